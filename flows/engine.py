"""The engine: advance a session by one reply. Pure: it returns what to say and do, and does neither."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flows.flow import Flow
from flows.secrets import looks_like_secret
from flows.session import Session
from flows.steps import AnyStep, Attachment, Choice, InvalidAnswer, Option, Settings, Text

MAX_REPLY_CHARS = 200_000
MAX_ATTACHMENT_BYTES = 5_000_000
FAILURES_BEFORE_EXPLAINING = 3
DONE = "done"

COMMANDS_HELP = (
    "You can say, at any point: `back` (previous question), `edit <question>` (change one "
    "answer, then come back), `status` (answers so far), `restart`, `cancel`, `help`."
)


# ---- what comes in -----------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One thing the user did: typed text, clicked a button (`step_id` + `value`), or sent a file."""

    text: str = ""
    value: str | None = None
    step_id: str | None = None
    attachments: tuple[Attachment, ...] = ()

    @classmethod
    def button(cls, step_id: str, value: str) -> Reply:
        return cls(value=value, step_id=step_id)


# ---- what goes out -----------------------------------------------------------------------


@dataclass(frozen=True)
class OptionView:
    value: str
    label: str
    description: str
    number: int
    recommended: bool


@dataclass(frozen=True)
class Question:
    """Ask one step. Choices carry their options (recommended first); text questions a hint."""

    step_id: str
    text: str
    kind: str
    options: tuple[OptionView, ...] = ()
    hint: str = ""
    position: int = 0
    total: int = 0


@dataclass(frozen=True)
class Notice:
    text: str


@dataclass(frozen=True)
class Problem:
    """Something wrong with the last reply. The session is unchanged except for a failure count."""

    text: str


Message = Question | Notice | Problem


@dataclass(frozen=True)
class Answered:
    """A step got its answer: an edge may update that question's message to show it."""

    step_id: str
    shown: str


@dataclass(frozen=True)
class Completed:
    """Every question is answered: render the script from these (active) answers."""

    answers: Mapping[str, Any]


@dataclass(frozen=True)
class Cancelled:
    pass


Effect = Answered | Completed | Cancelled


@dataclass(frozen=True)
class Turn:
    session: Session
    messages: tuple[Message, ...] = ()
    effects: tuple[Effect, ...] = field(default=())


# ---- the engine --------------------------------------------------------------------------


def begin(flow: Flow, session: Session) -> Turn:
    """The opening turn: ask the first open question of a (new or resumed) session."""
    return Turn(*_ask_next(flow, session))


def advance(flow: Flow, session: Session, reply: Reply) -> Turn:
    """Advance `session` by one reply and say what to answer. Never raises for bad input."""
    too_big = _too_big(reply)
    if too_big:
        return _reask(flow, session, too_big)
    if session.status == "cancelled":
        return Turn(
            session,
            (Notice("This session was cancelled: start a new one to train something else."),),
        )

    if reply.value is None:
        command_turn = _run_command(flow, session, reply.text.strip())
        if command_turn is not None:
            return command_turn

    if session.status == "complete":
        return Turn(
            session,
            (
                Notice(
                    "Every question is answered and the script is generated. "
                    "Say `edit <question>` to change an answer, or `restart` to start over."
                ),
            ),
        )

    step = flow.next_step(session.answers)
    if step is None:  # an active session with nothing left to ask: finish it
        return _complete(flow, session, ())
    if reply.step_id is not None and reply.step_id != step.id:
        return _reask(
            flow, session, "That button belongs to an earlier question. This is the open one:"
        )

    secret = _secret_in(reply)
    if secret:
        return _reask(
            flow,
            session,
            f"That looks like {secret}. artbot never stores or repeats keys and tokens: set it as an "
            "environment variable on the machine that runs the training instead. Nothing was saved.",
        )

    if isinstance(step, Settings):
        return _advance_settings(flow, session, step, reply)
    try:
        value = _read_answer(step, session, reply)
    except InvalidAnswer as error:
        return _fail(flow, session, step, str(error))
    except _Explain as explanation:
        return Turn(session, (Notice(explanation.text), _question(flow, session, step)))
    return _store(flow, session, step, value)


# ---- answers -----------------------------------------------------------------------------


class _Explain(Exception):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


KEEP_WORDS = frozenset({"keep", "yes", "y", "ok", "confirm"})
DEFAULT_WORDS = frozenset({"default", "skip", "none", "-"})


def _read_answer(step: AnyStep, session: Session, reply: Reply) -> Any:
    text = reply.text.strip()
    lowered = text.lower()
    if step.id in session.previous and lowered == "keep":
        return session.previous[step.id]
    if isinstance(step, Choice):
        return _read_choice(step, session, reply)
    assert isinstance(step, Text)
    if step.id in session.prefill and not reply.attachments and lowered in KEEP_WORDS:
        return step.parse(session.prefill[step.id], session.answers)
    if reply.attachments:
        return _read_attachment(step, session, reply.attachments)
    if reply.value is not None:
        raise InvalidAnswer("This question takes a typed answer, not a button.")
    if lowered in DEFAULT_WORDS and step.default is not None:
        return step.default(session.answers)
    if not text:
        raise InvalidAnswer("The answer is empty.")
    return step.parse(_strip_code_fence(text), session.answers)


def _read_choice(step: Choice, session: Session, reply: Reply) -> Any:
    options = displayed_options(step, session.answers)
    picked: Option | None = None
    if reply.value is not None:
        picked = next((o for o in step.options if o.value == reply.value), None)
        if picked is None:
            raise InvalidAnswer("That button is not one of this question's options.")
    else:
        text = reply.text.strip()
        if reply.attachments:
            raise InvalidAnswer("This question takes one of the options, not a file.")
        if not text:
            raise InvalidAnswer("The answer is empty: pick one of the options.")
        picked = _match_option(step, options, text)
        if picked is None:
            if step.other is not None:
                value = step.other(text, session.answers)
                if step.check is not None:
                    step.check(value, session.answers)
                return value
            raise InvalidAnswer(
                f"“{_clip(text, 60)}” is not one of the options. Reply with a number from 1 to "
                f"{len(options)} or an option's name."
            )
    if picked.explain:
        raise _Explain(picked.explain)
    if step.check is not None:
        step.check(picked.value, session.answers)
    return picked.value


def _match_option(step: Choice, options: tuple[OptionView, ...], text: str) -> Option | None:
    wanted = text.strip().strip("`*_").strip().lower()
    if wanted.isdigit():
        number = int(wanted)
        view = next((o for o in options if o.number == number), None)
        return next((o for o in step.options if view and o.value == view.value), None)
    for option in step.options:
        if wanted in (option.value.lower(), option.label.lower()):
            return option
    if step.other is not None:
        return None  # "openai/gpt-5" is another model, not a prefix of "openai/gpt-5.4"
    starts = [
        o for o in step.options if o.label.lower().startswith(wanted) or o.value.startswith(wanted)
    ]
    return starts[0] if len(starts) == 1 and len(wanted) >= 3 else None


def _read_attachment(step: Text, session: Session, attachments: tuple[Attachment, ...]) -> Any:
    if not step.accepts_files:
        raise InvalidAnswer("This question does not take a file: type the answer instead.")
    if len(attachments) != 1:
        raise InvalidAnswer("Send one file at a time.")
    attachment = attachments[0]
    if not attachment.name.lower().endswith(step.accepts_files):
        raise InvalidAnswer(
            f"“{_clip(attachment.name, 80)}” is not a {' or '.join(step.accepts_files)} file."
        )
    if len(attachment.content) > MAX_ATTACHMENT_BYTES:
        raise InvalidAnswer(
            f"The file is {len(attachment.content):,} bytes; the limit is {MAX_ATTACHMENT_BYTES:,}. "
            "For a bigger dataset, put it on the runner host and give its path."
        )
    try:
        text = attachment.content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidAnswer(f"The file is not UTF-8 text (byte {error.start}).") from None
    return step.parse(text, session.answers)


def _strip_code_fence(text: str) -> str:
    """Slack and Markdown wrap code in ``` fences; the answer is what is inside."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and len(stripped) >= 6:
        inner = stripped[3:-3]
        first_line, _, rest = inner.partition("\n")
        # ```python\n...``` : drop the language tag.
        if rest and first_line.strip().isidentifier():
            inner = rest
        return inner.strip("\n")
    return stripped


def _store(flow: Flow, session: Session, step: AnyStep, value: Any) -> Turn:
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
    if flow.next_step(answers) is None:
        return _complete(flow, updated, effects)
    session_after, messages = _ask_next(flow, updated)
    return Turn(session_after, messages, effects)


def _complete(flow: Flow, session: Session, effects: tuple[Effect, ...]) -> Turn:
    done = session.changed(status="complete")
    return Turn(
        done,
        (Notice("That's every question. Generating your training script now."),),
        (*effects, Completed(flow.active_answers(done.answers))),
    )


def _fail(flow: Flow, session: Session, step: AnyStep, error: str) -> Turn:
    count = session.failures.get(step.id, 0) + 1
    failed = session.changed(failures={**session.failures, step.id: count})
    text = error
    if count >= FAILURES_BEFORE_EXPLAINING:
        text += "\n\n" + explanation(step)
    return Turn(failed, (Problem(text), _question(flow, failed, step)))


def explanation(step: AnyStep) -> str:
    """What a good answer to `step` looks like, with an example."""
    parts = [f"*What “{step.name}” needs:* {step.help or step.prompt}"]
    if step.example:
        parts.append(f"For example:\n```\n{step.example}\n```")
    parts.append("Or say `back` to change an earlier answer, or `help`.")
    return "\n".join(parts)


# ---- settings menus ----------------------------------------------------------------------


def _advance_settings(flow: Flow, session: Session, step: Settings, reply: Reply) -> Turn:
    fields = {f.id: f for f in step.active_fields(session.answers)}
    text = reply.text.strip()
    if session.pending_field is not None and session.pending_field in fields:
        setting = fields[session.pending_field]
        if reply.value is not None:
            return _reask(flow, session, f"Type the new value for {setting.label}.")
        try:
            value = setting.parse(text, session.answers) if text else None
        except InvalidAnswer as error:
            return _fail(flow, session, step, str(error))
        if value is None:
            return _fail(flow, session, step, "The answer is empty.")
        updated = session.changed(
            draft={**session.draft, setting.id: value},
            pending_field=None,
            failures={k: v for k, v in session.failures.items() if k != step.id},
        )
        return Turn(updated, (Notice(f"{setting.label}: {value}"), _question(flow, updated, step)))

    picked = reply.value if reply.value is not None else text.lower()
    if picked.isdigit():
        ids = [*fields, DONE]
        index = int(picked) - 1
        picked = ids[index] if 0 <= index < len(ids) else picked
    if picked in (DONE, "finish", "ok"):
        value = {k: v for k, v in session.draft.items() if k in fields}
        return _store(flow, session, step, value)
    match = fields.get(picked) or next(
        (f for f in fields.values() if f.label.lower() == picked), None
    )
    if match is None:
        return _fail(flow, session, step, "Pick a value to change, or `done`.")
    asking = session.changed(pending_field=match.id)
    return Turn(asking, (_setting_question(step, asking, match.id),))


def _setting_question(step: Settings, session: Session, field_id: str) -> Question:
    setting = next(f for f in step.fields if f.id == field_id)
    current = settings_values(step, session).get(field_id, setting.default)
    hint = f"Currently {current}. {setting.hint}".strip()
    return Question(step.id, f"New value for {setting.label}?", "number", hint=hint)


def settings_values(step: Settings, session: Session) -> dict[str, Any]:
    """The menu's values as they stand: defaults, overlaid with the draft being edited."""
    return step.values({**session.answers, step.id: session.draft})


# ---- commands ----------------------------------------------------------------------------


def _run_command(flow: Flow, session: Session, text: str) -> Turn | None:
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
        return Turn(
            session.changed(status="cancelled"),
            (Notice("Cancelled. Nothing was generated. Start a new session any time."),),
            (Cancelled(),),
        )
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
        session_after, messages = _ask_next(flow, fresh)
        return Turn(session_after, (Notice("Starting over: all answers cleared."), *messages))
    if lowered == "back":
        return _back(flow, session)
    if lowered == "edit" or lowered.startswith("edit "):
        return _edit(flow, session, text[4:].strip())
    return None


def _back(flow: Flow, session: Session) -> Turn:
    history = [s for s in session.history if s in session.answers]
    if not history:
        return _reask(flow, session, "This is the first question: there is nothing to go back to.")
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
        what = f"There is no answered question “{_clip(name, 40)}”." if name else "Which answer?"
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
        draft=dict(value) if isinstance(step, Settings) else {},
    )
    return Turn(reopened, (_question(flow, reopened, step),))


# ---- asking ------------------------------------------------------------------------------


def _ask_next(flow: Flow, session: Session) -> tuple[Session, tuple[Message, ...]]:
    step = flow.next_step(session.answers)
    if step is None:
        return session, ()
    messages: list[Message] = []
    note = INTRO_NOTES.get(step.id)
    if note and step.id not in session.shown_notes:
        messages.append(Notice(note))
        session = session.changed(shown_notes=session.shown_notes | {step.id})
    if isinstance(step, Settings) and session.pending_field:
        # Resumed while a value was being asked: ask that value again, not the menu.
        messages.append(_setting_question(step, session, session.pending_field))
    else:
        messages.append(_question(flow, session, step))
    return session, tuple(messages)


def _reask(flow: Flow, session: Session, problem: str) -> Turn:
    step = flow.next_step(session.answers) if session.status == "active" else None
    messages: list[Message] = [Problem(problem)]
    if step is not None:
        if isinstance(step, Settings) and session.pending_field:
            messages.append(_setting_question(step, session, session.pending_field))
        else:
            messages.append(_question(flow, session, step))
    return Turn(session, tuple(messages))


INTRO_NOTES: dict[str, str] = {}
"""Step id -> a note shown once, the first time that step is asked (flows register theirs)."""


def _question(flow: Flow, session: Session, step: AnyStep) -> Question:
    active = flow.active_steps(session.answers)
    position = next((i for i, s in enumerate(active, 1) if s.id == step.id), len(active))
    text = step.prompt
    hint = ""
    if isinstance(step, Choice):
        options = displayed_options(step, session.answers)
        if step.recommend_reason is not None and any(o.recommended for o in options):
            text += "\n" + step.recommend_reason(session.answers)
        if step.other_hint:
            hint = step.other_hint
        kind = "choice"
    elif isinstance(step, Settings):
        values = settings_values(step, session)
        fields = step.active_fields(session.answers)
        options = (
            *(
                OptionView(f.id, f"{f.label}: {values[f.id]}", f.hint, i, False)
                for i, f in enumerate(fields, 1)
            ),
            OptionView(DONE, "Done", "Use these values", len(fields) + 1, False),
        )
        kind = "choice"
    else:
        options = ()
        kind = step.kind
        if step.id in session.prefill:
            text += f"\nFrom your command: “{_clip(session.prefill[step.id], 500)}”. Reply `yes` to use it, or type another."
        if step.default is not None:
            hint = f"Reply `default` for {step.default_label or 'the default'}."
        if step.accepts_files:
            hint = (
                hint + f" You can also upload a {' or '.join(step.accepts_files)} file."
            ).strip()
    if step.id in session.previous:
        text += f"\n(Current answer: {shown_answer(step, session.previous[step.id])}. Reply `keep` to keep it.)"
    return Question(step.id, text, kind, options, hint, position, len(active))


def displayed_options(step: Choice, answers: Mapping[str, Any]) -> tuple[OptionView, ...]:
    """The options as shown: the recommended one first and marked, then the rest in order."""
    recommended = step.recommend(answers) if step.recommend is not None else None
    ordered = sorted(step.options, key=lambda o: o.value != recommended)
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
        return option.label if option else _clip(str(value), 200)
    if isinstance(step, Text) and step.display is not None:
        return step.display(value)
    if isinstance(step, Settings):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "defaults"
    return _clip(str(value), 200) if value != "" else "(empty)"


def status_text(flow: Flow, session: Session) -> str:
    """Answers so far and what comes next."""
    active = flow.active_steps(session.answers)
    lines = [
        f"*Status:* {session.status}, {len([s for s in active if s.id in session.answers])} of {len(active)} questions answered."
    ]
    for step in active:
        if step.id in session.answers:
            lines.append(f"• {step.name}: {shown_answer(step, session.answers[step.id])}")
    upcoming = flow.next_step(session.answers)
    if session.status == "active" and upcoming is not None:
        lines.append(f"Next: {upcoming.name}.")
    return "\n".join(lines)


# ---- guards ------------------------------------------------------------------------------


def _too_big(reply: Reply) -> str | None:
    if len(reply.text) > MAX_REPLY_CHARS:
        return (
            f"That reply is {len(reply.text):,} characters; the limit is {MAX_REPLY_CHARS:,}. "
            "Upload big data as a file, or put it on the runner host and give its path."
        )
    if reply.value is not None and len(reply.value) > 2000:
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


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
