"""Stands in for a run that freezes: prints its OPENAI_API_KEY (which must not reach an event),
then twice a step's progress line and that it gathers the next step's rollouts, and goes quiet
until a file (`release`, then `release2`) appears in its working directory."""

import json
import os
import time
from pathlib import Path

print(f"key is {os.environ.get('OPENAI_API_KEY')}", flush=True)
for step, gate in ((1, "release"), (2, "release2")):
    print(
        "ARTBOT_PROGRESS " + json.dumps({"step": step, "split": "train", "reward": 0.5}), flush=True
    )
    print(f"gather: rollouts of step {step + 1}", flush=True)
    deadline = time.monotonic() + 120
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
print("done", flush=True)
