"""RL after SFT: a new train-rl session that continues a finished train-sft run, whose script
forks the SFT model (flows.wizards.start_from)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flows.definition.session import Session
from flows.definition.steps import InvalidAnswer, Text
from flows.wizards.rl.train_rl import TRAIN_RL
from flows.wizards.sft.train_sft import TRAIN_SFT
from flows.wizards.start_from import START_FROM


def rl_session_after_sft(
    sft_answers: Mapping[str, Any],
    prefill: Mapping[str, str] | None = None,
    *,
    run: str | None = None,
) -> Session:
    """A new train-rl session that starts from the SFT model of `sft_answers` (a train-sft
    session's answers): it carries `start_from` (the SFT model's name, project, base model and
    backend), so the base model and backend are the SFT run's and never asked, and its script
    forks the SFT model's latest checkpoint. `prefill` is text given up front, as with
    Session.start; `run`, how the caller knows the SFT run (the bot's run id, so that the RL
    job finds its files), kept with the start and never rendered. Raises ValueError when the
    answers name no SFT model to start from."""
    answers = TRAIN_SFT.active_answers(sft_answers)
    project = TRAIN_SFT.step("project")
    if "project" not in answers and isinstance(project, Text) and project.default is not None:
        answers["project"] = project.default(answers)  # left to its default
    missing = [k for k in ("run_name", "project", "base_model", "backend") if k not in answers]
    if missing:
        raise ValueError(f"the SFT run's answers lack {', '.join(missing)}")
    start = {
        "model": answers["run_name"],
        "project": answers["project"],
        "base_model": answers["base_model"],
        "backend": answers["backend"],
        **({"run": run} if run is not None else {}),
    }
    try:
        given = TRAIN_RL.given_answers({START_FROM: start})
    except InvalidAnswer as error:
        raise ValueError(f"the SFT run cannot be continued: {error}") from None
    return Session(flow=TRAIN_RL.id, answers=given, prefill=dict(prefill or {}))
