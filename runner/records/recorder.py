"""The writes that move a job through its states: each stores the new state with its event in
one transaction, then wakes the long polls waiting on that job. Event data and failures are
redacted (runner.records.redact) before they are stored: what a job printed may hold its secrets."""

from __future__ import annotations

import logging
from typing import Any

from runner.jobs.local.job_process import JobProcess
from runner.jobs.outcome import Outcome, cancelled_before_start
from runner.records.event_wakeups import EventWakeups
from runner.records.redact import Redactor
from runner.records.rows import STARTED_STATES, JobRow
from runner.records.store import JobStore
from runner.schemas import EventType, JobEvent, JobState, JobSubmission

log = logging.getLogger(__name__)


class JobRecorder:
    """A job's events and state changes, written to the store; readers are woken after each."""

    def __init__(self, store: JobStore, wakeups: EventWakeups, redactor: Redactor) -> None:
        self.store = store
        self.wakeups = wakeups
        self.redactor = redactor

    def queue(self, job_id: str, submission: JobSubmission, run_dir: str) -> tuple[JobRow, bool]:
        """JobStore.create: the new queued job, or the one the idempotency key already names."""
        job, created = self.store.create(job_id, submission, run_dir)
        if created:
            self.wakeups.notify(job.id)
        return job, created

    def emit(self, job_id: str, type: EventType, data: dict[str, Any]) -> JobEvent:
        """Append one event (progress, a warning)."""
        event = self.store.append_event(job_id, type, self.redactor.data(data))
        self.wakeups.notify(job_id)
        return event

    def cancel_queued(self, job_id: str) -> JobRow | None:
        """Cancel the job if it is still queued; None when it is not."""
        now = self.store.now()
        cancelled = self.store.transition(
            job_id,
            [JobState.queued],
            JobState.cancelled,
            event=cancelled_before_start().event,
            finished_at=now,
            cancel_requested_at=now,
        )
        return self._woken(job_id, cancelled)

    def running(self, job: JobRow, process: JobProcess) -> JobRow | None:
        """A starting job's supervisor was launched; None if the job was not starting."""
        running = self.store.transition(
            job.id,
            [JobState.starting],
            JobState.running,
            event=(EventType.started, {"gpus": job.gpus, "pid": process.pid}),
            pid=process.pid,
            process_start=process.start_id,
            started_at=self.store.now(),
        )
        return self._woken(job.id, running)

    def lost(self, job_id: str, reason: str) -> JobRow | None:
        """A started job whose processes are gone with no outcome recorded."""
        lost = self.store.transition(
            job_id,
            STARTED_STATES,
            JobState.lost,
            event=(EventType.lost, {"reason": self.redactor.text(reason)}),
            finished_at=self.store.now(),
        )
        return self._woken(job_id, lost)

    def finish(self, job_id: str, outcome: Outcome) -> None:
        """Record how a started job ended (unless something else finished it first)."""
        failure = self.redactor.failure(outcome.failure) if outcome.failure else None
        kind, data = outcome.event
        # A failed event's data is its failure: the redacted one, cut to the schema's lengths.
        data = failure.model_dump(mode="json") if failure and kind is EventType.failed else data
        done = self.store.transition(
            job_id,
            STARTED_STATES,
            outcome.state,
            event=(kind, self.redactor.data(data)),
            finished_at=self.store.now(),
            exit_code=outcome.exit_code,
            failure=failure,
        )
        if self._woken(job_id, done) is not None:
            log.info(
                "job %s %s exit_code=%s failure=%s",
                job_id,
                outcome.state.value,
                outcome.exit_code,
                outcome.failure.kind.value if outcome.failure else None,
            )

    def _woken(self, job_id: str, changed: JobRow | None) -> JobRow | None:
        # Only a change that happened wrote an event: nothing new to wake anyone for otherwise.
        if changed is not None:
            self.wakeups.notify(job_id)
        return changed
