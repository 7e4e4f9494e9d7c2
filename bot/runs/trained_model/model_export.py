"""A finished run's model, taken out of the runner: *Checkpoints and export* under the run lists
its checkpoints with their val/reward, the owner picks the one that is "the model" (the best by
default: `try` and export use it), pushes its LoRA adapter to the Hugging Face Hub or gets a
download link for it.

Everything happens on the runner (`GET /jobs/{id}/checkpoints`, `PUT /jobs/{id}/model`, `POST
/jobs/{id}/exports`, `POST .../download-link`): the checkpoints live there, and so does the Hub
token (HF_TOKEN in the runner's environment, never the bot's). The export runs on the runner; the
bot polls its state on the tries' pool (bot.runs.trained_model.try_limits), so a slow upload holds
no listener, and says in the thread where the adapter went and how to load it.

A ServerlessBackend run's checkpoints are W&B artifacts already: the bot says where they are.

Only the run's owner lists, chooses, exports or downloads: a checkpoint is the team's work, the
Hub repository the runner's token writes to is the team's, and a download link is a key to it."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC
from typing import TypeVar

from slack_sdk import WebClient

from bot.delivery.effects import Post
from bot.delivery.outbox import Outbox
from bot.runs.store import Run, RunRef, RunStore
from bot.runs.trained_model.export_messages import (
    at_step,
    checkpoints_message,
    export_modal,
    exported_message,
    repo_id_problem,
    reward_text,
    served_name,
    serverless_checkpoints,
)
from bot.runs.trained_model.try_limits import TryPool
from bot.slack.blocks import text_message
from bot.slack.poster import ThreadPoster
from bot.slack.text import clip, escape
from runner.client import RunnerClient, RunnerRejected, RunnerUnavailable
from runner.schemas import Export, ExportState

T = TypeVar("T")

EXPORT_POLL_S = 2.0
EXPORT_TIMEOUT_S = 2 * 3600.0
NOT_LOCAL = (
    "This run trained with LocalBackend and the bot has no runner: its checkpoints stay where "
    "the script ran."
)


class ModelExport:
    """The *Checkpoints and export* button and what follows it, for the run's owner."""

    def __init__(
        self,
        runs: RunStore,
        poster: ThreadPoster,
        outbox: Outbox,
        pool: TryPool,
        runner: RunnerClient | None,
        *,
        poll_s: float = EXPORT_POLL_S,
        timeout_s: float = EXPORT_TIMEOUT_S,
    ) -> None:
        self.runs = runs
        self.poster = poster
        self.outbox = outbox
        self.pool = pool
        self._runner = runner
        self.poll_s = poll_s
        self.timeout_s = timeout_s

    # -- the list, and the choice --

    def show_checkpoints(self, client: WebClient, ref: RunRef, user: str) -> None:
        """The run's checkpoints with their val/reward, which one is the model, and the
        choice, export and download controls."""
        run = self._owned(client, ref, user)
        if run is None:
            return
        if run.backend == "serverless":
            self._say(run, serverless_checkpoints(run))
            return
        listed = self._ask(run, lambda runner, job: runner.checkpoints(job))
        if isinstance(listed, str):
            self._say(run, listed)
        elif not listed.checkpoints:
            self._say(run, f"Run #{run.public_id} left no checkpoint on the runner.")
        else:
            self.outbox.enqueue(run.key, [Post(checkpoints_message(run, listed))])

    def choose(self, client: WebClient, ref: RunRef, user: str, step: int) -> None:
        """Make checkpoint `step` the run's model."""
        run = self._owned(client, ref, user)
        if run is None or run.backend == "serverless":
            return
        chosen = self._ask(run, lambda runner, job: runner.choose_checkpoint(job, step))
        if isinstance(chosen, str):
            self._say(run, chosen)
            return
        picked = at_step(chosen.checkpoints, step)
        reward = f" (val/reward {reward_text(picked.val_reward)})" if picked else ""
        self._say(
            run,
            f":dart: Run #{run.public_id}'s model is now step {step}{reward}: "
            f"`{escape(served_name(chosen, step))}`. `try`, export and download use it.",
        )

    # -- export to the Hugging Face Hub --

    def open_export_modal(self, client: WebClient, ref: RunRef, user: str, trigger_id: str) -> None:
        """*Export to Hugging Face*: a modal asking for the repository (private by default)."""
        run = self._owned(client, ref, user)
        if run is None:
            return
        self.poster.open_modal(
            client,
            run.key,
            user,
            trigger_id,
            export_modal(run),
            again="Slack did not open the export box; click it again.",
        )

    def export_submitted(
        self, client: WebClient, ref: RunRef, user: str, repo_id: str, *, public: bool
    ) -> None:
        """The modal's repository (checked by the listener with `repo_id_problem`): the runner
        pushes the model's adapter there; the thread hears when it is done."""
        run = self._owned(client, ref, user)
        if run is None or repo_id_problem(repo_id) is not None:
            return
        started = self._ask(
            run, lambda runner, job: runner.export(job, repo_id, private=not public)
        )
        if isinstance(started, str):
            self._say(run, started)
            return
        visibility = "public" if public else "private"
        self._say(
            run,
            f":outbox_tray: Pushing step {started.step} of run #{run.public_id}'s model to the "
            f"Hugging Face repository `{escape(started.repo_id)}` ({visibility})\u2026",
        )
        busy = self.pool.submit(run.key.team, lambda: self._until_exported(run, started))
        if busy is not None:
            self._say(run, "The export goes on on the runner; say *Checkpoints* later to see it.")

    def _until_exported(self, run: Run, started: Export) -> None:
        assert self._runner is not None and run.job_id is not None
        deadline = time.monotonic() + self.timeout_s
        export = started
        while export.state in (ExportState.queued, ExportState.uploading):
            if time.monotonic() >= deadline:
                self._say(run, f":x: The export to `{escape(started.repo_id)}` did not finish.")
                return
            time.sleep(self.poll_s)
            try:
                export = self._runner.export_status(run.job_id)
            except RunnerUnavailable:
                continue  # the runner restarting
            except RunnerRejected as error:
                self._say(run, f":x: The export stopped: {escape(clip(error.message, 300))}")
                return
        self.outbox.enqueue(run.key, [Post(exported_message(run, export, self._base_model(run)))])

    def _base_model(self, run: Run) -> str | None:
        listed = self._ask(run, lambda runner, job: runner.checkpoints(job))
        return None if isinstance(listed, str) else listed.base_model

    # -- a download link --

    def download(self, client: WebClient, ref: RunRef, user: str) -> None:
        """A signed, expiring link to the model's adapter as a .tar.gz, shown to the owner
        alone (anyone with the link can download until it expires)."""
        run = self._owned(client, ref, user)
        if run is None:
            return

        def link(runner: RunnerClient, job: str) -> str:
            step = runner.checkpoints(job).model_step
            if step is None:
                return f"Run #{run.public_id} left no checkpoint to download."
            made = runner.download_link(job, step)
            expires = made.expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
            return (
                f":inbox_tray: Step {step}'s LoRA adapter of run #{run.public_id}, as a .tar.gz "
                f"(from a machine that reaches the runner; the link works until {expires}, "
                f"for anyone who has it):\n{escape(runner.download_url(made))}"
            )

        said = self._ask(run, link)
        self.poster.ephemeral(client, run.key, user, said)

    # -- shared --

    def _owned(self, client: WebClient, ref: RunRef, user: str) -> Run | None:
        run = self.runs.find(ref)
        if run is None:
            return None
        if run.owner != user:
            self.poster.ephemeral(
                client, run.key, user, f"Only <@{run.owner}> can export this run's model."
            )
            return None
        return run

    def _ask(self, run: Run, call: Callable[[RunnerClient, str], T]) -> T | str:
        """`call(runner, job)`, or what to say when it cannot be made or is refused."""
        if self._runner is None or run.job_id is None:
            return NOT_LOCAL
        try:
            return call(self._runner, run.job_id)
        except RunnerRejected as error:
            return f":x: The runner refused: {escape(clip(error.message, 300))}"
        except RunnerUnavailable:
            return ":x: The runner did not answer; try again later."

    def _say(self, run: Run, text: str) -> None:
        self.outbox.enqueue(run.key, [Post(text_message(text))])
