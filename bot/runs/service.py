"""Approved scripts on the GPU runner: submit (retrying while it is down), and follow each job's
events (the reporter tells the thread: bot.runs.reporter). A job that dies of a transient cause
(its failure says so, or the runner lost it) is resumed in a new job, a few times at most. A
run's Cancel and its fixes: bot.runs.controls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from slack_sdk import WebClient

from bot.delivery.effects import Post, ThreadEffect
from bot.delivery.outbox import Outbox
from bot.process.shards import ALONE, Shard
from bot.runs.approval import ApprovalPolicy
from bot.runs.display.cards import preflight_then, runs_list_text, status_card, thread_status_text
from bot.runs.display.rollout_samples import post_rollouts, rollouts_said
from bot.runs.preflight_records import PreflightRecords
from bot.runs.reporter import RESTARTING, STALLED, AutoResume, RunReporter, failure_of
from bot.runs.store import Run, RunRef, RunStore
from bot.slack.blocks import text_message
from bot.slack.poster import ThreadPoster
from bot.slack.records import SlackRecords, script_digest
from bot.slack.text import clip, escape
from bot.workspaces.clients import ClientFor, NotInstalled
from flows import start_of
from runner.client import RunnerClient, RunnerClientError, RunnerRejected, RunnerUnavailable
from runner.schemas import EventsPage, EventType, FixAction, JobEvent, JobState, JobSubmission
from storage.sessions import SessionKey, SessionStore

log = logging.getLogger(__name__)

BACKOFF_CAP = timedelta(minutes=5)
SHOWN_AT_ONCE = {EventType.validation, EventType.rollouts, EventType.stalled}
"""Events that refresh the status card at once (the others at most every CARD_MIN_INTERVAL)."""
# What the thread is told when a call to the runner fails; {error} is the runner's error.
WAITING_FOR_RUNNER = (
    ":hourglass: The GPU runner is unreachable ({error}). "
    "The approval is saved; I keep retrying and will post here once it is submitted."
)
REFUSED = ":x: The runner refused the job: {error}"
LOST_CONTACT = (
    ":warning: Lost contact with the GPU runner ({error}); "
    "still following the job and will report when it answers again."
)
UNKNOWN_JOB = ":grey_question: The runner no longer knows this job: {error}"
RAY_CANNOT_RESUME = (
    "Nothing was retried automatically: a job on the runner's Ray executor cannot resume (its "
    "checkpoints stay on the Ray node that ran it)."
)
SCRIPT_GONE_NO_RESUME = (
    "Nothing was retried automatically: the approved script changed or is gone from the bot's host."
)
GAVE_UP = "Gave up after {count} automatic resume{s}."
SCRIPT_CHANGED = "The script changed since that run: approve the new one instead."
NO_ROLLOUTS_RUNNER = ":warning: Could not get the rollouts from the GPU runner: {error}"
NO_ROLLOUTS_YET = (
    "No validation rollouts yet. They come from ART's trajectory files at each validation "
    '(`model.log(..., split="val")`), read by the runner from the job\'s folder: a job on '
    "Ray keeps them on its own host."
)


def required_env(answers: Mapping[str, Any]) -> list[str]:
    """The environment variables the script checks at startup, by its answers."""
    names = []
    judge = str(answers.get("judge_model") or "")
    if answers.get("reward") in ("ruler", "custom") and judge.startswith("openai/"):
        names.append("OPENAI_API_KEY")
    if answers.get("backend") == "serverless":
        names.append("WANDB_API_KEY")
    teacher_key = answers.get("teacher_key_env")
    if answers.get("scenario") == "distillation" and isinstance(teacher_key, str) and teacher_key:
        names.append(teacher_key)  # the teacher's key, where the fine-tuning script runs
    return names


class RunService:
    """Everything between an approval and the trained model's message in the thread."""

    def __init__(
        self,
        runs: RunStore,
        records: SlackRecords,
        poster: ThreadPoster,
        outbox: Outbox,
        client: RunnerClient,
        load_script: Callable[[SessionKey, str], str | None],
        sessions: SessionStore,
        *,
        policy: ApprovalPolicy,
        auto_resume_max: int = 2,
        preflights: PreflightRecords | None = None,
    ) -> None:
        self.runs = runs
        self.records = records
        self.poster = poster
        self.client = client
        self._load_script = load_script
        self.sessions = sessions
        self.policy = policy
        """Who may approve (bot.runs.approval), and so start code on the GPU host."""
        self.reporter = RunReporter(runs, outbox)
        """Tells each run's thread what its job's events say."""
        self.auto_resume_max = auto_resume_max
        """How many times a job that died of a transient cause is resumed in a row (0: never)."""
        self.preflights = preflights
        """What preflights of a run's script measured: shown again when it succeeds."""
        self._submitting = threading.Lock()
        self._locks_lock = threading.Lock()
        self._run_locks: dict[int, threading.Lock] = {}
        self._submitted_callbacks: list[Callable[[Run], None]] = []

    # -- approving and submitting --

    def may_approve(self, slack: WebClient, key: SessionKey, user: str, owner: str) -> str | None:
        """Why `user` may not approve a run here, or None. Approving runs code on a GPU host."""
        return self.policy.refusal(slack, key, user, owner)

    def already_running(self, key: SessionKey, script: str) -> str | None:
        """Why approving `script` again would duplicate a run in progress, or None."""
        digest = script_digest(script)
        for run in self.runs.for_thread(key):
            if run.active and run.script_sha256 == digest:
                job = f" (job `{run.job_id}`)" if run.job_id else ""
                return f"This script is already approved and {run.state.replace('_', ' ')}{job}."
        return None

    def approve(
        self,
        slack: WebClient,
        key: SessionKey,
        user: str,
        script: str,
        script_name: str,
        answers: Mapping[str, Any],
    ) -> Run:
        """Record the approval, then submit; an unreachable runner is retried, never forgotten.
        An RL run that continues a fine-tuning run on LocalBackend works in that run's job
        folder, where its art path holds the checkpoint the script forks."""
        backend = str(answers.get("backend") or "local")
        sft = self._continued_run(key, answers)
        return self.start(
            slack,
            key,
            user,
            script,
            script_name,
            backend,
            required_env(answers),
            resume_from_job=sft.job_id if sft is not None and backend == "local" else None,
        )

    def continuation_refusal(self, key: SessionKey, answers: Mapping[str, Any]) -> str | None:
        """Why a run that continues a fine-tuning run cannot start (that run is gone, or did not
        succeed), or None (it can, or it continues nothing)."""
        start = start_of(answers)
        if start is None or not start.get("run"):
            return None
        sft = self._continued_run(key, answers)
        if sft is None or sft.state != "succeeded" or sft.job_id is None:
            return (
                f"This RL run starts from the fine-tuning run #{escape(str(start['run']))}, "
                "which is not a finished run of this workspace any more: start again from a "
                "fine-tuning run that succeeded."
            )
        return None

    def _continued_run(self, key: SessionKey, answers: Mapping[str, Any]) -> Run | None:
        """The fine-tuning run these answers continue (flows.wizards.start_from's `run`), of the
        same workspace; None when they continue none."""
        start = start_of(answers)
        if start is None or not isinstance(start.get("run"), str):
            return None
        return self.runs.find(RunRef(key.team, start["run"]))

    def start(
        self,
        slack: WebClient,
        key: SessionKey,
        user: str,
        script: str,
        script_name: str,
        backend: str,
        required: list[str],
        *,
        args: list[str] | None = None,
        resume_from_job: str | None = None,
        points: list[dict[str, Any]] | None = None,
    ) -> Run:
        """An approval recorded, a run created for it, and its first submission tried."""
        approval = self.records.record_approval(key, user, script, script_name)
        run = self.runs.create(
            approval_id=approval.id,
            key=key,
            owner=user,
            script_name=script_name,
            script_sha256=approval.script_sha256,
            backend=backend,
            required_env=required,
            args=args,
            resume_from_job=resume_from_job,
            points=points,
        )
        self._submit(slack, run)
        return self.runs.get(run.id) or run

    def script_of(self, run: Run) -> str | None:
        """The approved script, from the bot's scripts folder, if it is still the one approved."""
        script = self._load_script(run.key, run.script_name)
        if script is not None and script_digest(script) == run.script_sha256:
            return script
        return None

    def _submit(self, slack: WebClient, run: Run) -> None:
        script = self.script_of(run)
        if script is None:
            self._end(
                run,
                "rejected",
                ":x: The approved script changed or is gone from the bot's host: "
                "press Regenerate, then approve again.",
            )
            return
        submission = JobSubmission(
            script=script,
            script_name=run.script_name,
            idempotency_key=f"artbot-run-{run.id}-{run.script_sha256[:16]}",
            backend="serverless" if run.backend == "serverless" else "local",
            required_env=run.required_env,
            args=run.args,
            metadata={
                "team": run.key.team,
                "channel": run.key.channel,
                "thread": run.key.thread,
                "owner": run.owner,
            },
            resume_from_job=run.resume_from_job,
        )
        try:
            job = self.client.submit(submission)
        except RunnerUnavailable as error:
            attempts = run.submit_attempts + 1
            delay = min(BACKOFF_CAP, timedelta(seconds=2 ** min(attempts, 9)))
            run = self.runs.update(
                run.id,
                state="waiting_for_runner",
                submit_attempts=attempts,
                next_attempt_at=self.runs.now() + delay,
            )
            self._say_unreachable(run, WAITING_FOR_RUNNER.format(error=shown(error, 200)))
            return
        except RunnerRejected as error:
            self._end(run, "rejected", REFUSED.format(error=shown(error, 1_000)))
            return
        run = self.runs.update(
            run.id, job_id=job.id, state=job.state.value, unreachable_notified=False
        )
        # The card is posted directly, not through the outbox: its ts goes on the run's row at
        # once, for the updates of a run that may last days (the outbox forgets its rows after
        # one). A card lost to a Slack outage leaves the run without one; the milestones
        # still go through the outbox.
        card = self.poster.post(slack, run.key, status_card(run))
        run = self.runs.update(run.id, card_ts=card, card_updated_at=self.runs.now())
        for callback in self._submitted_callbacks:  # after the card: it comes first in the thread
            callback(run)

    # -- following jobs --

    def poll_once(self, client_for: ClientFor) -> None:
        """One round without waiting: submit what waits for the runner, then pass on each job's
        new events, each told in its thread with its team's client (`client_for`). The follower
        (bot.runs.follower) long-polls instead; tests drive this."""
        self.submit_due(client_for)
        for run in self.runs.active():
            if run.job_id is None:
                continue
            try:
                client_for(run.key.team)  # only to know the app is still in the workspace
            except NotInstalled:
                continue  # the app left that workspace: its runs wait for a reinstall
            try:
                page = self.client.events(run.job_id, after=run.cursor, wait=0)
            except RunnerClientError as error:
                self.following_failed(run.id, error)
                continue
            self.apply(run.id, page)

    def submit_due(self, client_for: ClientFor, shard: Shard = ALONE) -> None:
        """Submit the runs (of `shard`'s threads) waiting for the runner whose next attempt is
        due (those of a workspace the app left wait for a reinstall)."""
        with self._submitting:  # one submitter at a time: a run is submitted once per attempt
            for run in self.runs.active():
                if (
                    shard.owns(run.key)
                    and run.job_id is None
                    and run.state == "waiting_for_runner"
                    and (run.next_attempt_at is None or run.next_attempt_at <= self.runs.now())
                ):
                    try:
                        slack = client_for(run.key.team)
                    except NotInstalled:
                        continue
                    self._submit(slack, run)

    def on_job_submitted(self, callback: Callable[[Run], None]) -> None:
        """Call `callback(run)` as soon as a run has its job (the follower follows it then)."""
        self._submitted_callbacks.append(callback)

    def apply(self, run_id: int, page: EventsPage) -> Run | None:
        """Tell the run's thread what the events of `page` say, those after the run's stored
        cursor only (a page fetched twice is told once); the run as it is now, None if gone.
        The cursor moves after each event is handled: a restarted bot repeats nothing."""
        with self._following(run_id):
            run = self.runs.get(run_id)
            if run is None:
                return None
            if run.unreachable_notified:
                run = self.runs.update(run.id, unreachable_notified=False)
                self.reporter.say(run, ":electric_plug: The GPU runner answers again.")
            new = [event for event in page.events if event.seq > run.cursor]
            was_stalled = run.state == STALLED
            for event in new:
                if event.type is EventType.cancelled and run.state == RESTARTING:
                    self.queue_resume(run)  # first: a bot that stops here resumes it once
                auto = self._auto_resume(run, event)  # queued first too, for the same reason
                run, said = self.reporter.handle(run, event, auto)
                if event.type is EventType.succeeded:
                    said += self._last_rollouts(run) + self._preflight_then(run)
                # What the event says, and the cursor past it, in one transaction.
                self.reporter.outbox.enqueue(
                    run.key, said, also=self.runs.moving_cursor(run.id, event.seq)
                )
                run = self.runs.get(run.id) or run
            # A validation and its rollouts are shown at once (rare: minutes apart in ART); steps
            # at most every
            # CARD_MIN_INTERVAL; the end at once.
            shown_now = (
                not run.active
                or any(e.type in SHOWN_AT_ONCE for e in new)
                or (was_stalled and run.state != STALLED)  # it moved on: no longer "stalled"
            )
            self.reporter.refresh_card(run, force=bool(new) and shown_now)
            return self.runs.get(run_id)

    # -- restarting a stalled job --

    def change_state(self, run_id: int, expected: Collection[str], state: str) -> Run | None:
        """The run, moved from one of the `expected` states to `state` under its events' lock
        (a step told meanwhile does not undo it); None when it is in none of them (any more)."""
        with self._following(run_id):
            run = self.runs.get(run_id)
            if run is None or run.state not in expected:
                return None
            return self.runs.update(run.id, state=state)

    def mark_restarting(self, run_id: int) -> Run | None:
        """A stalled run, now `restarting`; None when it is not stalled (any more)."""
        return self.change_state(run_id, (STALLED,), RESTARTING)

    def queue_resume(self, run: Run) -> None:
        """The restarted (or paused) job stopped: a new run resuming it from its last checkpoint,
        submitted by the next `submit_due` (the follower's sweep); once, even if told twice."""
        if self.resumed_by(run) is not None:
            return
        script = self.script_of(run)
        if script is None:
            self.reporter.say(run, SCRIPT_CHANGED)
            return
        approval = self.records.record_approval(run.key, run.owner, script, run.script_name)
        resumed = self.runs.create(
            approval_id=approval.id,
            key=run.key,
            owner=run.owner,
            script_name=run.script_name,
            script_sha256=approval.script_sha256,
            backend=run.backend,
            required_env=run.required_env,
            args=run.args,
            resume_from_job=run.job_id,
            points=run.points,  # the curve goes on from the stopped job's
        )
        self.runs.update(resumed.id, state="waiting_for_runner")

    def resumed_by(self, run: Run) -> Run | None:
        """The run that resumes `run`'s job, if one was queued."""
        if run.job_id is None:
            return None
        later = self.runs.for_thread(run.key)
        return next((other for other in later if other.resume_from_job == run.job_id), None)

    # -- resuming a job that died of a transient cause --

    def _auto_resume(self, run: Run, event: JobEvent) -> AutoResume | None:
        """For a job that failed of a transient cause or was lost: a resume queued (at most
        `auto_resume_max` in a row), or why none was. None for any other event, or when
        automatic resumes are off."""
        if self.auto_resume_max <= 0 or run.job_id is None:
            return None
        if event.type is EventType.failed:
            failure = failure_of(event.data)
            if not failure.transient:
                return None
            from_checkpoint: bool | None = failure.fix_action is FixAction.resume
        elif event.type is EventType.lost:
            from_checkpoint = None
        else:
            return None
        done = self._automatic_resumes(run)
        if done >= self.auto_resume_max:
            return AutoResume(not_retried=GAVE_UP.format(count=done, s="" if done == 1 else "s"))
        on_ray, checkpointed = self.job_history(run.job_id)
        if on_ray:
            return AutoResume(not_retried=RAY_CANNOT_RESUME)
        if self.script_of(run) is None:
            return AutoResume(not_retried=SCRIPT_GONE_NO_RESUME)
        self.queue_resume(run)
        if from_checkpoint is None:
            from_checkpoint = checkpointed
        return AutoResume(done + 1, self.auto_resume_max, from_checkpoint)

    def _automatic_resumes(self, run: Run) -> int:
        """How many times the run's job is already a resume after a crash: the runs it resumes,
        followed back through `resume_from_job` while each ended failed or lost (a restart of
        a stalled job, or a new approval, starts the count again)."""
        by_job = {other.job_id: other for other in self.runs.for_thread(run.key) if other.job_id}
        count, current = 0, run
        while current.resume_from_job in by_job and count < len(by_job):
            earlier = by_job[current.resume_from_job]
            if earlier.state not in (JobState.failed.value, JobState.lost.value):
                break
            count, current = count + 1, earlier
        return count

    def job_history(self, job_id: str) -> tuple[bool, bool | None]:
        """Whether the job ran on the runner's Ray executor (its `started` event names the Ray
        job), and whether it saved a checkpoint (None: the runner did not answer)."""
        try:
            page = self.client.events(job_id, after=0, wait=0)
        except RunnerClientError as error:
            log.warning("job %s: its events, to resume it: %s", job_id, error)
            return False, None  # a Ray runner refuses the resume, saying why
        on_ray = any(e.type is EventType.started and "ray_job" in e.data for e in page.events)
        return on_ray, any(e.type is EventType.checkpoint for e in page.events)

    def _preflight_then(self, run: Run) -> list[ThreadEffect]:
        """The run succeeded: what the preflight of its script measured, beside what training
        reached (nothing when no preflight of that script measured anything in the thread)."""
        if self.preflights is None:
            return []
        numbers = self.preflights.latest(run.key, run.script_sha256)
        said = preflight_then(numbers, run.points) if numbers is not None else ""
        return [Post(text_message(said))] if said else []

    def _last_rollouts(self, run: Run) -> list[ThreadEffect]:
        """The run succeeded: its last validation's rollouts, unless that was the first (posted
        already). Without them (no validation, a Ray job, the runner unreachable) nothing."""
        if run.job_id is None:
            return []
        try:
            page = self.client.rollouts(run.job_id)
        except RunnerClientError as error:
            log.warning("run %s: no last rollouts: %s", run.id, error)
            return []
        if page.rollouts is not None and page.rollouts.step != min(page.steps):
            return rollouts_said(run, page.rollouts, "the last validation")
        return []

    def show_rollouts(self, key: SessionKey, step: int | None) -> bool:
        """`show rollouts [step]` in a thread: the best and worst rollouts of that validation
        of the thread's latest run (the latest validation without `step`). False when the
        thread has no run that reached the runner (the text is then not a request for us)."""
        runs = [run for run in self.runs.for_thread(key) if run.job_id is not None]
        if not runs:
            return False
        run = runs[-1]
        try:
            page = self.client.rollouts(str(run.job_id), step)
        except RunnerClientError as error:
            self.reporter.say(run, NO_ROLLOUTS_RUNNER.format(error=shown(error, 300)))
            return True
        if page.rollouts is not None:
            post_rollouts(self.reporter.outbox, run, page.rollouts)
        elif page.steps:
            steps = ", ".join(str(s) for s in page.steps)
            self.reporter.say(
                run, f"No validation rollouts at step {step}. Steps with some: {steps}."
            )
        else:
            self.reporter.say(run, NO_ROLLOUTS_YET)
        return True

    def following_failed(self, run_id: int, error: RunnerClientError) -> None:
        """Asking for a run's events failed: an unreachable runner is told once (following goes
        on); a runner that no longer knows the job ends the run as lost."""
        with self._following(run_id):
            run = self.runs.get(run_id)
            if run is None or not run.active:
                return
            if isinstance(error, RunnerRejected):
                self._end(run, "lost", UNKNOWN_JOB.format(error=shown(error, 300)))
            else:
                self._say_unreachable(run, LOST_CONTACT.format(error=shown(error, 200)))

    @contextmanager
    def _following(self, run_id: int) -> Iterator[None]:
        """One handler of a run's events at a time: they are told once, in order."""
        with self._locks_lock:
            lock = self._run_locks.setdefault(run_id, threading.Lock())
        with lock:
            yield

    def _end(self, run: Run, state: str, text: str) -> None:
        """The run ends without a job's result (`rejected`, `lost`): record it and say why."""
        self.runs.update(run.id, state=state, finished_at=self.runs.now())
        self.reporter.say(run, text)

    def _say_unreachable(self, run: Run, text: str) -> None:
        """Say once that the runner cannot be reached; it is said again only after it answered."""
        if not run.unreachable_notified:
            self.runs.update(run.id, unreachable_notified=True)
            self.reporter.say(run, text)

    # -- listings --

    def runs_text(self, user: str, team: str) -> str:
        """`/train-rl runs`: the user's latest runs in the team."""
        return runs_list_text(self.runs.for_owner(user, team))

    def thread_status(self, key: SessionKey) -> str | None:
        """`status` in a wizard's thread: its runs (None without any)."""
        return thread_status_text(self.runs.for_thread(key))


def shown(error: Exception, limit: int) -> str:
    """The runner's error as it goes into a message: clipped and escaped."""
    return escape(clip(str(error), limit))
