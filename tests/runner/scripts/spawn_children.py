"""Starts children and grandchildren that a kill of this process alone would leave behind.

- a child that starts a grandchild, both in the job's process group;
- a child that leaves the group with a session of its own (setsid), as daemons do;
all ignoring SIGHUP. Their pids go to pids.txt. With --exit the script then exits at once,
leaving them running (a training script that forgot to stop its vLLM server).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

SLEEPER = (
    "import signal, time\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\nwhile True: time.sleep(0.1)"
)
PARENT = (
    "import subprocess, sys, time, signal\n"
    "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
    f"g = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}])\n"
    "print(g.pid, flush=True)\n"
    "while True: time.sleep(0.1)\n"
)

child = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
assert child.stdout is not None
grandchild = int(child.stdout.readline())
escaped = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
# Whole or not at all: a test reads it as soon as it appears.
Path("pids.txt.part").write_text(f"{child.pid} {grandchild} {escaped.pid}")
os.replace("pids.txt.part", "pids.txt")
print("children started", flush=True)
if "--exit" in sys.argv:
    sys.exit(0)
while True:
    time.sleep(0.1)
