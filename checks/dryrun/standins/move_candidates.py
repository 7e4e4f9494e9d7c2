"""The moves a game might accept, read from what the agent is shown: the stand-in's candidates.

Pure functions of the conversation. The dry run tries each candidate on a copy of the game
(`checks.dryrun.standins.move_search`) and the stand-in policy plays one the game accepted, so the
candidates may be generous: a wrong one only costs a try. They come from the observation (the
cells of a board in any layout, its words and numbers) and the instructions (examples in quotes,
tags or JSON, moves listed in free text such as "up, down, left or right").
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

# A cell nobody has played: `_`, `.`, `-`, `·` (and `[ ]`-style brackets around nothing).
EMPTY_MARKS = frozenset({"_", ".", "-", "·", "[]", "()", "?"})
# `<move>A1</move>`, and the `<move>` tags a prompt asks answers to be wrapped in.
TAGGED_EXAMPLE = re.compile(r"<([a-z_]{2,20})>([^<>\n]{1,30})</\1>", re.IGNORECASE)
ANSWER_TAG = re.compile(r"<([a-z_]{2,20})>", re.IGNORECASE)
# 'up', "B3", `left`, 'move up': a quoted example, not an apostrophe inside a word.
QUOTED_EXAMPLE = re.compile(r"(?<![\w'])(['\"`])([^'\"`\s](?:[^'\"`\n]{0,28}[^'\"`\s])?)\1(?!\w)")
WORD = re.compile(r"[A-Za-z][A-Za-z'_-]*")
# `A1`, `e4`, `3B`: a cell named in free text ("Free squares: A1 A2 B3"), which WORD would cut.
CELL_NAME = re.compile(r"(?<![\w-])(?:[A-Za-z]{1,2}\d{1,2}|\d{1,2}[A-Za-z])(?![\w-])")
NUMBER = re.compile(r"(?<![\w.])-?\d{1,6}(?![\w.])")
# "from 1 to 9", "between 0 and 100", "1-9": a range an answer may be picked from.
NUMBER_RANGE = re.compile(
    r"(?:from|between)\s+(-?\d{1,6})\s+(?:to|and)\s+(-?\d{1,6})|(?<![\w.])(\d{1,6})\s*-\s*(\d{1,6})(?![\w.])",
    re.IGNORECASE,
)
# Table rules: `---+---`, `===`, `───` (not a lone `-`, which marks an empty cell).
RULE = re.compile(r"[-=─━+]{2,}")
BOX_DRAWING = re.compile(r"[│┃┌┐└┘├┤┬┴┼╔╗╚╝║═╠╣╦╩╬]")
CELL_SPLIT = re.compile(r"[\s|]+")
STOPWORDS = frozenset(
    re.split(
        r"\s+",
        "a an the is are was be to of in on at by for with and or not which what who how why "
        "when where this that these those it its you your i me my we our do does please from "
        "as so like etc if then than into only one each any all can will must should",
    )
)
MAX_BARE = 120  # candidates before tag-wrapped copies: what one position may cost in tries
MAX_JSON_VARIANTS = 48


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message, whether its content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def unique(items: Iterable[str]) -> list[str]:
    """`items` without repeats or blanks, in their first order."""
    return list(dict.fromkeys(item for item in items if item.strip()))


# --- boards -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Board:
    """A grid drawn as text: its column and row labels (None when unlabelled) and marks."""

    columns: tuple[str, ...] | None
    rows: tuple[str, ...] | None
    marks: tuple[tuple[str, ...], ...]

    @property
    def labelled(self) -> bool:
        """Whether its rows or columns carry labels (`A B C`, `1 2 3`)."""
        return self.columns is not None or self.rows is not None

    def cells(self) -> list[tuple[str, bool]]:
        """Every cell's names (the usual one first), each with whether the cell is empty; the
        empty cells come first."""
        named: list[tuple[str, bool]] = []
        for r, row in enumerate(self.marks):
            for c, mark in enumerate(row):
                empty = mark in EMPTY_MARKS
                named += [(name, empty) for name in self.names(r, c)]
        return sorted(named, key=lambda pair: not pair[1])

    def names(self, r: int, c: int) -> list[str]:
        """The ways a move may name the cell at row `r`, column `c` (0-based), usual first."""
        columns, rows = self.columns, self.rows
        if columns is not None and rows is not None:
            column, row = columns[c], rows[r]
            if column.isalpha() != row.isalpha():
                # A1 whichever way round the board is labelled: the letter, then the number.
                letter, number = (column, row) if column.isalpha() else (row, column)
                return [letter + number, number + letter, letter.lower() + number]
            return [row + column, f"{row},{column}", f"{row} {column}", column + row]
        if rows is not None:
            return [f"{rows[r]}{c + 1}", f"{rows[r]},{c + 1}"]
        if columns is not None:
            return [f"{columns[c]}{r + 1}", f"{columns[c]},{r + 1}"]
        return [f"{r},{c}", f"{r} {c}", f"{r + 1},{c + 1}", f"{r + 1} {c + 1}"]


def _labels(tokens: list[str]) -> tuple[str, ...] | None:
    """Tokens that label a board's columns or rows: consecutive letters or numbers."""
    if len(tokens) < 2:
        return None
    if all(len(t) == 1 and t.isalpha() for t in tokens):
        codes = [ord(t.upper()) for t in tokens]
    elif all(t.isdigit() and len(t) <= 2 for t in tokens):
        codes = [int(t) for t in tokens]
    else:
        return None
    if codes != list(range(codes[0], codes[0] + len(codes))):
        return None
    return tuple(tokens)


def _cell_lines(text: str) -> list[list[str]]:
    """Each line's cell tokens (rules and box drawing gone); a rule line is left out."""
    lines: list[list[str]] = []
    for line in text.splitlines():
        tokens = [t for t in CELL_SPLIT.split(BOX_DRAWING.sub(" ", line).strip()) if t]
        if tokens and all(RULE.fullmatch(t) for t in tokens):
            continue
        lines.append([t for t in tokens if not RULE.fullmatch(t)])
    return lines


def boards(text: str) -> list[Board]:
    """The grids drawn in `text`: a header of column labels (`  A B C` or `   1 2 3`) and rows
    that start with their own label (`1 . x .`, `B  x | _ | o`), either alone, or neither
    (rows of equal width)."""
    lines = _cell_lines(text)
    found: list[Board] = []
    i = 0
    while i < len(lines):
        columns = _labels(lines[i])
        width = len(columns) if columns else len(lines[i])
        block: list[list[str]] = []
        j = i + 1 if columns else i
        while j < len(lines) and width >= 2 and len(lines[j]) in (width, width + 1):
            if block and len(lines[j]) != len(block[0]):
                break
            block.append(lines[j])
            j += 1
        row_labels = bool(block) and len(block[0]) == width + 1
        rows = _labels([line[0] for line in block]) if row_labels else None
        if row_labels and rows is None and columns is None:
            block = []  # width+1 tokens whose first is no label: not a grid after all
        if len(block) >= 2 or (columns and block):
            marks = tuple(tuple(line[1:] if row_labels else line) for line in block)
            found.append(Board(columns, rows, marks))
            i = j
        else:
            i += 1
    return found


def free_cells(text: str) -> list[str]:
    """The usual names of the empty cells of the boards drawn in `text` (`B2`)."""
    return [
        board.names(r, c)[0]
        for board in boards(text)
        for r, row in enumerate(board.marks)
        for c, mark in enumerate(row)
        if mark in EMPTY_MARKS
    ]


# --- examples, words, numbers, JSON -----------------------------------------------------------


def example_answers(instructions: str) -> list[str]:
    """Short examples the instructions give of an answer: `<move>A1</move>`, 'up', `B3`."""
    tagged = [m.group(2) for m in TAGGED_EXAMPLE.finditer(instructions)]
    quoted = [m.group(2) for m in QUOTED_EXAMPLE.finditer(instructions)]
    return [e.strip() for e in tagged + quoted if e.strip()]


def answer_tags(instructions: str) -> list[str]:
    """The tags answers are asked to be wrapped in (`move` for `<move>A1</move>`)."""
    return unique(m.group(1) for m in ANSWER_TAG.finditer(instructions))


def words(text: str) -> list[str]:
    """The words of `text` an answer could be, as written and in lower case."""
    found = [w.strip("'-_") for w in WORD.findall(text)]
    kept = [w for w in found if w and w.lower() not in STOPWORDS]
    return unique(itertools.chain.from_iterable((w, w.lower()) for w in kept))


def cell_names(text: str) -> list[str]:
    """The cells `text` names in passing, as written (`A1 A2 B3`, `e4`)."""
    return unique(CELL_NAME.findall(text))


def numbers(text: str) -> list[str]:
    """The numbers of `text`, and those of any range it names ("from 1 to 9")."""
    found = [str(int(n)) for n in NUMBER.findall(text)]
    for match in NUMBER_RANGE.finditer(text):
        low, high = sorted(int(g) for g in match.groups() if g is not None)
        if high - low <= 30:
            found += [str(n) for n in range(low, high + 1)]
        else:
            found += [str(low + (high - low) * k // 4) for k in range(5)]
    return unique(found)


def json_examples(text: str) -> list[Any]:
    """The JSON objects written in `text` (`{"direction": "up"}`)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict) and value:
            found.append(value)
    return found


def json_variants(
    example: dict[str, Any], strings: list[str], integers: list[str]
) -> Iterator[str]:
    """`example` as written, then with its values swapped for other candidates of their type."""
    yield json.dumps(example)
    keys = list(example)
    per_key = max(2, int(MAX_JSON_VARIANTS ** (1 / len(keys))))
    pools: list[list[Any]] = []
    for key in keys:
        value = example[key]
        if isinstance(value, bool):
            pool: list[Any] = [value, not value]
        elif isinstance(value, int):
            pool = [value, *(int(n) for n in integers)]
        elif isinstance(value, str):
            pool = [value, *strings]
        else:
            pool = [value]
        pools.append(list(dict.fromkeys(json.dumps(v) for v in pool))[:per_key])
    for values in itertools.islice(itertools.product(*pools), MAX_JSON_VARIANTS):
        yield (
            "{"
            + ", ".join(f"{json.dumps(k)}: {v}" for k, v in zip(keys, values, strict=True))
            + "}"
        )


def candidate_moves(observation: str, instructions: str) -> list[str]:
    """What the stand-in may answer at this position, likeliest first: the examples the
    instructions give, the board's cells (empty ones first), words and numbers of the
    instructions and the observation, JSON like the instructions' own; then the same wrapped in
    the tags the instructions ask for. Cells the text names (`Free squares: A1 A2`) come right
    after the board's: they are the moves a game lists, and a game may draw no board we read."""
    texts = f"{instructions}\n{observation}"
    drawn = boards(observation)
    # Labelled cells (`B2`) are likely moves; a bare grid's row,column pairs less so than words.
    cells = [name for b in drawn if b.labelled for name, _ in b.cells()]
    pairs = [name for b in drawn if not b.labelled for name, _ in b.cells()]
    named = cell_names(observation) + cell_names(instructions)
    said = words(instructions) + words(observation)
    counted = numbers(observation) + numbers(instructions) + [str(n) for n in range(10)]
    bare = unique([*example_answers(texts), *cells, *named, *said, *pairs, *counted])[:MAX_BARE]
    structured = [
        variant
        for example in json_examples(texts)
        for variant in json_variants(example, unique(cells + said)[:12], counted[:12])
    ]
    bare = unique([*structured[:MAX_JSON_VARIANTS], *bare])
    tags = answer_tags(instructions)
    if not tags:
        return bare
    wrapped = [f"<{tags[0]}>{move}</{tags[0]}>" for move in bare if not move.startswith("<")]
    return unique([*wrapped, *bare])
