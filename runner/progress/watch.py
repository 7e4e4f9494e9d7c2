"""Reading a running job's files into events: ART's progress records (steps, validations,
checkpoints), the progress lines and warnings in its output.

A step told by both history.jsonl and a progress line is reported once (the first to tell it).

After a restart the new runner reads the same files again; what the job's event log already
holds (and what was on disk before the job started) is not reported twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from types import TracebackType

from runner.jobs.job_folder import JobFolder
from runner.progress.art_records import ArtProgress, Seen
from runner.progress.logfile import OutputFollower
from runner.progress.output_lines import OutputScanner, ProgressLines
from runner.records.rows import NewEvent
from runner.schemas import EventType, JobEvent

RESCAN_EVERY_S = 1.0
"""How often new model folders are looked for (a poll reads the known ones)."""
REPORTED_TYPES = (
    EventType.step,
    EventType.validation,
    EventType.checkpoint,
    EventType.rollouts,
    EventType.warning,
)
"""The event types a watch reports, and so must know from before a restart."""


class JobWatch:
    """A running job's files since the last look, as events; `with` closes the output log."""

    def __init__(self, folder: JobFolder, reported: Iterable[JobEvent]) -> None:
        reported = list(reported)
        self._seen = Seen.of((event.type, event.data) for event in reported)
        self._progress = ArtProgress(folder.run_dir, folder.baseline(), self._seen)
        self._output = OutputFollower(folder.runner_dir)
        self._scanner = OutputScanner()
        self._lines = ProgressLines()
        for event in reported:
            if event.type is EventType.warning:
                self._scanner.already_reported(str(event.data.get("message", "")))
        self._last_rescan = 0.0
        self.output_bytes = 0
        """How many bytes of output the last poll read (the stall watchdog's sign of life)."""

    @property
    def last_step(self) -> int | None:
        """The last training step reported (before a restart too)."""
        return self._progress.last_step

    def poll(self) -> list[NewEvent]:
        """What the job wrote since the last poll: progress first, then warnings."""
        rescan = time.monotonic() - self._last_rescan >= RESCAN_EVERY_S
        if rescan:
            self._last_rescan = time.monotonic()
        progress = self._progress.poll(rescan=rescan)
        chunk = self._output.poll()
        self.output_bytes = len(chunk)
        return progress + self._from_output(chunk)

    def drain(self) -> list[NewEvent]:
        """What is left once the job ended: the rest of its output, then ART's last records."""
        events: list[NewEvent] = []
        while chunk := self._output.poll():
            events += self._from_output(chunk)
        return events + self._progress.poll(rescan=True)

    def close(self) -> None:
        self._output.close()

    def __enter__(self) -> JobWatch:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _from_output(self, chunk: bytes) -> list[NewEvent]:
        """Progress lines (not told by history.jsonl already), then warnings."""
        progress = self._seen.fresh(self._lines.feed(chunk))
        return progress + [(EventType.warning, data) for data in self._scanner.feed(chunk)]
