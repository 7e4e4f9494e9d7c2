"""The assistant's proposals in a thread: Accept / Use it (the proposal through the engine exactly
as if typed), Re-answer (the open question again), a draft's Edit and Draft again, as buttons or
as `yes` / `no` typed under the newest proposal.
"""

from __future__ import annotations

from collections.abc import Callable

from slack_sdk import WebClient

from assistant import DRAFT_WORD, Proposal, read_confirmation
from bot.delivery.effects import Retire, turn_effects
from bot.slack.blocks import PROPOSAL_ACCEPT, PROPOSAL_HELD, PROPOSAL_STEP
from bot.wizard.drafts import DRAFT_AGAIN, DRAFT_EDIT, edit_effects
from bot.wizard.expiry import Expiry
from bot.wizard.turns import Turns
from flows import FLOWS, Reply, begin
from storage.sessions import SessionKey, StoredSession


class Proposals:
    """What the owner of a wizard does with the assistant's proposals."""

    def __init__(self, turns: Turns, expiry: Expiry) -> None:
        self.turns = turns
        self.expiry = expiry

    def clicked(
        self,
        client: WebClient,
        key: SessionKey,
        user: str,
        action: str,
        value: str,
        message_ts: str | None,
    ) -> None:
        """Accept / Use it (the proposal goes through the engine exactly as if typed, stale
        question checked there), Re-answer (the open question again), a draft's Edit (its code
        to change and send back) or Draft again (another draft), for the owner only. Each takes
        the proposals' buttons away."""
        turns = self.turns
        stored = turns.owned(client, key, user, "answer this wizard")
        if stored is None:
            return
        if stored.expired:
            turns.say(key, self.expiry.ended(stored))
            return
        if action == DRAFT_AGAIN:
            with turns.locks.hold(key):
                current = turns.store.get(key) or stored
                step = FLOWS[current.session.flow].next_step(current.session.answers)
                if step is None or step.id != value:  # its question was answered meanwhile
                    turns.poster.ephemeral(
                        client, key, user, "That draft's question was answered: not drafted again."
                    )
                    return
                again = Retire(PROPOSAL_STEP, "Not used: drafting again")
                turns.advance_and_save(
                    key, current, Reply(text=DRAFT_WORD), user=user, first=[again]
                )
            return
        if action == DRAFT_EDIT:
            draft = self._proposal_in(key, value, message_ts)
            if draft is not None:
                turns.outbox.enqueue(key, edit_effects(draft))
            return
        if action != PROPOSAL_ACCEPT:
            with turns.locks.hold(key):
                self.reanswer(key, turns.store.get(key) or stored)
            return
        proposal = self._proposal_in(key, value, message_ts)
        if proposal is None:
            turns.poster.ephemeral(
                client,
                key,
                user,
                "That button does not carry a proposal I can use (forged, or too old): "
                "not used. Answer the question in the thread.",
            )
            return
        with turns.locks.hold(key):
            self.accept(key, turns.store.get(key) or stored, proposal)

    def decided_in_text(
        self,
        key: SessionKey,
        stored: StoredSession,
        reply: Reply,
        first_time: Callable[[], bool] = lambda: True,
    ) -> bool:
        """`yes` / `no` typed under the thread's newest live proposal: its Accept / Re-answer
        (as in `artbot chat`), done if `first_time()` (not a repeated delivery). False when the
        reply is something else: a reply of its own. The thread's lock is held."""
        if self.turns.assistant is None or reply.value is not None or reply.attachments:
            return False
        decision = read_confirmation(reply.text)
        if decision is None:
            return False
        live = self.turns.records.live_questions(key, PROPOSAL_STEP)
        proposal = self.turns.outbox.proposal_posted_as(key, live[-1].ts) if live else None
        if proposal is None:
            return False
        if not first_time():
            return True
        if decision:
            self.accept(key, stored, proposal)
        else:
            self.reanswer(key, stored)
        return True

    def accept(self, key: SessionKey, stored: StoredSession, proposal: Proposal) -> None:
        """The proposal through the engine exactly as if typed (refused there as stale when its
        question has moved on); the proposals lose their buttons. The thread's lock is held."""
        accepted = Retire(PROPOSAL_STEP, f"Accepted: {proposal.shown}")
        self.turns.advance_and_save(key, stored, proposal.as_reply(), first=[accepted])

    def reanswer(self, key: SessionKey, stored: StoredSession) -> None:
        """The proposals lose their buttons and the open question is asked again. The thread's
        lock is held."""
        again = begin(FLOWS[stored.session.flow], stored.session)
        self.turns.outbox.enqueue(
            key, [Retire(PROPOSAL_STEP, "Not used: answer again below"), *turn_effects(again)]
        )

    def _proposal_in(self, key: SessionKey, value: str, message_ts: str | None) -> Proposal | None:
        """The proposal an Accept button carries, or its message offered when it was too long
        for the button; None for anything else (a forged value)."""
        if value == PROPOSAL_HELD:
            return self.turns.outbox.proposal_posted_as(key, message_ts) if message_ts else None
        try:
            return Proposal.from_json(value)
        except ValueError:
            return None
