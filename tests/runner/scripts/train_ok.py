"""Stands in for an ART training run on a CPU: writes what ART writes, in the way ART writes it.

history.jsonl lines (train and val splits) appended as ART's model.log does, a line sometimes
written in two parts (ART's writer is mid-line when the runner reads), checkpoints/NNNN folders,
the generated script's progress line after each (`ARTBOT_PROGRESS {...}`, with the same metrics
as the history line, so that whichever the runner reads first, the event is the same) and its
end-of-training banner. Takes --art-path like a generated script; --no-history prints the progress
lines only (a job whose files the runner cannot see, as on Ray).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--art-path", default=None)
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--delay", type=float, default=0.05)
parser.add_argument("--val-every", type=int, default=2)
parser.add_argument(
    "--wait-for", default=None, help="a file to wait for before the steps after --pause-after"
)
parser.add_argument("--pause-after", type=int, default=0)
parser.add_argument("--linger", type=float, default=0, help="seconds to stay after the banner")
parser.add_argument("--exit-code", type=int, default=0)
parser.add_argument("--no-history", action="store_true")
parser.add_argument(
    "--base-validation",
    action="store_true",
    help="validate the base model at step 0 first (not on resume), and log the rollouts' own "
    "metrics and ART's bookkeeping with each validation, as a generated script does",
)
args, _unknown = parser.parse_known_args()

art = Path(args.art_path or ".art")
model_dir = art / "proj" / "models" / "m1"
model_dir.mkdir(parents=True, exist_ok=True)
(model_dir / "model.json").write_text(json.dumps({"name": "m1", "project": "proj"}))
history = model_dir / "history.jsonl"
start = 0
if history.exists():  # resumed: go on from the last step, as a generated script does
    lines = [json.loads(line) for line in history.read_text().splitlines() if line.strip()]
    start = max((line["step"] for line in lines), default=0)


def log(record: dict) -> None:
    split = "val" if "val/reward" in record else "train"
    metrics = {k: v for k, v in record.items() if k not in ("step", "recorded_at")}
    progress = {"step": record["step"], "split": split, "metrics": metrics}
    if args.no_history:
        print("ARTBOT_PROGRESS " + json.dumps(progress), flush=True)
        return
    text = json.dumps(record) + "\n"
    with history.open("a") as file:
        half = len(text) // 2
        file.write(text[:half])
        file.flush()
        time.sleep(args.delay / 2)  # a reader now sees a partial last line
        file.write(text[half:])
    print("ARTBOT_PROGRESS " + json.dumps(progress), flush=True)


def validation_record(step: int) -> dict:
    """What a validation at `step` logs: val/reward grows, val/turns falls with training."""
    record = {"step": step, "recorded_at": time.time(), "val/reward": step / 20}
    if args.base_validation:
        record.update(
            {
                "val/turns": 3.0 - step / 4,
                "val/exception_rate": 0.0,
                "val/reward_std_dev": 0.1,
            }
        )
    return record


if args.base_validation and start == 0:
    log(validation_record(0))

for step in range(start + 1, start + args.steps + 1):
    if args.wait_for and step > args.pause_after:
        while not Path(args.wait_for).exists():
            time.sleep(0.01)
    print(f"step {step}: training", flush=True)
    log(
        {
            "step": step,
            "recorded_at": time.time(),
            "train/reward": step / 10,
            "train/exception_rate": 0.0,
            "loss/train": 1.0 / step,
            "time/step_wall_s": args.delay,
        }
    )
    (model_dir / "checkpoints" / f"{step:04d}").mkdir(parents=True, exist_ok=True)
    if step % args.val_every == 0:
        log(validation_record(step))
    time.sleep(args.delay)

if args.exit_code:
    sys.exit(args.exit_code)
print("\n" + "=" * 60)
print("RL TRAINING COMPLETE")
print("=" * 60)
print(f"  Model:          m1@{start + args.steps}")
print("  Base model:     OpenPipe/Qwen3-14B-Instruct")
print(f"  Training step:  {start + args.steps}")
print("  Inference URL:  http://127.0.0.1:8000/v1/")
print("=" * 60)
print("cuda visible:", os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
time.sleep(args.linger)
