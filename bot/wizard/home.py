"""The App Home tab: a user's wizards and runs in the workspace, each with its state and a
button that opens its thread.

The links come from `chat.getPermalink` (one call per thread listed, so the lists are kept
short); a thread Slack has no link for is listed without a button. Clicking a link button
still sends the app an action: `OPEN_THREAD_ACTION` is acked and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack.blocks import session_title
from bot.slack.text import clip, escape
from storage.sessions import SessionKey, SessionStore, StoredSession

if TYPE_CHECKING:
    from bot.runs.store import Run, RunStore

log = logging.getLogger(__name__)

OPEN_THREAD_ACTION = "home_open_thread"
HOME_BLOCKS_MAX = 100
"""Slack's limit for a Home tab view."""
WIZARDS_SHOWN = 15
RUNS_SHOWN = 10
SESSION_STATES = {
    "active": ":speech_balloon: waiting for your answer",
    "complete": ":white_check_mark: script ready",
    "cancelled": ":no_entry_sign: cancelled",
}
RUN_STATES = {
    "submitting": ":hourglass: submitting",
    "waiting_for_runner": ":hourglass: waiting for the GPU runner",
    "queued": ":hourglass: queued",
    "running": ":rocket: training",
    "succeeded": ":trophy: finished",
    "failed": ":x: failed",
    "cancelled": ":no_entry_sign: cancelled",
    "lost": ":grey_question: lost",
    "rejected": ":x: refused by the runner",
}

Block = dict[str, Any]


class HomeTab:
    """Publishes a user's Home tab: their wizards and runs (None: no runner), newest first."""

    def __init__(self, store: SessionStore, runs: RunStore | None = None) -> None:
        self.store = store
        self.runs = runs

    def publish(self, client: WebClient, user: str, team: str) -> None:
        """The App Home tab: the user's wizards and runs, each with a button to its thread."""
        sessions = self.store.list_for_owner(user, team=team)
        runs = self.runs.for_owner(user, team) if self.runs is not None else []
        client.views_publish(user_id=user, view=home_view(client, sessions, runs))


def thread_links(client: WebClient, keys: Iterable[SessionKey]) -> dict[SessionKey, str]:
    """Each thread's permalink (its parent message's); threads Slack has none for are left out."""
    links: dict[SessionKey, str] = {}
    for key in keys:
        if key in links:
            continue
        try:
            response = client.chat_getPermalink(channel=key.channel, message_ts=key.thread)
        except SlackApiError as error:
            log.warning("no permalink for %s: %s", key, error.response.get("error"))
            continue
        link = response.get("permalink")
        if isinstance(link, str) and link:
            links[key] = link
    return links


def home_view(
    client: WebClient, sessions: Sequence[StoredSession], runs: Sequence[Run]
) -> dict[str, Any]:
    """The Home tab for a user with these `sessions` and `runs` (newest first)."""
    shown_sessions, shown_runs = sessions[:WIZARDS_SHOWN], runs[:RUNS_SHOWN]
    keys = [s.key for s in shown_sessions] + [r.key for r in shown_runs]
    return home_blocks(shown_sessions, shown_runs, thread_links(client, keys), len(sessions))


def home_blocks(
    sessions: Sequence[StoredSession],
    runs: Sequence[Run],
    links: Mapping[SessionKey, str],
    total_sessions: int | None = None,
) -> dict[str, Any]:
    """The view itself, from what is listed and the threads' links."""
    blocks: list[Block] = [
        _header("Your training wizards"),
        _section(
            "Start one in any channel with `/train-rl what the agent should get better at` "
            "(reinforcement learning), or `/train-sft` (fine-tuning on examples, or distilling "
            "a teacher model)."
        ),
        {"type": "divider"},
    ]
    if not sessions:
        blocks.append(_section("You have no wizards yet."))
    for index, stored in enumerate(sessions):
        task = session_title(stored.session)
        state = "expired" if stored.expired else stored.session.status
        text = (
            f"*{escape(clip(str(task), 150))}*\n"
            f"{SESSION_STATES.get(state, ':zzz: ' + state)} · <#{stored.key.channel}> · "
            f"updated {stored.updated_at:%Y-%m-%d %H:%M} UTC"
        )
        blocks.append(_item(text, links.get(stored.key), f"wizard-{index}"))
    more = (total_sessions or len(sessions)) - len(sessions)
    if more > 0:
        blocks.append(_context(f"and {more} older: `/train-rl list` lists them all."))
    if runs:
        blocks += [{"type": "divider"}, _header("Your training runs")]
    for index, run in enumerate(runs):
        job = f" · job `{escape(run.job_id)}`" if run.job_id else ""
        text = (
            f"*{escape(run.script_name)}*\n"
            f"{RUN_STATES.get(run.state, run.state)} · <#{run.key.channel}>{job}"
        )
        blocks.append(_item(text, links.get(run.key), f"run-{index}"))
    return {"type": "home", "blocks": blocks[:HOME_BLOCKS_MAX]}


def _header(text: str) -> Block:
    return {"type": "header", "text": {"type": "plain_text", "text": text}}


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def _item(text: str, link: str | None, block_id: str) -> Block:
    block = _section(text)
    block["block_id"] = block_id
    if link is not None:
        block["accessory"] = {
            "type": "button",
            "text": {"type": "plain_text", "text": "Open thread"},
            "url": link,
            "action_id": f"{OPEN_THREAD_ACTION}:{block_id}",
        }
    return block
