"""The words that work on any question: back, edit, status, restart, cancel and help."""

from __future__ import annotations

from flows.conversation.asking import ask_next, reask
from flows.definition.flow import Flow
from flows.definition.questions import clip, explanation, question, shown_answer
from flows.definition.session import Session
from flows.definition.steps import AnyStep, Text, ValuesMenu
from flows.definition.turns import Cancelled, EditMenu, Notice, OptionView, Problem, Turn

COMMANDS = frozenset({"help", "status", "cancel", "restart", "back", "edit"})
COMMANDS_HELP = (
    "You can say, at any point: `back` (previous question), `edit` (pick an answer to change, "
    "then come back; or `edit <question>` directly), `status` (answers so far), `restart`, "
    "`cancel`, `help`."
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
            lines.append(explanation(step, session))
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
            answers=flow.given_answers(session.answers),  # what the session was made with
            history=(),
            previous={},
            failures={},
            pending_field=None,
            draft={},
            status="active",
            shown_notes=frozenset(),
        )
        kept = [
            f"{entry.title.lower()} {entry.display(fresh.answers[entry.id])}"
            for entry in flow.given
            if entry.id in fresh.answers
        ]
        said = "Starting over: all answers cleared"
        said += f" (it still {'; '.join(kept)})." if kept else "."
        session_after, messages = ask_next(flow, fresh)
        return Turn(session_after, (Notice(said), *messages))
    if lowered == "back":
        return _back(flow, session)
    if lowered == "edit" or lowered.startswith("edit "):
        return _edit(flow, session, text[4:].strip())
    return None


def status_text(flow: Flow, session: Session) -> str:
    """Answers so far, by label, and what comes next (by part: a total of questions would grow
    as branches open)."""
    answered = answered_steps(flow, session)
    lines = [f"*Status:* {session.status}, {len(answered)} questions answered."]
    for entry in flow.given:
        if entry.id in session.answers:
            lines.append(f"• {entry.title}: {entry.display(session.answers[entry.id])}")
    for step in answered.values():
        lines.append(f"• {step.name}: {shown_answer(step, session.answers[step.id])}")
    upcoming = flow.next_step(session.answers)
    if session.status == "active" and upcoming is not None:
        number, part = flow.part_of(upcoming.id)
        lines.append(
            f"Next: {upcoming.name} (part {number + 1} of {len(flow.parts)}: {part.title})."
        )
    return "\n".join(lines)


def _back(flow: Flow, session: Session) -> Turn:
    history = [s for s in session.history if s in session.answers]
    if not history:
        return reask(flow, session, "This is the first question: there is nothing to go back to.")
    return _reopen(flow, session, flow.step(history[-1]))


def _edit(flow: Flow, session: Session, name: str) -> Turn | None:
    """`edit`: the Edit menu. `edit <question>` (its label, id, a unique prefix, or its number
    in the menu): that question again. None when `edit ...` is really a free-text answer."""
    if not name:
        return Turn(session, (edit_menu(flow, session),))
    step = _answered_named(flow, session, name)
    if step is None:
        if session.status == "active":
            current = flow.next_step(session.answers)
            if isinstance(current, Text) and current.kind == "text":
                return None  # "edit the emails..." is an answer to a free-text question
        problem = Problem(f"There is no answered question “{clip(name, 40)}”. Pick one here:")
        return Turn(session, (problem, edit_menu(flow, session)))
    return _reopen(flow, session, step)


def edit_answer(flow: Flow, session: Session, step_id: str) -> Turn:
    """A click on the Edit menu: the question `step_id` again, if it is still answered."""
    step = flow.step(step_id) if flow.has_step(step_id) else None
    if step is not None and session.status == "active" and flow.next_step(session.answers) is step:
        return Turn(session)  # a second click on it: the question is already open again
    if step is None or step.id not in answered_steps(flow, session):
        problem = Problem("That answer is no longer there to change. Pick one here:")
        return Turn(session, (problem, edit_menu(flow, session)))
    return _reopen(flow, session, step)


def answered_steps(flow: Flow, session: Session) -> dict[str, AnyStep]:
    """The questions answered on the branch the answers take, in the order they are asked."""
    return {s.id: s for s in flow.active_steps(session.answers) if s.id in session.answers}


def edit_menu(flow: Flow, session: Session) -> EditMenu:
    """The answered questions by their labels (the answer beside each), numbered in order."""
    answered = answered_steps(flow, session)
    if not answered:
        return EditMenu("Nothing is answered yet, so there is nothing to change.", ())
    options = tuple(
        OptionView(step.id, step.name, shown_answer(step, session.answers[step.id]), i, False)
        for i, step in enumerate(answered.values(), 1)
    )
    return EditMenu(
        "Which answer do you want to change?",
        options,
        "Or type `edit` and the question's number or name, e.g. `edit 2`.",
    )


def _answered_named(flow: Flow, session: Session, name: str) -> AnyStep | None:
    answered = answered_steps(flow, session)
    if name.isdigit():
        steps = list(answered.values())
        index = int(name) - 1
        return steps[index] if 0 <= index < len(steps) else None
    return flow.find(name, among=tuple(answered.values()))


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
