"""`try <prompt>` in a run's thread: the prompt to the trained model, its reply into the thread.

A ServerlessBackend model stays served after training: the run's `succeeded` event names it
(`model`, the script's `model.get_inference_name()`) and where it is served (`inference_url`,
its `model.openai_client().base_url`), and the bot calls it there with the `openai` client and
the W&B key (WANDB_API_KEY in the bot's settings). A LocalBackend model is served only while its
script runs: trying it needs a serving job on the runner (README: "Trying a local model"), not
built yet, so the thread is told so.

Only the wizard's owner tries (the model's usage is billed to the team). A thread whose wizard
still asks a question takes `try ...` as an answer unless one of its runs succeeded."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import openai
from slack_sdk import WebClient

from bot.blocks import text_message
from bot.outbox import Outbox
from bot.runs.store import Run, RunStore
from bot.slack_text import clip, escape
from bot.thread_effects import Post
from bot.threads import ThreadPoster
from flows import Reply
from storage.sessions import SessionKey, SessionStore

log = logging.getLogger(__name__)

TRY_WORD = "try"
MAX_PROMPT_CHARS = 4_000
REPLY_SHOWN_CHARS = 2_800
NOT_YET = (
    "`try <prompt>` sends a prompt to the trained model once a run of this thread has "
    "succeeded; none has yet."
)
LOCAL_NOT_SERVED = (
    "This run trained with LocalBackend: its model was served only while the script ran, "
    "and serving it again on the runner is not available yet. Load its last checkpoint "
    "with vLLM on a GPU host to try it (the run's final message shows how to call it)."
)


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
        serverless_api_key: str | None,
        timeout_s: float = 60.0,
        max_tokens: int = 512,
    ) -> None:
        self.runs = runs
        self.sessions = sessions
        self.poster = poster
        self.outbox = outbox
        self._api_key = serverless_api_key
        self.timeout_s = timeout_s
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
        self._say(key, self.answer(succeeded[-1], prompt))

    def answer(self, run: Run, prompt: str) -> str:
        """What to post for `prompt` to `run`'s model: its reply, or why there is none."""
        if run.backend != "serverless":
            return LOCAL_NOT_SERVED
        served = served_model(run)
        if served is None:
            return "This run did not report where its model is served, so I cannot call it."
        if not self._api_key:
            return "Set WANDB_API_KEY for the bot to try serverless models."
        if len(prompt) > MAX_PROMPT_CHARS:
            return f"That prompt is {len(prompt):,} characters; `try` takes {MAX_PROMPT_CHARS:,}."
        model = openai.OpenAI(
            base_url=served.base_url,
            api_key=self._api_key,
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

    def _say(self, key: SessionKey, text: str) -> None:
        self.outbox.enqueue(key, [Post(text_message(text))])
