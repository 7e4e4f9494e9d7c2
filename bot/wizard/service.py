"""The wizard in Slack threads: who may answer, each reply advanced once, sessions kept in SQL.

The engine decides what to say; this module decides whose reply counts, makes retries and
races harmless, and saves the engine's turn with what it says in the thread (the outbox, which
a worker delivers: bot.delivery.worker). The listeners call one method of WizardService each.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from assistant import DRAFT_WORD, Assistant, Proposal, not_configured, read_confirmation
from bot.delivery.effects import Generate, Post, Retire, ThreadEffect, turn_effects
from bot.delivery.outbox import Outbox, TurnEffects
from bot.process.shards import ALONE, Shard
from bot.process.work_slots import WorkSlots
from bot.runs.rerun import rerun_turn
from bot.runs.rollouts import rollouts_request
from bot.slack.blocks import (
    PROPOSAL_ACCEPT,
    PROPOSAL_HELD,
    PROPOSAL_STEP,
    sections,
    sessions_text,
    text_message,
)
from bot.slack.poster import ThreadPoster
from bot.slack.records import DuplicateDelivery, SlackRecords
from bot.slack.text import clip, escape
from bot.wizard.drafts import DRAFT_AGAIN, DRAFT_EDIT, edit_effects, offer_effects
from bot.wizard.home import home_view
from bot.wizard.keyed_locks import KeyedLocks
from bot.wizard.script_results import ScriptResults
from bot.workspaces.installations import Workspaces
from flows import TRAIN_RL, Flow, Problem, Reply, Session, Turn, advance, begin
from storage.sessions import (
    AlsoWrite,
    DuplicateSession,
    SessionExpired,
    SessionKey,
    SessionStore,
    StaleSession,
    StoredSession,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from bot.runs.compare import RunComparer
    from bot.runs.service import RunService
    from bot.runs.store import RunRef
    from bot.runs.tryit import ModelTrier
    from runner.schemas import FixAction

log = logging.getLogger(__name__)

FLOWS: Mapping[str, Flow] = {TRAIN_RL.id: TRAIN_RL}
SAVE_ATTEMPTS = 5
DELIVERIES_KEPT = timedelta(days=1)
"""Longer than Slack retries a delivery."""
EXPIRED = "This wizard expired. Start a new one with `/train-rl`."
STOPPED = (
    "This wizard stopped when artbot was removed from this workspace "
    "(uninstalled, or its token revoked). Start a new one with `/train-rl`."
)
COMMAND_HELP = (
    "`/train-rl [what the agent should get better at]` starts the wizard in a thread. "
    "`/train-rl list` lists your wizards, `/train-rl runs` your training runs, "
    "`/train-rl compare <run> <run>` plots two of them side by side."
)
NOT_IN_CHANNEL = (
    "I can't post in this channel yet: invite me with `/invite @artbot`, "
    "then run `/train-rl` again."
)


@dataclass(frozen=True)
class Incoming:
    """One thing a user did in a thread, whatever Slack called it."""

    key: SessionKey
    user: str
    reply: Reply
    delivery_id: str | None


class WizardService:
    """Starts wizards, advances them by replies and clicks, and finishes them with a script."""

    def __init__(
        self,
        store: SessionStore,
        records: SlackRecords,
        poster: ThreadPoster,
        results: ScriptResults,
        outbox: Outbox,
        *,
        slots: WorkSlots,
        runs: RunService | None = None,
        on_complete: Callable[[WebClient, SessionKey, Mapping[str, object]], None] | None = None,
        max_upload_bytes: int = 1_000_000,
        assistant: Assistant | None = None,
        workspaces: Workspaces | None = None,
        comparer: RunComparer | None = None,
        trier: ModelTrier | None = None,
    ) -> None:
        self.store = store
        self.records = records
        self.poster = poster
        self.results = results
        self.outbox = outbox
        """Where a turn's thread messages wait for the worker (bot.delivery.worker)."""
        self.runs = runs
        self.max_upload_bytes = max_upload_bytes
        """The largest file a reply may attach."""
        self.assistant = assistant
        """Reads typed replies first when a model is configured (None: the plain form)."""
        self.workspaces = workspaces
        """The workspaces served, and whether the app left them (None: not recorded)."""
        self.comparer = comparer
        """Two runs side by side (`/train-rl compare`, a finished run's button); None: no runner."""
        self.trier = trier
        """`try <prompt>` in a thread whose run succeeded; None: no runner."""
        self.slots = slots
        """The work slots of the threads this service runs on (bot/process/work_slots.py): a thread
        gives its slot back while a model answers (seconds), as it does while Slack answers."""
        self._locks = KeyedLocks()
        # Rendering and checking take seconds: off the listener thread, on the results' executor.
        self._on_complete = on_complete or results.deliver_later

    # -- the command --

    def command(
        self, client: WebClient, team: str, channel: str, user: str, text: str
    ) -> str | None:
        """`/train-rl [list|runs|compare|help|task]`: what to answer the user privately.

        The answer goes through the command's response_url: it works even where the bot is not
        a member of the channel.
        """
        word = text.lower()
        if word == "list":
            return self.sessions_text(user, team)
        if word == "runs":
            if self.runs is None:
                return "No GPU runner is configured for this bot."
            return self.runs.runs_text(user, team)
        if word in ("help", "-h", "--help"):
            return COMMAND_HELP
        if word == "compare" or word.startswith("compare "):
            if self.comparer is None:
                return "No GPU runner is configured for this bot."
            return self.comparer.compare_text_command(client, user, team, text[len("compare") :])
        try:
            self.start(client, team, channel, user, text)
        except SlackApiError as error:
            if error.response.get("error") not in ("not_in_channel", "channel_not_found"):
                raise
            return NOT_IN_CHANNEL
        return None

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
        try:
            with self.outbox.turn(key) as said:
                self.store.create(key, user, turn.session, also=self._saying(said, turn))
        except DuplicateSession:
            return None
        return key

    # -- replies and clicks --

    def handle(self, client: WebClient, incoming: Incoming) -> None:
        """Advance the thread's session by one reply, once however often Slack delivers it: the
        delivery id is recorded in the transaction that saves the turn (a crash before it leaves
        Slack's retry to be handled), or first thing on the paths that save no turn. A retry of
        a reply already handled is turned away there, so it is not looked up first (a read
        per turn for what is rare), except before the assistant is asked (a model call)."""
        delivery = incoming.delivery_id

        def first_time() -> bool:  # for the paths that save no turn
            return delivery is None or self.records.first_delivery(delivery)

        key = incoming.key
        if self.trier is not None and self.trier.wants(key, incoming.reply):
            # `try <prompt>`: checked here, the model called on the tries' own pool
            if first_time():
                self.trier.respond(client, key, incoming.user, incoming.reply)
            return
        if self._rollouts_asked(client, incoming):
            return
        with self._locks.hold(key):
            stored = self.store.get(key)
            if stored is None:
                return  # not a wizard's thread
            if stored.owner != incoming.user:
                if first_time():
                    self.poster.ephemeral(
                        client,
                        key,
                        incoming.user,
                        f"Only <@{stored.owner}> can answer this wizard. "
                        "Start your own with `/train-rl`.",
                    )
                return
            if stored.expired:
                if first_time():
                    self._say(key, self._ended(stored))
                return
            if self._stuck(stored):
                # Its open question never reached Slack (or lost its message): ask it again
                # rather than apply a reply the user gave without seeing it.
                if first_time():
                    self.outbox.enqueue(
                        key, turn_effects(begin(FLOWS[stored.session.flow], stored.session))
                    )
                return
            if self._decided_in_text(key, stored, incoming.reply, first_time):
                return
            turn = self._advance_and_save(
                key, stored, incoming.reply, user=incoming.user, delivery=delivery
            )
        if turn is None:
            return
        if self.runs is not None and incoming.reply.text.strip().lower() == "status":
            runs = self.runs.thread_status(key)
            if runs:  # after the turn's own status, which is in the outbox
                self.outbox.enqueue(key, [Post(text_message(runs))])

    def _rollouts_asked(self, client: WebClient, incoming: Incoming) -> bool:
        """`show rollouts [step]` in a thread with a run: shown, whoever asks (it shows what the
        thread's run did, to the channel that already sees the thread; nothing is started)."""
        request = rollouts_request(incoming.reply.text)
        if request is None or self.runs is None:
            return False
        return self.runs.show_rollouts(client, incoming.key, request.step)

    def generate(self, client: WebClient, key: SessionKey) -> None:
        """The outbox reached a completed turn: render, check and upload the thread's script
        (on the results' executor), unless the session changed since."""
        stored = self.store.get(key)
        if stored is None or stored.session.status != "complete":
            return
        flow = FLOWS[stored.session.flow]
        self._on_complete(client, key, flow.active_answers(stored.session.answers))

    def refuse(self, client: WebClient, key: SessionKey, user: str, text: str) -> None:
        """Something in a thread that is not an answer (an edit, a file we cannot take): tell its
        author why, if they own the wizard."""
        stored = self.store.get(key)
        if stored is not None and stored.owner == user:
            self.poster.ephemeral(client, key, user, text)

    def _advance_and_save(
        self,
        key: SessionKey,
        stored: StoredSession,
        reply: Reply,
        *,
        user: str | None = None,
        first: Sequence[ThreadEffect] = (),
        delivery: str | None = None,
    ) -> Turn | None:
        """Compare-and-set: a save that lost a race reloads and applies the reply to what won.
        What the turn says (after `first`) is queued in the outbox, with the session when it
        changed. Given `user`, a typed reply goes to the assistant first (once: a retry after a
        lost race is the engine's alone), and its proposal is posted for the user to accept.
        What the assistant says without changing the session counts only if the session was not
        saved meanwhile (else it may be about a question that is gone: a lost race too)."""
        consult = self.assistant is not None and user is not None and reply.value is None
        if consult and delivery is not None and self.records.seen(delivery):
            return None  # a retry of a reply handled already: the model is not asked again
        for _ in range(SAVE_ATTEMPTS):
            session = stored.session
            if _is_repeat_click(session, reply):
                return None  # a double click on a question already answered with that value
            flow = FLOWS[session.flow]
            proposal: Proposal | None = None
            asked_model = consult
            if consult and self.assistant is not None and user is not None:
                consult = False
                with self.slots.waiting():  # the model answers in seconds
                    assisted = self.assistant.respond(flow, session, reply, user)
                turn, proposal = assisted.turn, assisted.proposal
            else:
                unassisted = not_configured(flow, session, reply) if not self.assistant else None
                turn = unassisted or advance(flow, session, reply)
            effects = [*first, *turn_effects(turn)]
            if proposal is not None:
                effects.extend(offer_effects(proposal))
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

    def _say(self, key: SessionKey, text: str) -> None:
        """Post mrkdwn `text` into the thread through the outbox (durable, in thread order)."""
        self.outbox.enqueue(key, [Post(text_message(text))])

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

    def _saying(self, said: TurnEffects, turn: Turn) -> AlsoWrite:
        """Queue what `turn` says in the thread, in the transaction that saves it."""
        effects = turn_effects(turn)
        return lambda connection: said.add(connection, effects)

    def _stuck(self, stored: StoredSession) -> bool:
        """An active thread whose open question is neither on its way nor live in Slack."""
        if not stored.resumable or stored.step is None:
            return False
        if self.records.live_questions(stored.key, stored.step):
            return False  # the usual case: one look
        # Then the outbox: a question it delivers meanwhile is remembered when it settles, so
        # look at Slack's record once more after it.
        if self.outbox.pending(stored.key):
            return False
        return not self.records.live_questions(stored.key, stored.step)

    # -- the assistant's proposals --

    def proposal_action(
        self,
        client: WebClient,
        key: SessionKey,
        user: str,
        action: str,
        value: str,
        message_ts: str | None,
        delivery_id: str | None,
    ) -> None:
        """Accept / Use it (the proposal goes through the engine exactly as if typed, stale
        question checked there), Re-answer (the open question again), a draft's Edit (its code
        to change and send back) or Draft again (another draft), for the owner only. Each takes
        the proposals' buttons away."""
        stored = self._clicked_by_owner(client, key, user, delivery_id, "answer this wizard")
        if stored is None:
            return
        if stored.expired:
            self._say(key, self._ended(stored))
            return
        if action == DRAFT_AGAIN:
            with self._locks.hold(key):
                current = self.store.get(key) or stored
                step = FLOWS[current.session.flow].next_step(current.session.answers)
                if step is None or step.id != value:  # its question was answered meanwhile
                    self.poster.ephemeral(
                        client, key, user, "That draft's question was answered: not drafted again."
                    )
                    return
                again = Retire(PROPOSAL_STEP, "Not used: drafting again")
                self._advance_and_save(
                    key, current, Reply(text=DRAFT_WORD), user=user, first=[again]
                )
            return
        if action == DRAFT_EDIT:
            draft = self._proposal_in(key, value, message_ts)
            if draft is not None:
                self.outbox.enqueue(key, edit_effects(draft))
            return
        if action != PROPOSAL_ACCEPT:
            with self._locks.hold(key):
                self._reanswer(key, self.store.get(key) or stored)
            return
        proposal = self._proposal_in(key, value, message_ts)
        if proposal is None:
            self.poster.ephemeral(
                client,
                key,
                user,
                "That button does not carry a proposal I can use (forged, or too old): "
                "not used. Answer the question in the thread.",
            )
            return
        with self._locks.hold(key):
            self._accept(key, self.store.get(key) or stored, proposal)

    def _decided_in_text(
        self,
        key: SessionKey,
        stored: StoredSession,
        reply: Reply,
        first_time: Callable[[], bool] = lambda: True,
    ) -> bool:
        """`yes` / `no` typed under the thread's newest live proposal: its Accept / Re-answer
        (as in `artbot chat`), done if `first_time()` (not a repeated delivery). False when the
        reply is something else: a reply of its own."""
        if self.assistant is None or reply.value is not None or reply.attachments:
            return False
        decision = read_confirmation(reply.text)
        if decision is None:
            return False
        live = self.records.live_questions(key, PROPOSAL_STEP)
        proposal = self.outbox.proposal_posted_as(key, live[-1].ts) if live else None
        if proposal is None:
            return False
        if not first_time():
            return True
        if decision:
            self._accept(key, stored, proposal)
        else:
            self._reanswer(key, stored)
        return True

    def _accept(self, key: SessionKey, stored: StoredSession, proposal: Proposal) -> None:
        """The proposal through the engine exactly as if typed (refused there as stale when its
        question has moved on); the proposals lose their buttons. The thread's lock is held."""
        accepted = Retire(PROPOSAL_STEP, f"Accepted: {proposal.shown}")
        self._advance_and_save(key, stored, proposal.as_reply(), first=[accepted])

    def _reanswer(self, key: SessionKey, stored: StoredSession) -> None:
        """The proposals lose their buttons and the open question is asked again. The thread's
        lock is held."""
        again = begin(FLOWS[stored.session.flow], stored.session)
        self.outbox.enqueue(
            key, [Retire(PROPOSAL_STEP, "Not used: answer again below"), *turn_effects(again)]
        )

    def _proposal_in(self, key: SessionKey, value: str, message_ts: str | None) -> Proposal | None:
        """The proposal an Accept button carries, or its message offered when it was too long
        for the button; None for anything else (a forged value)."""
        if value == PROPOSAL_HELD:
            return self.outbox.proposal_posted_as(key, message_ts) if message_ts else None
        try:
            return Proposal.from_json(value)
        except ValueError:
            return None

    def _clicked_by_owner(
        self,
        client: WebClient,
        key: SessionKey,
        user: str,
        delivery_id: str | None,
        what: str,
    ) -> StoredSession | None:
        """The session a button click acts on; None for a repeated delivery, a thread with no
        wizard, or someone other than its owner (told, to them alone, that only the owner can
        `what`)."""
        if delivery_id is not None and not self.records.first_delivery(delivery_id):
            return None
        stored = self.store.get(key)
        if stored is None:
            return None
        if stored.owner != user:
            self.poster.ephemeral(client, key, user, f"Only <@{stored.owner}> can {what}.")
            return None
        return stored

    # -- the result buttons --

    def result_action(
        self, client: WebClient, key: SessionKey, user: str, action: str, delivery_id: str | None
    ) -> None:
        """Approve and run / Edit an answer / Regenerate / Cancel, for the owner only."""
        stored = self._clicked_by_owner(client, key, user, delivery_id, "do that in this wizard")
        if stored is None:
            return
        if action == "result_edit":
            self.handle(client, Incoming(key, user, Reply(text="edit"), None))
        elif action == "result_cancel":
            self.handle(client, Incoming(key, user, Reply(text="cancel"), None))
        elif action == "result_regenerate":
            if stored.session.status != "complete":
                self._say(key, "Answer the open question first, then regenerate.")
                return
            # Through the outbox: after what the thread is still being told (the script is
            # rendered and checked on the results' executor, not on this listener's thread).
            self.outbox.enqueue(key, [Generate()])
        elif action == "result_approve":
            with self._locks.hold(key):  # two quick clicks must not start two GPU jobs
                self._approve(client, key, stored, user)

    def _approve(
        self, client: WebClient, key: SessionKey, stored: StoredSession, user: str
    ) -> None:
        if stored.session.status != "complete":
            self._say(key, "There is no finished script to approve in this thread yet.")
            return
        latest = self.results.latest_script(key, stored.session.answers)
        if latest is None:
            self._say(key, "The script is not on this host any more: press Regenerate first.")
            return
        path, script = latest
        if self.runs is not None:
            refusal = self.runs.may_approve(
                client, key, user, stored.owner
            ) or self.runs.already_running(key, script)
            if refusal:
                self.poster.ephemeral(client, key, user, refusal)
                return
            self.runs.approve(client, key, user, script, path.name, stored.session.answers)
            return
        approval = self.records.record_approval(key, user, script, path.name)
        self._say(
            key,
            f":white_check_mark: Approved by <@{user}> (script `{path.name}`, "
            f"sha256 `{approval.script_sha256[:12]}`).\n"
            "No GPU runner is configured for this bot yet, so nothing runs: "
            "the approval is recorded. "
            f"To train now, run `uv run {path.name}` on a GPU host.",
        )

    # -- the run buttons (no-ops without a runner) --

    def cancel_run(self, client: WebClient, ref: RunRef, user: str) -> None:
        """A status card's Cancel button."""
        if self.runs is not None:
            self.runs.cancel(client, ref, user)

    def rerun(
        self, client: WebClient, ref: RunRef, user: str, delivery_id: str | None
    ) -> SessionKey | None:
        """*Run again with changes* on a finished or failed run, for its owner: a new wizard
        thread on a copy of the run's answers, opened on the Edit menu; the old thread says
        where. The new thread's key (None when nothing was started)."""
        if self.runs is None:
            return None
        if delivery_id is not None and not self.records.first_delivery(delivery_id):
            return None
        run = self.runs.runs.find(ref)
        if run is None:
            return None
        if run.owner != user:
            self.poster.ephemeral(client, run.key, user, f"Only <@{run.owner}> can run this again.")
            return None
        if run.active:
            self.poster.ephemeral(client, run.key, user, "This run has not finished yet.")
            return None
        stored = self.store.get(run.key)
        if stored is None or stored.session.flow not in FLOWS:
            self.poster.ephemeral(client, run.key, user, "This run's answers are gone.")
            return None
        turn = rerun_turn(FLOWS[stored.session.flow], stored.session, run.public_id)
        headline = (
            f":repeat: <@{user}> is running run #{run.public_id} again with changes "
            f"(`{escape(run.script_name)}`).\nAnswers go in this thread; only they can answer."
        )
        key = self.open_thread(client, run.team, run.channel, user, headline, turn)
        if key is not None:
            link = _permalink(client, key)
            where = f"<{link}|a new thread>" if link else "a new thread in this channel"
            self._say(
                run.key, f":repeat: <@{user}> reopened these answers in {where} to change them."
            )
        return key

    def open_try(
        self, client: WebClient, ref: RunRef, user: str, trigger_id: str, delivery_id: str | None
    ) -> None:
        """*Try it* on a succeeded run, for its owner: a modal asking for a prompt."""
        if self.trier is None:
            return
        if delivery_id is not None and not self.records.first_delivery(delivery_id):
            return
        self.trier.open_modal(client, ref, user, trigger_id)

    def try_submitted(
        self, client: WebClient, ref: RunRef, user: str, prompt: str, delivery_id: str | None
    ) -> None:
        """The *Try it* modal's prompt: the model's reply in the run's thread."""
        if self.trier is None:
            return
        if delivery_id is not None and not self.records.first_delivery(delivery_id):
            return
        self.trier.submitted(client, ref, user, prompt)

    def compare_previous(
        self, client: WebClient, ref: RunRef, user: str, delivery_id: str | None
    ) -> None:
        """*Compare with the previous run of this project*, for the run's owner: the comparison
        with their latest earlier run of the same project, in this run's thread."""
        if self.comparer is None:
            return
        if delivery_id is not None and not self.records.first_delivery(delivery_id):
            return
        run = self.comparer.runs.find(ref)
        if run is None:
            return
        if run.owner != user:
            self.poster.ephemeral(
                client, run.key, user, f"Only <@{run.owner}> can compare this run."
            )
            return
        previous = self.comparer.previous_of(run)
        if previous is None:
            self.poster.ephemeral(
                client, run.key, user, "You have no earlier run of this project to compare with."
            )
            return
        refusal = self.comparer.post(client, previous, run)
        if refusal:
            self.poster.ephemeral(client, run.key, user, refusal)

    def fix_run(
        self, client: WebClient, ref: RunRef, fix: FixAction, user: str, delivery_id: str
    ) -> None:
        """A failed run's fix button, once however often Slack delivers the click."""
        if self.runs is not None and self.records.first_delivery(delivery_id):
            self.runs.retry(client, ref, fix, user)

    # -- listing, expiry, errors --

    def sessions_of(self, user: str, team: str) -> list[StoredSession]:
        return self.store.list_for_owner(user, team=team)

    def sessions_text(self, user: str, team: str) -> str:
        """`/train-rl list`: the user's wizards in the team."""
        return sessions_text(self.sessions_of(user, team))

    def publish_home(self, client: WebClient, user: str, team: str) -> None:
        """The App Home tab: the user's wizards and runs, each with a button to its thread."""
        sessions = self.sessions_of(user, team)
        runs = self.runs.runs.for_owner(user, team) if self.runs is not None else []
        client.views_publish(user_id=user, view=home_view(client, sessions, runs))

    def workspace_removed(self, team: str, enterprise: str | None, reason: str) -> list[SessionKey]:
        """The app was uninstalled from `team` or its bot token revoked: the workspace is
        marked, its open wizards stop (a later reply is told why) and what the outbox still had
        to say there is given up. The stopped wizards' keys."""
        if self.workspaces is not None:
            self.workspaces.removed(team, enterprise, reason)
        stopped = self.store.expire_team(team)
        given_up = self.outbox.give_up_team(team, reason)
        log.info(
            "left workspace %s (%s): %d wizards stopped, %d outbox effects given up",
            team,
            reason,
            len(stopped),
            given_up,
        )
        return stopped

    def _ended(self, stored: StoredSession) -> str:
        """Why an expired wizard goes no further: idle, or stopped when the app left."""
        workspace = self.workspaces.get(stored.key.team) if self.workspaces else None
        if (
            workspace is not None
            and workspace.removed_at is not None
            and stored.expired_at is not None
            and stored.expired_at >= workspace.removed_at
        ):
            return STOPPED
        return EXPIRED

    def expire_idle(self, older_than: timedelta, shard: Shard = ALONE) -> list[SessionKey]:
        """Expire sessions (of `shard`'s channels) idle for longer than `older_than`, with a note
        in each thread (through the outbox: a team the app left gives it up)."""
        expired = self.store.expire_idle(older_than, None if shard.alone else shard.owns)
        hours = older_than.total_seconds() / 3600
        said = text_message(
            f":zzz: This wizard expired after {hours:g} hours without an answer. "
            "Start a new one with `/train-rl`."
        )
        for key in expired:  # its open question (or result card) loses its buttons
            self.outbox.enqueue(key, [Retire(None, "Expired"), Post(said)])
        return expired

    def tidy(self, idle: timedelta, shard: Shard = ALONE) -> None:
        """Expire idle sessions of `shard` (with a note in their threads) and forget old
        delivery ids."""
        self.expire_idle(idle, shard)
        self.records.forget_deliveries(DELIVERIES_KEPT)
        self.outbox.forget_delivered(DELIVERIES_KEPT)

    def notify_error(self, client: WebClient, key: SessionKey) -> None:
        """Something of ours broke while handling a reply: say so instead of going silent."""
        try:
            self._say(
                key, ":x: Something went wrong on my side; your answers are saved. Try again."
            )
        except Exception:  # the database may be what broke: nothing more to do than log it
            log.exception("could not report an error to %s", key)


def _permalink(client: WebClient, key: SessionKey) -> str | None:
    """A link to the thread's parent message; None when Slack gives none."""
    try:
        link = client.chat_getPermalink(channel=key.channel, message_ts=key.thread).get("permalink")
    except SlackApiError:
        return None
    return str(link) if link else None


def _is_repeat_click(session: Session, reply: Reply) -> bool:
    return (
        reply.step_id is not None
        and reply.value is not None
        and session.answers.get(reply.step_id) == reply.value
        and FLOWS[session.flow].next_step(session.answers)
        is not FLOWS[session.flow].step(reply.step_id)
    )
