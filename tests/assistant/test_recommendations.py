"""Once the task and the scenarios are given, one model call recommends answers for the choice
questions ahead; each is checked against its question's options (the rest dropped) and shown
when the question comes, as its recommended option with the reason, for the user to pick."""

from __future__ import annotations

import json

from assistant import Assistant
from flows import TRAIN_RL, Attachment, Notice, Reply, Session, advance
from tests.assistant.conftest import USER, open_step, question_of, session_after
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.flows.matrix import MATH_ROWS

ADDITION = "Add small numbers and answer with the sum only."
AT_SCENARIOS = ["static", "single", ADDITION, "inline"]
ROWS = json.dumps(MATH_ROWS[:3])
CHECKABLE = "The answers are exact numbers, which code can check."


def advice(*items: tuple[str, str, str]) -> Scripted:
    return Scripted.json(
        {"recommendations": [{"step": s, "value": v, "reason": r} for s, v, r in items]}
    )


def give_scenarios(assistant: Assistant, session: Session) -> tuple[Session, str]:
    assisted = assistant.respond(TRAIN_RL, session, Reply(text=ROWS), USER)
    assert assisted.proposal is None
    said = "\n".join(m.text for m in assisted.turn.messages if isinstance(m, Notice))
    return assisted.turn.session, said


def test_recommendations_are_kept_and_shown_when_their_question_comes(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    fake.script(advice(("reward", "programmatic", CHECKABLE), ("train_split", "all", "Few rows.")))

    session, said = give_scenarios(assistant, session_after(AT_SCENARIOS))

    assert session.answers["scenario_rows"] == MATH_ROWS[:3]  # the reply counted as typed
    assert "reward" not in session.answers  # a recommendation is not an answer
    assert session.advice == {
        "reward": {"value": "programmatic", "reason": CHECKABLE},
        "train_split": {"value": "all", "reason": "Few rows."},
    }
    assert "I will recommend answers for: Reward, Training scenarios." in said
    session = advance(TRAIN_RL, session, Reply(text="skip")).session  # system prompt
    at_reward = advance(TRAIN_RL, session, Reply(text="default"))  # what the agent sees
    session = at_reward.session
    asked = question_of(at_reward.messages)
    assert asked.step_id == "reward"
    assert f"The assistant recommends this: {CHECKABLE} Please confirm." in asked.text
    first = asked.options[0]
    assert (first.value, first.recommended) == ("programmatic", True)
    assert first.label == "Programmatic (recommended)"
    picked = advance(TRAIN_RL, session, Reply(text="1")).session  # the numbers shown
    assert picked.answers["reward"] == "programmatic"


def test_the_request_is_strict_and_lists_only_the_questions_ahead(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    fake.script(advice())

    give_scenarios(assistant, session_after(AT_SCENARIOS))

    (request,) = fake.requests
    spec = request["response_format"]["json_schema"]
    assert spec["strict"] is True
    steps = spec["schema"]["properties"]["recommendations"]["items"]["properties"]["step"]
    assert "reward" in steps["enum"] and "judge_model" in steps["enum"]
    assert "replayable" not in steps["enum"] and "turns" not in steps["enum"]  # answered
    assert ADDITION in request["messages"][1]["content"]
    assert json.dumps(MATH_ROWS[0]) in request["messages"][0]["content"]


def test_a_recommendation_that_is_not_an_option_is_dropped(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    fake.script(
        advice(
            ("judge_model", "openai/gpt-99", "Invented."),
            ("reward", "approve-and-run", "Not an option."),
            ("turns", "multi", "Already answered."),
            ("val_split", "held_out", "Keep a quarter back to watch overfitting."),
            ("val_split", "none", "A second one for the same question."),
        )
    )

    session, said = give_scenarios(assistant, session_after(AT_SCENARIOS))

    assert session.advice == {
        "val_split": {"value": "held_out", "reason": "Keep a quarter back to watch overfitting."}
    }
    assert "I will recommend answers for: Validation." in said


def test_no_valid_recommendation_changes_nothing_but_the_answer(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    fake.script(advice(("reward", "best", "Not an option.")))
    before = session_after(AT_SCENARIOS)

    session, said = give_scenarios(assistant, before)

    assert session.advice == {}
    assert said == ""
    assert open_step(session) == "system_prompt"


def test_a_model_failure_leaves_one_note_and_the_answer_stored(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    fake.script(Scripted.error(429))

    session, said = give_scenarios(assistant, session_after(AT_SCENARIOS))

    assert session.answers["scenario_rows"] == MATH_ROWS[:3]
    assert session.advice == {}
    assert (
        said
        == "(The assistant could not recommend answers this time: it is rate-limited right now.)"
    )
    assert open_step(session) == "system_prompt"


def test_advice_survives_the_session_store_format() -> None:
    session = Session.start(TRAIN_RL.id).changed(
        advice={"reward": {"value": "ruler", "reason": "Open-ended answers."}}
    )
    assert Session.from_json(session.to_json()) == session
    assert "advice" not in Session.start(TRAIN_RL.id).to_json()  # unchanged without it


AGENT = b'''"""Our docs agent: searches a fixed snapshot of the docs, then answers."""

def search_docs(query: str) -> list[str]:
    """Search the docs snapshot.

    Args:
        query: words to look for.
    """
    return [page for page in PAGES if query in page]


def final_answer(answer: str) -> str:
    """Give the final answer."""
    return answer
'''


def test_an_agent_file_dropped_at_a_choice_gives_recommendations_for_it_and_ahead(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    replayable = "The tools only read a fixed docs snapshot, so episodes can be replayed."
    fake.script(
        advice(
            ("replayable", "yes", replayable),
            ("uses_tools", "yes", "It calls search_docs."),
            ("turns", "several", "Not an option."),
        )
    )
    session = session_after([])
    upload = Reply(attachments=(Attachment("agent.py", AGENT),))

    assisted = assistant.respond(TRAIN_RL, session, upload, USER)

    after = assisted.turn.session
    assert after.answers == {}  # nothing answered: the same question, with advice
    assert set(after.advice) == {"replayable", "uses_tools"}
    asked = question_of(assisted.turn.messages)
    assert asked.step_id == "replayable"
    assert f"The assistant recommends this: {replayable} Please confirm." in asked.text
    assert asked.options[0].value == "yes" and asked.options[0].recommended
    said = "\n".join(m.text for m in assisted.turn.messages if isinstance(m, Notice))
    assert "From your code, I will recommend answers for: Replayability, Tool use." in said
    (request,) = fake.requests
    assert "def search_docs(query: str)" in request["messages"][0]["content"]
    assert advance(TRAIN_RL, after, Reply(text="1")).session.answers == {"replayable": "yes"}


def test_a_py_file_at_a_question_that_takes_one_is_its_answer(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    fake.script(advice())  # the advice asked for once the scenarios are given
    session = give_scenarios(assistant, session_after(AT_SCENARIOS))[0]
    session = advance(TRAIN_RL, session, Reply(text="skip")).session
    session = advance(TRAIN_RL, session, Reply(text="default")).session  # what the agent sees
    session = advance(TRAIN_RL, session, Reply(text="programmatic")).session
    reward = b"def compute_reward(scenario, answer):\n    return 1.0\n"

    assisted = assistant.respond(
        TRAIN_RL, session, Reply(attachments=(Attachment("reward.py", reward),)), USER
    )

    assert assisted.turn.session.answers["reward_logic"]["kind"] == "function"
    assert len(fake.requests) == 1
