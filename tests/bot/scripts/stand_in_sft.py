"""Runs in place of a GPU fine-tuning (SFT) run: the runner starts it with the approved script.

It checks that the script is a generated train-sft script, reads its answers (BASE_MODEL,
PROJECT, RUN_NAME, CHECKPOINTS) from the script's own constants, then writes what ART 0.5.18's
`model.train_sft` writes and prints what the generated script prints, in the same order:
- with held-out rows (VAL_FRACTION in the script), the base model's reference similarity at
  step 0, logged as `model.log(metrics={"reference_similarity": ...}, split="val")` writes it;
- per part: the checkpoint folder, then the history.jsonl record of the part's averaged batch
  metrics (`loss/train`, `loss/learning_rate`, `loss/grad_norm`, `time/step_trainer_s`,
  `training_step`, `time/wall_clock_sec`: no `train/` key), then the script's progress line
  (`ARTBOT_PROGRESS`, with `train/batches_done` and `train/batches_total`) and its "Part i of n"
  line;
- the held-out similarity after training, and the end banner `SFT TRAINING COMPLETE`.
"""

import argparse
import ast
import datetime
import json
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("script")
parser.add_argument("--art-path", default=".art")
args, _ = parser.parse_known_args()

source = Path(args.script).read_text()
tree = ast.parse(source, args.script)
assert "model.train_sft(" in source or "train_sft_from_file(" in source, "not an SFT script"
assert "art.TrainableModel(" in source and "await backend.close()" in source
constants = {
    node.targets[0].id: ast.literal_eval(node.value)
    for node in tree.body
    if isinstance(node, ast.Assign)
    and len(node.targets) == 1
    and isinstance(node.targets[0], ast.Name)
    and node.targets[0].id.isupper()
    and isinstance(node.value, ast.Constant)
}
project, name, base_model = constants["PROJECT"], constants["RUN_NAME"], constants["BASE_MODEL"]
parts = int(constants["CHECKPOINTS"])
held_out = "VAL_FRACTION" in constants
batches_per_part = 4

model_dir = Path(args.art_path) / project / "models" / name
model_dir.mkdir(parents=True, exist_ok=True)
(model_dir / "model.json").write_text(
    json.dumps({"name": name, "project": project, "base_model": base_model})
)
history = model_dir / "history.jsonl"
started = time.time()


def log(metrics: dict, split: str, step: int) -> None:
    """What ART's Model._log_metrics appends to history.jsonl."""
    record = {
        **{key if "/" in key else f"{split}/{key}": value for key, value in metrics.items()},
        "training_step": step,
        "time/wall_clock_sec": time.time() - started,
        "step": step,
        "recorded_at": datetime.datetime.now().isoformat(),
    }
    with history.open("a") as file:
        file.write(json.dumps(record) + "\n")


def progress(step: int, split: str, count: int, metrics: dict) -> None:
    record = {"step": step, "split": split, "count": count, "metrics": metrics}
    print("ARTBOT_PROGRESS " + json.dumps(record), flush=True)


def similarity(step: int) -> None:
    score = 0.3 + 0.1 * step
    log({"reference_similarity": score}, "val", step)
    progress(step, "val", 2, {"val/reference_similarity": score})


if held_out:
    similarity(0)
total = parts * batches_per_part
for part in range(1, parts + 1):
    loss = 2.0 / part
    metrics = {"loss/train": loss, "loss/learning_rate": 2e-4, "loss/grad_norm": 0.5}
    checkpoint = model_dir / "checkpoints" / f"{part:04d}"
    checkpoint.mkdir(parents=True, exist_ok=True)
    adapter = {"base_model_name_or_path": base_model, "peft_type": "LORA", "r": 8}
    (checkpoint / "adapter_config.json").write_text(json.dumps(adapter))
    log({**metrics, "time/step_trainer_s": 0.01}, "train", part)
    done = part * batches_per_part
    progress(
        part,
        "train",
        batches_per_part * 2,
        {**metrics, "train/batches_done": done, "train/batches_total": total},
    )
    print(f"Part {part} of {parts}: {done} of {total} batches, checkpoint {part}, loss {loss:.4f}.")
    time.sleep(0.02)
if held_out:
    similarity(parts)

print("\n" + "=" * 60)
print("SFT TRAINING COMPLETE")
print("=" * 60)
print(f"  Model:          {name}@{parts}")
print(f"  Base model:     {base_model}")
print(f"  Training step:  {parts}")
print("  Inference URL:  http://127.0.0.1:8000/v1")
print("=" * 60, flush=True)
