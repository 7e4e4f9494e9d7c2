"""Bytecode that dry runs read and never write: compiled by artbot itself, read-only inside the
sandbox.

A dry run imports ~2,700 modules (art, litellm, openai); compiling them afresh in every run
costs seconds, so they are cached under `PYTHONPYCACHEPREFIX`. A cache the sandboxed script
could write would let one user's dry run plant bytecode that the next user's dry run (or any
Python sharing the prefix) executes. So the cache is filled only by `compileall`, which compiles
and executes nothing, and a sandbox sees it read-only; a module not in it is compiled in memory.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

from checks.dryrun.script_env import artbot_cache_dir, exclusive_lock

COMPILE_TIMEOUT_S = 900.0


def compiled_bytecode_dir(env: Mapping[str, str]) -> Path:
    """Where artbot keeps the compiled bytecode: `$XDG_CACHE_HOME/artbot/pycache-compiled`.

    A new folder (not the older `pycache`, which dry runs wrote to themselves)."""
    return artbot_cache_dir(env) / "pycache-compiled"


def compile_environment(python: str, prefix: Path) -> None:
    """Compile the standard library and site-packages of the environment `python` runs in
    into `prefix`, once per state of that environment (a marker holds what was compiled)."""
    paths = _library_paths(python)
    key = _state_key(python, paths)
    marker = prefix / "markers" / f"{key}.json"
    if marker.is_file():
        return
    prefix.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(prefix / ".lock"):
        if marker.is_file():
            return
        subprocess.run(
            [python, "-m", "compileall", "-q", "-j", "0", *map(str, paths)],
            env={"PYTHONPYCACHEPREFIX": str(prefix), "PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=COMPILE_TIMEOUT_S,
            check=False,  # a file that does not compile is compiled in memory if imported
        )
        marker.parent.mkdir(exist_ok=True)
        marker.write_text(json.dumps({"python": python, "paths": list(map(str, paths))}) + "\n")


@functools.cache
def _library_paths(python: str) -> tuple[Path, ...]:
    """Where `python` keeps its standard library and packages (asked once per interpreter)."""
    if Path(python).resolve() == Path(sys.executable).resolve():
        found = {sysconfig.get_path("stdlib"), sysconfig.get_path("purelib")}
        found.add(sysconfig.get_path("platlib"))
    else:
        asked = subprocess.run(
            [
                python,
                "-I",
                "-c",
                "import json,sysconfig as s;"
                "print(json.dumps([s.get_path(n) for n in ('stdlib','purelib','platlib')]))",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        found = set(json.loads(asked.stdout))
    return tuple(sorted(Path(p) for p in found if p and Path(p).is_dir()))


def _state_key(python: str, paths: tuple[Path, ...]) -> str:
    """Changes when a package is added, removed or upgraded (site-packages' entries change)."""
    state = [python] + [f"{p}:{p.stat().st_mtime_ns}" for p in paths]
    return hashlib.sha256(json.dumps(state).encode()).hexdigest()[:24]
