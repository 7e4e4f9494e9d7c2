"""What goes into the engine (a Reply) and what comes out (a Turn: messages and effects)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flows.session import Session
from flows.steps import Attachment

# ---- what comes in -----------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One thing the user did: typed text, clicked a button (`step_id` + `value`) or sent a file."""

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
    """Something wrong with the last reply. The session is unchanged but for a failure count."""

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
    """The engine's answer to one reply: the new session, what to say, and what to do."""

    session: Session
    messages: tuple[Message, ...] = ()
    effects: tuple[Effect, ...] = field(default=())
