"""What goes into the engine (a Reply) and what comes out (a Turn: messages and effects)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flows.definition.session import Session
from flows.definition.steps import Attachment

# ---- what comes in -----------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One thing the user did: typed text, clicked a button (`step_id` + `value`) or sent a file."""

    text: str = ""
    value: str | None = None
    step_id: str | None = None
    attachments: tuple[Attachment, ...] = ()
    empty_means_default: bool = False
    """Set by an edge where an empty reply is a real gesture (Enter in the terminal): with no
    text it takes the open question's default, where it has one. Elsewhere (Slack) an empty
    reply stays a refused answer."""

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
class Progress:
    """Where a question stands, in words that stay true as branches open: its part (the number
    of parts never changes) and its place among that part's questions (which depends only on
    earlier answers, so it never jumps)."""

    part: str
    part_number: int
    parts: int
    question: int

    def __str__(self) -> str:
        return (
            f"Part {self.part_number} of {self.parts}: {self.part} · "
            f"question {self.question} of this part"
        )


@dataclass(frozen=True)
class Question:
    """Ask one step. Choices carry their options (recommended first); text questions a hint."""

    step_id: str
    text: str
    kind: str
    options: tuple[OptionView, ...] = ()
    hint: str = ""
    progress: Progress | None = None


@dataclass(frozen=True)
class EditMenu:
    """The answered questions, by their labels, to pick one to change (`edit`). Each option's
    value is a step id: a click is `Reply.button(EDIT_MENU, step_id)`, typing is
    `edit <number or label>`."""

    text: str
    options: tuple[OptionView, ...]
    hint: str = ""


@dataclass(frozen=True)
class Notice:
    text: str


@dataclass(frozen=True)
class Problem:
    """Something wrong with the last reply. The session is unchanged but for a failure count."""

    text: str


Message = Question | Notice | Problem | EditMenu

EDIT_MENU = "edit"
"""The step id an Edit menu's buttons carry (no flow step may have it)."""


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
    """The engine's answer to one reply: the new session, what to say, and what to do."""

    session: Session
    messages: tuple[Message, ...] = ()
    effects: tuple[Effect, ...] = field(default=())
