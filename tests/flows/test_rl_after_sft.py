"""RL after SFT: a train-rl session made from a finished train-sft run starts from its model. It
never asks the base model or the backend (the SFT run's), keeps where it starts through storage,
`restart` and a file of answers, and renders a script that forks the SFT model."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest

from flows import (
    TRAIN_RL,
    TRAIN_SFT,
    AnswersError,
    RenderError,
    Session,
    begin,
    render_script,
    replay,
    rl_session_after_sft,
)
from flows.definition.flow import Flow, FlowDefinitionError
from flows.definition.steps import Text
from flows.wizards.start_from import START_FROM_SFT
from tests.flows.conversation import Conversation
from tests.flows.matrix import after_sft, answers_for
from tests.flows.sft_matrix import VARIANTS

SFT_LOCAL = VARIANTS["file-local-paste"]  # capitals-001, project left to its default
SFT_SERVERLESS = VARIANTS["file-serverless-upload-val"]  # weather-agent-001 of "assistants"
START_LOCAL = {
    "model": "capitals-001",
    "project": "sft-project",
    "base_model": "OpenPipe/Qwen3-14B-Instruct",
    "backend": "local",
}


def rl_answers(sft: dict[str, Any] = SFT_LOCAL, backend: str = "local") -> dict[str, Any]:
    """A complete train-rl answer set, less what the start settles, continuing `sft`."""
    answers = answers_for("single", "programmatic", "open_ended", backend, True)
    del answers["base_model"], answers["backend"]
    return {**answers, "start_from": rl_session_after_sft(sft).answers["start_from"]}


def test_the_session_starts_from_the_sft_model_with_its_base_model_and_backend() -> None:
    session = rl_session_after_sft(SFT_LOCAL, prefill={"task": "Add small numbers."})
    assert session.flow == TRAIN_RL.id and session.status == "active"
    assert session.answers == {
        "start_from": START_LOCAL,
        "base_model": "OpenPipe/Qwen3-14B-Instruct",
        "backend": "local",
    }
    assert session.history == () and session.prefill == {"task": "Add small numbers."}
    served = rl_session_after_sft(SFT_SERVERLESS).answers
    assert served["start_from"]["project"] == "assistants"
    assert (served["base_model"], served["backend"]) == (
        "Qwen/Qwen3-30B-A3B-Instruct-2507",
        "serverless",
    )
    # A finished session's stored answers (defaults taken, stale branches kept) give the same.
    stored = {**replay(TRAIN_SFT, SFT_LOCAL).answers, "teacher_model": "openai/gpt-5.4"}
    assert rl_session_after_sft(stored).answers == session.answers


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"run_name": "x'; import os #"}, "not a safe name"),
        ({"base_model": "someone/else"}, "not a base model"),
        ({"backend": "tinker"}, "not a backend"),
        ({"run_name": None}, "lack run_name"),
    ],
)
def test_answers_that_name_no_sft_model_to_start_from_are_refused(
    change: dict[str, Any], error: str
) -> None:
    answers = {k: v for k, v in {**SFT_LOCAL, **change}.items() if v is not None}
    with pytest.raises(ValueError, match=error):
        rl_session_after_sft(answers)


def test_the_wizard_never_asks_the_base_model_or_the_backend() -> None:
    chat = Conversation(session=rl_session_after_sft(SFT_LOCAL))
    assert chat.asking() == "replayable"
    done = replay(TRAIN_RL, rl_answers())
    assert done.status == "complete"
    assert "base_model" not in done.history and "backend" not in done.history
    assert TRAIN_RL.active_answers(done.answers)["start_from"] == START_LOCAL
    # The run's settings say where it starts.
    chat = Conversation(session=done)
    chat.say("status")
    assert (
        "• Starts from: the SFT model `capitals-001` of project `sft-project`" in chat.notices()[0]
    )


def test_a_settled_answer_reopened_takes_only_the_sft_runs_value() -> None:
    chat = Conversation(session=replay(TRAIN_RL, rl_answers(SFT_SERVERLESS, "serverless")))
    chat.say("edit backend")
    asked = chat.asked()
    assert asked is not None and asked.step_id == "backend"
    assert [o.value for o in asked.options if o.recommended] == ["serverless"]
    chat.click("local")
    assert chat.problem() == (
        "This run continues the SFT model `weather-agent-001` of project `assistants`: RL forks "
        "its checkpoint, so the backend must be the SFT run's, ServerlessBackend."
    )
    chat.click("serverless")
    assert chat.problem() is None and chat.completed() is not None
    chat.say("edit base model")
    chat.say("OpenPipe/Qwen3-14B-Instruct")
    refused = chat.problem()
    assert refused is not None and refused.endswith("Qwen/Qwen3-30B-A3B-Instruct-2507.")


def test_restart_keeps_where_the_run_starts() -> None:
    chat = Conversation(session=replay(TRAIN_RL, rl_answers()))
    chat.say("restart")
    assert chat.notices()[0] == (
        "Starting over: all answers cleared (it still starts from the SFT model `capitals-001` "
        "of project `sft-project`)."
    )
    assert chat.session.answers == rl_session_after_sft(SFT_LOCAL).answers
    assert chat.asking() == "replayable"


def test_the_run_cannot_take_the_sft_models_own_name_in_its_project() -> None:
    answers = {**rl_answers(), "project": "sft-project", "run_name": "capitals-001"}
    with pytest.raises(AnswersError, match="is the SFT model's name in this project") as refused:
        replay(TRAIN_RL, answers)
    assert refused.value.step_id == "run_name"
    # Another project, or another name, is a model of its own.
    replay(TRAIN_RL, {**answers, "project": "rl-project"})
    replay(TRAIN_RL, {**answers, "run_name": "capitals-rl-001"})


def test_the_start_survives_storage_and_old_sessions_load_without_one() -> None:
    session = replay(TRAIN_RL, rl_answers())
    assert Session.from_json(session.to_json()) == session
    fresh = rl_session_after_sft(SFT_LOCAL)
    assert Session.from_json(fresh.to_json()) == fresh
    # A session stored before starts existed: plain answers, no start, an ordinary script.
    old = json.dumps(
        {
            "flow": "train-rl",
            "answers": answers_for("single", "programmatic", "open_ended", "local", True),
            "history": [],
            "status": "complete",
            "revision": 7,
        }
    )
    loaded = Session.from_json(old)
    assert "start_from" not in TRAIN_RL.active_answers(loaded.answers)
    script = render_script(TRAIN_RL.active_answers(loaded.answers))
    assert "_experimental_fork_checkpoint" not in script and "SFT_MODEL" not in script


def test_the_sft_run_an_adapter_knows_is_kept_with_the_start_and_never_rendered() -> None:
    session = rl_session_after_sft(SFT_LOCAL, run="k7h2m9q4x3bd")
    assert session.answers["start_from"] == {**START_LOCAL, "run": "k7h2m9q4x3bd"}
    assert Session.from_json(session.to_json()) == session
    answers = {**rl_answers(), "start_from": session.answers["start_from"]}
    script = render_script(TRAIN_RL.active_answers(replay(TRAIN_RL, answers).answers))
    assert "k7h2m9q4x3bd" not in script
    with pytest.raises(ValueError, match="not a safe name"):
        rl_session_after_sft(SFT_LOCAL, run="../job")


def test_a_file_of_answers_may_repeat_the_settled_answers_but_not_contradict_them() -> None:
    settled = {"base_model": "OpenPipe/Qwen3-14B-Instruct", "backend": "local"}
    assert replay(TRAIN_RL, {**rl_answers(), **settled}).status == "complete"
    with pytest.raises(AnswersError, match="the backend must be the SFT run's") as refused:
        replay(TRAIN_RL, {**rl_answers(), "backend": "serverless"})
    assert refused.value.step_id == "backend"
    broken = {**rl_answers(), "start_from": {**START_LOCAL, "model": "../../etc"}}
    with pytest.raises(AnswersError, match="not a safe name") as refused:
        replay(TRAIN_RL, broken)
    assert refused.value.step_id == "start_from"


def test_the_script_forks_the_sft_model_named_only_in_string_constants() -> None:
    answers = TRAIN_RL.active_answers(replay(TRAIN_RL, rl_answers()).answers)
    script = render_script(answers)
    constants = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(script).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
        if node.targets[0].id in ("SFT_MODEL", "SFT_PROJECT", "BASE_MODEL")
    }
    assert constants == {
        "SFT_MODEL": "capitals-001",
        "SFT_PROJECT": "sft-project",
        "BASE_MODEL": "OpenPipe/Qwen3-14B-Instruct",
    }
    assert "backend._experimental_fork_checkpoint(" in script
    assert "experimental in 0.5.18" in script


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"base_model": "meta-llama/Llama-3.1-8B-Instruct"}, "base_model: this run continues"),
        ({"backend": "serverless"}, "backend: this run continues"),
        ({"project": "sft-project", "run_name": "capitals-001"}, "the SFT model's own name"),
        ({"start_from": {**START_LOCAL, "model": "a'); import os; ('"}}, "not a safe name"),
        ({"start_from": {**START_LOCAL, "extra": "x"}}, "names exactly"),
    ],
)
def test_answers_edited_out_of_step_with_the_start_are_not_rendered(
    change: dict[str, Any], error: str
) -> None:
    answers = {
        **after_sft(answers_for("single", "programmatic", "dataset", "local", True), SFT_LOCAL)
    }
    render_script(answers)  # as made, it renders
    with pytest.raises(RenderError, match=error):
        render_script({**answers, **change})


def test_an_ordinary_rl_session_is_as_it_was() -> None:
    assert begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session.answers == {}
    # Without a start, nothing settles the base model and the backend: they are asked.
    ordinary = {k: v for k, v in rl_answers().items() if k != "start_from"}
    with pytest.raises(RenderError, match="not answered yet: base_model, backend"):
        render_script(ordinary)


def test_a_given_answer_named_like_a_step_fails_when_the_flow_is_built() -> None:
    steps = [Text("start_from", "Where from?", title="Start")]
    with pytest.raises(FlowDefinitionError, match=r"given answer 'start_from' .* is a step's id"):
        Flow("x", TRAIN_RL.template, steps, given=[START_FROM_SFT])
    with pytest.raises(FlowDefinitionError, match="given twice"):
        Flow("x", TRAIN_RL.template, [Text("a", "A?", title="A")], given=[START_FROM_SFT] * 2)
