"""A reply in a wizard's thread (typed, or a click on one of its answers): whose reply counts, and
each one advanced once however often Slack delivers it.

Before the wizard: `try <prompt>` in a thread whose run succeeded (bot.runs.trained_model.tryit) and
`show rollouts [step]` (bot.runs.display.rollout_samples) are the runs' own. After it: `status` adds
the thread's runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from slack_sdk import WebClient

from bot.delivery.effects import Post, turn_effects
from bot.runs.display.rollout_samples import rollouts_request
from bot.slack.blocks import text_message
from bot.wizard.expiry import Expiry
from bot.wizard.proposals import Proposals
from bot.wizard.turns import Turns
from flows import FLOWS, Reply, begin
from storage.sessions import SessionKey, StoredSession

if TYPE_CHECKING:
    from bot.runs.service import RunService
    from bot.runs.trained_model.tryit import ModelTrier


@dataclass(frozen=True)
class Incoming:
    """One thing a user did in a thread, whatever Slack called it."""

    key: SessionKey
    user: str
    reply: Reply
    delivery_id: str | None


class Replies:
    """Advances a wizard's thread by its owner's replies."""

    def __init__(
        self,
        turns: Turns,
        proposals: Proposals,
        expiry: Expiry,
        *,
        runs: RunService | None = None,
        trier: ModelTrier | None = None,
    ) -> None:
        self.turns = turns
        self.proposals = proposals
        self.expiry = expiry
        self.runs = runs
        self.trier = trier
        """`try <prompt>` in a thread whose run succeeded; None: no runner."""

    def handle(self, client: WebClient, incoming: Incoming) -> None:
        """Advance the thread's session by one reply, once however often Slack delivers it: the
        delivery id is recorded in the transaction that saves the turn (a crash before it leaves
        Slack's retry to be handled), or first thing on the paths that save no turn. A retry of
        a reply already handled is turned away there, so it is not looked up first (a read
        per turn for what is rare), except before the assistant is asked (a model call)."""
        turns, delivery = self.turns, incoming.delivery_id

        def first_time() -> bool:  # for the paths that save no turn
            return turns.records.first_delivery(delivery)

        key = incoming.key
        if self.trier is not None and self.trier.wants(key, incoming.reply):
            # `try <prompt>`: checked here, the model called on the tries' own pool
            if first_time():
                self.trier.respond(client, key, incoming.user, incoming.reply)
            return
        if self._rollouts_asked(client, incoming):
            return
        with turns.locks.hold(key):
            stored = turns.store.get(key)
            if stored is None:
                return  # not a wizard's thread
            if stored.owner != incoming.user:
                if first_time():
                    turns.poster.ephemeral(
                        client,
                        key,
                        incoming.user,
                        f"Only <@{stored.owner}> can answer this wizard. "
                        "Start your own with `/train-rl`.",
                    )
                return
            if stored.expired:
                if first_time():
                    turns.say(key, self.expiry.ended(stored))
                return
            if self._stuck(stored):
                # Its open question never reached Slack (or lost its message): ask it again
                # rather than apply a reply the user gave without seeing it.
                if first_time():
                    turns.outbox.enqueue(
                        key, turn_effects(begin(FLOWS[stored.session.flow], stored.session))
                    )
                return
            if self.proposals.decided_in_text(key, stored, incoming.reply, first_time):
                return
            turn = turns.advance_and_save(
                key, stored, incoming.reply, user=incoming.user, delivery=delivery, client=client
            )
        if turn is None:
            return
        if self.runs is not None and incoming.reply.text.strip().lower() == "status":
            runs = self.runs.thread_status(key)
            if runs:  # after the turn's own status, which is in the outbox
                turns.outbox.enqueue(key, [Post(text_message(runs))])

    def refuse(self, client: WebClient, key: SessionKey, user: str, text: str) -> None:
        """Something in a thread that is not an answer (an edit, a file we cannot take): tell its
        author why, if they own the wizard."""
        stored = self.turns.store.get(key)
        if stored is not None and stored.owner == user:
            self.turns.poster.ephemeral(client, key, user, text)

    def _rollouts_asked(self, client: WebClient, incoming: Incoming) -> bool:
        """`show rollouts [step]` in a thread with a run: shown, whoever asks (it shows what the
        thread's run did, to the channel that already sees the thread; nothing is started)."""
        request = rollouts_request(incoming.reply.text)
        if request is None or self.runs is None:
            return False
        return self.runs.show_rollouts(incoming.key, request.step)

    def _stuck(self, stored: StoredSession) -> bool:
        """An active thread whose open question is neither on its way nor live in Slack."""
        if not stored.resumable or stored.step is None:
            return False
        records = self.turns.records
        if records.live_questions(stored.key, stored.step):
            return False  # the usual case: one look
        # Then the outbox: a question it delivers meanwhile is remembered when it settles, so
        # look at Slack's record once more after it.
        if self.turns.outbox.pending(stored.key):
            return False
        return not records.live_questions(stored.key, stored.step)
