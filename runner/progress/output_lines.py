"""Progress and trouble in what a job prints: the generated script's machine-readable progress
line, warnings and tracebacks in its output, and the banner it prints when training completed.
ART's own records on disk say more (runner.progress.art_records); these lines say what the
records cannot (a Ray job's progress, why a job stopped)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from runner.progress.art_records import MAX_METRICS, Emitted, metric_value
from runner.schemas import EventType

PROGRESS_PREFIX = b"ARTBOT_PROGRESS "
"""The generated script prints one line per training step and per validation, alone on its line:
`ARTBOT_PROGRESS {"step": 3, "split": "train", "reward": 0.41, "count": 32, "metrics": {...}}`
(`reward` may be null, `count` is the number of trajectories, `metrics` is optional)."""
_SPLITS = {"train": EventType.step, "val": EventType.validation}


def progress_line_event(payload: bytes) -> Emitted | None:
    """The event one progress line's JSON means, or None when it is not a valid one."""
    try:
        record = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict):
        return None
    step, split = record.get("step"), record.get("split")
    if not isinstance(step, int) or isinstance(step, bool) or split not in _SPLITS:
        return None
    data: dict[str, Any] = {"step": step}
    metrics = record.get("metrics")
    for key, value in (metrics if isinstance(metrics, dict) else {}).items():
        number = metric_value(value)
        is_metric = number is not None or value is None or isinstance(value, float)
        if is_metric and key not in ("step", "recorded_at") and len(data) <= MAX_METRICS:
            data[key] = number
    for field_name, key in (("reward", f"{split}/reward"), ("count", f"{split}/trajectories")):
        if field_name in record:
            data[key] = metric_value(record[field_name])
    return _SPLITS[split], data


class ProgressLines:
    """Finds the progress lines in the job's output, fed in chunks; bounded in memory.

    Only lines that start with PROGRESS_PREFIX count; a chunk without the prefix is not split
    into lines (the common case)."""

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, chunk: bytes) -> list[Emitted]:
        data = self._partial + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._partial = data[-MAX_PROGRESS_LINE_BYTES:]
            return []
        complete, self._partial = data[: cut + 1], data[cut + 1 :][-MAX_PROGRESS_LINE_BYTES:]
        if PROGRESS_PREFIX not in complete:
            return []
        events: list[Emitted] = []
        for line in complete.split(b"\n"):
            line = line.rstrip(b"\r")
            if line.startswith(PROGRESS_PREFIX):
                event = progress_line_event(line[len(PROGRESS_PREFIX) :])
                if event is not None:
                    events.append(event)
        return events


MAX_PROGRESS_LINE_BYTES = 64 * 1024


# ---- the job's output -------------------------------------------------------------------------

# Lines that matter to the person who started the run. Not every WARNING: vLLM and transformers
# print dozens of harmless ones, so only the generated script's own complaints, Python warnings
# that usually mean wrong numbers, and error-level log lines.
WARNING_LINE = re.compile(
    rb"rollouts? failed|could not score|No rollout succeeded|nothing to train on"
    rb"|\b(?:User|Runtime)Warning: |\bERROR\b|CUDA out of memory|OutOfMemoryError|\bKilled\b"
)
# Literal parts of WARNING_LINE: finding a literal is ~50 times faster than running the regex,
# and most output holds none of them, so most chunks are never split into lines.
_WARNING_WORDS = (
    b"rollout",
    b"could not score",
    b"nothing to train on",
    b"Warning: ",
    b"ERROR",
    b"CUDA out of memory",
    b"OutOfMemoryError",
    b"Killed",
)
TRACEBACK_START = b"Traceback (most recent call last):"
MAX_WARNINGS = 50
MAX_MESSAGE_CHARS = 1_000
MAX_TRACEBACK_CHARS = 4_000
MAX_TRACEBACK_LINES = 60
_PARTIAL_LIMIT = 8 * 1024
_DIGITS = re.compile(r"\d+")


class OutputScanner:
    """Turns the job's output, fed in chunks, into `warning` events; bounded in memory and count.

    The log holds stdout and stderr together (in order), so the lines that matter are picked by
    what they say. Each distinct line (numbers ignored) is reported once, MAX_WARNINGS at most.
    """

    def __init__(self, max_warnings: int = MAX_WARNINGS) -> None:
        self._partial = b""
        self._seen: set[str] = set()
        self._count = 0
        self._max = max_warnings
        self._traceback: list[str] | None = None
        self._truncated = False

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Warnings found in `chunk` (complete lines only; the rest waits for the next chunk)."""
        data = self._partial + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._keep_partial(data)
            return []
        complete, rest = data[: cut + 1], data[cut + 1 :]
        self._keep_partial(rest)
        if (
            self._traceback is None
            and TRACEBACK_START not in complete
            and not any(word in complete for word in _WARNING_WORDS)
        ):
            return []  # the common case: nothing to look at line by line
        warnings: list[dict[str, Any]] = []
        for raw in complete.split(b"\n")[:-1]:
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            warnings.extend(self._line(line))
        return warnings

    def already_reported(self, message: str) -> None:
        """Count a warning reported before a restart, so that it is not reported twice."""
        self._seen.add(_DIGITS.sub("#", message)[:200])
        self._count += 1

    def _keep_partial(self, data: bytes) -> None:
        # A line without end (a progress bar, binary noise) is cut: memory stays bounded.
        self._partial = data[-_PARTIAL_LIMIT:]

    def _line(self, line: str) -> list[dict[str, Any]]:
        if self._traceback is not None:
            if (
                line.startswith((" ", "\t"))
                or not line.strip()
                or line.startswith(("During handling", "The above exception"))
            ):
                if len(self._traceback) < MAX_TRACEBACK_LINES:
                    self._traceback.append(line)
                return []
            frames, self._traceback = self._traceback, None
            excerpt = "\n".join([*frames, line])[-MAX_TRACEBACK_CHARS:]
            return self._warning(
                f"Exception in the job's output: {line.strip()}", traceback=excerpt
            )
        if line.lstrip().startswith(TRACEBACK_START.decode()):
            self._traceback = [line]
            return []
        if WARNING_LINE.search(line.encode("utf-8", errors="replace")):
            return self._warning(line.strip())
        return []

    def _warning(self, message: str, **extra: str) -> list[dict[str, Any]]:
        key = _DIGITS.sub("#", message)[:200]
        if key in self._seen or self._truncated:
            return []
        self._seen.add(key)
        self._count += 1
        if self._count > self._max:
            self._truncated = True
            return [
                {
                    "message": (
                        f"More than {self._max} distinct warnings: the rest are only in the log."
                    )
                }
            ]
        return [{"message": message[:MAX_MESSAGE_CHARS], **extra}]


# ---- how the script said it ended -------------------------------------------------------------

_COMPLETE_BANNER = re.compile(r"^(?:RL|SFT) TRAINING COMPLETE\s*$", re.M)
"""What an RL script prints when training completed, or a fine-tuning (SFT) one."""
_MODEL_LINE = re.compile(r"^\s*Model:\s+(\S+)\s*$", re.M)
_URL_LINE = re.compile(r"^\s*Inference URL:\s+(\S+)\s*$", re.M)
_STEP_LINE = re.compile(r"^\s*Training step:\s+(\d+)\s*$", re.M)


@dataclass(frozen=True)
class Completion:
    """What the generated script prints when training is done (`print_usage`)."""

    complete: bool
    model: str | None = None
    inference_url: str | None = None
    step: int | None = None


def read_completion(output_tail: str) -> Completion:
    """The end-of-training banner in the output's tail, with the model name, URL and step."""
    banners = list(_COMPLETE_BANNER.finditer(output_tail))
    if not banners:
        return Completion(False)
    text = output_tail[banners[-1].start() :]
    model, url, step = _MODEL_LINE.search(text), _URL_LINE.search(text), _STEP_LINE.search(text)
    return Completion(
        True,
        model.group(1) if model else None,
        url.group(1) if url else None,
        int(step.group(1)) if step else None,
    )
