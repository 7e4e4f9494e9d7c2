"""Replay an answers mapping through the engine, as a conversation would, to validate it.

`artbot render --answers answers.json` goes through here, so a file of answers passes the same
parsers, cross-checks and branching as a chat. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from flows.conversation.commands import is_command
from flows.conversation.engine import MAX_REPLY_CHARS, advance, begin
from flows.definition.flow import Flow
from flows.definition.questions import DONE
from flows.definition.session import Session
from flows.definition.steps import (
    AnyStep,
    Attachment,
    Choice,
    InvalidAnswer,
    Option,
    Text,
    ValuesMenu,
)
from flows.definition.turns import Cancelled, Problem, Reply, Turn

MISSING = object()


class AnswersError(ValueError):
    """An answer the flow does not accept: which step, and what is wrong with it."""

    def __init__(self, step_id: str, message: str) -> None:
        super().__init__(f"{step_id}: {message}")
        self.step_id = step_id
        self.message = message


def replay(flow: Flow, answers: Mapping[str, Any]) -> Session:
    """Feed `answers` to the engine in flow order and return the completed session.

    Raises AnswersError naming the first step whose answer is missing or not accepted, or a
    key that is not a question of `flow` (or is not asked, given the other answers).
    """
    given_ids = {entry.id for entry in flow.given}
    unknown = sorted(key for key in answers if not flow.has_step(key) and key not in given_ids)
    if unknown:
        others = f" (also unknown: {', '.join(unknown[1:])})" if len(unknown) > 1 else ""
        raise AnswersError(unknown[0], f"not a question of the {flow.id} flow{others}")

    turn = begin(flow, Session(flow=flow.id, answers=_given(flow, answers)))
    session = turn.session
    while session.status == "active":
        step = flow.next_step(session.answers)
        if step is None:  # cannot happen: the engine completes a session with nothing left to ask
            break
        session = _answer(flow, session, step, answers.get(step.id, MISSING))

    if session.status != "complete":
        raise AnswersError(flow.steps[0].id, f"the conversation ended as {session.status}")
    asked = flow.active_answers(session.answers)
    not_asked = [key for key in answers if key not in asked]
    if not_asked:
        raise AnswersError(not_asked[0], "this question is not asked with these answers")
    return session


def _given(flow: Flow, answers: Mapping[str, Any]) -> dict[str, Any]:
    """The given answers (flows.definition.flow.Given) with the answers they settle, which
    `answers` may repeat but not contradict."""
    given: dict[str, Any] = {}
    for entry in flow.given:
        if entry.id not in answers:
            continue
        try:
            given |= flow.given_answers({entry.id: answers[entry.id]})
        except InvalidAnswer as error:
            raise AnswersError(entry.id, str(error)) from None
    for key, value in given.items():
        if key in answers and answers[key] != value:
            step = flow.step(key) if flow.has_step(key) else None
            if isinstance(step, Choice) and step.check is not None:
                try:
                    step.check(answers[key], given)
                except InvalidAnswer as error:
                    raise AnswersError(key, str(error)) from None
            raise AnswersError(key, f"settled as {_shown(value)} by the given answers")
    return given


def _answer(flow: Flow, session: Session, step: AnyStep, value: Any) -> Session:
    if isinstance(step, ValuesMenu):
        return _answer_menu(flow, session, step, value)
    if value is MISSING or value is None:
        if isinstance(step, Text) and step.default is not None:
            return _step(flow, session, step, Reply(text="default"))
        raise AnswersError(step.id, f"no answer (the question: {_first_line(step.prompt)})")
    if isinstance(step, Choice):
        return _answer_choice(flow, session, step, value)
    return _step(flow, session, step, _text_reply(step, value))


def _answer_choice(flow: Flow, session: Session, step: Choice, value: Any) -> Session:
    offered = step.options_for(session.answers)
    if not isinstance(value, str):
        raise AnswersError(
            step.id, f"expected one of {_option_values(offered)}, not {_shown(value)}"
        )
    option = next((o for o in offered if o.value == value), None)
    if option is not None and option.explain:
        raise AnswersError(
            step.id,
            f"{_shown(value)} only explains the question and is not an answer: pick one of "
            f"{_option_values(offered)}",
        )
    if option is not None:
        # A button press names the option exactly; typed text could match a label or number.
        reply = Reply.button(step.id, value)
    elif step.other is not None:
        reply = Reply(text=value)
    else:
        raise AnswersError(step.id, f"{_shown(value)} is not one of {_option_values(offered)}")
    after = _step(flow, session, step, reply)
    stored = after.answers.get(step.id)
    if stored != value.strip():
        raise AnswersError(step.id, f"{_shown(value)} was read as {_shown(stored)}")
    return after


def _answer_menu(flow: Flow, session: Session, step: ValuesMenu, value: Any) -> Session:
    if value is MISSING or value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise AnswersError(step.id, f"expected an object of settings, not {_shown(value)}")
    fields = {f.id for f in step.active_fields(session.answers)}
    for field_id, field_value in value.items():
        if field_id not in fields:
            known = ", ".join(f.id for f in step.fields)
            reason = (
                "does not apply with these answers"
                if any(f.id == field_id for f in step.fields)
                else f"is not a setting (the settings: {known})"
            )
            raise AnswersError(step.id, f"{field_id!r} {reason}")
        session = _step(flow, session, step, Reply.button(step.id, field_id))
        try:
            session = _step(flow, session, step, Reply(text=_as_text(field_value)))
        except AnswersError as error:
            raise AnswersError(step.id, f"{field_id}: {error.message}") from None
    return _step(flow, session, step, Reply.button(step.id, DONE))


def _text_reply(step: AnyStep, value: Any) -> Reply:
    text = _as_text(value)
    if isinstance(step, Text) and text == "" and step.default is not None:
        return Reply(text="default")  # the empty answer of an optional question is its default
    if isinstance(step, Text) and step.accepts_files and len(text) > MAX_REPLY_CHARS:
        suffix = (
            ".json"
            if ".json" in step.accepts_files and not isinstance(value, str)
            else step.accepts_files[0]
        )
        return Reply(attachments=(Attachment(f"{step.id}{suffix}", text.encode("utf-8")),))
    return Reply(text=text)


def _as_text(value: Any) -> str:
    """A value as the user would type it: strings as they are, numbers by str(), else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    if (
        isinstance(value, Mapping)
        and set(value) == {"kind", "code"}
        and isinstance(value["code"], str)
    ):
        # Code answers are stored as {"kind": "expression" | "function", "code": ...}: the
        # user typed the code.
        return value["code"]
    return json.dumps(value, ensure_ascii=False)


def _step(flow: Flow, session: Session, step: AnyStep, reply: Reply) -> Session:
    """One reply; an AnswersError unless the engine took it."""
    turn = advance(flow, session, reply)
    problem = next((m.text for m in turn.messages if isinstance(m, Problem)), None)
    if problem is not None:
        raise AnswersError(step.id, _first_paragraph(problem))
    if any(isinstance(effect, Cancelled) for effect in turn.effects):
        raise AnswersError(step.id, f"{_shown(reply.text)} is the `cancel` command, not an answer")
    if not _progressed(session, turn, step):
        if reply.value is None and is_command(reply.text):
            raise AnswersError(
                step.id,
                f"{_shown(reply.text)} is one of the wizard's commands, so it cannot be given as "
                "this answer",
            )
        said = " ".join(_first_paragraph(getattr(m, "text", "")) for m in turn.messages[:1])
        raise AnswersError(
            step.id, f"{_shown(reply.value or reply.text)} was not taken as an answer: {said}"
        )
    return turn.session


def _progressed(before: Session, turn: Turn, step: AnyStep) -> bool:
    after = turn.session
    if step.id in after.answers and step.id not in before.answers:
        return True
    # On a values menu, picking a field or giving its value moves the menu along.
    return isinstance(step, ValuesMenu) and (
        after.pending_field != before.pending_field or after.draft != before.draft
    )


def _option_values(offered: tuple[Option, ...]) -> str:
    return ", ".join(option.value for option in offered if not option.explain)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return repr(text if len(text) <= 60 else text[:59] + "…")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _first_paragraph(text: str) -> str:
    # The engine appends an explanation after repeated failures; the first paragraph is the error.
    return text.strip().split("\n\n")[0]


__all__ = ["AnswersError", "replay"]
