"""What a wizard turn or a run must do in its thread, as data: post a message, ask a question,
retire old questions, update a card in place, upload a file, show what artbot is doing (the
thread's status line), generate the script. The outbox stores
these with the turn (bot.delivery.outbox); its worker carries them out.

Fewer, better messages: a turn posts at most one message. The engine's notes and problems fold
into the question they come before (one post: the note, then the question), the note that ends
the wizard folds into the last answered question, and what is left (a command's answer) is one
post."""

from __future__ import annotations

from dataclasses import dataclass

from assistant import Proposal
from bot.slack.blocks import SlackMessage, engine_message, prefaced
from flows import Answered, Cancelled, Completed, Message, Notice, Question, Turn


@dataclass(frozen=True)
class Post:
    """Post a message into the thread."""

    message: SlackMessage


@dataclass(frozen=True)
class Ask:
    """Post a question into the thread and remember it (so it can lose its buttons later); the
    thread's older open questions lose theirs first: one live question per thread."""

    step_id: str
    text: str
    message: SlackMessage


@dataclass(frozen=True)
class Offer:
    """Post the assistant's proposal with Accept / Re-answer buttons and remember it (under
    PROPOSAL_STEP) so it loses its buttons later. Unlike Ask it leaves the open question's
    buttons alone. The stored proposal is what Accept uses when it is too long for a button's
    value."""

    proposal: Proposal
    message: SlackMessage


@dataclass(frozen=True)
class Retire:
    """The thread's open questions for `step_id` (None: any) lose their buttons and show
    `shown`: the question was answered, or what the buttons offered is gone. `note`, when
    given, is said under the answer (the wizard's closing words) instead of in a post."""

    step_id: str | None
    shown: str
    note: str = ""


@dataclass(frozen=True)
class Update:
    """The thread's newest message still live for `step_id` and remembered as `remembered`
    ("": any) is replaced by `message` in place, buttons and all (the result card and its dry
    run's verdict). Nothing when none is live: the thread moved on (a cancelled wizard's card
    must not get its buttons back, a newer script's card must not show an older one's)."""

    step_id: str
    message: SlackMessage
    remembered: str = ""


@dataclass(frozen=True)
class Upload:
    """Upload `content` into the thread as the file `filename` (files_upload_v2): what is too
    long to read in a message (a long draft, a run's rollouts, a dry run's report) or is an
    image (a run's reward curve, a comparison's plot), with `comment` posted with it."""

    filename: str
    title: str
    content: str | bytes
    comment: str = ""
    """Said with the file (initial_comment): what it shows, at a glance."""


@dataclass(frozen=True)
class Edit:
    """The thread's message `ts` becomes `message`, in place: a run's status card as the run
    goes. Idempotent: an attempt in doubt is simply made again; a message deleted meanwhile has
    nothing to update."""

    ts: str
    message: SlackMessage


@dataclass(frozen=True)
class Status:
    """The thread's status line (assistant.threads.setStatus): what artbot is doing while it
    works ("is thinking…"), or "" to clear it. Not a message: Slack shows it under the thread
    and clears it when the app replies there (or after two minutes without one)."""

    text: str


WORKING_STATUSES = {
    "thinking": "is thinking…",
    "dry_run": "is dry-running your script on a CPU…",
    "preflight": "is running the preflight against the model…",
    "reading": "is reading your file…",
}
"""What the thread's status says while artbot works, by what it is doing."""


@dataclass(frozen=True)
class Generate:
    """The session is complete: render, check and upload its script, after what the turn said
    (a crash before it is done leaves it to do after the restart)."""


ThreadEffect = Post | Ask | Offer | Retire | Update | Edit | Upload | Status | Generate


def turn_effects(turn: Turn) -> list[ThreadEffect]:
    """What a turn must do in its thread, in order: answered questions first, then its one
    message, then the script when the session is complete."""
    retired: list[Retire] = []
    for effect in turn.effects:
        if isinstance(effect, Answered):
            retired.append(Retire(effect.step_id, effect.shown))
        elif isinstance(effect, Cancelled):
            retired.append(Retire(None, "Cancelled"))
    completed = any(isinstance(effect, Completed) for effect in turn.effects)
    asked: list[ThreadEffect] = []
    before: list[Message] = []  # notes and problems waiting for the question they introduce
    for message in turn.messages:
        if isinstance(message, Question):
            asked.append(_ask(before, message))
            before = []
        else:
            before.append(message)
    if before and completed and retired and retired[-1].step_id is not None:
        # "That's every question": said under the last answer, the result card follows.
        note = "\n\n".join(message.text for message in before)
        retired[-1] = Retire(retired[-1].step_id, retired[-1].shown, note)
    elif before:
        asked.append(
            Post(prefaced([engine_message(m) for m in before[:-1]], engine_message(before[-1])))
        )
    effects: list[ThreadEffect] = [*retired, *asked]
    if completed:
        effects.append(Generate())
    return effects


def _ask(before: list[Message], question: Question) -> Ask:
    """One message: what comes before the question (a note, a problem with the last reply, a
    menu's new value), then the question. The remembered text, shown once it is answered, keeps
    the notes (they introduce the question) but not the problems (they are about a reply)."""
    notes = [message.text for message in before if isinstance(message, Notice)]
    message = prefaced([engine_message(m) for m in before], engine_message(question))
    return Ask(question.step_id, "\n\n".join([*notes, question.text]), message)
