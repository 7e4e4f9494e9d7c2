"""New wizards from a run: *Run again with changes*, on a copy of a finished or failed run's
answers, and *Continue with RL from this model*, an RL wizard that starts from a finished
fine-tuning run's model.

The copy starts where a finished wizard is (every question answered, nothing generated yet)
and opens on the Edit menu: the user changes what they want, and the script is generated again
for approval as after any edit. The RL wizard asks its questions, less the base model and the
backend, which are the SFT run's (flows.wizards.start_from). The old thread keeps its answers
and its runs, and says where the new one is."""

from __future__ import annotations

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.delivery.effects import Post
from bot.delivery.outbox import Outbox
from bot.runs.store import Run, RunRef, RunStore
from bot.slack.blocks import text_message
from bot.slack.poster import ThreadPoster
from bot.slack.text import escape
from bot.wizard.opening import ThreadOpener
from flows import (
    FLOWS,
    TRAIN_RL,
    TRAIN_SFT,
    Flow,
    Notice,
    Reply,
    Session,
    Turn,
    advance,
    begin,
    rl_session_after_sft,
)
from runner.schemas import JobState
from storage.sessions import SessionKey, SessionStore, StoredSession


class Reruns:
    """*Run again with changes* on a finished or failed run, for its owner."""

    def __init__(
        self,
        runs: RunStore,
        sessions: SessionStore,
        opener: ThreadOpener,
        poster: ThreadPoster,
        outbox: Outbox,
    ) -> None:
        self.runs = runs
        self.sessions = sessions
        self.opener = opener
        self.poster = poster
        self.outbox = outbox

    def rerun(self, client: WebClient, ref: RunRef, user: str) -> SessionKey | None:
        """A new wizard thread on a copy of the run's answers, opened on the Edit menu; the old
        thread says where. The new thread's key (None when nothing was started)."""
        found = self._finished_run(client, ref, user, "run this again")
        if found is None:
            return None
        run, stored = found
        turn = rerun_turn(FLOWS[stored.session.flow], stored.session, run.public_id)
        headline = (
            f":repeat: <@{user}> is running run #{run.public_id} again with changes "
            f"(`{escape(run.script_name)}`).\nAnswers go in this thread; only they can answer."
        )
        said = ":repeat: <@{user}> reopened these answers in {where} to change them."
        return self._open(client, run, user, headline, turn, said)

    def continue_with_rl(self, client: WebClient, ref: RunRef, user: str) -> SessionKey | None:
        """An RL wizard in a new thread whose script starts from the fine-tuning run's model (ART
        forks its latest checkpoint); the old thread says where. The new thread's key (None
        when nothing was started)."""
        found = self._finished_run(client, ref, user, "continue this run")
        if found is None:
            return None
        run, stored = found
        if stored.session.flow != TRAIN_SFT.id or run.state != JobState.succeeded.value:
            self.poster.ephemeral(
                client, run.key, user, "Only a fine-tuning run that succeeded continues with RL."
            )
            return None
        try:
            session = rl_session_after_sft(stored.session.answers, run=run.public_id)
        except ValueError as error:
            self.poster.ephemeral(
                client, run.key, user, f"This run cannot continue with RL: {escape(str(error))}."
            )
            return None
        start = session.answers["start_from"]
        opening = begin(TRAIN_RL, session)
        intro = Notice(
            f"This RL run starts from the fine-tuning run #{run.public_id}: its script forks the "
            f"latest checkpoint of `{start['model']}` (ART 0.5.18's experimental fork), so the "
            "base model and the backend are that run's and are not asked."
        )
        turn = Turn(opening.session, (intro, *opening.messages))
        headline = (
            f":arrow_forward: <@{user}> continues the fine-tuning run #{run.public_id} "
            f"(`{escape(run.script_name)}`) with RL.\n"
            "Answers go in this thread; only they can answer."
        )
        said = ":arrow_forward: <@{user}> continues this model with RL in {where}."
        return self._open(client, run, user, headline, turn, said)

    def _finished_run(
        self, client: WebClient, ref: RunRef, user: str, doing: str
    ) -> tuple[Run, StoredSession] | None:
        """The run and its wizard's session, when `user` owns the run and it has ended; else
        None, with the reason said to the user."""
        run = self.runs.find(ref)
        if run is None:
            return None
        if run.owner != user:
            self.poster.ephemeral(client, run.key, user, f"Only <@{run.owner}> can {doing}.")
            return None
        if run.active:
            self.poster.ephemeral(client, run.key, user, "This run has not finished yet.")
            return None
        stored = self.sessions.get(run.key)
        if stored is None or stored.session.flow not in FLOWS:
            self.poster.ephemeral(client, run.key, user, "This run's answers are gone.")
            return None
        return run, stored

    def _open(
        self, client: WebClient, run: Run, user: str, headline: str, turn: Turn, said: str
    ) -> SessionKey | None:
        """Open the new thread with `turn`; the run's thread gets `said` with {user} and {where}
        (the new thread's link) filled in."""
        key = self.opener.open_thread(client, run.team, run.channel, user, headline, turn)
        if key is not None:
            link = _permalink(client, key)
            where = f"<{link}|a new thread>" if link else "a new thread in this channel"
            text = said.format(user=user, where=where)
            self.outbox.enqueue(run.key, [Post(text_message(text))])
        return key


def copied_session(flow: Flow, original: Session) -> Session:
    """A new session with `original`'s answers (those of its branch) and their order: complete,
    or active when the original has an answer taken back since (an edit begun after the run)."""
    answers = flow.active_answers(original.answers)
    history = tuple(step for step in original.history if step in answers)
    status = "complete" if flow.next_step(answers) is None else "active"
    return Session(flow=flow.id, answers=answers, history=history, status=status)


def rerun_turn(flow: Flow, original: Session, public_id: str) -> Turn:
    """The new wizard's opening: the copied answers, a word on what this is (the run named by
    its `public_id`), the Edit menu (or the open question, when the copy has one)."""
    session = copied_session(flow, original)
    if session.status == "active":
        opening = begin(flow, session)
        intro = Notice(f"These are the answers of run #{public_id}; one is still open:")
        return Turn(opening.session, (intro, *opening.messages))
    menu = advance(flow, session, Reply(text="edit"))  # the engine's own Edit menu
    intro = Notice(
        f"These are the answers of run #{public_id}. Pick one to change; when it is answered, the "
        "script is generated again for you to approve (its card's *Edit an answer* changes more)."
    )
    return Turn(session, (intro, *menu.messages))


def _permalink(client: WebClient, key: SessionKey) -> str | None:
    """A link to the thread's parent message; None when Slack gives none."""
    try:
        link = client.chat_getPermalink(channel=key.channel, message_ts=key.thread).get("permalink")
    except SlackApiError:
        return None
    return str(link) if link else None
