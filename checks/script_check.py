"""Checks a generated ART training script before anyone spends GPU time on it.

Three tools, in order: Python's own `compile`, ruff (lint) and basedpyright (types, against
the `openpipe-art` installed next to `sys.executable`). Both external tools run with
explicit settings from a clean place, so no pyproject or pyrightconfig near the script
changes the verdict. Suppression comments in the script (`# noqa`, `# type: ignore`,
`# pyright: ignore`) are honoured, as they would be in any project.

Only basedpyright's errors are problems; its warnings and information are ignored, except
`reportMissingModuleSource` (an import that will fail at run time), which is made an error.

Findings are of two kinds. Errors mean the script is wrong: it does not compile, names
something undefined, misuses `art` as pyright sees it, or has a line that raises or certainly
does not do what it reads as (`RUFF_ERRORS`). The rest of ruff's findings are matters of style.
Style still fails the check in the script's own code (in a generated script, that is artbot's
code: a bug of ours), but in the user's own code placed by the wizard (`user_code_lines`) it is
only a note: people paste code written to their own taste (`zip(*cells)`, `"a b".split()`), and
style never says whether a script runs. Only errors stop a dry run.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import os
import re
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
# Ruff's rules whose finding means the script is wrong, not merely written to another taste:
# it cannot be read or parsed, a name is undefined, or the line raises when it runs or certainly
# does nothing it reads as (`++n`, `x == 1` as a statement, `assert (x, "why")`). Every other
# rule of RUFF_SELECT (E, W, I, UP, SIM, most of B: `zip()` without `strict=`, a mutable
# default, an unused import or variable) is style.
RUFF_ERRORS = frozenset(
    {
        "syntax",  # ruff's own parse errors have no code
        "E902",  # the file cannot be read
        # SyntaxError when the script starts
        *("F404", "F406", "F407", "F621", "F622", "F701", "F702", "F704", "F706", "F707"),
        # `"%s" % ...` and `"{}".format(...)` that raise
        *("F501", "F502", "F503", "F505", "F506", "F507", "F508", "F509", "F521", "F524", "F525"),
        # always true, or not what it reads as
        *("F601", "F602", "F631", "F632", "F633", "F634"),
        "F722",  # an annotation that does not parse
        *("F821", "F822", "F823"),  # undefined names: NameError, UnboundLocalError
        "F901",  # `raise NotImplemented`: TypeError
        *("B002", "B015", "B016", "B029", "B030", "B032", "B035"),
    }
)
# A tool that could not run judged nothing: the script is not known to be right.
TOOL_FAILURES = frozenset({"tool-missing", "tool-error", "timeout"})
# The comment that opens each piece of the user's code in a generated script
# (templates/train_rl: `# --- Your environment (from the wizard): ... ---`).
USER_CODE_MARKER = re.compile(r"# --- Your .*\(from the wizard\)")
# The functions the wizard wraps the user's code in (flows/code/user_code.py): `user_environment`...
USER_SCOPE_PREFIX = "user_"
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

    @property
    def is_error(self) -> bool:
        """The script is wrong (or could not be checked), as opposed to a matter of style."""
        return self.tool != "ruff" or self.code in RUFF_ERRORS or self.code in TOOL_FAILURES


@dataclass(frozen=True)
class CheckReport:
    """The verdict on one script: every problem found, in file order, and the notes."""

    script: Path
    problems: tuple[Problem, ...]
    """What fails the check: every error, and style in the script's own code."""
    notes: tuple[Problem, ...] = ()
    """Style in the user's own code (`user_code_lines`): said, never a failure."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def errors(self) -> tuple[Problem, ...]:
        """The problems that mean the script is wrong: only these stop a dry run."""
        return tuple(p for p in self.problems if p.is_error)

    def format(self) -> str:
        """One line per problem, compiler style, or a line saying the script passed; then one
        line per note."""
        lines = [f"{self.script}:{p.line}:{p.column}: {_described(p)}" for p in self.problems]
        if self.ok:
            lines.append(f"{self.script}: ok (compile, ruff, pyright)")
        if self.notes:
            count = f"{len(self.notes)} note{'s' if len(self.notes) > 1 else ''}"
            lines.append(f"{count} on your own code (matters of style: never a failure):")
            lines += [
                f"{self.script}:{p.line}:{p.column}: note: {_described(p)}" for p in self.notes
            ]
        return "\n".join(lines)


def _described(problem: Problem) -> str:
    return f"{problem.tool} {problem.code}: {_one_line(problem.message)}"


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
        return dataclasses.replace(check_script(path), script=Path(filename))


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
            reports[path] = _report(path, found[absolute])
    return [reports[path] for path in paths]


def _report(path: Path, found: tuple[Problem, ...]) -> CheckReport:
    """`found` split into problems and notes: style in the user's own code is a note."""
    if all(p.is_error for p in found):
        return CheckReport(path, found)
    users = user_code_lines(path.read_bytes().decode("utf-8", errors="replace"))
    notes = tuple(p for p in found if not p.is_error and p.line in users)
    return CheckReport(path, tuple(p for p in found if p not in notes), notes)


def user_code_lines(source: str) -> frozenset[int]:
    """The lines of a generated script that hold the user's own code, as the wizard placed it:
    under each `# --- Your ... (from the wizard) ---` comment, the body of the function that
    follows, less what the template writes there (a `user_*` wrapper's closing `return` of the
    entry points, another function's docstring). None in a script without those comments."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    # Lines as Python counts them (str.splitlines also splits at form feeds and the like).
    lines = re.split(r"\r\n?|\n", source)
    found: set[int] = set()
    for node in module.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not _under_marker(lines, node):
            continue
        body = node.body
        if node.name.startswith(USER_SCOPE_PREFIX):
            body, limit = body[:-1], body[-1].lineno - 1
        else:
            if _is_docstring(body[0]):
                body = body[1:]
            limit = node.end_lineno or node.lineno
        if not body:
            continue
        start, end = body[0].lineno, body[-1].end_lineno or body[-1].lineno
        # The user's comments around their statements are theirs too; the fences that keep
        # `ruff format` off their code (flows.script.literals.function_body) are the template's.
        while start - 1 > node.lineno and _users_comment(lines[start - 2]):
            start -= 1
        while end < limit and lines[end].strip() and _users_comment(lines[end]):
            end += 1
        found.update(range(start, end + 1))
    return frozenset(found)


def _under_marker(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the comment lines right above `node` include a user-code marker."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    index = first - 2
    while index >= 0 and lines[index].lstrip().startswith("#"):
        if USER_CODE_MARKER.match(lines[index]):
            return True
        index -= 1
    return False


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _users_comment(line: str) -> bool:
    """A blank or comment line, other than the template's `# fmt:` fences."""
    text = line.strip()
    return not text or (text.startswith("#") and not text.startswith("# fmt:"))


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
