"""How a step is put to the user: its question, options and hint, and an answer shown back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flows.definition.flow import Flow
from flows.definition.session import Session
from flows.definition.steps import AnyStep, Choice, Text, ValuesMenu
from flows.definition.turns import OptionView, Progress, Question

DONE = "done"
"""The last option of a ValuesMenu: keep the values as they stand."""


def open_question(flow: Flow, session: Session, step: AnyStep) -> Question:
    """The question for `step`, or, on a menu whose value is being asked, that value's question."""
    if isinstance(step, ValuesMenu) and session.pending_field:
        # Resumed (or refused) while a value was being asked: ask that value again, not the menu.
        return value_question(flow, step, session, session.pending_field)
    return question(flow, session, step)


def question(flow: Flow, session: Session, step: AnyStep) -> Question:
    """`step` as a question: its prompt, what to write, an example, its options or hint, and
    where it stands in the flow."""
    text = step.prompt
    if step.guide:
        text += "\n" + step.guide
    if step.details is not None:
        text += "\n" + step.details(session.answers)
    text += shown_example(step)
    hint = ""
    if isinstance(step, Choice):
        options = displayed_options(step, session.answers, session.advice.get(step.id))
        advised = advice_value(step, session.answers, session.advice.get(step.id))
        if advised is not None:
            reason = session.advice[step.id].get("reason", "").strip()
            why = f": {reason.rstrip('.')}." if reason else "."
            text += f"\nThe assistant recommends this{why} Please confirm."
        elif step.recommend_reason is not None and any(o.recommended for o in options):
            text += "\n" + step.recommend_reason(session.answers)
        if step.other_hint:
            hint = step.other_hint
        kind = "choice"
    elif isinstance(step, ValuesMenu):
        values = menu_values(step, session)
        fields = step.active_fields(session.answers)
        options = (
            *(
                OptionView(f.id, f"{f.label}: {f.shown(values[f.id])}", f.hint, i, False)
                for i, f in enumerate(fields, 1)
            ),
            OptionView(DONE, "Done", "Use these values", len(fields) + 1, False),
        )
        kind = "choice"
    else:
        options = ()
        kind = step.kind
        if step.id in session.prefill:
            text += (
                f"\nFrom your command: “{clip(session.prefill[step.id], 500)}”. "
                "Reply `yes` to use it, or type another."
            )
        if step.default is not None:
            hint = f"Reply `default` for {step.default_label or 'the default'}."
        if step.accepts_files:
            hint = (
                hint + f" You can also upload a {' or '.join(step.accepts_files)} file."
            ).strip()
    if step.id in session.previous:
        text += (
            f"\n(Current answer: {shown_answer(step, session.previous[step.id])}. "
            "Reply `keep` to keep it.)"
        )
    return Question(step.id, text, kind, options, hint, progress(flow, session, step))


EXAMPLE_LINES_SHOWN = 6
"""A longer example is left to `help`: the question stays readable."""


def shown_example(step: AnyStep) -> str:
    """The step's example as a line under the question (a code block when it spans lines)."""
    if not step.example or isinstance(step, Choice | ValuesMenu):
        return ""
    lines = step.example.splitlines()
    if len(lines) == 1:
        return f"\nFor example: `{step.example}`"
    if len(lines) <= EXAMPLE_LINES_SHOWN:
        return f"\nFor example:\n```\n{step.example}\n```"
    return "\nSay `help` for a complete example."


def progress(flow: Flow, session: Session, step: AnyStep) -> Progress:
    """The step's part and its place among the part's questions asked on this branch. Guards
    read only earlier answers, so that place is fixed once the part's earlier questions are
    answered: it never jumps as later branches open."""
    number, part = flow.part_of(step.id)
    active = [s for s in flow.steps_of(part) if s.is_active(session.answers)]
    place = next((i for i, s in enumerate(active, 1) if s.id == step.id), len(active))
    return Progress(part.title, number + 1, len(flow.parts), place)


def value_question(flow: Flow, step: ValuesMenu, session: Session, field_id: str) -> Question:
    """Ask for the new value of one field of a menu."""
    menu_field = next(f for f in step.fields if f.id == field_id)
    current = menu_values(step, session).get(field_id, menu_field.default)
    hint = f"Currently {menu_field.shown(current)}. {menu_field.hint}".strip()
    return Question(
        step.id,
        f"New value for {menu_field.label}?",
        "number",
        hint=hint,
        progress=progress(flow, session, step),
    )


def menu_values(step: ValuesMenu, session: Session) -> dict[str, Any]:
    """The menu's values as they stand: defaults, overlaid with the draft being edited."""
    return step.values({**session.answers, step.id: session.draft})


def advice_value(
    step: Choice, answers: Mapping[str, Any], advice: Mapping[str, str] | None
) -> str | None:
    """The option the assistant recommended for `step`, if it is still one of its options."""
    if advice is None:
        return None
    value = advice.get("value")
    offered = {o.value for o in step.options_for(answers) if o.explain is None}
    return value if value in offered else None


def displayed_options(
    step: Choice, answers: Mapping[str, Any], advice: Mapping[str, str] | None = None
) -> tuple[OptionView, ...]:
    """The options as shown: the recommended one first and marked (the assistant's advice, or
    else the step's own rule), then the rest in order."""
    recommended = advice_value(step, answers, advice)
    if recommended is None and step.recommend is not None:
        recommended = step.recommend(answers)
    ordered = sorted(step.options_for(answers), key=lambda o: o.value != recommended)
    return tuple(
        OptionView(
            o.value,
            o.label + (" (recommended)" if o.value == recommended else ""),
            o.description,
            i,
            o.value == recommended,
        )
        for i, o in enumerate(ordered, 1)
    )


def shown_answer(step: AnyStep, value: Any) -> str:
    """An answer as the user would recognise it, short."""
    if isinstance(step, Choice):
        option = next((o for o in step.options if o.value == value), None)
        return option.label if option else clip(str(value), 200)
    if isinstance(step, Text) and step.display is not None:
        return step.display(value)
    if isinstance(step, ValuesMenu):
        labels = {f.id: f.label for f in step.fields}
        changed = [f"{labels.get(k, k)}: {v}" for k, v in value.items()]
        return ", ".join(changed) or "the defaults"
    return clip(str(value), 200) if value != "" else "(empty)"


def explanation(step: AnyStep, session: Session) -> str:
    """What a good answer to `step` looks like, with an example of one: for a choice its
    options and how to pick one, for a menu its values, for a typed answer an example."""
    if isinstance(step, ValuesMenu) and session.pending_field:
        return _value_explanation(step, session, session.pending_field)
    parts = [f"*What “{step.name}” needs:* {step.help or step.prompt}"]
    if isinstance(step, Choice):
        options = displayed_options(step, session.answers, session.advice.get(step.id))
        parts += [_option_line(o) for o in options]
        first = next(o for o in step.options_for(session.answers) if o.value == options[0].value)
        parts.append(
            f"Reply with an option's number or its name, for example `{options[0].number}` or "
            f"`{first.label}`."
        )
        if step.other is not None and step.other_hint:
            parts.append(step.other_hint)
    elif isinstance(step, ValuesMenu):
        fields = step.active_fields(session.answers)
        values = menu_values(step, session)
        parts += [f"{i}. {f.label}: {f.shown(values[f.id])}" for i, f in enumerate(fields, 1)]
        parts.append(f"{len(fields) + 1}. Done - Use these values")
        parts.append(
            f"Reply with a value's number, then its new value, for example `1`, then "
            f"`{fields[0].default}`; `{DONE}` keeps the values as they stand."
            if fields
            else f"Reply `{DONE}` to keep the values as they stand."
        )
    else:
        parts.append(_typed_example(step, session))
        if step.default is not None:
            parts.append(f"Or reply `default` for {step.default_label or 'the default'}.")
    parts.append("Or say `back` to change an earlier answer, or `help`.")
    return "\n".join(part for part in parts if part)


def _option_line(option: OptionView) -> str:
    about = f" - {option.description}" if option.description else ""
    return f"{option.number}. {option.label}{about}"


def _typed_example(step: Text, session: Session) -> str:
    """The step's example; a step whose example depends on the branch has it in its details."""
    if step.example and "\n" not in step.example:
        return f"For example: `{step.example}`"
    if step.example:
        return f"For example:\n```\n{step.example}\n```"
    if step.details is not None:
        return step.details(session.answers)
    return ""


def _value_explanation(step: ValuesMenu, session: Session, field_id: str) -> str:
    menu_field = next(f for f in step.fields if f.id == field_id)
    current = menu_values(step, session).get(field_id, menu_field.default)
    return "\n".join(
        (
            f"*What “{menu_field.label}” needs:* {menu_field.hint or 'a new value'}",
            f"It is {menu_field.shown(current)} now. For example: `{menu_field.default}`.",
            "Or say `back` to change an earlier answer, or `help`.",
        )
    )


def clip(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with an ellipsis when longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
