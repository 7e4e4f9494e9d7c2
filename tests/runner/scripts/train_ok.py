"""Stands in for an ART training run on a CPU: writes what ART writes, in the way ART writes it.

history.jsonl lines (train and val splits) appended as ART's model.log does, a line sometimes
written in two parts (ART's writer is mid-line when the runner reads), checkpoints/NNNN folders,
each validation's trajectories in `trajectories/val/NNNN.parquet` with the schema and encoding
of ART 0.5.18's `write_trajectory_groups_parquet` (rewards VAL_OFFSETS around step / 20, so the
best and the worst are known; --rollout-text goes into the best one's last answer), the
generated script's progress line after each (`ARTBOT_PROGRESS {...}`, with the same metrics
as the history line, so that whichever the runner reads first, the event is the same) and its
end-of-training banner. Takes --art-path like a generated script; --no-history prints the progress
lines only (a job whose files the runner cannot see, as on Ray). Each checkpoint holds a PEFT
folder's two files (`adapter_config.json`, and 4 KiB of `adapter_model.safetensors` of its own);
--val-rewards sets the val/reward of chosen steps (a best checkpoint that is not the last).
"""

import argparse
import hashlib
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
parser.add_argument("--rollout-text", default="", help="said by the best validation rollout")
parser.add_argument(
    "--val-rewards",
    default="",
    help="val/reward by step instead of step / 20, e.g. 2:0.5,4:0.2 (the best need not be last)",
)
args, _unknown = parser.parse_known_args()

art = Path(args.art_path or ".art")
model_dir = art / "proj" / "models" / "m1"
model_dir.mkdir(parents=True, exist_ok=True)
BASE_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
(model_dir / "model.json").write_text(
    json.dumps({"name": "m1", "project": "proj", "base_model": BASE_MODEL})
)
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


VAL_REWARDS = {
    int(step): float(reward)
    for step, _, reward in (pair.partition(":") for pair in args.val_rewards.split(",") if pair)
}


def validation_record(step: int) -> dict:
    """What a validation at `step` logs: val/reward grows, val/turns falls with training."""
    reward = VAL_REWARDS.get(step, step / 20)
    record = {"step": step, "recorded_at": time.time(), "val/reward": reward}
    if args.base_validation:
        record.update(
            {
                "val/turns": 3.0 - step / 4,
                "val/exception_rate": 0.0,
                "val/reward_std_dev": 0.1,
            }
        )
    return record


VAL_OFFSETS = (0.0, 0.3, -0.2, 0.1)
"""The validation rollouts' rewards, minus step / 20: the second is the best, the third the
worst."""


def write_val_trajectories(step: int) -> None:
    """What ART's `model.log(groups, split="val", step=step)` writes before its history line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for index, offset in enumerate(VAL_OFFSETS):
        calls = [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"q": index})},
            }
        ]
        answer = f"Answer {index} of step {step}."
        if offset == max(VAL_OFFSETS):
            answer += args.rollout_text
        messages = [
            {
                "role": "system",
                "content": "You answer questions.",
                "tool_calls": None,
                "tool_call_id": None,
                "trainable": False,
            },
            {
                "role": "user",
                "content": f"Question {index}?",
                "tool_calls": None,
                "tool_call_id": None,
                "trainable": False,
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": json.dumps(calls),
                "tool_call_id": None,
                "trainable": True,
            },
            {
                "role": "tool",
                "content": f"result {index}",
                "tool_calls": None,
                "tool_call_id": f"call_{index}",
                "trainable": False,
            },
            {
                "role": "assistant",
                "content": answer,
                "tool_calls": None,
                "tool_call_id": None,
                "trainable": True,
            },
        ]
        rows.append(
            {
                "group_index": index // 2,
                "group_metadata": None,
                "group_metrics": None,
                "group_logs": None,
                "reward": step / 20 + offset,
                "metrics": json.dumps({"correct": float(offset > 0)}),
                "metadata": None,
                "tools": None,
                "logs": None,
                "messages": messages,
            }
        )
    message_type = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("tool_calls", pa.string()),
            ("tool_call_id", pa.string()),
            ("trainable", pa.bool_()),
        ]
    )
    schema = pa.schema(
        [
            ("group_index", pa.int64()),
            ("group_metadata", pa.string()),
            ("group_metrics", pa.string()),
            ("group_logs", pa.list_(pa.string())),
            ("reward", pa.float64()),
            ("metrics", pa.string()),
            ("metadata", pa.string()),
            ("tools", pa.string()),
            ("logs", pa.list_(pa.string())),
            ("messages", pa.list_(message_type)),
        ]
    )
    folder = model_dir / "trajectories" / "val"
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, folder / f"{step:04d}.parquet", compression="zstd")


if args.base_validation and start == 0:
    if not args.no_history:
        write_val_trajectories(0)
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
    checkpoint = model_dir / "checkpoints" / f"{step:04d}"
    checkpoint.mkdir(parents=True, exist_ok=True)
    # What a LoRA checkpoint of ART (PEFT) names: its base model.
    adapter = {"base_model_name_or_path": BASE_MODEL, "peft_type": "LORA", "r": 8}
    (checkpoint / "adapter_config.json").write_text(json.dumps(adapter))
    # The weights: bytes of their own per step (the Hub takes *.safetensors through LFS).
    weights = b"".join(hashlib.sha256(b"%d:%d" % (step, n)).digest() for n in range(128))
    (checkpoint / "adapter_model.safetensors").write_bytes(weights)
    if step % args.val_every == 0:
        if not args.no_history:
            write_val_trajectories(step)
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
