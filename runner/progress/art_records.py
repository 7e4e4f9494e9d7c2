"""Progress from ART's own records on disk (what the job prints: runner.progress.output_lines).

ART appends one JSON object per `model.log` call to
`<art_path>/<project>/models/<name>/history.jsonl` and keeps `checkpoints/<step:04d>/` beside it.
Following those files says more, and more reliably, than parsing what the script prints.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.progress.validation_rollouts import read_rollouts, val_trajectory_files
from runner.schemas import EventType

HISTORY_FILE = "history.jsonl"
# How deep below the run folder an `.art` folder is looked for (`./.art`, `./sub/.art`, ...).
ART_SEARCH_DEPTH = 3
SKIPPED_FOLDERS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".cache"})
READ_BUDGET_BYTES = 4 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024
MAX_METRICS = 100

Emitted = tuple[EventType, dict[str, Any]]


# ---- ART's files ------------------------------------------------------------------------------


def find_model_folders(run_dir: Path) -> list[Path]:
    """Every `.art/<project>/models/<name>` folder under `run_dir` (a few levels deep)."""
    found: list[Path] = []
    for art in _art_folders(run_dir, ART_SEARCH_DEPTH):
        for models in sorted(art.glob("*/models")):
            found.extend(sorted(p for p in models.iterdir() if p.is_dir()))
    return found


def _art_folders(folder: Path, depth: int) -> Iterator[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        if entry.name == ".art":
            yield Path(entry.path)
        elif depth > 1 and entry.name not in SKIPPED_FOLDERS and not entry.name.startswith("."):
            yield from _art_folders(Path(entry.path), depth - 1)


def checkpoint_steps(model_folder: Path) -> list[int]:
    """The steps that have a `checkpoints/NNNN` folder, ascending."""
    try:
        names = os.listdir(model_folder / "checkpoints")
    except OSError:
        return []
    return sorted(int(name) for name in names if name.isdigit())


def has_checkpoints(run_dir: Path) -> bool:
    """Whether any model under `run_dir` has a checkpoint (a run can resume from it)."""
    return any(checkpoint_steps(folder) for folder in find_model_folders(run_dir))


def metric_value(value: Any) -> float | int | bool | None:
    """A logged metric as an event carries it: a number or a boolean, None for anything else (a
    NaN or an infinity too: JSON has neither)."""
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        # JSON (and PostgreSQL's json) have no NaN or infinity.
        return value if math.isfinite(value) else None
    return None


def history_events(record: dict[str, Any]) -> list[Emitted]:
    """The events one history.jsonl record means: a `step` (train), a `validation`, or both."""
    step = record.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return []
    train: dict[str, Any] = {}
    val: dict[str, Any] = {}
    for key, value in record.items():
        if key in ("step", "recorded_at") or not isinstance(key, str):
            continue
        number = metric_value(value)
        if number is None and value is not None and not isinstance(value, float):
            continue  # strings, lists: not metrics
        target = val if key.startswith("val/") else train
        if len(target) < MAX_METRICS:
            target[key] = number
    events: list[Emitted] = []
    # A fine-tuning step logs a loss and no train/ metric (ART's train_sft): a step all the same.
    if any(key.startswith("train/") for key in train) or "loss/train" in train:
        events.append((EventType.step, {"step": step, **train}))
    if val:
        events.append((EventType.validation, {"step": step, **val}))
    return events


@dataclass
class _History:
    path: Path
    offset: int = 0
    partial: bytes = b""
    skipping: bool = False  # inside an over-long line: drop bytes until its newline


@dataclass
class Baseline:
    """What was on disk before the job started (a resumed run's earlier records): not news."""

    history_offsets: dict[str, int] = field(default_factory=dict)
    checkpoints: dict[str, list[int]] = field(default_factory=dict)
    val_trajectories: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def capture(cls, run_dir: Path) -> Baseline:
        baseline = cls()
        for folder in find_model_folders(run_dir):
            key = str(folder.relative_to(run_dir))
            size = _file_size(folder / HISTORY_FILE)
            if size:
                baseline.history_offsets[key] = size
            steps = checkpoint_steps(folder)
            if steps:
                baseline.checkpoints[key] = steps
            logged = sorted(val_trajectory_files(folder))
            if logged:
                baseline.val_trajectories[key] = logged
        return baseline

    def to_json(self) -> str:
        return json.dumps(
            {
                "history_offsets": self.history_offsets,
                "checkpoints": self.checkpoints,
                "val_trajectories": self.val_trajectories,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Baseline:
        value = json.loads(text)
        return cls(
            dict(value.get("history_offsets", {})),
            dict(value.get("checkpoints", {})),
            dict(value.get("val_trajectories", {})),
        )


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@dataclass
class Seen:
    """Steps already reported (from the event log, after a restart): reported once only.

    One Seen is shared by every source of progress of a job (ART's history.jsonl, the progress
    lines in its output), so that a step is reported once whichever source tells it first."""

    steps: set[int] = field(default_factory=set)
    validations: set[int] = field(default_factory=set)
    checkpoints: set[int] = field(default_factory=set)
    rollouts: set[int] = field(default_factory=set)

    @property
    def last_step(self) -> int | None:
        """The last training step reported."""
        return max(self.steps, default=None)

    def fresh(self, events: list[Emitted]) -> list[Emitted]:
        """The `step` and `validation` events whose step was not reported yet (now it is)."""
        fresh: list[Emitted] = []
        for kind, data in events:
            step = int(data["step"])
            seen = self.steps if kind is EventType.step else self.validations
            if step in seen:
                continue
            seen.add(step)
            fresh.append((kind, data))
        return fresh

    @classmethod
    def of(cls, reported: Iterable[tuple[EventType, dict[str, Any]]]) -> Seen:
        """What these reported events (from the job's event log) already told."""
        seen = cls()
        steps_by_type = {
            EventType.step: seen.steps,
            EventType.validation: seen.validations,
            EventType.checkpoint: seen.checkpoints,
            EventType.rollouts: seen.rollouts,
        }
        for kind, data in reported:
            step = data.get("step")
            if kind in steps_by_type and isinstance(step, int):
                steps_by_type[kind].add(step)
        return seen


class ArtProgress:
    """Follows every history.jsonl and checkpoints folder under a run folder; poll() for events.

    A partial last line (ART is mid-write) waits for its newline; a line that is not JSON is
    skipped. Each poll reads at most READ_BUDGET_BYTES per file.
    """

    def __init__(
        self, run_dir: Path, baseline: Baseline | None = None, seen: Seen | None = None
    ) -> None:
        self._run_dir = run_dir
        self._baseline = baseline or Baseline()
        self._seen = seen or Seen()
        self._histories: dict[str, _History] = {}
        self._models: list[Path] = []
        self._unreadable: dict[Path, int] = {}  # a trajectories file that did not parse: its size

    @property
    def last_step(self) -> int | None:
        """The last training step reported (by any source sharing this Seen)."""
        return self._seen.last_step

    def poll(self, *, rescan: bool = True) -> list[Emitted]:
        """New events since the last poll; `rescan` also looks for new model folders."""
        if rescan or not self._models:
            self._models = find_model_folders(self._run_dir)
        events: list[Emitted] = []
        for folder in self._models:
            key = str(folder.relative_to(self._run_dir))
            events.extend(self._read_history(key, folder / HISTORY_FILE))
            events.extend(self._new_checkpoints(key, folder))
            events.extend(self._new_rollouts(key, folder))
        return events

    def _read_history(self, key: str, path: Path) -> list[Emitted]:
        history = self._histories.get(key)
        if history is None:
            history = self._histories[key] = _History(
                path, self._baseline.history_offsets.get(key, 0)
            )
        size = _file_size(path)
        if size < history.offset:  # replaced or truncated: start over
            history.offset, history.partial, history.skipping = 0, b"", False
        if size == history.offset:
            return []
        try:
            with path.open("rb") as file:
                file.seek(history.offset)
                data = file.read(READ_BUDGET_BYTES)
        except OSError:
            return []
        history.offset += len(data)
        events: list[Emitted] = []
        for line in self._complete_lines(history, data):
            try:
                record = json.loads(line)
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(record, dict):
                events.extend(self._seen.fresh(history_events(record)))
        return events

    @staticmethod
    def _complete_lines(history: _History, data: bytes) -> Iterable[bytes]:
        lines = (history.partial + data).split(b"\n")
        history.partial = lines.pop()
        if history.skipping and lines:
            lines.pop(0)  # the end of the over-long line
            history.skipping = False
        if len(history.partial) > MAX_LINE_BYTES:
            history.partial, history.skipping = b"", True
        return [line for line in lines if line.strip()]

    def _new_rollouts(self, key: str, folder: Path) -> list[Emitted]:
        """A `rollouts` event per validation step whose trajectories file is new and readable.

        Several models under one run folder (rare) share the step numbers: the first told wins."""
        before = set(self._baseline.val_trajectories.get(key, ()))
        events: list[Emitted] = []
        for step, path in sorted(val_trajectory_files(folder).items()):
            if step in before or step in self._seen.rollouts:
                continue
            size = _file_size(path)
            if self._unreadable.get(path) == size:
                continue  # unchanged since it did not parse: half written, or not ART's
            rollouts = read_rollouts(path, step)
            if rollouts is None:
                self._unreadable[path] = size
                continue
            self._unreadable.pop(path, None)
            self._seen.rollouts.add(step)
            events.append((EventType.rollouts, rollouts.model_dump(mode="json")))
        return events

    def _new_checkpoints(self, key: str, folder: Path) -> list[Emitted]:
        before = set(self._baseline.checkpoints.get(key, ()))
        events: list[Emitted] = []
        for step in checkpoint_steps(folder):
            if step in before or step in self._seen.checkpoints:
                continue
            self._seen.checkpoints.add(step)
            events.append((EventType.checkpoint, {"step": step}))
        return events
