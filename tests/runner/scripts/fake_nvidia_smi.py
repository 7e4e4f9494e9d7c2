#!/usr/bin/env python3
"""Stands in for nvidia-smi: answers the two queries the runner makes from a JSON file.

The file ($FAKE_NVIDIA_SMI_STATE) holds {"gpus": [[index, uuid, name, total, used, free, util]],
"apps": [[gpu_uuid, pid, name, used]]}.
"""

import json
import os
import sys

with open(os.environ["FAKE_NVIDIA_SMI_STATE"]) as file:
    state = json.load(file)
query = next((arg for arg in sys.argv[1:] if arg.startswith("--query-")), "")
rows = state["gpus"] if query.startswith("--query-gpu=") else state["apps"]
for row in rows:
    print(", ".join(str(value) for value in row))
