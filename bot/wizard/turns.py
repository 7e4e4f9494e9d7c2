"""A thread's turn, saved with what it says: the reply advanced by the engine (the assistant
first, when a model is configured), the session saved compare-and-set, and the turn's thread
messages queued in the outbox in the same transaction (a worker delivers them:
bot.delivery.worker).

The replies, the proposals and the result buttons all advance a thread through `Turns`; each
holds the thread's lock (`Turns.locks`) while it does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from slack_sdk import WebClient

from assistant import Assistant, Proposal, not_configured
from bot.delivery.effects import WORKING_STATUSES, Post, Status, ThreadEffect, turn_effects
from bot.delivery.outbox import Outbox, TurnEffects
from bot.process.work_slots import WorkSlots
from bot.slack.answer_stream import AnswerStream
from bot.slack.blocks import text_message
from bot.slack.poster import ThreadPoster
from bot.slack.records import DuplicateDelivery, SlackRecords
from bot.wizard.drafts import offer_effects
from bot.wizard.expiry import EXPIRED
from bot.wizard.keyed_locks import KeyedLocks
from flows import FLOWS, Problem, Reply, Session, Turn, advance
from storage.sessions import (
    AlsoWrite,
    SessionExpired,
    SessionKey,
    SessionStore,
    StaleSession,
    StoredSession,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection

log = logging.getLogger(__name__)

SAVE_ATTEMPTS = 5


class Turns:
    """Advances a thread's session by one reply and saves the turn with what it says."""

    def __init__(
        self,
        store: SessionStore,
        records: SlackRecords,
        outbox: Outbox,
        poster: ThreadPoster,
        *,
        slots: WorkSlots,
        assistant: Assistant | None = None,
    ) -> None:
        self.store = store
        self.records = records
        self.outbox = outbox
        """Where a turn's thread messages wait for the worker (bot.delivery.worker)."""
        self.poster = poster
        self.slots = slots
        """The work slots of the threads this runs on (bot/process/work_slots.py): a thread
        gives its slot back while a model answers (seconds), as it does while Slack answers."""
        self.assistant = assistant
        """Reads typed replies first when a model is configured (None: the plain form)."""
        self.locks = KeyedLocks()
        """One per thread: its replies and clicks are handled one at a time."""

    def advance_and_save(
        self,
        key: SessionKey,
        stored: StoredSession,
        reply: Reply,
        *,
        user: str | None = None,
        first: Sequence[ThreadEffect] = (),
        delivery: str | None = None,
        client: WebClient | None = None,
    ) -> Turn | None:
        """Compare-and-set: a save that lost a race reloads and applies the reply to what won.
        What the turn says (after `first`) is queued in the outbox, with the session when it
        changed. Given `user`, a typed reply goes to the assistant first (once: a retry after a
        lost race is the engine's alone), and its proposal is posted for the user to accept.
        What the assistant says without changing the session counts only if the session was not
        saved meanwhile (else it may be about a question that is gone: a lost race too). Given
        `client`, the assistant's answer to a question streams into the thread as the model
        writes it (bot.slack.answer_stream), and the turn then does not post it again."""
        consult = self.assistant is not None and user is not None and reply.value is None
        if consult and delivery is not None and self.records.seen(delivery):
            return None  # a retry of a reply handled already: the model is not asked again
        thinking = False  # the thread's status says so while the model reads the reply
        for _ in range(SAVE_ATTEMPTS):
            session = stored.session
            if _is_repeat_click(session, reply):
                return None  # a double click on a question already answered with that value
            flow = FLOWS[session.flow]
            proposal: Proposal | None = None
            asked_model = consult
            if consult and self.assistant is not None and user is not None:
                consult = False
                self.outbox.enqueue(key, [Status(WORKING_STATUSES["thinking"])])
                thinking = True
                stream = AnswerStream(client, key, user) if client is not None else None
                with self.slots.waiting():  # the model answers in seconds
                    assisted = self.assistant.respond(flow, session, reply, user, on_text=stream)
                    turn, proposal = assisted.turn, assisted.proposal
                    if stream is not None:
                        turn = stream.settle(turn, assisted.answered)
            else:
                unassisted = not_configured(flow, session, reply) if not self.assistant else None
                turn = unassisted or advance(flow, session, reply)
            effects = [*first, *turn_effects(turn)]
            if proposal is not None:
                effects.extend(offer_effects(proposal))
            if thinking:
                effects.append(Status(""))  # after what it said: the status line goes
            if turn.session == session:  # nothing changed: nothing to save
                if asked_model and self._moved_on(key, session):
                    # Saved meanwhile (the model took a while): what it said is about a
                    # question that may be gone. The engine alone reads the reply again.
                    reloaded = self.store.get(key)
                    if reloaded is None:
                        return None
                    stored = reloaded
                    continue
                try:
                    self.outbox.enqueue(key, effects, also=self._recording(delivery))
                except DuplicateDelivery:
                    return None  # handled meanwhile by a copy of this delivery
                return turn
            try:
                with self.outbox.turn(key) as said:  # delivered once saved
                    self.store.save(
                        key,
                        turn.session,
                        expected_revision=session.revision,
                        also=self._saving(said, effects, delivery),
                    )
                return turn
            except DuplicateDelivery:
                return None  # handled meanwhile by a copy of this delivery
            except StaleSession:
                reloaded = self.store.get(key)
                if reloaded is None:
                    return None
                stored = reloaded
            except SessionExpired:
                expired = Turn(session, (Problem(EXPIRED),))
                self.outbox.enqueue(key, turn_effects(expired))
                return expired
        log.warning("gave up saving %s after %d races", key, SAVE_ATTEMPTS)
        return None

    def say(self, key: SessionKey, text: str) -> None:
        """Post mrkdwn `text` into the thread through the outbox (durable, in thread order)."""
        self.outbox.enqueue(key, [Post(text_message(text))])

    def owned(
        self, client: WebClient, key: SessionKey, user: str, what: str
    ) -> StoredSession | None:
        """The session a button click acts on; None for a thread with no wizard, or someone
        other than its owner (told, to them alone, that only the owner can `what`)."""
        stored = self.store.get(key)
        if stored is None:
            return None
        if stored.owner != user:
            self.poster.ephemeral(client, key, user, f"Only <@{stored.owner}> can {what}.")
            return None
        return stored

    def notify_error(self, key: SessionKey) -> None:
        """Something of ours broke while handling a reply: say so instead of going silent."""
        try:
            self.say(key, ":x: Something went wrong on my side; your answers are saved. Try again.")
        except Exception:  # the database may be what broke: nothing more to do than log it
            log.exception("could not report an error to %s", key)

    def _moved_on(self, key: SessionKey, session: Session) -> bool:
        """Has the stored session changed since `session` was read?"""
        now = self.store.get(key)
        return now is None or now.session.revision != session.revision

    def _saving(
        self, said: TurnEffects, effects: Sequence[ThreadEffect], delivery: str | None
    ) -> AlsoWrite:
        """In the transaction that saves a turn: the delivery that brought it, what it says."""

        def write(connection: Connection) -> None:
            self._recording(delivery)(connection)
            said.add(connection, effects)

        return write

    def _recording(self, delivery: str | None) -> AlsoWrite:
        """Record `delivery` (if any) in a transaction; DuplicateDelivery if it was before."""

        def write(connection: Connection) -> None:
            if delivery is not None:
                self.records.record_delivery(connection, delivery)

        return write


def _is_repeat_click(session: Session, reply: Reply) -> bool:
    return (
        reply.step_id is not None
        and reply.value is not None
        and session.answers.get(reply.step_id) == reply.value
        and FLOWS[session.flow].next_step(session.answers)
        is not FLOWS[session.flow].step(reply.step_id)
    )
