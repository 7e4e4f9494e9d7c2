"""The fenced blocks of the README and the documentation pages, read as the docs tests run them.

A block's language says what it is: `console` (a shell session: `$ ` commands, `> ` typed input,
their output), `bash` (a script), `python` (a script), or anything else (shown, never run). A
`title="NAME"` makes a block a file of the page. An HTML comment on the last non-blank line
before a block, `<!-- docs-test: ... -->`, says how to run it (`exit N`, `server PATH`, `runner`)
or why it is not run (`skip: REASON`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = ("console", "bash", "python")
REFUSED = ("sh", "shell", "zsh", "shell-session", "sh-session", "pycon", "powershell")
"""Languages that would run but say less than ours: a session is `console`, a script `bash`."""

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
MARKER = re.compile(r"^\s*<!-- docs-test: (?P<how>.*?) -->\s*$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
LOOKS_RUNNABLE = re.compile(
    r"^\s*(\$ |uv (run|sync|pip)\b|artbot \w|python3? |curl |export [A-Z_]+=|docker |pip install )"
)


@dataclass(frozen=True)
class Command:
    """One `$ ` command of a console block, what is typed to it and the output shown."""

    text: str
    typed: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    text: str
    title: str | None = None
    marker: str | None = None
    """What the `<!-- docs-test: ... -->` before it says, or None."""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.language in RUNNABLE and self.title is None

    @property
    def skip_reason(self) -> str | None:
        if self.marker is None or not self.marker.startswith("skip"):
            return None
        return self.marker.removeprefix("skip").lstrip(":").strip()

    def commands(self) -> list[Command]:
        """A console block's commands, with their typed input and shown output."""
        commands: list[_Building] = []
        continued = False
        for line in self.text.splitlines():
            if continued:
                commands[-1].text += "\n" + line
                continued = line.endswith("\\")
            elif line.startswith("$ "):
                commands.append(_Building(line[2:]))
                continued = line.endswith("\\")
            elif commands and (line.startswith("> ") or line == ">"):
                commands[-1].typed.append(line[2:])
            elif commands and line.strip():
                commands[-1].shown.append(line.rstrip())
        return [Command(c.text, tuple(c.typed), tuple(c.shown)) for c in commands]


@dataclass
class _Building:
    text: str
    typed: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)


def documentation_files() -> list[Path]:
    """The README, the runner's README and every page of the site."""
    pages = sorted((ROOT / "docs").rglob("*.md"))
    return [
        path for path in (ROOT / "README.md", ROOT / "runner" / "README.md") if path.is_file()
    ] + pages


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].strip()
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            stripped = lines[end].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(lines[end][len(indent) :] if lines[end].startswith(indent) else lines[end])
            end += 1
        before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = MARKER.match(before)
        title = TITLE.search(info)
        found.append(
            Block(
                path=path,
                line=index + 1,
                language=info.split()[0] if info else "",
                text="\n".join(body) + "\n",
                title=title["title"] if title else None,
                marker=marker["how"].strip() if marker else None,
            )
        )
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in documentation_files() for block in blocks_of(path)]


def shown_in_order(shown: tuple[str, ...], printed: str) -> str | None:
    """None when every shown line appears in `printed`, in order (a line `...` skips any lines,
    `...` inside a line stands for any text); else the first line that does not."""
    lines = [line.rstrip() for line in printed.splitlines()]
    at = 0
    for expected in shown:
        if expected.strip() == "...":
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in expected.split("...")) + r"\Z")
        while at < len(lines) and not pattern.match(lines[at]):
            at += 1
        if at == len(lines):
            return expected
        at += 1
    return None
