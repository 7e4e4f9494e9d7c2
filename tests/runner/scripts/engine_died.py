"""Leaves a checkpoint, then dies as a run does when vLLM's engine core process dies under it:
the client's log line, and the script's own call to the engine failing with a 500."""

import sys
from pathlib import Path

Path(".art/proj/models/m1/checkpoints/0001").mkdir(parents=True)
print("step 1: training", flush=True)
print(
    "ERROR 08-25 11:05:40 [core_client.py:564] Engine core proc EngineCore_0 died unexpectedly, "
    "shutting down client.",
    file=sys.stderr,
    flush=True,
)
print(
    "Traceback (most recent call last):\n"
    f'  File "{Path(__file__).resolve()}", line 95, in rollout\n'
    "    response = await client.chat.completions.create(\n"
    "openai.InternalServerError: Error code: 500 - {'object': 'error', 'message': 'EngineCore "
    "encountered an issue. See stack trace (above) for the root cause.'}",
    file=sys.stderr,
)
sys.exit(1)
