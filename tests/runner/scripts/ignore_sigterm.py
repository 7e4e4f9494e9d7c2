"""Ignores SIGTERM (a stuck vLLM shutdown): only SIGKILL stops it."""

import signal
import time
from pathlib import Path

signal.signal(signal.SIGTERM, signal.SIG_IGN)
Path("ready").write_text("ready")
print("ignoring SIGTERM", flush=True)
while True:
    time.sleep(0.1)
