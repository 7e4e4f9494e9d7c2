"""Read one reply into the answer to a choice or text step, or say why it is not one."""

from __future__ import annotations

from typing import Any

from flows.definition.questions import clip, displayed_options
from flows.definition.session import Session
from flows.definition.steps import Attachment, Choice, InvalidAnswer, Option, Text
from flows.definition.turns import OptionView, Reply

MAX_ATTACHMENT_BYTES = 5_000_000
KEEP_WORDS = frozenset({"keep", "yes", "y", "ok", "confirm"})
DEFAULT_WORDS = frozenset({"default", "skip", "none", "-"})


class Explain(Exception):
    """The reply picked an option that only explains: show `text` and ask the question again."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def read_answer(step: Choice | Text, session: Session, reply: Reply) -> Any:
    """The value `reply` gives `step`; raises InvalidAnswer, or Explain for an explaining option."""
    text = reply.text.strip()
    lowered = text.lower()
    if step.id in session.previous and lowered == "keep":
        return session.previous[step.id]
    if isinstance(step, Choice):
        return _read_choice(step, session, reply)
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
    options = displayed_options(step, session.answers, session.advice.get(step.id))
    picked: Option | None = None
    if reply.value is not None:
        picked = next(
            (o for o in step.options_for(session.answers) if o.value == reply.value), None
        )
        if picked is None:
            raise InvalidAnswer("That button is not one of this question's options.")
    else:
        text = reply.text.strip()
        if reply.attachments:
            raise InvalidAnswer("This question takes one of the options, not a file.")
        if not text:
            raise InvalidAnswer("The answer is empty: pick one of the options.")
        picked = _match_option(step, step.options_for(session.answers), options, text)
        if picked is None:
            if step.other is not None:
                value = step.other(text, session.answers)
                if step.check is not None:
                    step.check(value, session.answers)
                return value
            raise InvalidAnswer(
                f"“{clip(text, 60)}” is not one of the options. Reply with a number from 1 to "
                f"{len(options)} or an option's name."
            )
    if picked.explain:
        raise Explain(picked.explain)
    if step.check is not None:
        step.check(picked.value, session.answers)
    return picked.value


def _match_option(
    step: Choice, offered: tuple[Option, ...], options: tuple[OptionView, ...], text: str
) -> Option | None:
    wanted = text.strip().strip("`*_").strip().lower()
    if wanted.isdigit():
        number = int(wanted)
        view = next((o for o in options if o.number == number), None)
        return next((o for o in offered if view and o.value == view.value), None)
    for option in offered:
        if wanted in (option.value.lower(), option.label.lower()):
            return option
    if step.other is not None:
        return None  # "openai/gpt-5" is another model, not a prefix of "openai/gpt-5.4"
    starts = [
        o for o in offered if o.label.lower().startswith(wanted) or o.value.startswith(wanted)
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
            f"“{clip(attachment.name, 80)}” is not a {' or '.join(step.accepts_files)} file."
        )
    if len(attachment.content) > MAX_ATTACHMENT_BYTES:
        raise InvalidAnswer(
            f"The file is {len(attachment.content):,} bytes; "
            f"the limit is {MAX_ATTACHMENT_BYTES:,}. "
            "For a bigger dataset, put it on the runner host and give its path."
        )
    try:
        text = attachment.content.decode("utf-8")
    except UnicodeDecodeError as error:
        line = attachment.content.count(b"\n", 0, error.start) + 1
        raise InvalidAnswer(
            f"The file is not UTF-8 text: line {line:,} (byte {error.start:,}) is not. Save it "
            "as UTF-8 and send it again."
        ) from None
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
