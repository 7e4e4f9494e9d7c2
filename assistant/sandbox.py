"""Run a draft's code on a few scenarios in a child process, never in the bot's: a fresh Python
(`-I`: no environment variables of Python's, no user site), in an empty temporary directory, with
an environment of its own that holds no secrets, killed at a wall-clock limit, and limited from
inside (assistant/sandbox_child.py) in memory, CPU time, file sizes and open files, with network,
processes and native libraries refused by an audit hook.

That stops mistakes (an endless loop, a huge allocation, a call to a real API), not a determined
attacker: the draft is still code the user reads before it counts.

    report = run_sandboxed(code_calls("reward_logic", answers, code), Limits())
    report.problem   # None: it ran on every scenario
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources

from flows import CodeCalls

CHILD = "sandbox_child.py"
MAX_OUTPUT_BYTES = 1_000_000


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 10.0
    cpu_seconds: int = 8
    memory_bytes: int = 512 * 1024 * 1024


@dataclass(frozen=True)
class SandboxReport:
    problem: str | None
    """None: every call worked on every scenario tried."""

    @property
    def ok(self) -> bool:
        return self.problem is None


def run_sandboxed(exercise: CodeCalls, limits: Limits) -> SandboxReport:
    """Load the code and make its calls on each scenario in a child process; say what failed,
    if anything."""
    marker = f"@@result-{secrets.token_hex(8)}@@"
    job = {
        "marker": marker,
        "memory_bytes": limits.memory_bytes,
        "cpu_seconds": limits.cpu_seconds,
        "sources": dict(exercise.sources),
        "scenarios": list(exercise.scenarios),
        "generate": exercise.generate,
        "checks": [
            {
                "source": c.source,
                "call": c.call,
                "expect": c.expect,
                "what": c.what,
                "setup": {name: list(pair) for name, pair in c.setup.items()},
                "errors_ok": c.errors_ok,
            }
            for c in exercise.calls
        ],
    }
    child = resources.files("assistant").joinpath(CHILD)
    with tempfile.TemporaryDirectory(prefix="artbot-sandbox-") as home:
        process = subprocess.Popen(
            [sys.executable, "-I", str(child)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=home,
            env=_clean_environment(home),
            start_new_session=True,  # its own process group: killed whole
        )
        try:
            out, _ = process.communicate(json.dumps(job).encode(), timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            _kill(process)
            return SandboxReport(
                f"the sandbox stopped it after {limits.wall_seconds:g} seconds "
                "(an endless loop, or far too slow)"
            )
    return _read(out[-MAX_OUTPUT_BYTES:], marker, process.returncode, limits)


def _clean_environment(home: str) -> dict[str, str]:
    """Only what Python needs: no keys, tokens or settings of the bot."""
    return {
        "PATH": os.defpath,
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _read(out: bytes, marker: str, returncode: int, limits: Limits) -> SandboxReport:
    for line in reversed(out.decode("utf-8", "replace").splitlines()):
        if line.startswith(marker):
            try:
                problem = json.loads(line[len(marker) :])["problem"]
            except (ValueError, KeyError, TypeError):
                break
            if problem is None or isinstance(problem, str):
                return SandboxReport(problem)
            break
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return SandboxReport(
            f"the sandbox stopped it: it used more than {limits.cpu_seconds} seconds of CPU "
            "or too much memory"
        )
    if returncode < 0:
        return SandboxReport(f"the sandbox stopped it (signal {-returncode})")
    return SandboxReport(f"it ended the sandbox's process (exit status {returncode})")
