"""A tiny driver for conversations with the engine: what the user says, what the bot asks next."""

from __future__ import annotations

from dataclasses import dataclass, field

from flows import (
    Completed,
    EditMenu,
    Flow,
    Notice,
    Problem,
    Question,
    Reply,
    Turn,
    advance,
    begin,
)
from flows.definition.session import Session
from flows.wizards.rl.train_rl import TRAIN_RL


@dataclass
class Conversation:
    session: Session = field(default_factory=lambda: Session.start(TRAIN_RL.id))
    turns: list[Turn] = field(default_factory=list)
    flow: Flow = TRAIN_RL

    def __post_init__(self) -> None:
        if self.session.flow != self.flow.id and not self.session.answers:
            self.session = Session.start(self.flow.id)  # the default session is train-rl's
        self.turns.append(begin(self.flow, self.session))
        self.session = self.turns[-1].session

    def say(self, text: str) -> Turn:
        return self._apply(Reply(text=text))

    def send(self, reply: Reply) -> Turn:
        return self._apply(reply)

    def click(self, value: str) -> Turn:
        asked = self.asked()
        assert asked is not None, "no open question to click on"
        return self._apply(Reply.button(asked.step_id, value))

    def _apply(self, reply: Reply) -> Turn:
        turn = advance(self.flow, self.session, reply)
        self.turns.append(turn)
        self.session = turn.session
        return turn

    @property
    def last(self) -> Turn:
        return self.turns[-1]

    def asked(self) -> Question | None:
        questions = [m for m in self.last.messages if isinstance(m, Question)]
        return questions[-1] if questions else None

    def asking(self) -> str | None:
        asked = self.asked()
        return asked.step_id if asked else None

    def edit_menu(self) -> EditMenu | None:
        menus = [m for m in self.last.messages if isinstance(m, EditMenu)]
        return menus[-1] if menus else None

    def problem(self) -> str | None:
        problems = [m.text for m in self.last.messages if isinstance(m, Problem)]
        return problems[0] if problems else None

    def notices(self) -> list[str]:
        return [m.text for m in self.last.messages if isinstance(m, Notice)]

    def completed(self) -> Completed | None:
        done = [e for e in self.last.effects if isinstance(e, Completed)]
        return done[0] if done else None

    def play(self, script: list[tuple[str, str | None]]) -> None:
        """Each row: a reply, then the step the bot must ask next (None: it must finish)."""
        for reply, expected in script:
            self.say(reply)
            assert self.problem() is None, f"{reply!r} was refused: {self.problem()}"
            assert self.asking() == expected, f"after {reply!r} the bot asks {self.asking()!r}"
