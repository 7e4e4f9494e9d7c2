"""The terminal's side of a chat: read replies from lines of input, print what the engine says."""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TextIO

from artbot.terminal.answer_lines import continues, may_continue, unfinished
from artbot.terminal.markup import terminal_text
from flows import (
    EDIT_MENU,
    MAX_ATTACHMENT_BYTES,
    Answered,
    Attachment,
    EditMenu,
    Effect,
    Message,
    Notice,
    Problem,
    Question,
    Reply,
)

FENCE = "```"
PASTE_GAP_S = 0.05
"""Lines that follow the last one within this gap were pasted with it: no one types that fast,
and a terminal hands over a long paste in chunks a few milliseconds apart."""
SEND_WITH_EMPTY_LINE = "(An empty line sends it.)"


class EndOfInput(Exception):
    """Stdin ended (or the user said /quit) before the wizard finished."""


@dataclass
class _Screen:
    """What the terminal last showed, which decides how the next lines are read."""

    kind: str | None = None
    """The open question's kind (choice, text, json, code...): data and code may span lines."""
    menu: EditMenu | None = None
    """An Edit menu just shown: the next reply may pick from it by number or name."""
    ahead: list[str] = field(default_factory=list)
    """Lines read to see where an answer ends, and not part of it: the next replies' lines."""


@dataclass(frozen=True)
class Terminal:
    """Reads replies from lines of input and prints what the engine says."""

    read_line: Callable[[str], str | None]
    """Shows the prompt and returns the next line, or None at the end of input."""
    write: Callable[[str], None]
    _: KW_ONLY
    interactive: bool
    """A person is typing: show prompts; lines waiting behind the last one are a paste."""
    color: bool
    waiting: Callable[[], bool] = lambda: False
    """Whether another line came with the last one (a paste), so reading it waits on no one."""
    _screen: _Screen = field(default_factory=_Screen)

    @classmethod
    def standard(cls) -> Terminal:
        """stdin and stdout; prompts, line editing and colour only when a person is typing."""
        interactive = sys.stdin.isatty()
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
        return cls(
            _input_line if interactive else _stream_line(sys.stdin),
            _print,
            interactive=interactive,
            color=color,
            waiting=_pasted_after(sys.stdin.fileno()) if interactive else lambda: False,
        )

    # -- reading --

    def read_reply(self) -> Reply:
        """The next reply: a line (or lines that make one answer), a ``` block, a /file, or a
        pick from the Edit menu just shown. EndOfInput when there is none."""
        menu, self._screen.menu = self._screen.menu, None
        while True:
            line = self._line("> ")
            stripped = line.strip()
            if menu is not None:
                picked = _picked(menu, stripped)
                if picked is not None:
                    return Reply.button(EDIT_MENU, picked)
                if stripped.isdigit():
                    self.problem(f"The menu goes from 1 to {len(menu.options)}: pick one of those.")
                    continue
                if not stripped:
                    self.write("Nothing picked, so nothing changes.")
                    menu = None
                    continue
            if not stripped:  # Enter alone: the open question's default, where it has one
                return Reply(text="", empty_means_default=True)
            if "\n" in stripped:  # line editing kept a paste whole
                return Reply(text=stripped)
            if stripped.lower() in ("/quit", "/exit"):
                raise EndOfInput("quit")
            if stripped.startswith(FENCE):
                return Reply(text=self._block(stripped))
            command, _, argument = stripped.partition(" ")
            if command == "/file":
                attachment = self._attachment(argument.strip())
                if attachment is not None:
                    return Reply(attachments=(attachment,))
                continue
            return Reply(text=self._answer(line))

    def _answer(self, first: str) -> str:
        """`first` and the lines that make one answer with it (answer_lines says which)."""
        lines = [first.rstrip()]
        if self.interactive:
            self._typed_answer(lines)
        else:
            self._piped_answer(lines)
        if len(lines) == 1:
            return lines[0].strip()
        return "\n".join(lines).strip("\n")

    def _typed_answer(self, lines: list[str]) -> None:
        """Lines pasted with the first are the answer's; so are lines typed after a first line
        that cannot be the whole answer (`[`, `def f():`). Then an empty line sends it."""
        noted = False
        while True:
            if self.waiting():
                lines.append(self._line("").rstrip())
                continue
            if len(lines) == 1 and not unfinished(self._screen.kind, lines):
                return
            if not noted:
                self.write(self._style(SEND_WITH_EMPTY_LINE, "2"))
                noted = True
            try:
                more = self._line("... ")
            except EndOfInput:
                return  # send what there is: the session keeps nothing unsaved
            if not more.strip():
                return
            lines.append(more.rstrip())

    def _piped_answer(self, lines: list[str]) -> None:
        """At a data or code question (or the tools' URLs), the lines that continue the first as
        answer_lines says."""
        kind = self._screen.kind
        while True:
            if unfinished(kind, lines):
                more = self._next_line()
                if more is None:
                    return  # the wizard says what is missing
                lines.append(more.rstrip())
                continue
            following = self._following() if may_continue(kind, lines) else []
            taken = continues(kind, lines, following)
            if not taken:
                return
            lines += [line.rstrip() for line in following[:taken]]
            del self._screen.ahead[:taken]

    def _following(self) -> list[str]:
        """The next lines of input up to the first that is not blank (or the end), left to be
        read again."""
        ahead = self._screen.ahead
        while not ahead or not ahead[-1].strip():
            line = self.read_line("")
            if line is None:
                break
            ahead.append(line.rstrip("\r\n"))
        return list(ahead)

    def _next_line(self) -> str | None:
        if self._screen.ahead:
            return self._screen.ahead.pop(0)
        line = self.read_line("")
        return None if line is None else line.rstrip("\r\n")

    def _line(self, prompt: str) -> str:
        if self._screen.ahead:
            return self._screen.ahead.pop(0)
        line = self.read_line(prompt if self.interactive else "")
        if line is None:
            raise EndOfInput("eof")
        return line.rstrip("\r\n")

    def _block(self, first: str) -> str:
        if len(first) >= 2 * len(FENCE) and first.endswith(FENCE):
            return first  # ```one line```
        lines = [first]
        while True:
            try:
                line = self._line("... ")
            except EndOfInput:
                self.problem("The ``` block was not closed, so it was not sent.")
                raise
            lines.append(line)
            if line.rstrip().endswith(FENCE):
                # The engine strips the fences (and a language tag) from code answers.
                return "\n".join(lines)

    def _attachment(self, argument: str) -> Attachment | None:
        if not argument:
            self.problem("Say which file: `/file PATH`.")
            return None
        path = Path(argument.strip("\"'")).expanduser()
        try:
            size = path.stat().st_size
            if not path.is_file():
                self.problem(f"{path} is not a file.")
                return None
            if size > MAX_ATTACHMENT_BYTES:
                self.problem(
                    f"{path} is {size:,} bytes; files can be at most {MAX_ATTACHMENT_BYTES:,}. "
                    "Put a bigger dataset on the runner host and give its path instead."
                )
                return None
            content = path.read_bytes()
        except OSError as error:
            self.problem(f"Cannot read {path}: {error.strerror or error}.")
            return None
        return Attachment(path.name, content)

    # -- writing --

    def say(self, text: str) -> None:
        """Print `text` as it is."""
        self.write(text)

    def tell(self, text: str) -> None:
        """Print `text`, written in Slack's markup as the wizard's messages are, for a terminal."""
        self.write(self._plain(text))

    def problem(self, text: str) -> None:
        """Print `text` as a problem (in red when colour is on)."""
        self.write(self._style("Problem: ", "31;1") + text)

    def show(self, messages: Sequence[Message], effects: Sequence[Effect] = ()) -> None:
        """Print a turn: what got answered, notices, problems, then the question and choices."""
        for effect in effects:
            if isinstance(effect, Answered):
                self.write(self._style(f"  = {effect.shown or '(nothing)'}", "2"))
        for message in messages:
            if isinstance(message, Question):
                self._question(message)
            elif isinstance(message, EditMenu):
                self._edit_menu(message)
            elif isinstance(message, Problem):
                self.problem(self._plain(message.text))
            elif isinstance(message, Notice):
                self.tell(message.text)

    def _question(self, question: Question) -> None:
        self._screen.kind = question.kind
        first, _, rest = question.text.partition("\n")
        place = f"[{question.progress}] " if question.progress is not None else ""
        self.write("")
        self.write(self._style(place + terminal_text(first), "1"))
        if rest:
            self.tell(rest)
        for option in question.options:
            marker = "*" if option.recommended else " "
            about = f" - {option.description}" if option.description else ""
            self.write(self._plain(f" {marker}{option.number:>2}. {option.label}{about}"))
        if question.options:
            self.write(self._style("  Reply with a number or an option's name.", "2"))
        if question.hint:
            self.write(self._style(f"  Hint: {terminal_text(question.hint)}", "36"))

    def _edit_menu(self, menu: EditMenu) -> None:
        self.tell(menu.text)
        for option in menu.options:
            self.write(self._plain(f"  {option.number:>2}. {option.label}: {option.description}"))
        if menu.options:
            self._screen.menu = menu
            self.write(
                self._style("  Reply with its number or name; an empty line changes nothing.", "36")
            )

    def _plain(self, text: str) -> str:
        return terminal_text(text, lambda words: self._style(words, "1"))

    def _style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text


def _input_line(prompt: str) -> str | None:
    try:
        return input(prompt)
    except EOFError:
        return None


def _picked(menu: EditMenu, reply: str) -> str | None:
    """The step an Edit menu's option names by its number or its label, if `reply` is one."""
    for option in menu.options:
        if reply == str(option.number) or reply.casefold() == option.label.casefold():
            return option.value
    return None


def _pasted_after(fd: int) -> Callable[[], bool]:
    """Whether the terminal `fd` has another line ready within PASTE_GAP_S: pasted, not typed."""

    def waiting() -> bool:
        ready, _, _ = select.select([fd], [], [], PASTE_GAP_S)
        return bool(ready)

    return waiting


def _stream_line(stream: TextIO) -> Callable[[str], str | None]:
    def read(_prompt: str) -> str | None:
        line = stream.readline()
        return line if line else None

    return read


def _print(text: str) -> None:
    print(text, flush=True)
