"""The script's own environment: its PEP 723 dependencies in a virtualenv, built once, cached.

A dry run in artbot's environment proves the code but not the script's dependency block: a
package the block forgets is still importable there. Where the block is light enough to
install on any machine (everything but openpipe-art's `[backend]` extra: torch, vLLM,
unsloth), the dry run runs in a venv of exactly what the block lists. The venv is keyed by the
block's meaning and the interpreter, so every script with the same block shares one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from checks.script_metadata import ScriptDependencies

BUILD_TIMEOUT_S = 900.0
MARKER = "artbot-script-env.json"
# openpipe-art with an extra naming `backend`: the LocalBackend stack, for GPU hosts only.
ART_WITH_BACKEND = re.compile(r"^\s*openpipe[-_.]art\s*\[[^\]]*\bbackend\b", re.IGNORECASE)


class ScriptEnvError(RuntimeError):
    """The script's own environment could not be built (the message says why)."""


@dataclass(frozen=True)
class ScriptEnvironment:
    """A built environment: its interpreter, and how long getting it took."""

    python: Path
    folder: Path
    built: bool  # False when it came from the cache
    seconds: float


def is_light(dependencies: ScriptDependencies) -> bool:
    """True unless the block asks for openpipe-art's `[backend]` extra (the GPU stack)."""
    return not any(ART_WITH_BACKEND.match(d) for d in dependencies.dependencies)


def artbot_cache_dir(env: Mapping[str, str]) -> Path:
    """artbot's cache folder: `$XDG_CACHE_HOME/artbot`, else `~/.cache/artbot`."""
    cache_home = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home, "artbot")


def environment_key(dependencies: ScriptDependencies, python: str) -> str:
    """The cache key: the block's meaning and the interpreter's exact version."""
    version = ".".join(map(str, sys.version_info[:3])) if python == sys.executable else python
    payload = json.dumps([dependencies.digest(), version, sys.platform])
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def script_environment(
    dependencies: ScriptDependencies,
    *,
    cache_dir: Path,
    python: str = sys.executable,
    timeout_s: float = BUILD_TIMEOUT_S,
) -> ScriptEnvironment:
    """A venv with exactly `dependencies` installed, built with uv on first use."""
    started = time.monotonic()
    folder = cache_dir / "script-envs" / environment_key(dependencies, python)
    interpreter = folder / "bin" / "python"
    if (folder / MARKER).is_file():
        return ScriptEnvironment(interpreter, folder, False, time.monotonic() - started)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(folder.with_name(folder.name + ".lock")):
        # Another dry run may have built it while this one waited.
        if (folder / MARKER).is_file():
            return ScriptEnvironment(interpreter, folder, False, time.monotonic() - started)
        shutil.rmtree(folder, ignore_errors=True)  # a build that died half-way
        try:
            _build(folder, dependencies, python, timeout_s)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        seconds = time.monotonic() - started
        (folder / MARKER).write_text(
            json.dumps(
                {
                    "requires-python": dependencies.requires_python,
                    "dependencies": list(dependencies.dependencies),
                    "python": python,
                    "build_seconds": round(seconds, 1),
                },
                indent=2,
            )
            + "\n"
        )
    return ScriptEnvironment(interpreter, folder, True, seconds)


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(folder: Path, dependencies: ScriptDependencies, python: str, timeout_s: float) -> None:
    uv = shutil.which("uv")
    if uv is None:
        raise ScriptEnvError(
            "uv is not on PATH; it builds the script's own environment (pip install uv), "
            "or dry-run in artbot's environment instead (artbot dryrun --env project)"
        )
    deadline = time.monotonic() + timeout_s
    _uv(deadline, uv, "venv", "--quiet", "--python", python, str(folder))
    requirements = folder / "requirements.in"
    requirements.write_text(dependencies.requirements_text())
    _uv(
        deadline,
        uv,
        "pip",
        "install",
        "--quiet",
        # Wheels only: building a source distribution runs its setup code on the bot host,
        # outside any sandbox (a wheel's install runs nothing).
        "--no-build",
        "--python",
        str(folder / "bin" / "python"),
        "--requirement",
        str(requirements),
    )


def _uv(deadline: float, *command: str) -> None:
    environment = dict(os.environ)
    # Not the project's environment: uv must install into the venv it is given.
    for name in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "UV_SYSTEM_PYTHON"):
        environment.pop(name, None)
    environment.setdefault("UV_HTTP_TIMEOUT", "120")
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=environment,
            stdin=subprocess.DEVNULL,
            timeout=max(1.0, deadline - time.monotonic()),
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise ScriptEnvError(
            f"building the script's own environment took too long ({' '.join(command[1:3])})"
        ) from error
    if done.returncode != 0:
        detail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise ScriptEnvError(
            f"the script's dependencies could not be installed ({' '.join(command[1:3])}, "
            f"exit {done.returncode}):\n{detail}"
        )
