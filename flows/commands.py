"""The words that work on any question: back, edit, status, restart, cancel and help."""

from __future__ import annotations

from flows.asking import ask_next, reask
from flows.flow import Flow
from flows.questions import clip, explanation, question, shown_answer
from flows.session import Session
from flows.steps import AnyStep, Text, ValuesMenu
from flows.turns import Cancelled, Notice, Problem, Turn

COMMANDS = frozenset({"help", "status", "cancel", "restart", "back", "edit"})
COMMANDS_HELP = (
    "You can say, at any point: `back` (previous question), `edit <question>` (change one "
    "answer, then come back), `status` (answers so far), `restart`, `cancel`, `help`."
)


def is_command(text: str) -> bool:
    """Whether a typed reply reads as one of the commands (so it cannot be an answer)."""
    lowered = text.strip().lower()
    return lowered in COMMANDS or lowered.startswith("edit ")


CANCELLED = "Cancelled. Nothing was generated. Start a new session any time."
CANCELLED_AFTER_SCRIPT = (
    "Cancelled: this session takes no more answers. The script it generated is kept as it was "
    "(and a run already started goes on until you cancel it on its card). Start a new session "
    "any time."
)


def run_command(flow: Flow, session: Session, text: str) -> Turn | None:
    """The turn for a command, or None when `text` is not one here (then it is an answer)."""
    lowered = text.lower()
    if lowered == "help":
        step = flow.next_step(session.answers) if session.status == "active" else None
        lines = [COMMANDS_HELP]
        if step is not None:
            lines.append(explanation(step))
        return Turn(session, (Notice("\n\n".join(lines)),))
    if lowered == "status":
        return Turn(session, (Notice(status_text(flow, session)),))
    if lowered == "cancel":
        if session.status == "cancelled":
            return None
        said = CANCELLED_AFTER_SCRIPT if session.status == "complete" else CANCELLED
        return Turn(session.changed(status="cancelled"), (Notice(said),), (Cancelled(),))
    if lowered == "restart":
        fresh = session.changed(
            answers={},
            history=(),
            previous={},
            failures={},
            pending_field=None,
            draft={},
            status="active",
            shown_notes=frozenset(),
        )
        session_after, messages = ask_next(flow, fresh)
        return Turn(session_after, (Notice("Starting over: all answers cleared."), *messages))
    if lowered == "back":
        return _back(flow, session)
    if lowered == "edit" or lowered.startswith("edit "):
        return _edit(flow, session, text[4:].strip())
    return None


def status_text(flow: Flow, session: Session) -> str:
    """Answers so far and what comes next."""
    active = flow.active_steps(session.answers)
    answered = len([s for s in active if s.id in session.answers])
    lines = [
        f"*Status:* {session.status}, {answered} of {len(active)} questions answered.",
    ]
    for step in active:
        if step.id in session.answers:
            lines.append(f"• {step.name}: {shown_answer(step, session.answers[step.id])}")
    upcoming = flow.next_step(session.answers)
    if session.status == "active" and upcoming is not None:
        lines.append(f"Next: {upcoming.name}.")
    return "\n".join(lines)


def _back(flow: Flow, session: Session) -> Turn:
    history = [s for s in session.history if s in session.answers]
    if not history:
        return reask(flow, session, "This is the first question: there is nothing to go back to.")
    return _reopen(flow, session, flow.step(history[-1]))


def _edit(flow: Flow, session: Session, name: str) -> Turn | None:
    answered = [s for s in flow.active_steps(session.answers) if s.id in session.answers]
    step = flow.find(name) if name else None
    if step is None or step.id not in session.answers or not step.is_active(session.answers):
        listing = ", ".join(f"`{s.id}`" for s in answered) or "none yet"
        if name and session.status == "active":
            current = flow.next_step(session.answers)
            if isinstance(current, Text) and current.kind == "text":
                return None  # "edit the emails..." is an answer to a free-text question
        what = f"There is no answered question “{clip(name, 40)}”." if name else "Which answer?"
        return Turn(session, (Problem(f"{what} Say `edit <question>` with one of: {listing}."),))
    return _reopen(flow, session, step)


def _reopen(flow: Flow, session: Session, step: AnyStep) -> Turn:
    """Take back one answer (kept as `previous`, so `keep` restores it) and ask it again."""
    value = session.answers[step.id]
    answers = {k: v for k, v in session.answers.items() if k != step.id}
    reopened = session.changed(
        answers=answers,
        history=tuple(s for s in session.history if s != step.id),
        previous={**session.previous, step.id: value},
        status="active",
        pending_field=None,
        draft=dict(value) if isinstance(step, ValuesMenu) else {},
    )
    return Turn(reopened, (question(flow, reopened, step),))
