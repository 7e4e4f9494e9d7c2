"""Approved scripts on the GPU runner: submit (retrying while it is down), then follow each job's
events into its thread: one status card updated in place, milestones, reward plots, the result.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.blocks import Block, SlackMessage, clip, escape, sections
from bot.plots import reward_curve_png
from bot.records import BotRecords, script_digest
from bot.run_records import Run, RunStore
from bot.threads import ThreadPoster
from runner.client import RunnerClient, RunnerRejected, RunnerUnavailable
from runner.schemas import EventType, Failure, FixAction, JobEvent, JobState, JobSubmission
from storage.sessions import SessionKey

log = logging.getLogger(__name__)

CARD_MIN_INTERVAL = timedelta(seconds=5)
"""chat.update is Tier 3 (about 50 a minute): one card refreshes at most this often."""
MAX_WARNINGS_POSTED = 3
BACKOFF_CAP = timedelta(minutes=5)
CANCEL_ACTION = "run_cancel"
FIX_ACTIONS = {
    FixAction.retry_lower_gpu_memory: "Retry with lower GPU memory",
    FixAction.resume: "Resume from the last checkpoint",
}
STATE_EMOJI = {
    "submitting": ":outbox_tray:",
    "waiting_for_runner": ":hourglass:",
    "queued": ":hourglass_flowing_sand:",
    "starting": ":gear:",
    "running": ":runner:",
    "succeeded": ":white_check_mark:",
    "failed": ":x:",
    "cancelled": ":no_entry_sign:",
    "lost": ":grey_question:",
    "rejected": ":x:",
}


def required_env(answers: Mapping[str, Any]) -> list[str]:
    """The environment variables the script checks at startup, by its answers."""
    names = []
    judge = str(answers.get("judge_model") or "")
    if answers.get("reward") in ("ruler", "custom") and judge.startswith("openai/"):
        names.append("OPENAI_API_KEY")
    if answers.get("backend") == "serverless":
        names.append("WANDB_API_KEY")
    return names


class RunService:
    """Everything between an approval and the trained model's message in the thread."""

    def __init__(
        self,
        runs: RunStore,
        records: BotRecords,
        poster: ThreadPoster,
        client: RunnerClient,
        load_script: Callable[[SessionKey, str], str | None],
        *,
        approvers: frozenset[str] = frozenset(),
        channels: frozenset[str] = frozenset(),
    ) -> None:
        self.runs = runs
        self.records = records
        self.poster = poster
        self.client = client
        self._load_script = load_script
        self.approvers = approvers
        self.channels = channels
        self._lock = threading.Lock()

    # -- approving and submitting --

    def may_approve(self, key: SessionKey, user: str, owner: str) -> str | None:
        """Why `user` may not approve a run here, or None. Approving runs code on a GPU host."""
        if user != owner:
            return f"Only <@{owner}> can approve this script."
        if self.approvers and user not in self.approvers:
            return "You are not on this bot's list of approvers (ARTBOT_APPROVERS)."
        if self.channels and key.channel not in self.channels:
            return "Runs cannot be approved in this channel (ARTBOT_RUNNER_CHANNELS)."
        return None

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
        """Record the approval, then submit; an unreachable runner is retried, never forgotten."""
        backend = str(answers.get("backend") or "local")
        return self._start(slack, key, user, script, script_name, backend, required_env(answers))

    def _start(
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
        )
        self._submit(slack, run)
        return self.runs.get(run.id) or run

    def _script_of(self, run: Run) -> str | None:
        """The approved script, from the bot's scripts folder, if it is still the one approved."""
        script = self._load_script(run.key, run.script_name)
        if script is not None and script_digest(script) == run.script_sha256:
            return script
        return None

    def _submit(self, slack: WebClient, run: Run) -> None:
        script = self._script_of(run)
        if script is None:
            self.runs.update(run.id, state="rejected", finished_at=self.runs.now())
            self.poster.post(
                slack,
                run.key,
                _text(
                    ":x: The approved script changed or is gone from the bot's host: press Regenerate, then approve again."
                ),
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
            if not run.unreachable_notified:
                self.runs.update(run.id, unreachable_notified=True)
                self.poster.post(
                    slack,
                    run.key,
                    _text(
                        f":hourglass: The GPU runner is unreachable ({escape(clip(str(error), 200))}). The approval is saved; I keep retrying and will post here once it is submitted."
                    ),
                )
            return
        except RunnerRejected as error:
            self.runs.update(run.id, state="rejected", finished_at=self.runs.now())
            self.poster.post(
                slack,
                run.key,
                _text(f":x: The runner refused the job: {escape(clip(str(error), 1_000))}"),
            )
            return
        run = self.runs.update(
            run.id, job_id=job.id, state=job.state.value, unreachable_notified=False
        )
        card = self.poster.post(slack, run.key, status_card(run))
        self.runs.update(run.id, card_ts=card, card_updated_at=self.runs.now())

    # -- following jobs --

    def poll_once(self, slack: WebClient) -> None:
        """One round: submit what waits for the runner, then pass on each active job's new events."""
        with self._lock:  # one follower at a time: events are handled once, in order
            for run in self.runs.active():
                if run.job_id is None:
                    if run.state == "waiting_for_runner" and (
                        run.next_attempt_at is None or run.next_attempt_at <= self.runs.now()
                    ):
                        self._submit(slack, run)
                    continue
                self._follow(slack, run)

    def _follow(self, slack: WebClient, run: Run) -> None:
        assert run.job_id is not None
        try:
            page = self.client.events(run.job_id, after=run.cursor, wait=0)
        except RunnerUnavailable as error:
            if not run.unreachable_notified:
                self.runs.update(run.id, unreachable_notified=True)
                self.poster.post(
                    slack,
                    run.key,
                    _text(
                        f":warning: Lost contact with the GPU runner ({escape(clip(str(error), 200))}); still following the job and will report when it answers again."
                    ),
                )
            return
        except RunnerRejected as error:
            self.runs.update(run.id, state="lost", finished_at=self.runs.now())
            self.poster.post(
                slack,
                run.key,
                _text(
                    f":grey_question: The runner no longer knows this job: {escape(clip(str(error), 300))}"
                ),
            )
            return
        if run.unreachable_notified:
            run = self.runs.update(run.id, unreachable_notified=False)
            self.poster.post(slack, run.key, _text(":electric_plug: The GPU runner answers again."))
        for event in page.events:
            run = self._handle(slack, run, event)
            # The cursor moves after each event is handled: a restart repeats nothing.
            run = self.runs.update(run.id, cursor=event.seq)
        self._refresh_card(slack, run, force=bool(page.events) and not run.active)

    def _handle(self, slack: WebClient, run: Run, event: JobEvent) -> Run:
        data = event.data
        if event.type is EventType.started:
            run = self.runs.update(run.id, state=JobState.running.value, started_at=event.at)
            self.poster.post(
                slack,
                run.key,
                _text(
                    f":rocket: Training started ({escape(run.script_name)}, job `{run.job_id}`)."
                ),
            )
        elif event.type is EventType.step:
            run = self.runs.update(
                run.id,
                state=JobState.running.value,
                points=_with_point(run.points, data, "train", "train/reward"),
            )
        elif event.type is EventType.validation:
            run = self.runs.update(
                run.id, points=_with_point(run.points, data, "val", "val/reward")
            )
            value = data.get("val/reward")
            shown = f"{value:.3f}" if isinstance(value, int | float) else "n/a"
            self.poster.post(
                slack,
                run.key,
                _text(
                    f":bar_chart: Validation at step {data.get('step', '?')}: val/reward = {shown}."
                ),
            )
            self._upload_plot(slack, run)
        elif event.type is EventType.warning and run.warnings_posted < MAX_WARNINGS_POSTED:
            run = self.runs.update(run.id, warnings_posted=run.warnings_posted + 1)
            self.poster.post(
                slack,
                run.key,
                _text(f":warning: {escape(clip(str(data.get('message', '')), 1_500))}"),
            )
        elif event.type is EventType.failed:
            run = self.runs.update(run.id, state=JobState.failed.value, finished_at=event.at)
            self._post_failure(slack, run, data)
            self._upload_plot(slack, run)
        elif event.type is EventType.succeeded:
            run = self.runs.update(run.id, state=JobState.succeeded.value, finished_at=event.at)
            self.poster.post(slack, run.key, success_message(run, data))
            self._upload_plot(slack, run)
        elif event.type in (EventType.cancelled, EventType.lost):
            run = self.runs.update(run.id, state=event.type.value, finished_at=event.at)
            what = (
                "was cancelled"
                if event.type is EventType.cancelled
                else "was lost: the runner restarted and its process was gone"
            )
            self.poster.post(
                slack, run.key, _text(f"<@{run.owner}> the training job `{run.job_id}` {what}.")
            )
        return run

    def _post_failure(self, slack: WebClient, run: Run, data: Mapping[str, Any]) -> None:
        try:
            failure = Failure.model_validate(data)
        except ValueError:
            failure = Failure(kind="unknown", summary=str(data.get("summary") or "The job failed."))  # type: ignore[arg-type]
        lines = [f"<@{run.owner}> :x: Training failed: {escape(failure.summary)}"]
        if failure.fix:
            lines.append(f"*What to do:* {escape(failure.fix)}")
        if failure.log_excerpt:
            lines.append(f"```{escape(clip(failure.log_excerpt, 2_000))}```")
        blocks: list[Block] = sections("\n".join(lines))
        if failure.fix_action is not None:
            blocks.append(
                {
                    "type": "actions",
                    "block_id": f"fix:{run.id}",
                    "elements": [
                        {
                            "type": "button",
                            "action_id": f"run_fix:{failure.fix_action.value}",
                            "text": {"type": "plain_text", "text": FIX_ACTIONS[failure.fix_action]},
                            "value": str(run.id),
                            "style": "primary",
                        }
                    ],
                }
            )
        self.poster.post(slack, run.key, SlackMessage(clip("\n".join(lines), 3_900), blocks[:50]))

    def _upload_plot(self, slack: WebClient, run: Run) -> None:
        if not run.points:
            return
        try:
            png = reward_curve_png(run.points, run.script_name.removesuffix(".py"))
            slack.files_upload_v2(
                channel=run.key.channel,
                thread_ts=run.key.thread,
                content=png,
                filename=f"{run.script_name.removesuffix('.py')}-rewards.png",
                title="Reward curve",
            )
        except SlackApiError as error:
            log.warning("plot upload failed for run %s: %s", run.id, error.response.get("error"))

    def _refresh_card(self, slack: WebClient, run: Run, *, force: bool = False) -> None:
        if run.card_ts is None:
            return
        now = self.runs.now()
        if (
            not force
            and run.card_updated_at is not None
            and now - run.card_updated_at < CARD_MIN_INTERVAL
        ):
            return
        card = status_card(run, now=now)
        try:
            slack.chat_update(
                channel=run.key.channel, ts=run.card_ts, text=card.text, blocks=card.blocks
            )
        except SlackApiError as error:
            log.warning(
                "status card update failed for run %s: %s", run.id, error.response.get("error")
            )
            return
        self.runs.update(run.id, card_updated_at=now)

    # -- buttons and listings --

    def cancel(self, slack: WebClient, run_id: int, user: str) -> None:
        run = self.runs.get(run_id)
        if run is None or run.job_id is None:
            return
        if user != run.owner and user not in self.approvers:
            self.poster.ephemeral(slack, run.key, user, f"Only <@{run.owner}> can cancel this run.")
            return
        try:
            self.client.cancel(run.job_id)
        except (RunnerUnavailable, RunnerRejected) as error:
            self.poster.ephemeral(
                slack, run.key, user, f"Could not cancel: {escape(clip(str(error), 300))}"
            )
            return
        self.poster.post(
            slack,
            run.key,
            _text(
                f":no_entry_sign: Cancelling job `{run.job_id}` (requested by <@{user}>); checkpoints are saved first."
            ),
        )

    def retry(self, slack: WebClient, run_id: int, action: FixAction, user: str) -> None:
        """A fix button: the same script again, with less GPU memory or resuming from checkpoints."""
        run = self.runs.get(run_id)
        if run is None or run.state != JobState.failed.value:
            return
        refusal = self.may_approve(run.key, user, run.owner)
        if refusal:
            self.poster.ephemeral(slack, run.key, user, refusal)
            return
        script = self._script_of(run)
        if script is None:
            self.poster.post(
                slack,
                run.key,
                _text("The script changed since that run: approve the new one instead."),
            )
            return
        args = list(run.args)
        resume = None
        if action is FixAction.retry_lower_gpu_memory:
            current = _flag_value(args, "--gpu-memory-utilization") or 0.7
            lowered = round(max(0.2, current - 0.15), 2)
            args = _with_flag(args, "--gpu-memory-utilization", str(lowered))
        else:
            resume = run.job_id
        self._start(
            slack,
            run.key,
            user,
            script,
            run.script_name,
            run.backend,
            run.required_env,
            args=args,
            resume_from_job=resume,
        )

    def runs_text(self, user: str, team: str) -> str:
        runs = self.runs.for_owner(user, team)
        if not runs:
            return "You have no training runs yet."
        lines = [f"Your training runs ({len(runs)}):"]
        for run in runs:
            lines.append(
                f"• {STATE_EMOJI.get(run.state, '')} `{run.script_name}` in <#{run.key.channel}>: {run.state}{_progress(run)}"
            )
        return "\n".join(lines)

    def thread_status(self, key: SessionKey) -> str | None:
        runs = self.runs.for_thread(key)
        if not runs:
            return None
        return "\n".join(
            f"Run {i}: {STATE_EMOJI.get(r.state, '')} {r.state}{_progress(r)}"
            for i, r in enumerate(runs, 1)
        )


def status_card(run: Run, *, now: datetime | None = None) -> SlackMessage:
    """One card per run, updated in place: state, step, rewards, elapsed time, Cancel."""
    elapsed = ""
    if run.started_at is not None:
        end = run.finished_at or now or run.started_at
        elapsed = f" · {_duration(end - run.started_at)}"
    text = f"{STATE_EMOJI.get(run.state, '')} *{escape(run.script_name)}*: {run.state}{_progress(run)}{elapsed}"
    if run.job_id:
        text += f"\njob `{run.job_id}`"
    blocks: list[Block] = sections(text)
    if run.active and run.job_id:
        blocks.append(
            {
                "type": "actions",
                "block_id": f"run:{run.id}",
                "elements": [
                    {
                        "type": "button",
                        "action_id": CANCEL_ACTION,
                        "text": {"type": "plain_text", "text": "Cancel"},
                        "value": str(run.id),
                        "style": "danger",
                    }
                ],
            }
        )
    return SlackMessage(clip(text, 3_900), blocks)


def success_message(run: Run, data: Mapping[str, Any]) -> SlackMessage:
    model = str(data.get("model") or run.script_name.removesuffix(".py"))
    url = str(data.get("inference_url") or "http://<runner-host>:<port>/v1/")
    step = data.get("step", "?")
    text = (
        f"<@{run.owner}> :white_check_mark: Training finished at step {step}. Your model: `{escape(model)}`\n"
        f'*Python*\n```from openai import OpenAI\n\nclient = OpenAI(base_url="{escape(url)}", api_key="not-needed")\n'
        f'response = client.chat.completions.create(\n    model="{escape(model)}",\n'
        f'    messages=[{{"role": "user", "content": "Your prompt here"}}],\n)\nprint(response.choices[0].message.content)```\n'
        f'*curl*\n```curl {escape(url.rstrip("/"))}/chat/completions -H "Content-Type: application/json" \\\n'
        f'  -d \'{{"model": "{escape(model)}", "messages": [{{"role": "user", "content": "Your prompt here"}}]}}\'```'
    )
    return SlackMessage(clip(text, 3_900), sections(text)[:50])


def _progress(run: Run) -> str:
    latest = run.points[-1] if run.points else None
    if latest is None:
        return ""
    parts = [f"step {latest['step']}"]
    train = next((p["train"] for p in reversed(run.points) if p.get("train") is not None), None)
    val = next((p["val"] for p in reversed(run.points) if p.get("val") is not None), None)
    if train is not None:
        parts.append(f"train/reward {train:.3f}")
    if val is not None:
        parts.append(f"val/reward {val:.3f}")
    return " · " + ", ".join(parts)


def _with_point(
    points: list[dict[str, Any]], data: Mapping[str, Any], field: str, metric: str
) -> list[dict[str, Any]]:
    step = data.get("step")
    value = data.get(metric)
    if not isinstance(step, int) or not isinstance(value, int | float):
        return points
    updated = [dict(p) for p in points]
    for point in updated:
        if point["step"] == step:
            point[field] = float(value)
            return updated
    updated.append({"step": step, "train": None, "val": None, field: float(value)})
    return sorted(updated, key=lambda p: p["step"])


def _duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def _flag_value(args: list[str], flag: str) -> float | None:
    if flag in args:
        index = args.index(flag)
        try:
            return float(args[index + 1])
        except (IndexError, ValueError):
            return None
    return None


def _with_flag(args: list[str], flag: str, value: str) -> list[str]:
    if flag in args:
        index = args.index(flag)
        return [*args[:index], flag, value, *args[index + 2 :]]
    return [*args, flag, value]


def _text(text: str) -> SlackMessage:
    return SlackMessage(clip(text, 3_900), sections(text)[:50])


class RunFollower:
    """Calls RunService.poll_once every few seconds in a daemon thread (started by `artbot serve`)."""

    def __init__(
        self,
        service: RunService,
        slack: WebClient,
        interval_s: float,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self._service = service
        self._slack = slack
        self._interval = interval_s
        self._stop = threading.Event()
        self._on_error = on_error
        self._thread = threading.Thread(target=self._loop, name="artbot-runs", daemon=True)

    def start(self) -> RunFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._service.poll_once(self._slack)
            except Exception as error:  # keep following the other runs
                log.exception("run follower round failed")
                if self._on_error:
                    self._on_error(error)
