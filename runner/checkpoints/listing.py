"""A LocalBackend job's checkpoints as ART left them in its folder, with the rewards logged at
each step, and which one is the model.

ART keeps a model's checkpoints at `<art_path>/<project>/models/<name>/checkpoints/<step:04d>/`
(a PEFT LoRA folder) beside `history.jsonl` (one JSON object per `model.log` call: `step`,
`train/reward`, `val/reward`...) and `model.json` (its name and base model). The job's model is
the first model folder with a checkpoint (runner.progress.art_records.find_model_folders' order).

The best checkpoint has the highest val/reward (the later one on a tie), or is the last one when
no checkpoint has a val/reward. The model is the one its owner chose while that checkpoint is
there, else the best. Every file is read as runner.checkpoints.job_files reads a job's files.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.checkpoints.job_files import JobPath, folder_size, is_plain_folder, read_file
from runner.errors import CheckpointRefused
from runner.progress.art_records import HISTORY_FILE, checkpoint_steps, find_model_folders
from runner.records.rows import JobRow
from runner.schemas import CheckpointInfo, Checkpoints

MODEL_FILE = "model.json"
MAX_MODEL_FILE_BYTES = 64 * 1024
MAX_HISTORY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ModelFolder:
    """A model's folder under the job's: its name, base model and checkpoint steps."""

    folder: JobPath
    name: str
    base_model: str | None
    steps: list[int]

    def checkpoint(self, step: int) -> JobPath:
        return self.folder.child("checkpoints", f"{step:04d}")


@dataclass(frozen=True)
class Checkpoint:
    """What a serving job serves: the LoRA folder, its served name and its base model."""

    lora_path: Path
    model: str
    step: int
    base_model: str


@dataclass
class Rewards:
    """The rewards history.jsonl logged, by step (a later line for a step wins)."""

    val: dict[int, float] = field(default_factory=dict)
    train: dict[int, float] = field(default_factory=dict)


def model_folder(run_dir: Path) -> ModelFolder | None:
    """The job's model: the first model folder under `run_dir` with a checkpoint."""
    for path in find_model_folders(run_dir):
        folder = JobPath(run_dir, path.relative_to(run_dir).parts)
        # A step is a plain folder reached through plain folders: not a symlink the job made.
        steps = [
            step
            for step in checkpoint_steps(path)
            if is_plain_folder(folder.child("checkpoints", f"{step:04d}"))
        ]
        if not steps:
            continue
        described = _json_object(read_file(folder, MODEL_FILE, MAX_MODEL_FILE_BYTES))
        name = described.get("name")
        base_model = described.get("base_model")
        return ModelFolder(
            folder,
            name if isinstance(name, str) and name else path.name,
            base_model if isinstance(base_model, str) and base_model else None,
            steps,
        )
    return None


def rewards(folder: ModelFolder) -> Rewards:
    """`val/reward` and `train/reward` by step, from the model's history.jsonl."""
    found = Rewards()
    text = read_file(folder.folder, HISTORY_FILE, MAX_HISTORY_BYTES) or b""
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a partial last line, or not ART's
        step = record.get("step") if isinstance(record, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            continue
        for key, kept in (("val/reward", found.val), ("train/reward", found.train)):
            value = _number(record.get(key))
            if value is not None:
                kept[step] = value
    return found


def best_step(checkpoints: list[CheckpointInfo]) -> int | None:
    """The highest val/reward (the later step on a tie); the last step when none has one."""
    scored = [c for c in checkpoints if c.val_reward is not None]
    if scored:
        return max(scored, key=lambda c: (c.val_reward, c.step)).step
    return checkpoints[-1].step if checkpoints else None


def list_checkpoints(job: JobRow) -> Checkpoints:
    """The job's checkpoints, ascending, with the best, the chosen and the model's step."""
    found = model_folder(Path(job.run_dir))
    if found is None:
        return Checkpoints(job_id=job.id, chosen_step=job.chosen_step)
    logged = rewards(found)
    infos = [
        CheckpointInfo(
            step=step,
            val_reward=logged.val.get(step),
            train_reward=logged.train.get(step),
            size_bytes=folder_size(found.checkpoint(step)),
        )
        for step in found.steps
    ]
    best = best_step(infos)
    chosen = job.chosen_step
    return Checkpoints(
        job_id=job.id,
        model=found.name,
        base_model=found.base_model,
        checkpoints=infos,
        best_step=best,
        chosen_step=chosen,
        model_step=chosen if chosen in found.steps else best,
    )


def model_checkpoint(job: JobRow, step: int | None = None) -> Checkpoint:
    """Checkpoint `step` of the job's model (its model's step when None), to serve.
    CheckpointRefused when there is none, or model.json does not name the base model."""
    found = model_folder(Path(job.run_dir))
    if found is None:
        raise CheckpointRefused(f"job {job.id} left no checkpoint")
    if step is None:
        logged = rewards(found)
        best = best_step(
            [CheckpointInfo(step=s, val_reward=logged.val.get(s)) for s in found.steps]
        )
        step = job.chosen_step if job.chosen_step in found.steps else best
    if step is None or step not in found.steps:
        raise CheckpointRefused(f"job {job.id} has no checkpoint of step {step}")
    if found.base_model is None:
        raise CheckpointRefused(
            f"job {job.id}: {found.folder.parts[-1]}'s model.json does not name its base model"
        )
    return Checkpoint(found.checkpoint(step).path, f"{found.name}@{step}", step, found.base_model)


def _json_object(data: bytes | None) -> dict[str, Any]:
    try:
        value = json.loads(data or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
