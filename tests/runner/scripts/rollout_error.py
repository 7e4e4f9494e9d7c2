"""A training script whose rollout raises: the traceback ends in the script's own code."""

import argparse
import asyncio
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--checkpoint", action="store_true", help="leave a checkpoint first")
args = parser.parse_args()

if args.checkpoint:
    Path(".art/proj/models/m1/checkpoints/0003").mkdir(parents=True)


def score(answer: str) -> float:
    return len(answer) / 0  # the bug


async def rollout(scenario: dict) -> float:
    await asyncio.sleep(0)
    return score(scenario["prompt"])


async def main() -> None:
    print("Scenarios: 2 for training, 0 for validation.", flush=True)
    await rollout({"prompt": "What is 2 + 2?"})


asyncio.run(main())
