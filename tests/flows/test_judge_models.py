"""RULER's judge list is current, a judge OpenAI has shut down is refused, and one it has
deprecated is taken with a warning (the date is set: no test depends on today's)."""

from __future__ import annotations

from datetime import date

import pytest

from flows import Notice, Question, Reply, advance
from flows.definition.steps import Choice, InvalidAnswer
from flows.wizards.rl import judge_models as judges
from flows.wizards.rl.judge_models import JUDGE_MODELS, judge_caution, judge_model_id, shutdown_date
from flows.wizards.rl.train_rl import TRAIN_RL
from tests.flows.test_invalid_answers import session_at

CHECKED = date(2026, 11, 27)  # when the list was checked against OpenAI's deprecations page
O3_SHUTDOWN = date(2026, 12, 11)


def on(day: date, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judges, "today", lambda: day)


def test_the_offered_judges_are_none_that_openai_has_deprecated() -> None:
    step = TRAIN_RL.step("judge_model")
    assert isinstance(step, Choice)
    assert tuple(option.value for option in step.options) == JUDGE_MODELS
    assert JUDGE_MODELS[0] == "openai/gpt-5.4"
    assert all(shutdown_date(model) is None for model in JUDGE_MODELS)
    assert {"openai/o4-mini", "openai/o3"}.isdisjoint(JUDGE_MODELS)


def test_a_deprecated_judge_is_taken_with_a_warning_until_its_shutdown_then_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    on(CHECKED, monkeypatch)
    assert judge_model_id("openai/o3", {}) == "openai/o3"
    warning = judge_caution({"judge_model": "openai/o3"})
    assert warning is not None
    assert "deprecated `openai/o3`" in warning and "shuts it down on 2026-12-11" in warning
    assert "`edit judge model`" in warning and "`openai/gpt-5.4`" in warning

    on(O3_SHUTDOWN, monkeypatch)
    with pytest.raises(InvalidAnswer, match=r"OpenAI shut `openai/o3` down on 2026-12-11"):
        judge_model_id("openai/o3", {})
    assert judge_caution({"judge_model": "openai/o3"}) is None  # refused, not warned


@pytest.mark.parametrize(
    "model",
    ["openai/gpt-5.4", "openai/gpt-5.4-pro", "anthropic/claude-sonnet-4-5", "azure/o4-mini"],
)
def test_current_models_and_other_providers_get_no_warning(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    on(CHECKED, monkeypatch)
    assert judge_model_id(model, {}) == model
    assert judge_caution({"judge_model": model}) is None


def test_a_retired_judge_typed_in_the_wizard_is_refused_with_a_current_one_named() -> None:
    session = session_at("judge_model")
    turn = advance(TRAIN_RL, session, Reply(text="openai/o4-mini-2025-04-16"))
    said = " ".join(getattr(m, "text", "") for m in turn.messages)
    assert "OpenAI shut `openai/o4-mini-2025-04-16` down on 2026-10-23" in said
    assert "`openai/gpt-5.4` or `openai/gpt-5.5`" in said
    assert "judge_model" not in turn.session.answers


def test_the_wizard_warns_of_a_deprecated_judge_after_taking_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    on(CHECKED, monkeypatch)
    turn = advance(TRAIN_RL, session_at("judge_model"), Reply(text="openai/o3"))
    assert turn.session.answers["judge_model"] == "openai/o3"
    notices = [m.text for m in turn.messages if isinstance(m, Notice)]
    assert any("shuts it down on 2026-12-11" in text for text in notices)
    assert isinstance(turn.messages[-1], Question)
    assert turn.messages[-1].step_id == "ruler_rubric"  # and the next question is asked

    taken = advance(TRAIN_RL, session_at("judge_model"), Reply(text="openai/gpt-5.4"))
    assert not [m for m in taken.messages if isinstance(m, Notice) and "deprecated" in m.text]
