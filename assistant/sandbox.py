"""Run a draft's code on a few scenarios in a child process, never in the bot's: inside the
host's OS sandbox (isolation.sandbox: namespaces with no network and no view of the bot's files
or processes, a uid of its own, rlimits), as a fresh Python (`-I`) in an empty scratch folder
with an environment that holds nothing of the bot's, killed at a wall-clock limit. Inside, the
child (assistant/sandbox_child.py) also limits itself and refuses network, processes and native
libraries with an audit hook: not a boundary (the sandbox is), but a clear message for the
common mistakes.

    report = run_sandboxed(code_calls("reward_logic", answers, code), Limits(), Sandbox.for_host())
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
from pathlib import Path

from flows import CodeCalls
from isolation.sandbox import Sandbox, SandboxLimits, python_paths, sandbox_environment

CHILD = "sandbox_child.py"
MAX_OUTPUT_BYTES = 1_000_000
FILE_BYTES = 10_000_000
OPEN_FILES = 64


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 10.0
    cpu_seconds: int = 8
    memory_bytes: int = 512 * 1024 * 1024
    processes: int = 16

    def for_sandbox(self) -> SandboxLimits:
        return SandboxLimits(
            cpu_seconds=self.cpu_seconds,
            memory_bytes=self.memory_bytes,
            processes=self.processes,
            file_bytes=FILE_BYTES,
            open_files=OPEN_FILES,
        )


@dataclass(frozen=True)
class SandboxReport:
    problem: str | None
    """None: every call worked on every scenario tried."""

    @property
    def ok(self) -> bool:
        return self.problem is None


def run_sandboxed(exercise: CodeCalls, limits: Limits, host: Sandbox) -> SandboxReport:
    """Load the code and make its calls on each scenario in a child process in `host`'s
    sandbox; say what failed, if anything. The caller checks `host.may_run` first."""
    if not host.may_run:
        raise RuntimeError(host.refusal)
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
    child = Path(str(resources.files("assistant").joinpath(CHILD)))
    # The base interpreter, not artbot's venv: the child needs the standard library only.
    python = os.path.realpath(sys.executable)
    with (
        tempfile.TemporaryDirectory(prefix="artbot-sandbox-") as home,
        host.confine(
            [python, "-I", str(child)],
            cwd=Path(home),
            limits=limits.for_sandbox(),
            read_only=[*python_paths(python), child],
            writable=[Path(home)],
        ) as command,
    ):
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=home,
            env=sandbox_environment(Path(home), {"PYTHONDONTWRITEBYTECODE": "1"}),
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
        _kill(process)  # what it left behind goes with its group (and its PID namespace)
    return _read(out[-MAX_OUTPUT_BYTES:], marker, process.returncode, limits)


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
    if returncode > 128 and returncode - 128 in signal.valid_signals():
        returncode = 128 - returncode  # bubblewrap passes on a death by signal N as 128 + N
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return SandboxReport(
            f"the sandbox stopped it: it used more than {limits.cpu_seconds} seconds of CPU "
            "or too much memory"
        )
    if returncode < 0:
        return SandboxReport(f"the sandbox stopped it (signal {-returncode})")
    return SandboxReport(f"it ended the sandbox's process (exit status {returncode})")
