"""SFT data at the question: the rows of a pasted or uploaded dataset, each checked by the rules
of flows.wizards.sft.rows with errors that name the line, then what a careful engineer looks at
before spending GPU time (duplicates, rows too long for the model, the validation split, a summary);
and the prompts a teacher model answers for distillation.

Pasted and uploaded data ends up in the script, so it has a limit of its own (MAX_DATASET_CHARS,
under the runner's limit on a script); a bigger dataset stays on the runner host, where the
script checks it when it starts. The text is read a line at a time, never split into a second
copy, and what is kept of each row for the summary is a few numbers.
"""

from __future__ import annotations

import io
import json
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from flows.definition.steps import Answers, InvalidAnswer
from flows.wizards.sft.rows import (
    CHARS_PER_TOKEN,
    LONG_ROW_TOKENS,
    MAX_SEQ_TOKENS,
    estimated_tokens,
    held_out,
    message_problems,
    row_problems,
    tools_problems,
)

MAX_DATASET_CHARS = 1_500_000
"""Pasted or uploaded rows go into the script, and the runner takes scripts of up to 2 MB."""
MAX_PROBLEMS_SHOWN = 8
FEW_ROWS = 10


def counted(count: int, noun: str) -> str:
    """`3 rows`, `1 row`: a count and its noun, in the singular for one."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def row_line(row: Any) -> str:
    """A row as one JSONL line, as the script holds it and as its split is hashed."""
    return json.dumps(row, ensure_ascii=False)


# ---- reading -------------------------------------------------------------------------------


def _records(text: str) -> Iterator[tuple[str, int, str]]:
    """(`line` or `item`, its number, its JSON text) for each record of a JSON array or JSONL,
    blank lines skipped; the JSONL is read a line at a time."""
    if len(text) > MAX_DATASET_CHARS:
        raise InvalidAnswer(
            f"That is {len(text):,} characters; pasted or uploaded data can be at most "
            f"{MAX_DATASET_CHARS:,}, as it goes into the script. Put a bigger dataset on the "
            "runner host and answer with its path: the script checks it there when it starts."
        )
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except ValueError as error:
            raise InvalidAnswer(f"That is not a valid JSON array: {error}.") from None
        if not isinstance(items, list):
            raise InvalidAnswer("Expected a JSON array, or JSONL: one JSON object per line.")
        for number, item in enumerate(items, 1):
            yield "item", number, row_line(item)
        return
    for number, line in enumerate(io.StringIO(text.lstrip("\ufeff")), 1):
        if line.strip():
            yield "line", number, line.strip()


def _load(line: str) -> Any:
    """One record's JSON; ValueError says why not, briefly."""
    try:
        return json.loads(line, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON: {error.msg} (column {error.colno})") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"not valid JSON: {name} is not a JSON number")


def _refuse(noun: str, problems: list[str], bad: int, total: int) -> InvalidAnswer:
    shown = "\n".join(f"• {p}" for p in problems[:MAX_PROBLEMS_SHOWN])
    more = len(problems) - MAX_PROBLEMS_SHOWN
    rest = f"\n(and {more:,} more)" if more > 0 else ""
    return InvalidAnswer(
        f"{bad:,} of the {counted(total, noun)} cannot be used; nothing was saved. Fix them "
        f"and send the whole set again:\n{shown}{rest}"
    )


class Unusable(ValueError):
    """What makes one record unusable: one or more problems, each said on a line of its own."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _checked(
    records: Iterable[tuple[str, int, str]], read: Callable[[Any], Any], noun: str
) -> list[Any]:
    """Each record's JSON as `read` takes it (ValueError, or Unusable, says why not); when any is
    unusable, InvalidAnswer lists them all by line and nothing is kept."""
    taken: list[Any] = []
    problems: list[str] = []
    bad = total = 0
    for where, number, line in records:
        total += 1
        try:
            item = read(_load(line))
        except ValueError as error:
            bad += 1
            found = error.problems if isinstance(error, Unusable) else [str(error)]
            problems += [f"{where} {number}: {p}" for p in found]
            continue
        if not bad:
            taken.append(item)
    if bad:
        raise _refuse(noun, problems, bad, total)
    if not taken:
        raise InvalidAnswer(f"There are no {noun}s in that: one JSON object per line, please.")
    return taken


def _trainable(row: Any) -> dict[str, Any]:
    problems = row_problems(row)
    if problems:
        raise Unusable(problems)
    return row


def dataset_rows(value: str, answers: Answers) -> list[dict[str, Any]]:
    """The training rows of a pasted or uploaded dataset (JSONL, or a JSON array), each one a
    row ART can train on; InvalidAnswer lists the rows that are not, by line."""
    return _checked(_records(value), _trainable, "row")


# ---- prompts for distillation --------------------------------------------------------------


def prompt_rows(value: str, answers: Answers) -> list[dict[str, Any]]:
    """The prompts a teacher answers, each as {"messages": [...]} (and its "tools", if any).

    Accepted: JSONL or a JSON array of strings (a user message each) or of objects with a
    "prompt" string, a "messages" list (not ending with the assistant's reply) or an
    `{"input": {"messages": [...]}}` (evaluation-style rows); or plain text, a prompt a line.
    """
    first = value.lstrip("\ufeff \t\r\n")[:1]
    if first in ("[", "{", '"'):
        records = _records(value)
    else:
        if len(value) > MAX_DATASET_CHARS:
            list(_records(value))  # raises the size refusal
        records = (
            ("line", n, json.dumps(line.strip()))
            for n, line in enumerate(io.StringIO(value.lstrip("\ufeff")), 1)
            if line.strip()
        )
    return _checked(records, _prompt, "prompt")


def _prompt(record: Any) -> dict[str, Any]:
    """One prompt as {"messages": [...], "tools": [...]}; ValueError (or Unusable) says what is
    wrong."""
    if isinstance(record, str):
        record = {"prompt": record}
    if not isinstance(record, dict):
        raise ValueError("a prompt must be a string or a JSON object")
    if isinstance(record.get("prompt"), str):
        if not record["prompt"].strip():
            raise ValueError("the prompt is empty")
        messages: Any = [{"role": "user", "content": record["prompt"]}]
    else:
        source = record.get("input") if "messages" not in record else record
        messages = source.get("messages") if isinstance(source, dict) else None
    if not isinstance(messages, list) or not messages:
        raise ValueError('expected a "prompt" string or a non-empty "messages" list')
    problems = [f"messages[{i}]: {p}" for i, m in enumerate(messages) for p in message_problems(m)]
    if not problems and messages[-1].get("role") == "assistant":
        problems.append("the last message is the assistant's: the teacher writes that one")
    tools = record.get("tools")
    if tools is not None:
        problems += tools_problems(tools)
    if problems:
        raise Unusable(problems)
    return {"messages": messages, **({"tools": tools} if tools else {})}


# ---- what is said about the data -----------------------------------------------------------


@dataclass(frozen=True)
class DatasetSummary:
    """A few numbers per row, and what stands out."""

    rows: int
    messages: tuple[int, ...]
    """Messages per row."""
    tool_rows: int
    """Rows in which the assistant calls a tool."""
    lengths: tuple[int, ...]
    """Characters per row, as a JSON line."""
    duplicates: tuple[tuple[int, int], ...]
    """(row, the earlier row it repeats), numbered from 1."""
    undeclared_tools: tuple[tuple[int, str], ...]
    """(row, a tool it calls that its `tools` do not declare)."""


def summarize(rows: Sequence[dict[str, Any]]) -> DatasetSummary:
    first_seen: dict[str, int] = {}
    duplicates: list[tuple[int, int]] = []
    messages: list[int] = []
    lengths: list[int] = []
    tool_rows = 0
    undeclared: list[tuple[int, str]] = []
    for number, row in enumerate(rows, 1):
        line = row_line(row)
        key = json.dumps(row, sort_keys=True, ensure_ascii=False)
        if key in first_seen:
            duplicates.append((number, first_seen[key]))
        else:
            first_seen[key] = number
        lengths.append(len(line))
        messages.append(len(row.get("messages", ())))
        called = _called_tools(row)
        tool_rows += bool(called)
        declared = {t["function"]["name"] for t in row.get("tools") or ()}
        if declared:
            undeclared += [(number, name) for name in sorted(called - declared)]
    return DatasetSummary(
        len(rows),
        tuple(messages),
        tool_rows,
        tuple(lengths),
        tuple(duplicates),
        tuple(undeclared),
    )


def _called_tools(row: dict[str, Any]) -> set[str]:
    return {
        str(call["function"]["name"])
        for message in row.get("messages", ())
        for call in message.get("tool_calls") or ()
    }


def _percentile(values: Sequence[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def _rows_named(numbers: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:6])
    return shown + (f" and {len(numbers) - 6:,} more" if len(numbers) > 6 else "")


def summary_text(rows: Sequence[dict[str, Any]], noun: str = "row") -> str:
    """The summary shown once the data is taken: counts, turns, tool calls, lengths, and the
    warnings (duplicates, rows that may be too long, too few rows)."""
    s = summarize(rows)
    p50, p90, longest = (_percentile(s.lengths, q) for q in (0.5, 0.9, 1.0))
    tokens = ", ".join(f"{estimated_tokens(n):,}" for n in (p50, p90, longest))
    lines = [
        f"Checked {counted(s.rows, noun)}: every one can be used.",
        f"• {min(s.messages)} to {max(s.messages)} messages a row "
        f"(median {statistics.median(s.messages):g})",
        f"• {counted(s.tool_rows, noun)} ({s.tool_rows / s.rows:.0%}) with tool calls",
        f"• Length: median {p50:,}, 90th percentile {p90:,}, longest {longest:,} characters "
        f"(about {tokens} tokens: an estimate at {CHARS_PER_TOKEN} characters a token, as no "
        "tokenizer is at hand)",
    ]
    warnings = _warnings(s, noun)
    if warnings:
        lines.append("Warnings (nothing refused; fix the data and send it again if you agree):")
        lines += [f"• {w}" for w in warnings]
    return "\n".join(lines)


def _warnings(s: DatasetSummary, noun: str) -> list[str]:
    warnings: list[str] = []
    if s.duplicates:
        first, earlier = s.duplicates[0]
        others = len(s.duplicates) - 1
        more = (
            f" ({others:,} more duplicates: rows {_rows_named([d for d, _ in s.duplicates[1:]])})"
        )
        warnings.append(
            f"Row {first} repeats row {earlier}{more if others else ''}: a repeated row weighs "
            "that much more in training."
        )
    long_rows = [
        n for n, length in enumerate(s.lengths, 1) if estimated_tokens(length) > LONG_ROW_TOKENS
    ]
    if long_rows:
        longest = max(estimated_tokens(s.lengths[n - 1]) for n in long_rows)
        warnings.append(
            f"Row{'s' if len(long_rows) > 1 else ''} {_rows_named(long_rows)}: up to about "
            f"{longest:,} tokens (estimated), near or over the {MAX_SEQ_TOKENS:,} tokens ART's "
            "LocalBackend trains on; ART drops a longer row without training on it."
        )
    if s.undeclared_tools:
        number, name = s.undeclared_tools[0]
        warnings.append(
            f"Row {number} calls `{name[:40]}`, which its `tools` do not declare: the model learns "
            "to call a tool it is never shown."
        )
    if s.rows < FEW_ROWS:
        warnings.append(
            f"Only {counted(s.rows, noun)}: SFT usually needs dozens to hundreds of examples to "
            "change how a model answers."
        )
    return warnings


def split_counts(rows: Sequence[dict[str, Any]], fraction: float) -> tuple[int, int]:
    """(rows to train on, rows held out) for this validation fraction, as the script splits."""
    held = sum(held_out(row_line(row), fraction) for row in rows)
    return len(rows) - held, held
