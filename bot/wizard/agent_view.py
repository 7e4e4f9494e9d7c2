"""artbot in Slack's agent view (the app's DM, `features.agent_view`): a message there opens a
conversation in its own thread, as `/train-rl` opens one in a channel. What it asks for picks
the conversation: a fine-tuning wizard, the user's runs, a word on RULER, or (anything else) the
RL wizard with the message as its task. The thread gets a title; from then on it is a wizard's
thread like any other (same engine, sessions, outbox and owner)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.delivery.effects import Post
from bot.slack.blocks import text_message
from bot.slack.text import clip
from bot.wizard.command import NO_RUNNER
from bot.wizard.opening import ThreadOpener, first_turn
from flows import TRAIN_RL, TRAIN_SFT, Flow
from storage.sessions import SessionKey

if TYPE_CHECKING:
    from bot.runs.service import RunService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SuggestedPrompt:
    title: str
    message: str


SUGGESTED_PROMPTS = (
    SuggestedPrompt("Train an agent with RL", "Train an agent with RL"),
    SuggestedPrompt("Fine-tune from a JSONL file", "Fine-tune a model from a JSONL file"),
    SuggestedPrompt("Show my runs", "Show my runs"),
    SuggestedPrompt("What is RULER?", "What is RULER?"),
)
"""What the agent view offers to type (the manifests' `agent_view.suggested_prompts`)."""
TRAIN_RL_PROMPT, FINE_TUNE_PROMPT, RUNS_PROMPT, RULER_PROMPT = SUGGESTED_PROMPTS

ABOUT_RULER = (
    "*RULER* is ART's LLM judge: for each group of trajectories (the agent's attempts at one "
    "scenario) it reads them side by side and scores which ones did the task better, from 0 to "
    "1. GRPO learns from those differences, so you write no reward function: the judge needs "
    "only your task's description and an API key for its model (`OPENAI_API_KEY` for OpenAI's) "
    "where the training runs. A programmatic reward, or a mix of both, is the choice when "
    "success can be checked by code.\n"
    f"Say _{TRAIN_RL_PROMPT.message}_ in a new message to start the wizard."
)
_FINE_TUNING = re.compile(r"\b(fine[- ]?tun\w*|sft|distil\w*|jsonl)\b", re.IGNORECASE)
_RUNS = re.compile(r"^\s*(show\s+)?(my\s+)?(training\s+)?runs\W*$", re.IGNORECASE)
_RULER = re.compile(r"^\s*(what\s+is|what's|explain)\s+ruler\W*$", re.IGNORECASE)
TITLE_CHARS = 80


class AgentView:
    """Opens a conversation in the thread of each new message in the app's DM."""

    def __init__(self, opener: ThreadOpener, *, runs: RunService | None = None) -> None:
        self.opener = opener
        self.runs = runs

    def open(self, client: WebClient, key: SessionKey, user: str, text: str) -> None:
        """The message `key.thread` (what `user` typed: `text`) begins a conversation: answer it
        in its thread and give the thread a title."""
        words = text.strip()
        if _RUNS.match(words):
            self._title(client, key, "Your training runs")
            said = self.runs.runs_text(user, key.team) if self.runs is not None else NO_RUNNER
            self.opener.outbox.enqueue(key, [Post(text_message(said))])
        elif _RULER.match(words):
            self._title(client, key, "About RULER")
            self.opener.outbox.enqueue(key, [Post(text_message(ABOUT_RULER))])
        elif _FINE_TUNING.search(words):
            self._title(client, key, "Fine-tuning")
            self._begin(key, user, TRAIN_SFT, "")
        else:
            task = "" if words.lower() == TRAIN_RL_PROMPT.message.lower() else words
            self._title(client, key, f"RL: {clip(task, TITLE_CHARS)}" if task else "RL training")
            self._begin(key, user, TRAIN_RL, task)

    def _begin(self, key: SessionKey, user: str, flow: Flow, task: str) -> None:
        opened = self.opener.begin_in(key, user, first_turn(flow, task))
        if opened is None:
            log.info("the agent-view thread %s has a wizard already", key)

    @staticmethod
    def _title(client: WebClient, key: SessionKey, title: str) -> None:
        """The thread's title in the agent view's history; best effort (an install from before
        the agent view, without assistant:write, goes without)."""
        try:
            client.assistant_threads_setTitle(
                channel_id=key.channel, thread_ts=key.thread, title=title
            )
        except SlackApiError as error:
            log.info("no title for %s: %s", key, error.response.get("error"))
