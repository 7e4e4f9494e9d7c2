"""Prints a line every 20 ms for 2 s of its own time, then exits: never quiet for long."""

import time

start = time.monotonic()
while time.monotonic() - start < 2:
    print(f"gather: {time.monotonic() - start:.2f}s", flush=True)
    time.sleep(0.02)
