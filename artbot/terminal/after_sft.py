"""`artbot chat --after-sft`: RL that continues a finished fine-tuning (train-sft) run. Where the
SFT run's answers come from (a file `--export` wrote, or a finished session of yours), what the
terminal says about the fork, and the stand-in SFT model the chat's dry run forks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from checks.dryrun.standins.model_dirs import STANDIN_SFT_STEP
from flows import (
    BACKEND_NAMES,
    FLOWS,
    TRAIN_SFT,
    AnswersError,
    Session,
    replay,
    rl_session_after_sft,
)
from storage.sessions import SessionKey, SessionStore, StoredSession


class NotAFinishedSftRun(Exception):
    """The source given to continue is not a finished train-sft run (a usage error)."""


def rl_session_from_file(path: Path) -> Session:
    """A new train-rl session continuing the train-sft answers in `path` (as `artbot chat
    --export` writes them); NotAFinishedSftRun says why the file cannot be continued."""
    try:
        answers: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise NotAFinishedSftRun(f"cannot read {path}: {error}") from None
    except json.JSONDecodeError as error:
        raise NotAFinishedSftRun(
            f"{path}: not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    if not isinstance(answers, dict):
        raise NotAFinishedSftRun(
            f"{path}: expected a JSON object of answers by question id, as "
            "`artbot chat --export` writes"
        )
    unknown = [key for key in answers if not TRAIN_SFT.has_step(key)]
    if unknown:
        other = [f for f in FLOWS.values() if all(f.has_step(key) for key in answers)]
        what = (
            f"these are a {other[0].id} session's answers"
            if len(other) == 1
            else f"`{unknown[0]}` is not a question of the train-sft wizard"
        )
        raise NotAFinishedSftRun(
            f"{path}: {what}; RL continues a finished fine-tuning run (train-sft answers)"
        )
    try:
        session = replay(TRAIN_SFT, answers)
    except AnswersError as error:
        raise NotAFinishedSftRun(
            f"{path}: not a finished train-sft session's answers: {error.step_id}: {error.message}"
        ) from None
    return _rl_session(session.answers, str(path))


def rl_session_from_store(
    store: SessionStore, team: str, user: str, name: str | None
) -> tuple[SessionKey, Session]:
    """A new train-rl session continuing `user`'s finished train-sft session `name` (None: the
    one finished last), and that session's key; NotAFinishedSftRun says why not."""
    if name is None:
        finished = [
            stored
            for stored in store.list_for_owner(user, team)
            if stored.key.channel == user and _finished_sft(stored)
        ]
        if not finished:
            raise NotAFinishedSftRun(
                "you have no finished train-sft session: `artbot chat --flow train-sft` "
                "fine-tunes a model first"
            )
        stored = finished[0]  # most recently active first
    else:
        found = store.get(SessionKey(team, user, name))
        if found is None:
            raise NotAFinishedSftRun(f"there is no session “{name}”")
        stored = found
        if stored.session.flow != TRAIN_SFT.id:
            raise NotAFinishedSftRun(
                f"session “{name}” is a {stored.session.flow} session; RL continues a "
                "finished fine-tuning (train-sft) run"
            )
        if not _finished_sft(stored):
            state = "expired" if stored.expired else stored.session.status
            raise NotAFinishedSftRun(
                f"session “{name}” is not finished ({state}): `artbot chat --session {name}` "
                "goes on with it"
            )
    return stored.key, _rl_session(stored.session.answers, f"session “{stored.key.thread}”")


def _finished_sft(stored: StoredSession) -> bool:
    return (
        stored.session.flow == TRAIN_SFT.id
        and stored.session.status == "complete"
        and not stored.expired
    )


def _rl_session(sft_answers: Mapping[str, Any], where: str) -> Session:
    try:
        return rl_session_after_sft(sft_answers)
    except ValueError as error:
        raise NotAFinishedSftRun(f"{where}: {error}") from None


def rl_session_name(start: Mapping[str, str]) -> str:
    """The session a continued run is kept under when `--session` names none."""
    return f"{start['model']}-rl"


def fork_note(start: Mapping[str, str]) -> str:
    """What the terminal says when an RL session starts from an SFT model."""
    backend = BACKEND_NAMES[start["backend"]]
    where = (
        "On LocalBackend the fork copies it from the SFT run's ART folder, so run the script "
        "with the same --art-path as the SFT run."
        if start["backend"] == "local"
        else "On ServerlessBackend the fork copies it from W&B, so run the script with the SFT "
        "run's WANDB_API_KEY."
    )
    return (
        f"This RL run starts from your SFT model `{start['model']}` (project "
        f"`{start['project']}`): its script forks that model's latest checkpoint with ART "
        "0.5.18's experimental `_experimental_fork_checkpoint`, so the base model "
        f"({start['base_model']}) and the backend ({backend}) are the SFT run's and are not "
        f"asked. {where}"
    )


def run_note(start: Mapping[str, str], script_name: str) -> str:
    """How to run the written script so that the fork finds the SFT model."""
    if start["backend"] == "local":
        return (
            f"It forks `{start['model']}` when it first starts: run it with the SFT run's ART "
            f"folder, `uv run {script_name} --art-path PATH`."
        )
    return f"It forks `{start['model']}` from W&B when it first starts: use the SFT run's W&B key."


def standin_note(start: Mapping[str, str]) -> str:
    """What the terminal says before dry-running a script that starts from an SFT model: the
    dry run forks a stand-in of it (checks.dryrun.standins.model_dirs.plant_sft_model)."""
    return (
        f"Your SFT model `{start['model']}` is not part of the dry run: it forks a stand-in "
        f"(checkpoint {STANDIN_SFT_STEP}, no weights) left in the dry run's own folder. So it "
        "shows the fork and the RL steps after it, not that the script will find your SFT "
        "model: that takes the SFT run's "
        + ("--art-path." if start["backend"] == "local" else "W&B account.")
    )
