"""`try <prompt>` in a run's thread, or its *Try it* button: the prompt to the trained model, its
reply into the thread.

A ServerlessBackend model stays served after training: the run's `succeeded` event names it
(`model`, the script's `model.get_inference_name()`) and where it is served (`inference_url`,
its `model.openai_client().base_url`), and the bot calls it there with the `openai` client and
the W&B key (WANDB_API_KEY in the bot's settings).

A LocalBackend model is served only while its script runs, so the bot asks the runner for a
serving job (`POST /jobs/{id}/serve`: its last checkpoint on a GPU slot, stopped when idle), says
once that the model is starting, waits for the job's `serving` event through the events
long-poll, and calls the model through the runner (`/jobs/{id}/serve/v1`, the runner's token as
the api_key) with the same `openai` code. The message that says it is starting has Cancel, which
stops the serving job.

Only the wizard's owner tries (the model's usage is billed to the team). A thread whose wizard
still asks a question takes `try ...` as an answer unless one of its runs succeeded.

The listener's thread only checks (who, which run, the rate limits:
bot.runs.trained_model.try_limits) and hands the call to the tries' own pool, so a slow model never
holds a listener: acks and other threads' turns go on whatever the tries do."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import openai
import openai.resources.chat.completions
from slack_sdk import WebClient

from bot.delivery.effects import Post
from bot.delivery.outbox import Outbox
from bot.runs.store import Run, RunRef, RunStore
from bot.runs.trained_model.try_limits import TryLimits, TryPool
from bot.slack.blocks import (
    MAX_BLOCKS,
    RUN_CANCEL_ACTION,
    TRY_MODAL,
    SlackMessage,
    sections,
    text_message,
)
from bot.slack.poster import ThreadPoster
from bot.slack.text import clip, escape
from flows import Reply
from runner.client import RunnerClient, RunnerRejected, RunnerUnavailable
from runner.schemas import EventType, Serving, ServingState
from storage.sessions import SessionKey, SessionStore

log = logging.getLogger(__name__)
# openai loads its resources and their response types at their first use: 3 s or more on a busy
# host, which the first `try` would wait through. Imported with this module, at the bot's start.

TRY_WORD = "try"
MAX_PROMPT_CHARS = 4_000
REPLY_SHOWN_CHARS = 2_800
NOT_YET = (
    "`try <prompt>` sends a prompt to the trained model once a run of this thread has "
    "succeeded; none has yet."
)
LOCAL_NOT_SERVED = (
    "This run trained with LocalBackend and the bot has no runner to serve its model again: "
    "load its last checkpoint with vLLM on a GPU host to try it."
)
MODAL_PROMPT_CHARS = 3_000
"""A modal's text input takes at most 3,000 characters (Slack's plain_text_input)."""
PROMPT_BLOCK, PROMPT_INPUT = "prompt", "prompt_text"
EVENTS_WAIT_S = 25.0
RETRY_S = 1.0


def try_prompt(reply: Reply) -> str | None:
    """The prompt of a typed `try <prompt>`; None for anything else."""
    if reply.value is not None or reply.attachments:
        return None
    text = reply.text.strip()
    word, _, rest = text.partition(" ")
    if word.lower() != TRY_WORD:
        return None
    prompt = rest.strip()
    return prompt or None


@dataclass(frozen=True)
class Served:
    """Where a trained model answers: its served name and its OpenAI-compatible base URL."""

    model: str
    base_url: str


def served_model(run: Run) -> Served | None:
    """Where a succeeded serverless run's model is served, from its `succeeded` event."""
    result = run.result or {}
    model, url = result.get("model"), result.get("inference_url")
    if run.backend != "serverless" or not model or not url:
        return None
    return Served(str(model), str(url))


class ModelTrier:
    """Answers `try <prompt>` in a wizard's thread with the reply of the thread's trained model."""

    def __init__(
        self,
        runs: RunStore,
        sessions: SessionStore,
        poster: ThreadPoster,
        outbox: Outbox,
        *,
        limits: TryLimits,
        pool: TryPool,
        serverless_api_key: str | None,
        runner: RunnerClient | None = None,
        runner_token: str | None = None,
        timeout_s: float = 60.0,
        start_timeout_s: float = 1800.0,
        max_tokens: int = 512,
    ) -> None:
        """`runner` and its token serve LocalBackend models (None: `try` says it cannot);
        `limits` and `pool` bound what tries cost (bot.runs.trained_model.try_limits)."""
        self.runs = runs
        self.limits = limits
        self.pool = pool
        self.sessions = sessions
        self.poster = poster
        self.outbox = outbox
        self._api_key = serverless_api_key
        self._runner = runner
        self._runner_token = runner_token
        self._told_lock = threading.Lock()
        self._told_starting: set[tuple[str, int]] = set()
        """Serving jobs (job, after_seq) the thread was told are starting: said once each."""
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.max_tokens = max_tokens

    def wants(self, key: SessionKey, reply: Reply) -> bool:
        """Whether `reply` is a `try` for this thread (then `respond` answers it); False leaves
        it to the wizard. Reads only: a retried delivery may ask again."""
        if try_prompt(reply) is None:
            return False
        stored = self.sessions.get(key)
        if stored is None:
            return False
        if stored.session.status == "active" and not stored.expired:
            # An answer to the open question that happens to start with "try", unless a run of
            # this thread succeeded already.
            return any(r.state == "succeeded" for r in self.runs.for_thread(key))
        return True

    def respond(self, client: WebClient, key: SessionKey, user: str, reply: Reply) -> None:
        """Answer a `try` (`wants` said yes): the model's reply in the thread, or why not."""
        prompt, stored = try_prompt(reply), self.sessions.get(key)
        if prompt is None or stored is None:
            return
        succeeded = [r for r in self.runs.for_thread(key) if r.state == "succeeded"]
        if stored.owner != user:
            self.poster.ephemeral(client, key, user, f"Only <@{stored.owner}> can try this model.")
            return
        if not succeeded:
            self._say(key, NOT_YET)
            return
        self.try_run(succeeded[-1], prompt, user)

    def try_run(self, run: Run, prompt: str, user: str) -> None:
        """Post `run`'s model's reply to `prompt` (sent by `user`) in the run's thread, or why
        there is none. Within the rate limits, the call goes to the tries' own pool (a
        serverless model answers in seconds; a local one may take many minutes to start):
        never on the listener's thread, which every turn of every thread needs."""
        refusal = self.limits.take(run.key.team, user)
        if refusal is not None:
            log.info("try of run %s refused: over a rate limit", run.id)
            if refusal.say:
                self._say(run.key, refusal.text)
            return
        busy = self.pool.submit(run.key.team, lambda: self._answer_into_thread(run, prompt))
        if busy is not None:
            log.info("try of run %s refused: the workspace's tries are all in flight", run.id)
            self._say(run.key, busy)

    def _answer_into_thread(self, run: Run, prompt: str) -> None:
        try:
            self._say(run.key, self.answer(run, prompt, lambda m: self._post(run.key, m)))
        except Exception:
            log.exception("try of run %s failed", run.id)
            self._say(run.key, ":x: Trying the model failed; try again later.")

    def answer(
        self, run: Run, prompt: str, say: Callable[[SlackMessage], None] | None = None
    ) -> str:
        """What to post for `prompt` to `run`'s model: its reply, or why there is none. A local
        run's model is served first (`say` tells the thread it is starting)."""
        if len(prompt) > MAX_PROMPT_CHARS:
            return f"That prompt is {len(prompt):,} characters; `try` takes {MAX_PROMPT_CHARS:,}."
        if run.backend != "serverless":
            return self._answer_local(run, prompt, say or (lambda message: None))
        served = served_model(run)
        if served is None:
            return "This run did not report where its model is served, so I cannot call it."
        if not self._api_key:
            return "Set WANDB_API_KEY for the bot to try serverless models."
        return self._reply(run, served, self._api_key, prompt)

    # -- the *Try it* button --

    def open_modal(self, client: WebClient, ref: RunRef, user: str, trigger_id: str) -> None:
        """*Try it*: a modal asking the run's owner for a prompt."""
        run = self.runs.find(ref)
        if run is None:
            return
        if run.owner != user:
            self.poster.ephemeral(client, run.key, user, f"Only <@{run.owner}> can try this model.")
            return
        self.poster.open_modal(
            client,
            run.key,
            user,
            trigger_id,
            try_modal(run),
            again="Slack did not open the prompt box; click *Try it* again.",
        )

    def submitted(self, client: WebClient, ref: RunRef, user: str, prompt: str) -> None:
        """The modal's prompt: the model's reply in the run's thread."""
        run = self.runs.find(ref)
        if run is None or run.state != "succeeded":
            return
        if run.owner != user:
            self.poster.ephemeral(client, run.key, user, f"Only <@{run.owner}> can try this model.")
            return
        self.try_run(run, prompt, user)

    # -- a LocalBackend run: a serving job on the runner --

    def _answer_local(self, run: Run, prompt: str, say: Callable[[SlackMessage], None]) -> str:
        if self._runner is None or not self._runner_token or run.job_id is None:
            return LOCAL_NOT_SERVED
        try:
            serving = self._runner.serve(run.job_id)
            if serving.state is not ServingState.serving:
                if self._first_to_wait(run.job_id, serving.after_seq):
                    say(starting_message(run, serving))
                refusal = self._until_served(run.job_id, serving)
                if refusal:
                    return refusal
        except RunnerRejected as error:
            return f":x: The runner will not serve this model: {escape(clip(error.message, 300))}"
        except RunnerUnavailable:
            return ":x: The runner did not answer; try again later."
        served = Served(serving.model, self._runner.serving_api_url(run.job_id))
        return self._reply(run, served, self._runner_token, prompt)

    def _first_to_wait(self, job_id: str, after_seq: int) -> bool:
        """Whether this is the first `try` to wait for this serving job (it says it starts)."""
        with self._told_lock:
            if (job_id, after_seq) in self._told_starting:
                return False
            self._told_starting.add((job_id, after_seq))
            return True

    def _until_served(self, job_id: str, serving: Serving) -> str:
        """Wait for the serving job's `serving` event; '' then, else why it will not answer."""
        assert self._runner is not None
        after = serving.after_seq
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            try:
                page = self._runner.events(job_id, after=after, wait=EVENTS_WAIT_S)
            except RunnerUnavailable:
                time.sleep(RETRY_S)  # the runner restarting: its serving job will have stopped
                continue
            for event in page.events:
                if event.type is EventType.serving:
                    return ""
                if event.type is EventType.stopped:
                    reason = clip(str(event.data.get("reason") or "no reason given"), 1_500)
                    return f":x: The model stopped before it answered: {escape(reason)}"
            after = page.next_after
            if page.finished:  # no serving job is left to tell anything
                return ":x: The model stopped before it answered."
        return (
            f":x: The model did not start within {self.start_timeout_s / 60:g} minutes; "
            "try again later."
        )

    # -- the call, the same for both --

    def _reply(self, run: Run, served: Served, api_key: str, prompt: str) -> str:
        model = openai.OpenAI(
            base_url=served.base_url,
            api_key=api_key,
            timeout=self.timeout_s,
            max_retries=1,
        )
        try:
            completion = model.chat.completions.create(
                model=served.model,
                messages=[{"role": "user", "content": prompt}],
                max_tokens=self.max_tokens,
            )
        except openai.APIStatusError as error:
            log.warning("try of run %s: status %s", run.id, error.status_code)
            return f":x: The model's server refused the prompt ({error.status_code})."
        except openai.APIError as error:  # unreachable, timed out
            log.warning("try of run %s: %s", run.id, type(error).__name__)
            return ":x: The model's server did not answer; try again later."
        finally:
            model.close()
        content = completion.choices[0].message.content if completion.choices else None
        # In a code block: the reply shows as the model wrote it (its own fences bent so).
        reply = (content or "(an empty reply)").replace("```", "'''")
        shown = escape(clip(reply, REPLY_SHOWN_CHARS))
        return (
            f":speech_balloon: *`{escape(served.model)}`* to "
            f"_{escape(clip(' '.join(prompt.split()), 200))}_:\n```{shown}```"
        )

    def _post(self, key: SessionKey, message: SlackMessage) -> None:
        self.outbox.enqueue(key, [Post(message)])

    def _say(self, key: SessionKey, text: str) -> None:
        self.outbox.enqueue(key, [Post(text_message(text))])


def starting_message(run: Run, serving: Serving) -> SlackMessage:
    """Said once, while a local run's model starts on the runner; Cancel stops it."""
    waiting = " (waiting for a free GPU)" if serving.state is ServingState.queued else ""
    lifetime = serving.max_lifetime_s
    text = (
        f":hourglass_flowing_sand: Starting the model `{escape(serving.model)}` on the "
        f"runner{waiting}\u2026 It stays up until {_duration(serving.idle_timeout_s)} pass "
        "without a prompt" + (f", {_duration(lifetime)} at most." if lifetime else ".")
    )
    cancel: dict[str, Any] = {
        "type": "actions",
        "block_id": f"serving:{run.public_id}",
        "elements": [
            {
                "type": "button",
                "action_id": RUN_CANCEL_ACTION,
                "text": {"type": "plain_text", "text": "Cancel"},
                "value": run.public_id,
                "style": "danger",
            }
        ],
    }
    return SlackMessage(text, [*sections(text)[: MAX_BLOCKS - 1], cancel])


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g} seconds"
    return f"{seconds / 60:.0f} minutes" if seconds < 7200 else f"{seconds / 3600:.0f} hours"


def try_modal(run: Run) -> dict[str, Any]:
    """*Try it*'s modal: one prompt; its private_metadata is the run's public id and its
    thread's channel (`bot.process.router` sends the submission to that channel's worker)."""
    return {
        "type": "modal",
        "callback_id": TRY_MODAL,
        "private_metadata": f"{run.public_id} {run.key.channel}",
        "title": {"type": "plain_text", "text": "Try the model"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": [
            {
                "type": "input",
                "block_id": PROMPT_BLOCK,
                "label": {
                    "type": "plain_text",
                    "text": f"A prompt for run #{run.public_id}'s model",
                },
                "element": {
                    "type": "plain_text_input",
                    "action_id": PROMPT_INPUT,
                    "multiline": True,
                    "max_length": MODAL_PROMPT_CHARS,
                },
            }
        ],
    }
