"""What the `train-sft` wizard's questions say beyond their text: cautions about the teacher's URL
and the validation split, and how answers and defaults counted at start are shown back."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flows.definition.steps import Answers
from flows.wizards.sft.branches import PROMPTS_HERE, ROWS_HERE, val_fraction
from flows.wizards.sft.dataset import counted, split_counts

FROM_ROW_COUNT = "from the row count when the script starts"


def or_at_start(value: Any) -> str:
    return (
        FROM_ROW_COUNT
        if value is None
        else f"{value:g}"
        if isinstance(value, float)
        else str(value)
    )


def plain_http_caution(answers: Answers) -> str | None:
    parts = urlsplit(str(answers.get("teacher_base_url", "")))
    local = parts.hostname in ("localhost", "127.0.0.1", "::1") or (parts.hostname or "").endswith(
        ".internal"
    )
    if parts.scheme == "http" and not local:
        return (
            "That URL is plain http: the teacher's key and every prompt would cross the network "
            "unencrypted. Use https unless the teacher runs on a network you trust."
        )
    return None


def split_caution(answers: Answers) -> str | None:
    rows = (
        answers.get("dataset")
        if ROWS_HERE(answers)
        else answers.get("prompts")
        if PROMPTS_HERE(answers)
        else None
    )
    if not isinstance(rows, list):
        return (
            "The script splits the rows when it starts, by a hash of each row, so a row and its "
            "duplicates always fall on the same side."
        )
    train, held = split_counts(rows, val_fraction(answers))
    return (
        f"Held out for validation: {held:,} of {len(rows):,} rows, chosen by a hash of each row "
        f"(its duplicates stay with it); {train:,} to train on."
    )


def rows_display(what: str) -> Any:
    def display(rows: Any) -> str:
        if not isinstance(rows, list):
            return str(rows)
        return counted(len(rows), what)

    return display


def code_display(code: Any) -> str:
    lines = str(code).strip().splitlines()
    return f"{len(lines)} line{'s' if len(lines) != 1 else ''} of code"
