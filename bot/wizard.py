"""The wizard in Slack threads: who may answer, each reply advanced once, sessions kept in SQL.

The engine decides what to say; this module decides whose reply counts, makes retries and
races harmless, and hands the engine's turn to the thread poster.
"""

from __future__ import annotations

import logging
import threading
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.blocks import SlackMessage, clip, escape, sections
from bot.records import BotRecords
from bot.results import ScriptResults
from bot.threads import ThreadPoster
from flows import (
    TRAIN_RL,
    Attachment,
    Completed,
    Flow,
    Problem,
    Reply,
    Session,
    Turn,
    advance,
    begin,
)
from storage.sessions import (
    DuplicateSession,
    SessionExpired,
    SessionKey,
    SessionStore,
    StaleSession,
    StoredSession,
)

if TYPE_CHECKING:
    from bot.runs import RunService

log = logging.getLogger(__name__)

FLOWS: Mapping[str, Flow] = {TRAIN_RL.id: TRAIN_RL}
SAVE_ATTEMPTS = 5


@dataclass(frozen=True)
class Incoming:
    """One thing a user did in a thread, whatever Slack called it."""

    key: SessionKey
    user: str
    reply: Reply
    delivery_id: str | None


class KeyedLocks:
    """One lock per conversation, so replies racing in one thread are handled one at a time."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: weakref.WeakValueDictionary[SessionKey, threading.Lock] = (
            weakref.WeakValueDictionary()
        )

    @contextmanager
    def hold(self, key: SessionKey) -> Iterator[None]:
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = threading.Lock()
                self._locks[key] = lock
        with lock:
            yield


class WizardService:
    """Starts wizards, advances them by replies and clicks, and finishes them with a script."""

    def __init__(
        self,
        store: SessionStore,
        records: BotRecords,
        poster: ThreadPoster,
        results: ScriptResults,
        *,
        runs: RunService | None = None,
        on_complete: Callable[[WebClient, SessionKey, Mapping[str, object]], None] | None = None,
    ) -> None:
        self.store = store
        self.records = records
        self.poster = poster
        self.results = results
        self.runs = runs
        self._locks = KeyedLocks()
        # Rendering and checking take seconds: off the listener thread, on the results' executor.
        self._on_complete = on_complete or results.deliver_later

    # -- starting --

    def start(
        self, client: WebClient, team: str, channel: str, user: str, text: str
    ) -> SessionKey | None:
        """Post the parent message that names the owner and ask the first question in its thread."""
        task = text.strip()
        parent = client.chat_postMessage(
            channel=channel,
            text=f"<@{user}> started an RL training wizard. Answers go in this thread.",
            blocks=[
                *sections(
                    f":robot_face: <@{user}> started an RL training wizard"
                    + (f" for: _{escape(clip(task, 300))}_" if task else "")
                    + ".\nAnswers go in this thread; only they can answer."
                )
            ],
        )
        key = SessionKey(team, channel, str(parent["ts"]))
        session = Session.start(TRAIN_RL.id, prefill={"task": task} if task else None)
        turn = begin(TRAIN_RL, session)
        try:
            self.store.create(key, user, turn.session)
        except DuplicateSession:
            return None
        self.poster.deliver(client, key, turn)
        return key

    # -- replies and clicks --

    def handle(self, client: WebClient, incoming: Incoming) -> None:
        """Advance the thread's session by one reply, at most once however often Slack delivers it."""
        if incoming.delivery_id is not None and not self.records.first_delivery(
            incoming.delivery_id
        ):
            return  # a retry of something already handled
        key = incoming.key
        with self._locks.hold(key):
            stored = self.store.get(key)
            if stored is None:
                return  # not a wizard's thread
            if stored.owner != incoming.user:
                self.poster.ephemeral(
                    client,
                    key,
                    incoming.user,
                    f"Only <@{stored.owner}> can answer this wizard. Start your own with `/train-rl`.",
                )
                return
            if stored.expired:
                self.poster.post(
                    client, key, _text("This wizard expired. Start a new one with `/train-rl`.")
                )
                return
            turn = self._advance_and_save(key, stored, incoming.reply)
        if turn is None:
            return
        self.poster.deliver(client, key, turn)
        if self.runs is not None and incoming.reply.text.strip().lower() == "status":
            runs = self.runs.thread_status(key)
            if runs:
                self.poster.post(client, key, _text(runs))
        for effect in turn.effects:
            if isinstance(effect, Completed):
                self._on_complete(client, key, effect.answers)

    def _advance_and_save(
        self, key: SessionKey, stored: StoredSession, reply: Reply
    ) -> Turn | None:
        """Compare-and-set: a save that lost a race reloads and applies the reply to what won."""
        for _ in range(SAVE_ATTEMPTS):
            session = stored.session
            if _is_repeat_click(session, reply):
                return None  # a double click on a question already answered with that value
            turn = advance(FLOWS[session.flow], session, reply)
            if turn.session == session:
                return turn  # nothing changed: nothing to save
            try:
                self.store.save(key, turn.session, expected_revision=session.revision)
                return turn
            except StaleSession:
                reloaded = self.store.get(key)
                if reloaded is None:
                    return None
                stored = reloaded
            except SessionExpired:
                return Turn(
                    session, (Problem("This wizard expired. Start a new one with `/train-rl`."),)
                )
        log.warning("gave up saving %s after %d races", key, SAVE_ATTEMPTS)
        return None

    # -- the result buttons --

    def result_action(
        self, client: WebClient, key: SessionKey, user: str, action: str, delivery_id: str | None
    ) -> None:
        """Approve and run / Edit an answer / Regenerate / Cancel, for the owner only."""
        if delivery_id is not None and not self.records.first_delivery(delivery_id):
            return
        stored = self.store.get(key)
        if stored is None:
            return
        if stored.owner != user:
            self.poster.ephemeral(
                client, key, user, f"Only <@{stored.owner}> can do that in this wizard."
            )
            return
        if action == "result_edit":
            self.handle(client, Incoming(key, user, Reply(text="edit"), None))
        elif action == "result_cancel":
            self.handle(client, Incoming(key, user, Reply(text="cancel"), None))
        elif action == "result_regenerate":
            if stored.session.status != "complete":
                self.poster.post(
                    client, key, _text("Answer the open question first, then regenerate.")
                )
                return
            self.results.deliver(client, key, stored.session.answers)
        elif action == "result_approve":
            with self._locks.hold(key):  # two quick clicks must not start two GPU jobs
                self._approve(client, key, stored, user)

    def _approve(
        self, client: WebClient, key: SessionKey, stored: StoredSession, user: str
    ) -> None:
        if stored.session.status != "complete":
            self.poster.post(
                client, key, _text("There is no finished script to approve in this thread yet.")
            )
            return
        latest = self.results.latest_script(key, stored.session.answers)
        if latest is None:
            self.poster.post(
                client,
                key,
                _text("The script is not on this host any more: press Regenerate first."),
            )
            return
        path, script = latest
        if self.runs is not None:
            refusal = self.runs.may_approve(key, user, stored.owner) or self.runs.already_running(
                key, script
            )
            if refusal:
                self.poster.ephemeral(client, key, user, refusal)
                return
            self.runs.approve(client, key, user, script, path.name, stored.session.answers)
            return
        approval = self.records.record_approval(key, user, script, path.name)
        self.poster.post(
            client,
            key,
            _text(
                f":white_check_mark: Approved by <@{user}> (script `{path.name}`, sha256 `{approval.script_sha256[:12]}`).\n"
                "No GPU runner is configured for this bot yet, so nothing runs: the approval is recorded. "
                f"To train now, run `uv run {path.name}` on a GPU host."
            ),
        )

    # -- listing and expiry --

    def sessions_of(self, user: str, team: str) -> list[StoredSession]:
        return self.store.list_for_owner(user, team=team)

    def expire_idle(self, client: WebClient, older_than: timedelta) -> list[SessionKey]:
        """Expire sessions idle for longer than `older_than`, with a note in each thread."""
        expired = self.store.expire_idle(older_than)
        hours = older_than.total_seconds() / 3600
        for key in expired:
            self.poster.post(
                client,
                key,
                _text(
                    f":zzz: This wizard expired after {hours:g} hours without an answer. Start a new one with `/train-rl`."
                ),
            )
        return expired


def _is_repeat_click(session: Session, reply: Reply) -> bool:
    return (
        reply.step_id is not None
        and reply.value is not None
        and session.answers.get(reply.step_id) == reply.value
        and FLOWS[session.flow].next_step(session.answers)
        is not FLOWS[session.flow].step(reply.step_id)
    )


def _text(text: str) -> SlackMessage:
    return SlackMessage(clip(text, 3_900), sections(text)[:50])


def attachment_from_file(
    client: WebClient, file: Mapping[str, object], max_bytes: int
) -> Attachment | str:
    """Download a file a user dropped in the thread (bot token as bearer); an error text otherwise."""
    name = str(file.get("name") or "file")
    size = file.get("size")
    if isinstance(size, int) and size > max_bytes:
        return f"“{escape(clip(name, 80))}” is {size:,} bytes; the limit is {max_bytes:,}."
    url = file.get("url_private_download") or file.get("url_private")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        return f"I cannot download “{escape(clip(name, 80))}”."
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {client.token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            content_type = response.headers.get("Content-Type", "")
            content = response.read(max_bytes + 1)
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        return f"Downloading “{escape(clip(name, 80))}” failed: {escape(str(error))}."
    if len(content) > max_bytes:
        return f"“{escape(clip(name, 80))}” is over the limit of {max_bytes:,} bytes."
    # Without files:read Slack answers with its HTML login page, not an error.
    if "text/html" in content_type and not name.lower().endswith((".html", ".htm")):
        return f"Slack did not hand over “{escape(clip(name, 80))}” (is the app missing the files:read scope?)."
    return Attachment(name, content)


def notify_error(client: WebClient, key: SessionKey, poster: ThreadPoster) -> None:
    """Something of ours broke while handling a reply: say so instead of going silent."""
    try:
        poster.post(
            client,
            key,
            _text(":x: Something went wrong on my side; your answers are saved. Try again."),
        )
    except SlackApiError:
        log.exception("could not report an error to %s", key)
