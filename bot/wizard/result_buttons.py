"""A finished wizard's script and the buttons under it: the script generated once the outbox
reaches the turn that completed the session, and *Approve and run*, *Preflight*, *Edit an
answer*, *Regenerate* and *Cancel*, for the owner only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slack_sdk import WebClient

from bot.delivery.effects import Generate
from bot.wizard.preflights import Preflights
from bot.wizard.replies import Incoming, Replies
from bot.wizard.script_results import ScriptResults
from bot.wizard.turns import Turns
from flows import FLOWS, Reply
from storage.sessions import SessionKey, StoredSession

if TYPE_CHECKING:
    from bot.runs.service import RunService


class ResultButtons:
    """Generates a finished wizard's script, and acts on the buttons of its result card."""

    def __init__(
        self,
        turns: Turns,
        replies: Replies,
        results: ScriptResults,
        *,
        runs: RunService | None = None,
        preflights: Preflights | None = None,
    ) -> None:
        self.turns = turns
        self.replies = replies
        self.results = results
        self.preflights = preflights
        """*Preflight* on RL cards; None: no endpoint configured, no button."""
        self.runs = runs
        """Approving starts the script on the GPU runner; None: no runner, approvals are only
        recorded."""

    def generate(self, client: WebClient, key: SessionKey) -> None:
        """The outbox reached a completed turn: render, check and upload the thread's script
        (on the results' executor), unless the session changed since."""
        stored = self.turns.store.get(key)
        if stored is None or stored.session.status != "complete":
            return
        flow = FLOWS[stored.session.flow]
        self.results.deliver_later(client, key, flow, flow.active_answers(stored.session.answers))

    def clicked(self, client: WebClient, key: SessionKey, user: str, action: str) -> None:
        """Approve and run / Edit an answer / Regenerate / Cancel, for the owner only."""
        turns = self.turns
        stored = turns.owned(client, key, user, "do that in this wizard")
        if stored is None:
            return
        if action == "result_edit":
            self.replies.handle(client, Incoming(key, user, Reply(text="edit"), None))
        elif action == "result_cancel":
            self.replies.handle(client, Incoming(key, user, Reply(text="cancel"), None))
        elif action == "result_regenerate":
            if stored.session.status != "complete":
                turns.say(key, "Answer the open question first, then regenerate.")
                return
            # Through the outbox: after what the thread is still being told (the script is
            # rendered and checked on the results' executor, not on this listener's thread).
            turns.outbox.enqueue(key, [Generate()])
        elif action == "result_preflight":
            self._preflight(client, key, stored, user)
        elif action == "result_approve":
            with turns.locks.hold(key):  # two quick clicks must not start two GPU jobs
                self._approve(client, key, stored, user)

    def _preflight(
        self, client: WebClient, key: SessionKey, stored: StoredSession, user: str
    ) -> None:
        """The thread's script against the configured endpoint, its report into the thread."""
        turns = self.turns
        if self.preflights is None:
            turns.poster.ephemeral(client, key, user, "No preflight endpoint is configured.")
            return
        latest = self.results.latest_script(key, stored.session.answers)
        if stored.session.status != "complete" or latest is None:
            turns.say(key, "There is no finished script to preflight in this thread yet.")
            return
        flow = FLOWS[stored.session.flow]
        refusal = self.preflights.start(key, latest[0], flow.active_answers(stored.session.answers))
        if refusal:
            turns.poster.ephemeral(client, key, user, refusal)

    def _approve(
        self, client: WebClient, key: SessionKey, stored: StoredSession, user: str
    ) -> None:
        turns = self.turns
        if stored.session.status != "complete":
            turns.say(key, "There is no finished script to approve in this thread yet.")
            return
        latest = self.results.latest_script(key, stored.session.answers)
        if latest is None:
            turns.say(key, "The script is not on this host any more: press Regenerate first.")
            return
        path, script = latest
        if self.runs is not None:
            refusal = (
                self.runs.may_approve(client, key, user, stored.owner)
                or self.runs.already_running(key, script)
                or self.runs.continuation_refusal(key, stored.session.answers)
            )
            if refusal:
                turns.poster.ephemeral(client, key, user, refusal)
                return
            self.runs.approve(client, key, user, script, path.name, stored.session.answers)
            return
        approval = turns.records.record_approval(key, user, script, path.name)
        turns.say(
            key,
            f":white_check_mark: Approved by <@{user}> (script `{path.name}`, "
            f"sha256 `{approval.script_sha256[:12]}`).\n"
            "No GPU runner is configured for this bot yet, so nothing runs: "
            "the approval is recorded. "
            f"To train now, run `uv run {path.name}` on a GPU host.",
        )
