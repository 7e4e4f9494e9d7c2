"""Opening a wizard's thread: the parent message that names its owner, and the first turn saved
for the thread with what it says there (`/train-rl`, `/train-sft`, and *Run again with changes*).
"""

from __future__ import annotations

from slack_sdk import WebClient

from bot.delivery.effects import turn_effects
from bot.delivery.outbox import Outbox
from bot.slack.blocks import sections
from bot.slack.text import clip, escape
from flows import TRAIN_RL, TRAIN_SFT, Flow, Session, Turn, begin
from storage.sessions import DuplicateSession, SessionKey, SessionStore

WIZARD_NAMES = {TRAIN_RL.id: "an RL training wizard", TRAIN_SFT.id: "a fine-tuning (SFT) wizard"}
"""What a flow's wizard is called in its thread's parent message."""


class ThreadOpener:
    """Posts a wizard's parent message and stores its first turn for the thread."""

    def __init__(self, store: SessionStore, outbox: Outbox) -> None:
        self.store = store
        self.outbox = outbox

    def start(
        self,
        client: WebClient,
        team: str,
        channel: str,
        user: str,
        text: str,
        flow: Flow = TRAIN_RL,
    ) -> SessionKey | None:
        """Post the parent message that names the owner and ask the first question of `flow` in
        its thread. `text` is what the command said after its name: the RL wizard's task (asked
        first, with it offered); the SFT wizard has no such question, so it only heads the
        thread."""
        task = text.strip()
        headline = (
            f":robot_face: <@{user}> started {WIZARD_NAMES[flow.id]}"
            + (f" for: _{escape(clip(task, 300))}_" if task else "")
            + ".\nAnswers go in this thread; only they can answer."
        )
        return self.open_thread(client, team, channel, user, headline, first_turn(flow, task))

    def open_thread(
        self, client: WebClient, team: str, channel: str, user: str, headline: str, turn: Turn
    ) -> SessionKey | None:
        """Post the parent message (`headline`, mrkdwn) and store `turn`'s session for its
        thread, with what the turn says there; None if that thread has a session already."""
        wizard = WIZARD_NAMES.get(turn.session.flow, "a training wizard")
        parent = client.chat_postMessage(
            channel=channel,
            text=f"<@{user}> started {wizard}. Answers go in this thread.",
            blocks=[*sections(headline)],
        )
        return self.begin_in(SessionKey(team, channel, str(parent["ts"])), user, turn)

    def begin_in(self, key: SessionKey, user: str, turn: Turn) -> SessionKey | None:
        """Store `turn`'s session for the existing thread `key` (the agent view's: the user's
        own message heads it), with what the turn says there; None if it has a session."""
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


def first_turn(flow: Flow, task: str) -> Turn:
    """A new wizard of `flow`, its first question asked; `task` (what the user said they want)
    offered as the answer to the task question where `flow` has one."""
    prefill = {"task": task} if task and flow.has_step("task") else None
    return begin(flow, Session.start(flow.id, prefill=prefill))
