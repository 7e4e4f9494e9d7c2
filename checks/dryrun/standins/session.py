"""What the stand-in backends share inside one dry-run process: the policy server, the recorder,
the step limit and where the models live; installed by the bootstrap (tests reset it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from checks.dryrun.run_record import Recorder
from checks.dryrun.standins.policy_server import PolicyServer


class DryrunStepLimit(BaseException):
    """The stand-in trainer's hard cap on steps: a clean stop of the dry run, not a failure.

    A BaseException so that a script's `except Exception` around its loop cannot swallow it.
    """


@dataclass
class DryrunSession:
    """What the stand-in backends share inside one dry-run process."""

    policy: PolicyServer
    recorder: Recorder
    step_limit: int
    art_root: Path
    steps_trained: int = 0
    unclosed_backends: int = 0


_session: DryrunSession | None = None


def install_session(session: DryrunSession | None) -> None:
    """Make `session` the one the stand-in backends use (None: none; tests reset it)."""
    global _session
    _session = session


def current_session() -> DryrunSession:
    """The installed session; the stand-ins only make sense inside `artbot dryrun`."""
    if _session is None:
        raise RuntimeError("The artbot stand-in backends only run inside `artbot dryrun`.")
    return _session
