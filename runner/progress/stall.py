"""The stall watchdog: a running job that printed nothing and reported no progress for longer
than its threshold is reported once as `stalled`, and again only after it moved and then went
quiet again (OpenPipe/ART runs are known to freeze in `gather_trajectory_groups` or in training
without exiting).

The threshold is the runner's `stall_after_s` until the job has timed a step (two step events
seen), then `max(stall_floor_s, stall_step_factor x the slowest step seen)`: a run whose steps take
an hour is not called stalled after 30 minutes, and one whose steps take a minute is noticed in
minutes rather than half an hour.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runner.records.rows import NewEvent
from runner.schemas import EventType
from runner.settings import RunnerSettings

STALL_LOG_LINES = 20
"""How many of the job's last output lines a stalled event carries."""
STALL_LINE_CHARS = 300
STALL_TAIL_BYTES = 16 * 1024
"""How much of the log's end is read for those lines."""
_PROGRESS = (EventType.step, EventType.validation, EventType.checkpoint, EventType.rollouts)
_PHASE_WORDS = (
    # The last line that names one of these says what the job was doing: ART's progress bars are
    # "gather" (rollouts) and "train"; the generated scripts print "validation" / "val/...".
    ("validation", re.compile(r"\bval(?:idat\w*|/|\b)", re.I)),
    ("training", re.compile(r"\btrain(?:ing)?\b(?!/reward)|\bloss\b|\boptimi[sz]er\b", re.I)),
    ("rollouts", re.compile(r"\bgather\w*|\brollouts?\b|\btrajector\w*", re.I)),
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class StallRule:
    """When a quiet job counts as stalled (runner settings `stall_*`)."""

    after_s: float
    floor_s: float
    step_factor: float

    def threshold(self, slowest_step_s: float | None) -> float:
        """Seconds of silence that make a stall: from the job's own step times once known."""
        if slowest_step_s is None:
            return self.after_s
        return max(self.floor_s, self.step_factor * slowest_step_s)


def stall_rule(settings: RunnerSettings) -> StallRule:
    """The runner's stall settings as a rule."""
    return StallRule(settings.stall_after_s, settings.stall_floor_s, settings.stall_step_factor)


class StallWatch:
    """One job's silence, told by what its watch saw at each poll (`saw`); `check` says when it
    became a stall, once per stall. The clock is injectable: tests drive it."""

    def __init__(self, rule: StallRule, clock: Callable[[], float] = time.monotonic) -> None:
        self._rule = rule
        self._clock = clock
        self._last_activity = clock()
        self._last_step_at: float | None = None
        self._slowest_step_s: float | None = None
        self._last_step: int | None = None
        self._last_progress: EventType | None = None
        self._reported = False

    @property
    def threshold_s(self) -> float:
        return self._rule.threshold(self._slowest_step_s)

    def saw(self, events: Sequence[NewEvent], output_bytes: int) -> None:
        """What one poll read: its events and how many bytes of output."""
        now = self._clock()
        moved = output_bytes > 0
        for kind, data in events:
            if kind not in _PROGRESS:
                continue
            moved = True
            self._last_progress = kind
            if kind is EventType.step:
                step = data.get("step")
                if isinstance(step, int) and step != self._last_step:
                    self._last_step = step
                    if self._last_step_at is not None:
                        took = now - self._last_step_at
                        self._slowest_step_s = max(self._slowest_step_s or 0.0, took)
                    self._last_step_at = now
        if moved:
            self._last_activity = now
            self._reported = False

    def check(self, log_tail: Callable[[], str]) -> dict[str, Any] | None:
        """The `stalled` event's data when the job just became stalled, else None. `log_tail`
        reads the end of its output (only then)."""
        if self._reported:
            return None
        idle_s = self._clock() - self._last_activity
        threshold = self.threshold_s
        if idle_s < threshold:
            return None
        self._reported = True
        lines = last_lines(log_tail())
        return {
            "idle_s": round(idle_s, 1),
            "threshold_s": round(threshold, 1),
            "phase": phase_of(lines, self._last_progress),
            "last_step": self._last_step,
            "log_tail": "\n".join(lines),
        }


def last_lines(text: str, count: int = STALL_LOG_LINES) -> list[str]:
    """The last `count` non-empty lines of `text`, a progress bar's last state for each line it
    redrew (carriage returns), colour codes out, each line clipped."""
    lines: list[str] = []
    for raw in text.split("\n"):
        line = _ANSI.sub("", raw.rsplit("\r", 1)[-1] if "\r" in raw else raw).rstrip()
        if line.strip():
            lines.append(line[:STALL_LINE_CHARS])
    return lines[-count:]


def phase_of(lines: Sequence[str], last_progress: EventType | None) -> str | None:
    """What the job was doing: rollouts, training or validation, from the last output line that
    says so (only lines after the last progress line: those say what is done, not what is under
    way); else after a validation, the next step's rollouts; None when nothing tells."""
    for line in reversed(lines):
        if line.startswith("ARTBOT_PROGRESS"):
            break
        named = [phase for phase, pattern in _PHASE_WORDS if pattern.search(line)]
        if len(named) == 1:  # a line that names two ("for training, for validation") tells none
            return named[0]
    if last_progress in (EventType.validation, EventType.rollouts):
        return "rollouts"
    return None
