"""What happened inside the dry-run process: the JSON file the bootstrap hands the parent.

The bootstrap rewrites the file after every event, so a run killed by the timeout still
tells how far it got.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from checks.dryrun.child.user_calls import CallCounter

Severity = Literal["problem", "warning", "note"]


class Finding(BaseModel):
    """One kind of thing worth reporting, with how often it happened."""

    kind: str
    severity: Severity
    message: str
    count: int = 1


class TrainedStep(BaseModel):
    """One call of the stand-in trainer."""

    step: int
    groups: int
    trajectories: int
    trainable_groups: int
    kind: Literal["rl", "sft"] = "rl"
    """`rl`: one `backend.train` call; `sft`: one `model.train_sft` call."""
    examples: int = 0
    """SFT: the examples (ending with an assistant reply) the call trained on."""


class MoveSearchRecord(BaseModel):
    """What the stand-in player's move search found (`checks.dryrun.standins.move_search`)."""

    positions: int = 0  # positions of a copied game where candidate moves were tried
    learnt: int = 0  # positions of a game that could not be copied (learnt from its replies)
    copy_error: str | None = None  # why the game could not be copied
    stuck: int = 0  # positions where no candidate was accepted
    stuck_at: str | None = None  # the first such position, as the agent saw it
    stuck_tried: int = 0  # how many candidates were tried there
    stuck_examples: list[str] = Field(default_factory=list)
    stuck_refusal: str | None = None  # apply_action's first error there


class RunRecord(BaseModel):
    """The dry run as the bootstrap saw it."""

    script: str
    argv: list[str] = Field(default_factory=list)
    model_dirs: list[str] = Field(default_factory=list)
    gathers: int = 0
    groups_gathered: int = 0
    rollouts: int = 0
    rollout_exceptions: int = 0
    reward_min: float | None = None
    reward_max: float | None = None
    groups_dropped: int = 0
    steps: list[TrainedStep] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    first_error: str | None = None
    first_error_source: Literal["rollout", "uncaught"] | None = None
    uncaught_error: str | None = None
    exit_code: int | None = None
    stopped_at_step_limit: bool = False
    policy: dict[str, Any] = Field(default_factory=dict)
    stuck_at: str | None = None
    finished: bool = False
    # The script's module-level functions, and how often each was entered and raised.
    functions: list[str] = Field(default_factory=list)
    calls: dict[str, int] = Field(default_factory=dict)
    exceptions: dict[str, int] = Field(default_factory=dict)
    # Trajectory metrics (numbers and bools) of the gathered rollouts: sum and count per name.
    metric_sums: dict[str, float] = Field(default_factory=dict)
    metric_counts: dict[str, int] = Field(default_factory=dict)
    moves: MoveSearchRecord = Field(default_factory=MoveSearchRecord)


def load_record(path: Path) -> RunRecord | None:
    """The record at `path`, or None when the process wrote none (or half of one)."""
    try:
        return RunRecord.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


class Recorder:
    """Collects events from the patched ART calls and keeps the record file current."""

    def __init__(self, path: Path, *, script: str, argv: list[str]) -> None:
        self._path = path
        self._lock = threading.RLock()
        self.record = RunRecord(script=script, argv=argv)
        self.policy_stats: Callable[[], dict[str, Any]] | None = None
        self.user_calls: CallCounter | None = None
        self.move_search: Callable[[], MoveSearchRecord] | None = None

    def flush(self) -> None:
        """Write the record atomically: the parent may read it at any moment."""
        with self._lock:
            if self.policy_stats is not None:
                self.record.policy = self.policy_stats()
            if self.user_calls is not None:
                self.record.functions = list(self.user_calls.defined)
                self.record.calls, self.record.exceptions = self.user_calls.snapshot()
            if self.move_search is not None:
                self.record.moves = self.move_search()
            temporary = self._path.with_suffix(".tmp")
            temporary.write_text(self.record.model_dump_json(indent=1))
            os.replace(temporary, self._path)

    def finding(self, kind: str, severity: Severity, message: str) -> None:
        """Report `message` once per `kind`; later occurrences only count."""
        with self._lock:
            for existing in self.record.findings:
                if existing.kind == kind:
                    existing.count += 1
                    break
            else:
                self.record.findings.append(Finding(kind=kind, severity=severity, message=message))
            self.flush()

    def model_registered(self, model_dir: str) -> None:
        with self._lock:
            if model_dir not in self.record.model_dirs:
                self.record.model_dirs.append(model_dir)
            self.flush()

    def rollouts_finished(self, trajectories: int, exception_tracebacks: list[str]) -> None:
        """A group (or a batch of `gather_trajectories`) came back from its rollouts."""
        with self._lock:
            self.record.groups_gathered += 1
            self.record.rollouts += trajectories
            self.record.rollout_exceptions += len(exception_tracebacks)
            if exception_tracebacks and self.record.first_error is None:
                self.record.first_error = exception_tracebacks[0]
                self.record.first_error_source = "rollout"
            self.flush()

    def rewards_seen(self, rewards: list[float]) -> None:
        with self._lock:
            finite = [r for r in rewards if math.isfinite(r)]
            if finite:
                low, high = min(finite), max(finite)
                current_low, current_high = self.record.reward_min, self.record.reward_max
                self.record.reward_min = low if current_low is None else min(current_low, low)
                self.record.reward_max = high if current_high is None else max(current_high, high)
            self.flush()

    def metrics_seen(self, metrics: list[dict[str, Any]]) -> None:
        """The trajectories' metrics, summed per name (what the report averages)."""
        with self._lock:
            for values in metrics:
                for name, value in values.items():
                    if isinstance(value, int | float) and math.isfinite(value):
                        sums, counts = self.record.metric_sums, self.record.metric_counts
                        sums[name] = sums.get(name, 0.0) + float(value)
                        counts[name] = counts.get(name, 0) + 1
            self.flush()

    def gather_finished(self) -> None:
        with self._lock:
            self.record.gathers += 1
            self.flush()

    def group_dropped(self) -> None:
        with self._lock:
            self.record.groups_dropped += 1
            self.flush()

    def step_trained(self, step: TrainedStep) -> None:
        with self._lock:
            self.record.steps.append(step)
            self.flush()

    def uncaught(self, summary: str, traceback_text: str) -> None:
        """The script died of `summary` ("Type: message")."""
        with self._lock:
            self.record.uncaught_error = summary
            if self.record.first_error is None:
                self.record.first_error = traceback_text
                self.record.first_error_source = "uncaught"
            self.flush()

    def stuck(self, stacks: str) -> None:
        """Where the script was when the parent, about to kill it, asked."""
        with self._lock:
            self.record.stuck_at = stacks
            self.flush()

    def finish(self, exit_code: int, *, stopped_at_step_limit: bool) -> None:
        with self._lock:
            self.record.exit_code = exit_code
            self.record.stopped_at_step_limit = stopped_at_step_limit
            self.record.finished = True
            self.flush()
