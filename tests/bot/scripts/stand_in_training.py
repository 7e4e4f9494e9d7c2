"""Runs in place of a GPU training run: the runner starts it with the approved script as argument.

It checks that the script it was given is the generated one (it compiles and calls ART), then
writes what ART writes (tests/runner/scripts/train_ok.py). With --mode oom-then-ok it fails
with CUDA's out-of-memory error unless --gpu-memory-utilization was lowered below 0.7; with
--mode slow each step takes seconds (time to cancel it); with --mode fail-then-resume the first
run trains 2 steps and then raises in the script's `rollout` (a failure the runner offers to
resume), and a run that finds checkpoints goes on from them. --mode huge-rollout makes the best
validation rollout's answer far too long for a message; --mode secret-rollout makes it say the
job's OPENAI_API_KEY; --mode progress-lines-only writes no ART files (a job on Ray, whose
files the runner cannot see); --mode stall-then-resume trains 2 steps and then goes quiet for good
(a frozen run) unless it finds checkpoints, then goes on from them. --mode engine-dies trains
one step (a checkpoint) and then dies as a run does when vLLM's engine process dies under it, at
every start; --mode engine-dies-then-resume trains 2 steps and dies so when it finds no
checkpoint, and goes on from them when it does.
"""

import argparse
import os
import runpy
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument(
    "--mode",
    default="ok",
    choices=[
        "ok",
        "oom-then-ok",
        "slow",
        "fail-then-resume",
        "huge-rollout",
        "secret-rollout",
        "progress-lines-only",
        "stall-then-resume",
        "engine-dies",
        "engine-dies-then-resume",
    ],
)
parser.add_argument("script")
parser.add_argument("--art-path", default=None)
parser.add_argument("--gpu-memory-utilization", type=float, default=None)
args, _ = parser.parse_known_args()

source = Path(args.script).read_text()
compile(source, args.script, "exec")
assert "art.TrainableModel(" in source and "await backend.close()" in source, (
    "not a generated script"
)

if args.mode == "oom-then-ok" and (
    args.gpu_memory_utilization is None or args.gpu_memory_utilization >= 0.7
):
    print("Traceback (most recent call last):", file=sys.stderr)
    print('  File "rl_train.py", line 1, in <module>', file=sys.stderr)
    print(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", file=sys.stderr
    )
    sys.exit(1)

train_ok = Path(__file__).resolve().parents[2] / "runner" / "scripts" / "train_ok.py"
delay = "3" if args.mode == "slow" else "0.05"
said = {
    "huge-rollout": " The long answer:" + " word" * 5_000,
    "secret-rollout": f" My key is {os.environ.get('OPENAI_API_KEY')}.",
}.get(args.mode, "")
sys.argv = [
    str(train_ok),
    "--delay",
    delay,
    "--base-validation",
    *(["--art-path", args.art_path] if args.art_path else []),
    *(["--rollout-text", said] if said else []),
    *(["--no-history"] if args.mode == "progress-lines-only" else []),
]
art_path = Path(args.art_path or ".art")
fails_now = args.mode == "fail-then-resume" and not any(art_path.glob("*/models/*/checkpoints/*"))
if fails_now:
    sys.argv += ["--steps", "2", "--exit-code", "1"]
engine_dies = args.mode == "engine-dies" or (
    args.mode == "engine-dies-then-resume" and not any(art_path.glob("*/models/*/checkpoints/*"))
)
if engine_dies:
    steps = "1" if args.mode == "engine-dies" else "2"
    sys.argv += ["--steps", steps, "--exit-code", "1"]
if args.mode == "stall-then-resume" and not any(art_path.glob("*/models/*/checkpoints/*")):
    sys.argv += ["--pause-after", "2", "--wait-for", "never-released"]
try:
    runpy.run_path(str(train_ok), run_name="__main__")
except SystemExit as stopped:
    if engine_dies:  # what vLLM 0.10 and the openai client print when the engine core dies
        print(
            "(EngineCore_0 pid=4242) ERROR 11-22 09:01:02 [core.py:700] EngineCore encountered "
            "a fatal error.\n"
            "ERROR 11-22 09:01:02 [core_client.py:564] Engine core proc EngineCore_0 died "
            "unexpectedly, shutting down client.\n"
            "Traceback (most recent call last):\n"
            f'  File "{Path(args.script).resolve()}", line 88, in rollout\n'
            "    response = await client.chat.completions.create(\n"
            '  File "/venv/lib/python3.12/site-packages/openai/_base_client.py", line 1594, '
            "in request\n"
            "    raise self._make_status_error_from_response(err.response) from None\n"
            "openai.InternalServerError: Error code: 500 - {'object': 'error', 'message': "
            "'EngineCore encountered an issue. See stack trace (above) for the root cause.', "
            "'type': 'InternalServerError', 'param': None, 'code': 500}",
            file=sys.stderr,
        )
        sys.exit(stopped.code)
    if not fails_now:
        raise
    print("Traceback (most recent call last):", file=sys.stderr)
    print(f'  File "{Path(args.script).resolve()}", line 120, in rollout', file=sys.stderr)
    print("    answer = parse(reply)", file=sys.stderr)
    print("ValueError: the reply has no answer", file=sys.stderr)
    sys.exit(stopped.code)
