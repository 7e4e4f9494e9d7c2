"""The terminal's side of a chat: read replies from lines of input, print what the engine says."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TextIO

from flows import (
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


class EndOfInput(Exception):
    """Stdin ended (or the user said /quit) before the wizard finished."""


@dataclass(frozen=True)
class Terminal:
    """Reads replies from lines of input and prints what the engine says."""

    read_line: Callable[[str], str | None]
    """Shows the prompt and returns the next line, or None at the end of input."""
    write: Callable[[str], None]
    _: KW_ONLY
    interactive: bool
    """A person is typing: show prompts."""
    color: bool

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
        )

    # -- reading --

    def read_reply(self) -> Reply:
        """The next reply: a line, a ``` block or a /file. EndOfInput when there is none."""
        while True:
            line = self._line("> ")
            stripped = line.strip()
            if not stripped:  # Enter alone: the open question's default, where it has one
                return Reply(text="", empty_means_default=True)
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
            return Reply(text=stripped)

    def _line(self, prompt: str) -> str:
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
                self.problem(message.text)
            elif isinstance(message, Notice):
                self.write(message.text)

    def _question(self, question: Question) -> None:
        first, _, rest = question.text.partition("\n")
        place = f"[{question.progress}] " if question.progress is not None else ""
        self.write("")
        self.write(self._style(place + first, "1"))
        if rest:
            self.write(rest)
        for option in question.options:
            marker = "*" if option.recommended else " "
            about = f" - {option.description}" if option.description else ""
            self.write(f" {marker}{option.number:>2}. {option.label}{about}")
        if question.options:
            self.write(self._style("  Reply with a number or an option's name.", "2"))
        if question.hint:
            self.write(self._style(f"  Hint: {question.hint}", "36"))

    def _edit_menu(self, menu: EditMenu) -> None:
        self.write(menu.text)
        for option in menu.options:
            self.write(f"  {option.number:>2}. {option.label}: {option.description}")
        if menu.hint:
            self.write(self._style(f"  {menu.hint}", "36"))

    def _style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text


def _input_line(prompt: str) -> str | None:
    try:
        return input(prompt)
    except EOFError:
        return None


def _stream_line(stream: TextIO) -> Callable[[str], str | None]:
    def read(_prompt: str) -> str | None:
        line = stream.readline()
        return line if line else None

    return read


def _print(text: str) -> None:
    print(text, flush=True)
