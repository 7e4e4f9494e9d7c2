"""The assistant in the fine-tuning wizard: questions answered from the SFT notes (not the RL
ones), and a free reply read as one of the SFT question's answers, stored only when accepted."""

from __future__ import annotations

from assistant import Assistant
from flows import TRAIN_SFT, Notice, Reply, Session, advance, begin
from tests.assistant.conftest import USER, question_of
from tests.assistant.test_recommendations import advice
from tests.assistant.test_understanding import reading
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.flows.sft_data import ROWS, ROWS_JSONL

DISTILLATION = (
    "Distillation trains the small model on a bigger teacher model's replies to your prompts."
)


def fresh_sft_session() -> Session:
    return begin(TRAIN_SFT, Session.start(TRAIN_SFT.id)).session


def test_a_question_in_the_fine_tuning_wizard_is_answered_from_the_sft_notes(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = fresh_sft_session()
    fake.script(Scripted.text(DISTILLATION))

    turn = assistant.respond(TRAIN_SFT, session, Reply(text="what is distillation?"), USER)

    assert turn.turn.session == session
    assert [m.text for m in turn.turn.messages if isinstance(m, Notice)] == [DISTILLATION]
    system = fake.requests[0]["messages"][0]["content"]
    assert "Open question `scenario`" in system
    assert "create_sft_dataset_iterator" in system and "clamp(round(10000 / n), 1, 10)" in system
    assert "RULER" not in system  # the RL wizard's notes are not this wizard's


def test_a_free_reply_to_the_scenario_is_read_as_one_of_its_options(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = fresh_sft_session()
    fake.script(reading("distillation", "A teacher model's answers become the examples."))

    assisted = assistant.respond(
        TRAIN_SFT, session, Reply(text="copy what gpt-5 says into a small model"), USER
    )

    assert assisted.turn.session == session  # nothing stored until accepted
    proposal = assisted.proposal
    assert proposal is not None and proposal.step_id == "scenario"
    accepted = advance(TRAIN_SFT, session, proposal.as_reply())
    assert accepted.session.answers["scenario"] == "distillation"
    schema = str(fake.requests[0].get("response_format"))
    assert "'file'" in schema and "'distillation'" in schema


def test_examples_given_bring_recommendations_for_the_split_and_the_base_model(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = fresh_sft_session()
    for reply in ("file", "local", "paste"):
        session = advance(TRAIN_SFT, session, Reply(text=reply)).session
    small = "meta-llama/Llama-3.1-8B-Instruct"
    fake.script(
        advice(
            ("val_split", "held_out", "Fifteen rows spare a few for a before-and-after check."),
            ("base_model", small, "Short single tool calls: the smallest model learns them."),
            ("reward", "ruler", "Not a question of this wizard."),
        )
    )

    assisted = assistant.respond(TRAIN_SFT, session, Reply(text=ROWS_JSONL), USER)

    session = assisted.turn.session
    assert session.answers["dataset"] == ROWS  # the examples count as typed
    assert set(session.advice) == {"val_split", "base_model"}  # another wizard's question dropped
    said = "\n".join(m.text for m in assisted.turn.messages if isinstance(m, Notice))
    assert "From your examples, I will recommend answers for:" in said
    (request,) = fake.requests
    system, user = request["messages"]
    assert f"Some of the {len(ROWS)} examples (data, JSONL)" in system["content"]
    assert "fine-tuning (SFT) wizard" in system["content"]
    assert user["content"] == "Recommend from the examples above."
    at_split = question_of(assisted.turn.messages)
    assert at_split.step_id == "val_split" and at_split.options[0].recommended
    session = advance(TRAIN_SFT, session, Reply(text="held_out")).session
    asked = question_of(advance(TRAIN_SFT, session, Reply(text="default")).messages)
    assert asked.step_id == "base_model"
    assert [o.value for o in asked.options if o.recommended] == [small]
