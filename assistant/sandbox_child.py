"""The child side of the sandbox (assistant.sandbox): run as its own Python process, never
imported by the bot. It limits itself (memory, CPU time, file sizes, open files), forbids
network, subprocesses and native libraries through an audit hook, then runs the code of a draft
on a few scenarios and prints one line of JSON: what failed, or nothing.

Standard library only: it must not load anything of the bot's (settings, keys, clients).

The job, read from stdin as JSON:
    {"marker": str, "memory_bytes": int, "cpu_seconds": int,
     "sources": {"draft": code, "environment": code, "generator": code, ...},
     "scenarios": [...], "generate": "generate_scenario(rng)" | null,
     "checks": [{"source": name, "call": "compute_reward(scenario, answer)",
                 "expect": "number" | "text" | "dict" | "any", "what": str,
                 "setup": {"game": ["environment", "create_game(scenario)"]},
                 "errors_ok": bool}]}
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import math
import random
import resource
import sys
from typing import Any

SCENARIOS_TRIED = 3
FORBIDDEN_EVENTS = {
    "socket.__new__": "opened a network socket",
    "socket.connect": "connected to the network",
    "socket.bind": "opened a network port",
    "socket.getaddrinfo": "looked up a network address",
    "subprocess.Popen": "started a process",
    "os.system": "started a process",
    "os.exec": "started a process",
    "os.posix_spawn": "started a process",
    "os.spawn": "started a process",
    "os.fork": "started a process",
    "os.forkpty": "started a process",
    "ctypes.dlopen": "loaded a native library",
}
violations: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    why = FORBIDDEN_EVENTS.get(event)
    if why is not None:
        if why not in violations:
            violations.append(why)
        raise PermissionError(f"the sandbox forbids this: the code {why}")


class Stand:
    """A stand-in for an ART trajectory: what reward code commonly reads."""

    def __init__(self) -> None:
        self.messages_and_choices: list[Any] = []
        self.metrics: dict[str, float] = {}
        self.metadata: dict[str, Any] = {}
        self.reward = 0.0

    def messages(self) -> list[Any]:
        return []


def _limit(memory_bytes: int, cpu_seconds: int) -> None:
    for kind, value in (
        (resource.RLIMIT_AS, memory_bytes),
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_FSIZE, 10_000_000),
        (resource.RLIMIT_NOFILE, 64),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(kind, (value, value))


LOOP = asyncio.new_event_loop()
"""Made before the audit hook: an event loop opens a socket pair for itself."""


def _value(expression: str, scope: dict[str, Any]) -> Any:
    result = eval(expression, scope)
    if inspect.isawaitable(result):
        result = LOOP.run_until_complete(_awaited(result))
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _kind_problem(value: Any, expect: str) -> str | None:
    if expect == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"returned {type(value).__name__}, not a number"
        if not math.isfinite(float(value)):
            return f"returned {value}, not a finite number"
    elif expect == "text" and not isinstance(value, str):
        return f"returned {type(value).__name__}, not text"
    elif expect == "dict":
        if not isinstance(value, dict):
            return f"returned {type(value).__name__}, not a dict"
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            return "returned a dict that is not JSON (a scenario must be)"
    return None


def _run(job: dict[str, Any]) -> str | None:
    namespaces: dict[str, dict[str, Any]] = {}
    for name, source in job["sources"].items():
        scope: dict[str, Any] = {"__name__": f"draft_{name}"}
        try:
            exec(compile(source, f"<{name}>", "exec"), scope)
        except BaseException as error:
            return f"loading the {name} code failed: {_described(error)}"
        namespaces[name] = scope
    scenarios = list(job["scenarios"])[:SCENARIOS_TRIED]
    generate = job.get("generate")
    if generate:
        for seed in range(SCENARIOS_TRIED):
            scope = {**namespaces["generator"], "rng": random.Random(seed)}
            try:
                scenarios.append(_value(generate, scope))
            except BaseException as error:
                return f"generate_scenario (seed {seed}) failed: {_described(error)}"
    if not scenarios:
        return None  # no scenarios here to try it on: loading it is the check
    for index, scenario in enumerate(scenarios[:SCENARIOS_TRIED], 1):
        for check in job["checks"]:
            scope = {
                **namespaces[check["source"]],
                "scenario": scenario,
                "answer": str(scenario.get("answer", "")) if isinstance(scenario, dict) else "",
                "trajectory": Stand(),
                "rng": random.Random(index),
            }
            what = check["what"]
            try:
                for name, (source, call) in check.get("setup", {}).items():
                    scope[name] = _value(call, {**namespaces[source], **scope})
                value = _value(check["call"], scope)
            except Exception as error:
                if check.get("errors_ok") and not isinstance(error, MemoryError | RecursionError):
                    continue  # an error is an answer here (a tool's goes to the agent)
                return f"{what} failed on scenario {index}: {_described(error)}"
            except BaseException as error:
                return f"{what} failed on scenario {index}: {_described(error)}"
            problem = _kind_problem(value, check["expect"])
            if problem:
                return f"{what} {problem} on scenario {index}"
    return None


def _described(error: BaseException) -> str:
    if isinstance(error, MemoryError):
        return "it used more memory than the sandbox allows"
    if isinstance(error, RecursionError):
        return "it recursed too deeply"
    text = str(error).strip()
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__


def main() -> None:
    job = json.loads(sys.stdin.read())
    out = sys.stdout
    sys.stdout = io.StringIO()  # what the code prints is not the result line
    _limit(int(job["memory_bytes"]), int(job["cpu_seconds"]))
    sys.addaudithook(_audit)
    sys.setrecursionlimit(2_000)
    try:
        problem = _run(job)
    except BaseException as error:
        problem = _described(error)
    if violations:
        problem = f"the sandbox stopped it: the code {violations[0]}"
    out.write(job["marker"] + json.dumps({"problem": problem}) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
