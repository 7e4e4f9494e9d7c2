"""Opening a wizard's thread: the parent message that names its owner, and the first turn saved
for the thread with what it says there (`/train-rl`, and *Run again with changes*).
"""

from __future__ import annotations

from slack_sdk import WebClient

from bot.delivery.effects import turn_effects
from bot.delivery.outbox import Outbox
from bot.slack.blocks import sections
from bot.slack.text import clip, escape
from flows import TRAIN_RL, Session, Turn, begin
from storage.sessions import DuplicateSession, SessionKey, SessionStore


class ThreadOpener:
    """Posts a wizard's parent message and stores its first turn for the thread."""

    def __init__(self, store: SessionStore, outbox: Outbox) -> None:
        self.store = store
        self.outbox = outbox

    def start(
        self, client: WebClient, team: str, channel: str, user: str, text: str
    ) -> SessionKey | None:
        """Post the parent message that names the owner and ask the first question in its thread."""
        task = text.strip()
        headline = (
            f":robot_face: <@{user}> started an RL training wizard"
            + (f" for: _{escape(clip(task, 300))}_" if task else "")
            + ".\nAnswers go in this thread; only they can answer."
        )
        session = Session.start(TRAIN_RL.id, prefill={"task": task} if task else None)
        return self.open_thread(client, team, channel, user, headline, begin(TRAIN_RL, session))

    def open_thread(
        self, client: WebClient, team: str, channel: str, user: str, headline: str, turn: Turn
    ) -> SessionKey | None:
        """Post the parent message (`headline`, mrkdwn) and store `turn`'s session for its
        thread, with what the turn says there; None if that thread has a session already."""
        parent = client.chat_postMessage(
            channel=channel,
            text=f"<@{user}> started an RL training wizard. Answers go in this thread.",
            blocks=[*sections(headline)],
        )
        key = SessionKey(team, channel, str(parent["ts"]))
        effects = turn_effects(turn)
        try:
            with self.outbox.turn(key) as said:
                self.store.create(
                    key,
                    user,
                    turn.session,
                    also=lambda connection: said.add(connection, effects),
                )
        except DuplicateSession:
            return None
        return key
