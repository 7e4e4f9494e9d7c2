"""A run's controls: the status card's Cancel (the job stopped, or a finished run's served model),
a failed run's fix buttons (the script again with less GPU memory, or resumed from its last
checkpoint), a stalled run's *Restart from the last checkpoint* and *Keep waiting*, and a
running run's *Pause* with its *Resume*. Each
comes straight from its listener (bot/slack/listeners/run_buttons.py).
"""

from __future__ import annotations

from slack_sdk import WebClient

from bot.runs.flags import with_lower_gpu_memory
from bot.runs.reporter import PAUSED, PAUSING, STALLED
from bot.runs.service import SCRIPT_CHANGED, RunService, shown
from bot.runs.store import Run, RunRef
from runner.client import RunnerRejected, RunnerUnavailable
from runner.schemas import FixAction, JobState

RAY_CANNOT_PAUSE = (
    "This job runs on the runner's Ray executor, where a job cannot resume from its checkpoints "
    "(they stay on the Ray node), so it cannot be paused: *Cancel* stops it."
)


class RunControls:
    """Cancel and the fixes, for a run's owner (or an approver)."""

    def __init__(self, service: RunService) -> None:
        self.service = service

    def cancel(self, slack: WebClient, ref: RunRef, user: str) -> None:
        """The status card's Cancel button: the owner or an approver stops the job."""
        run = self.service.runs.find(ref)
        if run is None or run.job_id is None:
            return
        if user != run.owner and user not in self.service.policy.approvers:
            self.service.poster.ephemeral(
                slack, run.key, user, f"Only <@{run.owner}> can cancel this run."
            )
            return
        if not run.active:  # a finished run: what may still run is its model's serving job
            self._stop_serving(slack, run, user)
            return
        try:
            self.service.client.cancel(run.job_id)
        except (RunnerUnavailable, RunnerRejected) as error:
            self.service.poster.ephemeral(
                slack, run.key, user, f"Could not cancel: {shown(error, 300)}"
            )
            return
        # Said to the one who clicked: the thread hears once, when the job has stopped (the
        # card and the `cancelled` milestone).
        self.service.poster.ephemeral(
            slack,
            run.key,
            user,
            f":no_entry_sign: Cancelling job `{run.job_id}`; checkpoints are saved first.",
        )

    def restart_stalled(self, slack: WebClient, ref: RunRef, user: str) -> None:
        """A stalled run's *Restart from the last checkpoint*, for its owner: the job is
        cancelled (the runner stops its whole process tree) and, once the runner says it was,
        a new job resumes it (RunService.apply)."""
        run = self._owned(slack, ref, user, "can restart")
        if run is None:
            return
        if self.service.script_of(run) is None:
            self.service.reporter.say(run, SCRIPT_CHANGED)
            return
        restarting = self.service.mark_restarting(run.id)
        if restarting is None:
            self.service.poster.ephemeral(
                slack,
                run.key,
                user,
                f"Job `{run.job_id}` is not stalled any more ({run.state}): nothing to restart.",
            )
            return
        self._stop_marked(
            slack,
            user,
            restarting,
            STALLED,
            "stop",
            f":arrows_counterclockwise: <@{user}> restarts job `{run.job_id}` from its last "
            "checkpoint: stopping it (all its processes) first.",
        )

    def pause(self, slack: WebClient, ref: RunRef, user: str) -> None:
        """A running run's *Pause*, for its owner: the job is stopped (its checkpoints kept, its
        GPU freed); once the runner says it was, the thread offers *Resume*
        (RunReporter.handle)."""
        run = self._owned(slack, ref, user, "can pause")
        if run is None or run.job_id is None:  # _owned returns runs with a job
            return
        if self.service.job_history(run.job_id)[0]:
            self.service.poster.ephemeral(slack, run.key, user, RAY_CANNOT_PAUSE)
            return
        was = run.state
        pausing = self.service.change_state(run.id, (JobState.running.value, STALLED), PAUSING)
        if pausing is None:
            self.service.poster.ephemeral(
                slack, run.key, user, f"Job `{run.job_id}` is {run.state}: nothing to pause."
            )
            return
        self._stop_marked(
            slack,
            user,
            pausing,
            was,
            "pause",
            f":double_vertical_bar: <@{user}> pauses job `{run.job_id}`: stopping it, its "
            "checkpoints kept.",
        )

    def _owned(self, slack: WebClient, ref: RunRef, user: str, may: str) -> Run | None:
        """The run `ref` names, with a job, when `user` owns it; None otherwise, and anyone else
        is told that only the owner `may` (e.g. "can pause") this run."""
        run = self.service.runs.find(ref)
        if run is None or run.job_id is None:
            return None
        if user != run.owner:
            self.service.poster.ephemeral(
                slack, run.key, user, f"Only <@{run.owner}> {may} this run."
            )
            return None
        return run

    def _stop_marked(
        self, slack: WebClient, user: str, marked: Run, back_to: str, verb: str, said: str
    ) -> None:
        """Stop the job of `marked` (a run just marked restarting or pausing) and tell the
        thread `said`; a runner that cannot stop it puts the run back to `back_to` and tells the
        clicker why."""
        assert marked.job_id is not None
        try:
            self.service.client.cancel(marked.job_id)
        except (RunnerUnavailable, RunnerRejected) as error:
            self.service.change_state(marked.id, (marked.state,), back_to)
            self.service.poster.ephemeral(
                slack, marked.key, user, f"Could not {verb} it: {shown(error, 300)}"
            )
            return
        self.service.reporter.say(marked, said)
        self.service.reporter.refresh_card(marked, force=True)

    def resume(self, slack: WebClient, ref: RunRef, user: str) -> None:
        """A paused run's *Resume*, for its owner: a new job goes on from its last checkpoint
        (submitted by the follower's next sweep, like a restart's)."""
        run = self.service.runs.find(ref)
        if run is None or run.job_id is None or run.state != PAUSED:
            return
        if user != run.owner:
            self.service.poster.ephemeral(
                slack, run.key, user, f"Only <@{run.owner}> can resume this run."
            )
            return
        if self.service.resumed_by(run) is not None:
            self.service.poster.ephemeral(
                slack, run.key, user, f"Job `{run.job_id}` is resumed already."
            )
            return
        if self.service.script_of(run) is None:
            self.service.reporter.say(run, SCRIPT_CHANGED)
            return
        self.service.queue_resume(run)
        self.service.reporter.say(
            run,
            f":arrow_forward: <@{user}> resumes job `{run.job_id}` from its last checkpoint in "
            "a new job.",
        )

    def keep_waiting(self, slack: WebClient, ref: RunRef, user: str) -> None:
        """A stalled run's *Keep waiting*: nothing changes; said in the thread, and the runner
        speaks again only after the job moved on and went quiet again."""
        run = self._owned(slack, ref, user, "decides for")
        if run is None:
            return
        if run.state != "stalled":
            self.service.poster.ephemeral(
                slack, run.key, user, f"Job `{run.job_id}` is {run.state} now."
            )
            return
        self.service.reporter.say(
            run,
            f":hourglass: <@{user}> keeps waiting for job `{run.job_id}`. I say so again only if "
            "it moves on and then goes quiet again.",
        )

    def _stop_serving(self, slack: WebClient, run: Run, user: str) -> None:
        assert run.job_id is not None
        try:
            serving = self.service.client.stop_serving(run.job_id)
        except RunnerRejected as error:
            said = "Nothing of this run is being served." if error.status == 404 else None
            self.service.poster.ephemeral(
                slack, run.key, user, said or f"Could not stop it: {shown(error, 300)}"
            )
            return
        except RunnerUnavailable as error:
            self.service.poster.ephemeral(
                slack, run.key, user, f"Could not stop it: {shown(error, 300)}"
            )
            return
        self.service.poster.ephemeral(
            slack, run.key, user, f":no_entry_sign: Stopping the served model `{serving.model}`."
        )

    def retry(self, slack: WebClient, ref: RunRef, action: FixAction, user: str) -> None:
        """A fix button: the script again, with less GPU memory or resuming from a checkpoint."""
        run = self.service.runs.find(ref)
        if run is None or run.state != JobState.failed.value:
            return
        refusal = self.service.may_approve(slack, run.key, user, run.owner)
        if refusal:
            self.service.poster.ephemeral(slack, run.key, user, refusal)
            return
        script = self.service.script_of(run)
        if script is None:
            self.service.reporter.say(run, SCRIPT_CHANGED)
            return
        args = list(run.args)
        resume = None
        if action is FixAction.retry_lower_gpu_memory:
            stored = self.service.sessions.get(run.key)
            args = with_lower_gpu_memory(args, stored.session.answers if stored else {})
        else:
            resume = run.job_id
        self.service.start(
            slack,
            run.key,
            user,
            script,
            run.script_name,
            run.backend,
            run.required_env,
            args=args,
            resume_from_job=resume,
            # The resumed job reports only its own steps: the curve (and the base model's
            # validation at step 0) go on from the earlier run's.
            points=run.points if resume else None,
        )
