"""Replies on a ValuesMenu: pick a value by number or name, type its new value, repeat, `done`."""

from __future__ import annotations

from flows.conversation.asking import fail, reask, store
from flows.definition.flow import Flow
from flows.definition.questions import DONE, question, value_question
from flows.definition.session import Session
from flows.definition.steps import InvalidAnswer, ValuesMenu
from flows.definition.turns import Notice, Reply, Turn


def advance_menu(flow: Flow, session: Session, step: ValuesMenu, reply: Reply) -> Turn:
    """Advance a menu by one reply: the value being asked, or the next value to change."""
    fields = {f.id: f for f in step.active_fields(session.answers)}
    text = reply.text.strip()
    if session.pending_field is not None and session.pending_field in fields:
        menu_field = fields[session.pending_field]
        if reply.value is not None:
            return reask(flow, session, f"Type the new value for {menu_field.label}.")
        try:
            value = menu_field.parse(text, session.answers) if text else None
        except InvalidAnswer as error:
            return fail(flow, session, step, str(error))
        if value is None:
            return fail(flow, session, step, "The answer is empty.")
        updated = session.changed(
            draft={**session.draft, menu_field.id: value},
            pending_field=None,
            failures={k: v for k, v in session.failures.items() if k != step.id},
        )
        return Turn(
            updated, (Notice(f"{menu_field.label}: {value}"), question(flow, updated, step))
        )

    picked = reply.value if reply.value is not None else text.lower()
    if picked.isdigit():
        ids = [*fields, DONE]
        index = int(picked) - 1
        picked = ids[index] if 0 <= index < len(ids) else picked
    if picked in (DONE, "finish", "ok"):
        value = {k: v for k, v in session.draft.items() if k in fields}
        return store(flow, session, step, value)
    match = fields.get(picked) or next(
        (f for f in fields.values() if f.label.lower() == picked), None
    )
    if match is None:
        return fail(flow, session, step, "Pick a value to change, or `done`.")
    asking = session.changed(pending_field=match.id)
    return Turn(asking, (value_question(flow, step, asking, match.id),))
