"""A model's folder as LocalBackend lays it out: `checkpoints/NNNN/` and `history.jsonl`.

The stand-in trainer keeps the same layout, so that a script reading it (to resume, to pick
the best step) finds what it would find after a real run; the report reads what `model.log`
wrote there.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

CHECKPOINT_FILE = "dryrun_checkpoint.json"
HISTORY_FILE = "history.jsonl"


def checkpoint_steps(model_dir: str) -> list[int]:
    """The steps of the `checkpoints/NNNN` folders under `model_dir`, in order."""
    checkpoint_dir = os.path.join(model_dir, "checkpoints")
    if not os.path.isdir(checkpoint_dir):
        return []
    return sorted(
        int(name)
        for name in os.listdir(checkpoint_dir)
        if name.isdigit() and os.path.isdir(os.path.join(checkpoint_dir, name))
    )


def newest_step(model_dir: str) -> int:
    """The highest `checkpoints/NNNN` step under `model_dir`, 0 when there is none."""
    return max(checkpoint_steps(model_dir), default=0)


def write_checkpoint(model_dir: str, step: int) -> str:
    """Make `checkpoints/NNNN` for `step`, holding a note that no weights were trained."""
    checkpoint = os.path.join(model_dir, "checkpoints", f"{step:04d}")
    os.makedirs(checkpoint, exist_ok=True)
    with open(os.path.join(checkpoint, CHECKPOINT_FILE), "w") as f:
        json.dump({"step": step, "stand_in": "artbot dryrun: no weights were trained"}, f)
    return checkpoint


def delete_checkpoint_dirs(model_dir: str, steps_to_keep: list[int]) -> None:
    """Delete `checkpoints/NNNN` dirs not in `steps_to_keep`, as art/local/checkpoints.py does."""
    checkpoint_base_dir = os.path.join(model_dir, "checkpoints")
    if not os.path.exists(checkpoint_base_dir):
        return
    for name in os.listdir(checkpoint_base_dir):
        path = os.path.join(checkpoint_base_dir, name)
        if os.path.isdir(path) and name.isdigit() and int(name) not in steps_to_keep:
            shutil.rmtree(path)
            print(f"Deleted checkpoint {path}")


def has_validation(model_dir: str) -> bool:
    """Whether `model.log` wrote any `val/` metric to the model's `history.jsonl`."""
    history = Path(model_dir, HISTORY_FILE)
    return history.is_file() and '"val/' in history.read_text()


@dataclass(frozen=True)
class HistorySummary:
    """What `model.log` wrote to the models' `history.jsonl` files."""

    train_rows: int = 0
    validations: int = 0
    last_val_reward: float | None = None


def read_history(model_dirs: Iterable[str]) -> HistorySummary:
    """Count train and validation rows (those with a `val/` metric) across `model_dirs`."""
    train_rows = validations = 0
    last_val_reward: float | None = None
    for model_dir in model_dirs:
        path = Path(model_dir, HISTORY_FILE)
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict):
                continue
            # An SFT row has its loss (`loss/train`) and no `train/` metric.
            if any(str(key).startswith("train/") for key in row) or "loss/train" in row:
                train_rows += 1
            if any(str(key).startswith("val/") for key in row):
                validations += 1
            if isinstance(row.get("val/reward"), int | float):
                last_val_reward = float(row["val/reward"])
    return HistorySummary(train_rows, validations, last_val_reward)


STANDIN_SFT_STEP = 3
"""The step of the stand-in SFT checkpoint a continued RL run's dry run forks (any would do)."""


def plant_sft_model(art_path: Path, start: Mapping[str, str]) -> str:
    """Leave a stand-in of the SFT model an RL run starts from (flows.wizards.start_from: its model,
    project and base model) in the dry run's art path, as ART lays a model out (model.json, one
    checkpoint, no weights), so the stand-in fork finds it; the note the report keeps."""
    model_dir = art_path / start["project"] / "models" / start["model"]
    write_checkpoint(str(model_dir), STANDIN_SFT_STEP)
    (model_dir / "model.json").write_text(
        json.dumps(
            {"name": start["model"], "project": start["project"], "base_model": start["base_model"]}
        ),
        encoding="utf-8",
    )
    return (
        f"forked a stand-in of the SFT model `{start['model']}` (checkpoint {STANDIN_SFT_STEP}, "
        "no weights) left in the dry run's own folder: the dry run shows the fork and the RL "
        "steps after it, not that the script finds your SFT model (that takes the SFT run's "
        + ("art path)" if start.get("backend") == "local" else "W&B account)")
    )
