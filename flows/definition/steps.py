"""The kinds of question a flow is made of.

A step is data: what to ask, when, and how to read the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from flows.definition.conditions import Condition

Answers = Mapping[str, Any]
Parse = Callable[[str, Answers], Any]
"""Reads one reply (its text) into a JSON-serializable value, or raises InvalidAnswer."""


class InvalidAnswer(ValueError):
    """An answer that cannot be accepted; the message says what is wrong, briefly and exactly."""


@dataclass(frozen=True)
class Attachment:
    """A file that came with a reply (a Slack upload, or `/file PATH` in the terminal)."""

    name: str
    content: bytes


@dataclass(frozen=True)
class Option:
    """One choice of a Choice step. `value` is the machine id (a button value), `label` its text."""

    value: str
    label: str
    description: str = ""
    explain: str | None = None
    """If set, picking this option is not an answer: the bot explains this and asks again."""


@dataclass(frozen=True)
class Step:
    """Fields shared by every kind of question."""

    id: str
    prompt: str
    """The question itself, one sentence ending in `?` (checked when the flow is built)."""
    when: Condition | None = None
    help: str = ""
    """Shown on `help` and after repeated failures: what a good answer looks like."""
    example: str = ""
    """A short answer shown with the question (and in full on `help`)."""
    guide: str = ""
    """What the user may write, and what the names their code sees mean; shown under the prompt."""
    title: str = ""
    """The human label (`status`, the Edit menu, `edit <label>`); every flow step needs one."""
    intro_note: str = ""
    """Shown once, before this step is asked for the first time (e.g. what RULER is)."""
    details: Callable[[Mapping[str, Any]], str] | None = None
    """A line drawn from the answers so far, shown after the prompt (e.g. the imports found)."""
    caution: Callable[[Mapping[str, Any]], str | None] | None = None
    """Read after this step is answered (with that answer): a warning to show, not a refusal."""

    @property
    def name(self) -> str:
        """The human label: never the id, which is the machine's name for the step."""
        return self.title or self.id.replace("_", " ").capitalize()

    def is_active(self, answers: Answers) -> bool:
        return self.when is None or self.when(answers)


@dataclass(frozen=True)
class Choice(Step):
    """Pick one option: buttons in Slack; elsewhere a button value, the option's number or text."""

    options: tuple[Option, ...] = ()
    options_from: Callable[[Answers], tuple[Option, ...]] | None = None
    """Options that depend on earlier answers (e.g. one per tool); replaces `options`."""
    options_reads: tuple[str, ...] = ()
    """Step ids `options_from` reads (checked when the flow is built)."""
    recommend: Callable[[Answers], str | None] | None = None
    recommend_reads: tuple[str, ...] = ()
    """Step ids `recommend` reads (checked when the flow is built)."""
    recommend_reason: Callable[[Answers], str] | None = None
    other: Parse | None = None
    """If set, a reply that matches no option is parsed by this (e.g. another LiteLLM model id)."""
    other_hint: str = ""
    check: Callable[[str, Answers], None] | None = None
    """Cross-answer validation of the chosen value; raises InvalidAnswer."""

    def options_for(self, answers: Answers) -> tuple[Option, ...]:
        """The options offered with these answers."""
        return self.options_from(answers) if self.options_from is not None else self.options


TextKind = Literal["text", "number", "json", "code", "path"]


@dataclass(frozen=True)
class Text(Step):
    """A free-text answer, read by `parse`. Code and data may come as a code block or a file."""

    parse: Parse = field(default=lambda text, answers: text)
    kind: TextKind = "text"
    default: Callable[[Answers], Any] | None = None
    """Used when the reply is `default` or `skip`; None means the question must be answered."""
    default_label: str = ""
    accepts_files: tuple[str, ...] = ()
    """File suffixes an attached file may have to answer this question (e.g. ('.jsonl',))."""
    display: Callable[[Any], str] | None = None
    """How to show a parsed answer back (e.g. '12 scenarios'); defaults to str()."""


@dataclass(frozen=True)
class MenuField:
    """One value on a ValuesMenu: its label, how to read a new value, and its default."""

    id: str
    label: str
    parse: Parse
    default: Any
    when: Condition | None = None
    hint: str = ""
    default_from: Callable[[Answers], Any] | None = None
    """A default drawn from the answers (with the menu's draft as its answer), in place of
    `default`: e.g. epochs computed from a dataset's row count."""

    display: Callable[[Any], str] | None = None
    """How a value is shown (e.g. None as 'from the row count'); defaults to str()."""

    def shown(self, value: Any) -> str:
        return self.display(value) if self.display is not None else str(value)

    def default_for(self, answers: Answers) -> Any:
        """The default with these answers."""
        return self.default if self.default_from is None else self.default_from(answers)


@dataclass(frozen=True)
class ValuesMenu(Step):
    """A menu of values with defaults (e.g. hyperparameters): pick one, give its value, repeat,
    then `done`. The answer is a dict of the values changed."""

    fields: tuple[MenuField, ...] = ()

    def active_fields(self, answers: Answers) -> tuple[MenuField, ...]:
        return tuple(f for f in self.fields if f.when is None or f.when(answers))

    def values(self, answers: Answers) -> dict[str, Any]:
        """The defaults of the active fields, overlaid with what the user changed."""
        changed = answers.get(self.id) or {}
        return {
            f.id: changed[f.id] if f.id in changed else f.default_for(answers)
            for f in self.active_fields(answers)
        }


AnyStep = Choice | Text | ValuesMenu
