"""The turns every path of the engine ends in: store an answer and ask the next question, finish
the flow, refuse a reply and ask again."""

from __future__ import annotations

from typing import Any

from flows.definition.flow import Flow
from flows.definition.questions import explanation, open_question, shown_answer
from flows.definition.session import Session
from flows.definition.steps import AnyStep, InvalidAnswer, Text
from flows.definition.turns import Answered, Completed, Effect, Message, Notice, Problem, Turn

FAILURES_BEFORE_EXPLAINING = 3


def ask_next(flow: Flow, session: Session) -> tuple[Session, tuple[Message, ...]]:
    """Ask the first open step, after its intro note the first time (the session records it)."""
    step = flow.next_step(session.answers)
    if step is None:
        return session, ()
    messages: list[Message] = []
    if step.intro_note and step.id not in session.shown_notes:
        messages.append(Notice(step.intro_note))
        session = session.changed(shown_notes=session.shown_notes | {step.id})
    messages.append(open_question(flow, session, step))
    return session, tuple(messages)


def reask(flow: Flow, session: Session, problem: str) -> Turn:
    """Say what is wrong, then ask the open question again; the session does not change."""
    step = flow.next_step(session.answers) if session.status == "active" else None
    messages: list[Message] = [Problem(problem)]
    if step is not None:
        messages.append(open_question(flow, session, step))
    return Turn(session, tuple(messages))


def fail(flow: Flow, session: Session, step: AnyStep, error: str) -> Turn:
    """Refuse an answer to `step` and ask its open question again (a menu's value being typed
    stays the question); after a few failures, explain what it needs."""
    count = session.failures.get(step.id, 0) + 1
    failed = session.changed(failures={**session.failures, step.id: count})
    text = error
    if count >= FAILURES_BEFORE_EXPLAINING:
        text += "\n\n" + explanation(step, failed)
    return Turn(failed, (Problem(text), open_question(flow, failed, step)))


def store(flow: Flow, session: Session, step: AnyStep, value: Any) -> Turn:
    """Take `value` as the answer to `step`, then ask the next question or complete the flow."""
    answers = {**session.answers, step.id: value}
    history = (*(s for s in session.history if s != step.id), step.id)
    previous = {k: v for k, v in session.previous.items() if k != step.id}
    failures = {k: v for k, v in session.failures.items() if k != step.id}
    updated = session.changed(
        answers=answers,
        history=history,
        previous=previous,
        failures=failures,
        pending_field=None,
        draft={},
    )
    effects: tuple[Effect, ...] = (Answered(step.id, shown_answer(step, value)),)
    caution = step.caution(answers) if step.caution is not None else None
    cautions: tuple[Message, ...] = (Notice(caution),) if caution else ()
    if flow.next_step(answers) is None:
        done = complete(flow, updated, effects)
        return Turn(done.session, (*cautions, *done.messages), done.effects)
    session_after, messages = ask_next(flow, updated)
    return Turn(session_after, (*cautions, *messages), effects)


def complete(flow: Flow, session: Session, effects: tuple[Effect, ...]) -> Turn:
    """Mark the session complete, with the active answers to render."""
    done = session.changed(status="complete")
    return Turn(
        done,
        (Notice("That's every question. Generating your training script now."),),
        (*effects, Completed(flow.active_answers(done.answers))),
    )


def take_default(flow: Flow, session: Session, step: Text) -> Turn:
    """An empty reply where the question has a default: store it, and say which value it was."""
    assert step.default is not None
    try:
        value = step.default(session.answers)
    except InvalidAnswer as error:
        return fail(flow, session, step, str(error))
    stored = store(flow, session, step, value)
    said = Notice(f"Nothing typed, so {step.name} takes its default: {shown_answer(step, value)}.")
    return Turn(stored.session, (said, *stored.messages), stored.effects)
