"""Shorten a run without editing the script: cap the generated scripts' size flags.

After argparse has parsed the script's command line, these attributes are capped when the
script defines them (any other flag, and any script without them, runs as written):

| flag                   | dry-run value                                           |
|------------------------|---------------------------------------------------------|
| --num-steps            | at most `max_steps`                                     |
| --num-epochs           | 1                                                       |
| --groups-per-step      | at most 2                                               |
| --rollouts-per-group   | at most 4                                               |
| --dataset-size         | at most `max_steps` * groups per step + val groups      |
| --val-every            | at most `max_steps`, so that validation runs            |
| --val-max-groups       | at most 2 (None too)                                    |
| --max-turns            | at most 20: a long game still reaches its reward        |
| --epochs               | 1 in a train-sft script (None too: its count from rows) |
| --checkpoints          | at most `max_steps` (an SFT script's train_sft calls)   |
| --prompt-count         | at most `max_steps` * 2 + 2 (a distillation's prompts)  |
| --val-samples          | at most 2                                               |
| --teacher-base-url     | the stand-in policy (a distillation's teacher)          |

`--max-concurrent` stays: it bounds concurrency, not length.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

GROUPS_PER_STEP = 2
ROLLOUTS_PER_GROUP = 4
VAL_MAX_GROUPS = 2
MAX_TURNS = 20
VAL_SAMPLES = 2


Cap = Callable[[Any, argparse.Namespace], Any]


@dataclass(frozen=True)
class ArgCap:
    """One capped attribute: its dest, and its capped value given the parsed namespace."""

    dest: str
    cap: Cap


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _at_most(limit: int) -> Cap:
    return lambda value, _: min(value, limit) if _is_int(value) else value


def _at_most_or_none(limit: int) -> Cap:
    return lambda value, ns: limit if value is None else _at_most(limit)(value, ns)


def _int_or(namespace: argparse.Namespace, dest: str, default: int) -> int:
    value = getattr(namespace, dest, None)
    return value if isinstance(value, int) and value > 0 else default


def _sft_only(cap: Cap) -> Cap:
    """`cap` for a train-sft script (it has --checkpoints); another script's --epochs stays."""
    return lambda value, namespace: (
        cap(value, namespace) if hasattr(namespace, "checkpoints") else value
    )


def dryrun_caps(max_steps: int, teacher_url: str | None = None) -> list[ArgCap]:
    """The caps for a dry run of at most `max_steps` training steps (order matters); a
    distillation's teacher is `teacher_url` (the stand-in policy's), when given."""

    def dataset_size(value: Any, namespace: argparse.Namespace) -> Any:
        # Enough scenarios for `max_steps` steps plus a small validation split, no more.
        per_step = _int_or(namespace, "groups_per_step", GROUPS_PER_STEP)
        validation = _int_or(namespace, "val_max_groups", VAL_MAX_GROUPS)
        return _at_most_or_none(max_steps * per_step + validation)(value, namespace)

    def val_every(value: Any, _: argparse.Namespace) -> Any:
        # 0 or None conventionally means "never validate": leave that alone.
        return min(value, max_steps) if _is_int(value) and value > 0 else value

    return [
        ArgCap("num_steps", _at_most(max_steps)),
        ArgCap("num_epochs", _at_most(1)),
        ArgCap("groups_per_step", _at_most(GROUPS_PER_STEP)),
        ArgCap("rollouts_per_group", _at_most(ROLLOUTS_PER_GROUP)),
        ArgCap("val_max_groups", _at_most_or_none(VAL_MAX_GROUPS)),
        ArgCap("dataset_size", dataset_size),
        ArgCap("val_every", val_every),
        ArgCap("max_turns", _at_most(MAX_TURNS)),
        ArgCap("epochs", _sft_only(_at_most_or_none(1))),
        ArgCap("checkpoints", _at_most(max_steps)),
        ArgCap("prompt_count", _at_most(max_steps * 2 + 2)),
        ArgCap("val_samples", _at_most(VAL_SAMPLES)),
        *([ArgCap("teacher_base_url", lambda _, __: teacher_url)] if teacher_url else []),
    ]


def apply_caps(namespace: argparse.Namespace, caps: Sequence[ArgCap]) -> list[str]:
    """Cap `namespace` in place; returns what changed, e.g. `--num-steps 50 -> 3`."""
    changes: list[str] = []
    for cap in caps:
        if not hasattr(namespace, cap.dest):
            continue
        before = getattr(namespace, cap.dest)
        after = cap.cap(before, namespace)
        if after != before:
            setattr(namespace, cap.dest, after)
            changes.append(f"--{cap.dest.replace('_', '-')} {before} -> {after}")
    return changes


def install_arg_caps(caps: Sequence[ArgCap], on_change: Callable[[str], None]) -> None:
    """Wrap `ArgumentParser.parse_known_args` (which `parse_args` calls) to apply `caps`."""
    original = argparse.ArgumentParser.parse_known_args

    def parse_known_args(
        self: argparse.ArgumentParser, *args: Any, **kwargs: Any
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = original(self, *args, **kwargs)
        for change in apply_caps(namespace, caps):
            on_change(change)
        return namespace, extras

    argparse.ArgumentParser.parse_known_args = parse_known_args  # type: ignore[method-assign]
