"""Checks a generated ART training script before anyone spends GPU time on it.

Three tools, in order: Python's own `compile`, ruff (lint) and basedpyright (types, against
the `openpipe-art` installed next to `sys.executable`). Both external tools run with
explicit settings from a clean place, so no pyproject or pyrightconfig near the script
changes the verdict. Suppression comments in the script (`# noqa`, `# type: ignore`,
`# pyright: ignore`) are honoured, as they would be in any project.

Only basedpyright's errors are problems; its warnings and information are ignored, except
`reportMissingModuleSource` (an import that will fail at run time), which is made an error.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal

Tool = Literal["compile", "ruff", "pyright"]

MAX_SCRIPT_BYTES = 2 * 1024 * 1024
TOOL_TIMEOUT_S = 180.0
# The oldest Python that openpipe-art 0.5.18 supports; ruff and pyright both check against it.
TARGET_PYTHON = "3.11"
RUFF_SELECT = ("E", "F", "W", "I", "B", "UP", "SIM")
RUFF_IGNORE = ("E501",)
PYRIGHT_CONFIG: dict[str, Any] = {
    "typeCheckingMode": "standard",
    "pythonVersion": TARGET_PYTHON,
    # Pyright only warns when typeshed has stubs for a package that is not installed
    # (`import six` without six); the script would still die with ImportError at start.
    "reportMissingModuleSource": "error",
}


@dataclass(frozen=True)
class Problem:
    """One finding. Problems about the whole file (too large, a tool missing) sit at 1:1."""

    tool: Tool
    line: int
    column: int
    code: str
    message: str


@dataclass(frozen=True)
class CheckReport:
    """The verdict on one script: every problem found, in file order."""

    script: Path
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def format(self) -> str:
        """One line per problem, compiler style, or a single line saying the script passed."""
        if self.ok:
            return f"{self.script}: ok (compile, ruff, pyright)"
        return "\n".join(
            f"{self.script}:{p.line}:{p.column}: {p.tool} {p.code}: {_one_line(p.message)}"
            for p in self.problems
        )


def check_script(path: Path) -> CheckReport:
    """Check the script at `path` in place (its folder is on the import path, as when run).

    Raises OSError (e.g. FileNotFoundError) when the file cannot be read at all.
    """
    return check_scripts([path])[0]


def check_source(source: str, filename: str = "rl_train.py") -> CheckReport:
    """Check `source` as if saved as `filename` (in a temporary folder, removed afterwards)."""
    if Path(filename).name != filename or filename in {"", ".", ".."}:
        raise ValueError(f"filename must be a bare file name, not {filename!r}")
    data = source.encode()
    if len(data) > MAX_SCRIPT_BYTES:
        return CheckReport(Path(filename), (_too_large(len(data)),))
    with tempfile.TemporaryDirectory(prefix="artbot-check-") as tmp:
        path = Path(tmp) / filename
        path.write_bytes(data)
        return CheckReport(Path(filename), check_script(path).problems)


def check_scripts(paths: Sequence[Path]) -> list[CheckReport]:
    """Check many scripts with one ruff and one basedpyright run (much faster than one by one).

    Raises OSError (e.g. FileNotFoundError) when a file cannot be read at all.
    """
    reports: dict[Path, CheckReport] = {}
    parsed: list[Path] = []
    for path in paths:
        refusal = _refusal(path)
        if refusal is not None:
            reports[path] = CheckReport(path, (refusal,))
        else:
            parsed.append(path)
    if parsed:
        # Absolute, because each tool runs from a folder of its choosing.
        resolved = [p.resolve() for p in parsed]
        found = _merge(_ruff(resolved), _pyright(resolved))
        for path, absolute in zip(parsed, resolved, strict=True):
            reports[path] = CheckReport(path, found[absolute])
    return [reports[path] for path in paths]


def _refusal(path: Path) -> Problem | None:
    """Why the tools need not run on `path`: too large, or it does not compile."""
    size = path.stat().st_size
    if size > MAX_SCRIPT_BYTES:
        return _too_large(size)
    # Bounded read as well: a pipe or device reports size 0 and may never end.
    with path.open("rb") as file:
        data = file.read(MAX_SCRIPT_BYTES + 1)
    if len(data) > MAX_SCRIPT_BYTES:
        return _too_large(len(data))
    # Lint and type errors on a file that does not parse are noise around the real one.
    return _compile(data, path.resolve())


def _merge(*found: dict[Path, list[Problem]]) -> dict[Path, tuple[Problem, ...]]:
    paths = {path for by_path in found for path in by_path}
    # Stable sort: at one position, ruff's finding stays before pyright's.
    return {
        path: tuple(
            sorted(
                (p for by_path in found for p in by_path.get(path, [])),
                key=lambda p: (p.line, p.column),
            )
        )
        for path in paths
    }


def _compile(data: bytes, path: Path) -> Problem | None:
    try:
        # Bytes, not str, so a PEP 263 coding line is honoured as the interpreter would.
        # SyntaxWarnings (e.g. "\d" in a string) are ruff's to report, not stderr's. (Before
        # 3.14 catch_warnings is process-wide; it only hides warnings meanwhile.)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(data, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        return Problem("compile", exc.lineno or 1, exc.offset or 1, "syntax", exc.msg)
    except (ValueError, RecursionError, MemoryError) as exc:
        # Null bytes (ValueError before 3.12) and absurd nesting never reach the parser's
        # error reporting; the script is still unrunnable.
        return Problem("compile", 1, 1, "syntax", f"cannot compile: {exc}")
    return None


def _ruff(paths: Sequence[Path]) -> dict[Path, list[Problem]]:
    """Ruff's findings for each of `paths` (absolute); a tool failure goes on every path."""
    command = _tool_command("ruff")
    if command is None:
        return _on_every_path(paths, _missing("ruff", "ruff"))
    args = [
        *command,
        "check",
        "--isolated",
        "--no-cache",
        "--select",
        ",".join(RUFF_SELECT),
        "--ignore",
        ",".join(RUFF_IGNORE),
        "--target-version",
        "py" + TARGET_PYTHON.replace(".", ""),
        "--output-format",
        "json",
        *map(str, paths),
    ]
    # From the script's folder: isort then counts sibling modules as first-party, which is
    # how `python rl_train.py` will import them.
    outcome = _run("ruff", args, cwd=paths[0].parent)
    return _findings("ruff", outcome, paths, _ruff_problems)


def _ruff_problems(stdout: str) -> Iterator[tuple[Path, Problem]]:
    for f in json.loads(stdout):
        yield (
            Path(f["filename"]).resolve(),
            Problem(
                "ruff",
                int(f["location"]["row"]),
                int(f["location"]["column"]),
                # Ruff's own parse errors (e.g. newer syntax than the target) have no code.
                f["code"] or "syntax",
                f["message"],
            ),
        )


def _pyright(paths: Sequence[Path]) -> dict[Path, list[Problem]]:
    """basedpyright's errors for each of `paths` (absolute); a tool failure goes on every path."""
    command = _tool_command("basedpyright")
    if command is None:
        return _on_every_path(paths, _missing("pyright", "basedpyright"))
    with tempfile.TemporaryDirectory(prefix="artbot-pyright-") as tmp:
        # A folder of our own: no pyproject, pyrightconfig or basedpyright baseline of the
        # script's surroundings applies. The script's folder is added back for its imports.
        config = Path(tmp) / "pyrightconfig.json"
        folders = sorted({str(path.parent) for path in paths})
        settings = {**PYRIGHT_CONFIG, "extraPaths": folders}
        config.write_text(json.dumps(settings))
        args = [
            *command,
            "--project",
            str(config),
            "--pythonpath",
            sys.executable,
            "--outputjson",
            *map(str, paths),
        ]
        outcome = _run("pyright", args, cwd=Path(tmp))
    return _findings("pyright", outcome, paths, _pyright_problems)


def _pyright_problems(stdout: str) -> Iterator[tuple[Path, Problem]]:
    diagnostics = json.loads(stdout)["generalDiagnostics"]
    # Warnings and information are dropped: in standard mode they are style opinions,
    # and the one warning that means "will crash" is promoted in PYRIGHT_CONFIG.
    for d in diagnostics:
        if d["severity"] != "error":
            continue
        yield (
            Path(d["file"]).resolve(),
            Problem(
                "pyright",
                int(d["range"]["start"]["line"]) + 1,
                int(d["range"]["start"]["character"]) + 1,
                d.get("rule") or "error",
                d["message"],
            ),
        )


def _findings(
    tool: Tool,
    outcome: tuple[int, str, str] | Problem,
    paths: Sequence[Path],
    parse: Callable[[str], Iterable[tuple[Path, Problem]]],
) -> dict[Path, list[Problem]]:
    """Each path's problems, parsed from the tool's output; one problem on every path when the
    tool could not run, or failed, or said what `parse` cannot read."""
    if isinstance(outcome, Problem):
        return _on_every_path(paths, outcome)
    returncode, stdout, stderr = outcome
    found: dict[Path, list[Problem]] = {path: [] for path in paths}
    try:
        # 0: clean, 1: problems reported; anything else is a crash or a configuration error.
        if returncode not in (0, 1):
            raise ValueError("abnormal exit")
        # A path the tool names that was not asked for is a KeyError: the output is not trusted.
        for path, problem in parse(stdout):
            found[path].append(problem)
    except (ValueError, TypeError, KeyError):
        return _on_every_path(paths, _tool_error(tool, returncode, stdout, stderr))
    return found


def _on_every_path(paths: Sequence[Path], problem: Problem) -> dict[Path, list[Problem]]:
    return {path: [problem] for path in paths}


def _tool_command(name: str) -> list[str] | None:
    """The command that runs `name` from the environment of `sys.executable`, if installed.

    Not PATH: a ruff or basedpyright elsewhere may be another version, and basedpyright
    must resolve `art` from this very environment.
    """
    # Not resolved: a venv's python is a symlink, and its scripts sit beside the link.
    bin_dir = Path(sys.executable).parent
    found = shutil.which(name, path=str(bin_dir))
    if found is not None:
        return [found]
    module = name.replace("-", "_")
    if find_spec(module) is not None:
        return [sys.executable, "-m", module]
    return None


def _run(tool: Tool, args: Sequence[str], cwd: Path) -> tuple[int, str, str] | Problem:
    try:
        # A session of its own, so a timeout can end the whole tree: basedpyright is a
        # Python wrapper around a Node.js process.
        process = subprocess.Popen(
            args,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return Problem(tool, 1, 1, "tool-missing", f"cannot run {args[0]}: {exc}")
    try:
        stdout, stderr = process.communicate(timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_tree(process)
        process.communicate()
        return Problem(tool, 1, 1, "timeout", f"{tool} did not finish within {TOOL_TIMEOUT_S:g} s")
    return process.returncode, stdout, stderr


def _kill_tree(process: subprocess.Popen[str]) -> None:
    if sys.platform == "win32":
        process.kill()
        return
    # Already gone: the tool finished between the timeout and the kill.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _missing(tool: Tool, executable: str) -> Problem:
    return Problem(
        tool,
        1,
        1,
        "tool-missing",
        f"{executable} is not installed in {sys.prefix}; the script was not checked by it",
    )


def _tool_error(tool: Tool, returncode: int, stdout: str, stderr: str) -> Problem:
    detail = (stderr.strip() or stdout.strip() or "no output").splitlines()[-1][:300]
    return Problem(tool, 1, 1, "tool-error", f"{tool} failed (exit {returncode}): {detail}")


def _too_large(size: int) -> Problem:
    return Problem(
        "compile",
        1,
        1,
        "too-large",
        f"refusing to check a file of more than {MAX_SCRIPT_BYTES:,} bytes (read {size:,})",
    )


def _one_line(message: str, limit: int = 400) -> str:
    # Pyright explains over several indented lines; a report line must stay one line, and
    # the first few clauses say all a reader acts on.
    line = "; ".join(part.strip() for part in message.splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 1] + "…"
