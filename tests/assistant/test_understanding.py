"""A reply the engine refuses is read by the model as one valid answer, shown back, and stored
only when the user accepts it, through the engine, exactly as if typed."""

from __future__ import annotations

from typing import Any

import pytest

from assistant import Assistant, Proposal, read_confirmation
from flows import TRAIN_RL, Answered, Notice, Problem, Reply, advance
from tests.assistant.conftest import (
    SINGLE_TURN_TO_VALIDATION,
    TO_BASE_MODEL,
    USER,
    open_step,
    question_of,
    session_after,
)
from tests.fakes.openai_server import FakeOpenAI, Scripted

BIGGER_QWEN = "Qwen/Qwen3-30B-A3B-Instruct-2507"


def reading(value: str | None, reason: str = "", understood: bool = True) -> Scripted:
    return Scripted.json({"understood": understood, "value": value, "reason": reason})


def test_the_bigger_qwen_is_understood_and_stored_only_when_accepted(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_BASE_MODEL)
    fake.script(reading(BIGGER_QWEN, "The bigger of the two Qwen models."))

    assisted = assistant.respond(TRAIN_RL, session, Reply(text="the bigger Qwen"), USER)

    assert assisted.turn.session == session  # nothing stored, no failure counted
    assert assisted.turn.messages == ()
    proposal = assisted.proposal
    assert proposal == Proposal(
        "base_model", BIGGER_QWEN, BIGGER_QWEN, "The bigger of the two Qwen models."
    )
    assert proposal is not None
    assert "I read that as: *Qwen/Qwen3-30B-A3B-Instruct-2507*" in proposal.text

    accepted = advance(TRAIN_RL, session, proposal.as_reply())
    typed = advance(TRAIN_RL, session, Reply(text=BIGGER_QWEN))
    assert accepted.session.answers == typed.session.answers
    assert accepted.session.answers["base_model"] == BIGGER_QWEN
    assert open_step(accepted.session) == "project"


def test_the_request_asks_for_structured_output_over_the_options(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_BASE_MODEL)
    fake.script(reading(BIGGER_QWEN))

    assistant.respond(TRAIN_RL, session, Reply(text="the bigger Qwen"), USER)

    (request,) = fake.requests
    response_format: dict[str, Any] = request["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is True
    value = response_format["json_schema"]["schema"]["properties"]["value"]
    assert value["anyOf"][0]["enum"] == [
        "OpenPipe/Qwen3-14B-Instruct",
        BIGGER_QWEN,
        "meta-llama/Llama-3.1-8B-Instruct",
    ]
    assert "<<<\nthe bigger Qwen\n>>>" in request["messages"][1]["content"]


def test_hold_out_a_fifth_becomes_0_2(assistant: Assistant, fake: FakeOpenAI) -> None:
    at_split = session_after(SINGLE_TURN_TO_VALIDATION)
    fake.script(reading("held_out", "Hold out part of the scenarios."))
    to_fraction = assistant.respond(TRAIN_RL, at_split, Reply(text="hold some back"), USER)
    assert to_fraction.proposal is not None
    session = advance(TRAIN_RL, at_split, to_fraction.proposal.as_reply()).session
    assert open_step(session) == "val_fraction"
    fake.script(reading("0.2", "A fifth is 0.2."))

    assisted = assistant.respond(TRAIN_RL, session, Reply(text="hold out a fifth"), USER)

    assert assisted.proposal is not None
    assert assisted.proposal.reply_text == "0.2"
    assert "val_fraction" not in assisted.turn.session.answers
    stored = advance(TRAIN_RL, session, assisted.proposal.as_reply()).session
    assert stored.answers["val_fraction"] == 0.2


def test_a_choice_that_takes_other_values_gets_any_valid_one(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(SINGLE_TURN_TO_VALIDATION[:8])  # up to the judge model
    assert open_step(session) == "judge_model"
    fake.script(reading("anthropic/claude-sonnet-4-5", "Claude as the judge."))

    assisted = assistant.respond(TRAIN_RL, session, Reply(text="use claude as judge"), USER)

    (request,) = fake.requests
    schema = request["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["value"] == {"type": ["string", "null"]}
    assert assisted.proposal is not None
    assert assisted.proposal.reply_text == "anthropic/claude-sonnet-4-5"


def test_a_reading_the_engine_refuses_is_not_offered(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    at_split = session_after(SINGLE_TURN_TO_VALIDATION)
    session = advance(TRAIN_RL, at_split, Reply(text="held_out")).session
    fake.script(reading("1.5", "All of them and a half."))

    assisted = assistant.respond(TRAIN_RL, session, Reply(text="one and a half"), USER)

    assert assisted.proposal is None
    problems = [m for m in assisted.turn.messages if isinstance(m, Problem)]
    notices = [m.text for m in assisted.turn.messages if isinstance(m, Notice)]
    assert len(problems) == 1  # the engine's own refusal of the typed reply
    assert notices == ["(The assistant read it as “1.5”, which is not a valid answer either.)"]
    assert question_of(assisted.turn.messages).step_id == "val_fraction"
    assert assisted.turn.session.answers == session.answers


def test_not_understood_is_the_plain_refusal(assistant: Assistant, fake: FakeOpenAI) -> None:
    session = session_after(TO_BASE_MODEL)
    fake.script(reading(None, "It names no model.", understood=False))

    assisted = assistant.respond(TRAIN_RL, session, Reply(text="banana"), USER)

    assert assisted.proposal is None
    assert assisted.turn == advance(TRAIN_RL, session, Reply(text="banana"))


def test_an_accepted_proposal_for_a_question_that_moved_on_is_refused(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_BASE_MODEL)
    fake.script(reading(BIGGER_QWEN))
    proposal = assistant.respond(TRAIN_RL, session, Reply(text="the bigger Qwen"), USER).proposal
    assert proposal is not None
    moved_on = advance(TRAIN_RL, session, Reply(text="1")).session  # answered meanwhile

    turn = advance(TRAIN_RL, moved_on, proposal.as_reply())

    assert turn.session.answers == moved_on.answers
    assert "belongs to an earlier question" in "".join(
        m.text for m in turn.messages if isinstance(m, Problem)
    )


def test_replies_the_engine_accepts_never_reach_the_model(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_BASE_MODEL)

    assisted = assistant.respond(TRAIN_RL, session, Reply(text="2"), USER)

    assert fake.requests == []
    assert any(isinstance(e, Answered) for e in assisted.turn.effects)
    assert assisted.turn == advance(TRAIN_RL, session, Reply(text="2"))


def test_yes_and_no() -> None:
    assert read_confirmation("yes") is True
    assert read_confirmation(" Y ") is True
    assert read_confirmation("Accept") is True
    assert read_confirmation("no") is False
    assert read_confirmation("re-answer") is False
    assert read_confirmation("the smaller one") is None


def test_a_proposal_travels_as_json_and_nothing_else_reads_as_one() -> None:
    proposal = Proposal("base_model", BIGGER_QWEN, BIGGER_QWEN, "The bigger Qwen.")

    assert Proposal.from_json(proposal.to_json()) == proposal
    for forged in (
        '{"step": "run_name"}',
        "[]",
        '{"step": 1, "text": "x", "shown": "", "why": ""}',
    ):
        with pytest.raises(ValueError):
            Proposal.from_json(forged)
