"""Appends a line to `starts.txt` in its working directory each time it starts, then ends."""

import os
from pathlib import Path

with Path("starts.txt").open("a") as starts:
    starts.write(f"{os.getpid()}\n")
print("started", flush=True)
