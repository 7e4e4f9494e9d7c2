"""The engine: advance a session by one reply. Pure: it returns what to say and do, and does
neither.

One reply goes, in order, through the guards (size, a cancelled session), the commands
(flows.conversation.commands), a finished session, the open step's checks (a stale button, a
secret), and then the step: a values menu (flows.conversation.menu) or an answer read by
flows.conversation.answers.
"""

from __future__ import annotations

from flows.conversation.answers import MAX_ATTACHMENT_BYTES, Explain, read_answer
from flows.conversation.asking import ask_next, complete, fail, reask, store, take_default
from flows.conversation.commands import edit_answer, run_command
from flows.conversation.menu import advance_menu
from flows.conversation.secrets import looks_like_secret
from flows.definition.flow import Flow
from flows.definition.questions import question
from flows.definition.session import Session
from flows.definition.steps import InvalidAnswer, Text, ValuesMenu
from flows.definition.turns import EDIT_MENU, Notice, Reply, Turn

MAX_REPLY_CHARS = 200_000
MAX_BUTTON_VALUE_CHARS = 2_000


def begin(flow: Flow, session: Session) -> Turn:
    """The opening turn: ask the first open question of a (new or resumed) session."""
    return Turn(*ask_next(flow, session))


def advance(flow: Flow, session: Session, reply: Reply) -> Turn:
    """Advance `session` by one reply and say what to answer. Never raises for bad input."""
    too_big = _too_big(reply)
    if too_big:
        return reask(flow, session, too_big)
    if session.status == "cancelled":
        return Turn(
            session,
            (Notice("This session was cancelled: start a new one to train something else."),),
        )

    if reply.value is None:
        command_turn = run_command(flow, session, reply.text.strip())
        if command_turn is not None:
            return command_turn
    elif reply.step_id == EDIT_MENU:
        return edit_answer(flow, session, reply.value)

    if session.status == "complete":
        return Turn(
            session,
            (
                Notice(
                    "Every question is answered and the script is generated. Say `edit` to "
                    "change an answer (or `edit <question>`), or `restart` to start over."
                ),
            ),
        )

    step = flow.next_step(session.answers)
    if step is None:  # an active session with nothing left to ask: finish it
        return complete(flow, session, ())
    if reply.step_id is not None and reply.step_id != step.id:
        return reask(
            flow, session, "That button belongs to an earlier question. This is the open one:"
        )

    secret = _secret_in(reply)
    if secret:
        return reask(
            flow,
            session,
            f"That looks like {secret}. artbot never stores or repeats keys and tokens: "
            "set it as an environment variable on the machine that runs the training instead. "
            "Nothing was saved.",
        )

    if isinstance(step, ValuesMenu):
        return advance_menu(flow, session, step, reply)
    if _takes_default(step, reply):
        assert isinstance(step, Text)
        return take_default(flow, session, step)
    try:
        value = read_answer(step, session, reply)
    except InvalidAnswer as error:
        return fail(flow, session, step, str(error))
    except Explain as explanation:
        return Turn(session, (Notice(explanation.text), question(flow, session, step)))
    return store(flow, session, step, value)


def _takes_default(step: object, reply: Reply) -> bool:
    """An empty reply, where empty means the default, at a question that has one."""
    return (
        reply.empty_means_default
        and not reply.text.strip()
        and not reply.attachments
        and reply.value is None
        and isinstance(step, Text)
        and step.default is not None
    )


def _too_big(reply: Reply) -> str | None:
    if len(reply.text) > MAX_REPLY_CHARS:
        return (
            f"That reply is {len(reply.text):,} characters; the limit is {MAX_REPLY_CHARS:,}. "
            "Upload big data as a file, or put it on the runner host and give its path."
        )
    if reply.value is not None and len(reply.value) > MAX_BUTTON_VALUE_CHARS:
        return "That button value is too long to be one of ours."
    return None


def _secret_in(reply: Reply) -> str | None:
    found = looks_like_secret(reply.text)
    if found:
        return found
    for attachment in reply.attachments:
        found = looks_like_secret(
            attachment.content[:MAX_ATTACHMENT_BYTES].decode("utf-8", "replace")
        )
        if found:
            return found
    return None
