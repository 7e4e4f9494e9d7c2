"""Run a script under the dry run in a child process, with a timeout, and judge it."""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from checks.dryrun.bytecode import compile_environment, compiled_bytecode_dir
from checks.dryrun.handoff import (
    INJECTED_PATH_ENV,
    MAX_STEPS_ENV,
    OPENAI_KEY_PLACEHOLDER,
    OWN_ENVIRONMENT_ENV,
    RECORD_ENV,
    STACKS_AT_ENV,
    WANDB_KEY_PLACEHOLDER,
)
from checks.dryrun.output_tail import OutputTail
from checks.dryrun.report import DryrunReport, build_report, setup_failure_report
from checks.dryrun.run_record import load_record
from checks.dryrun.script_env import (
    ScriptEnvError,
    artbot_cache_dir,
    is_light,
    script_environment,
)
from checks.dryrun.standins.model_dirs import plant_sft_model
from checks.script_metadata import ScriptMetadataError, script_dependencies
from isolation.redaction import SECRET_VARIABLE
from isolation.sandbox import Sandbox, SandboxLimits, python_paths, sandbox_environment

COPY_LIMIT_BYTES = 5 * 1024 * 1024
STACK_DUMP_WAIT_S = 2.0
SECRET_PLACEHOLDER = "artbot-dryrun-placeholder"
# The keys RULER's judge reads by provider (templates/train_rl/partials/environment_check.py.j2):
# the judge is stood in, so a placeholder passes the script's check for any of them.
JUDGE_KEY_NAMES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "TOGETHERAI_API_KEY",
)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# What of artbot the child imports (the bootstrap and the stand-ins): all it sees of artbot.
SANDBOXED_PACKAGES = ("checks", "flows", "isolation")
# What one dry run may use. The address space holds art, litellm and openai with their threads'
# stacks; processes count threads (RLIMIT_NPROC).
DRYRUN_MEMORY_BYTES = 3 * 1024**3
DRYRUN_PROCESSES = 256
# Where the child runs: "auto" is the script's own environment when its dependency block is
# light (anything but openpipe-art[backend]), else artbot's.
EnvironmentChoice = Literal["auto", "script", "project"]
ENVIRONMENT_CHOICES: tuple[EnvironmentChoice, ...] = ("auto", "script", "project")


@dataclass(frozen=True)
class Interpreter:
    """The Python the child runs on, and a note for the report saying which and why (or "")."""

    python: str
    own_environment: bool
    note: str


def choose_interpreter(script: Path, choice: EnvironmentChoice, cache_dir: Path) -> Interpreter:
    """The script's own environment (built or cached) or artbot's, as `choice` asks."""
    if choice == "project":
        return Interpreter(sys.executable, False, "")
    dependencies = script_dependencies(script.read_text(encoding="utf-8", errors="replace"))
    if dependencies is None:
        if choice == "script":
            raise ScriptEnvError("the script has no `# /// script` block to build its environment")
        return Interpreter(sys.executable, False, "")
    if choice == "auto" and not is_light(dependencies):
        return Interpreter(
            sys.executable,
            False,
            "ran in artbot's environment: the script's block asks for openpipe-art[backend] "
            "(the GPU stack), so its dependencies were not installed here",
        )
    built = script_environment(dependencies, cache_dir=cache_dir)
    how = f"built in {built.seconds:.0f} s" if built.built else "cached"
    return Interpreter(
        str(built.python),
        True,
        f"ran in the script's own environment: exactly its `# /// script` dependencies ({how}, "
        f"{built.folder})",
    )


# The script's constants that name an environment variable holding a key it needs (the HTTP
# tools' header: templates/train_rl/partials/tools_http.py.j2; a distillation's teacher:
# templates/train_sft/partials/answers.py.j2).
KEY_VARIABLE_CONSTANTS = ("TOOL_AUTH_VARIABLE", "TEACHER_KEY_ENV")


def keys_read_from_environment(script: Path) -> list[str]:
    """The variables the script reads keys from, by its constants: each gets a placeholder."""
    try:
        module = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return []
    return [
        node.value.value
        for node in module.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id in KEY_VARIABLE_CONSTANTS for t in node.targets)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and node.value.value.isidentifier()
    ]


def dryrun_environment(
    base: Mapping[str, str],
    *,
    record_path: Path,
    max_steps: int,
    own_environment: bool = False,
    home: Path | None = None,
    pycache: Path | None = None,
    stacks_at: float | None = None,
    script_variables: Iterable[str] = (),
) -> dict[str, str]:
    """The child's environment, built from nothing: no value of `base` reaches it.

    A variable of `base` whose name says it holds a secret is passed as a placeholder (its
    name only: scripts check that their keys are set), and so are the keys RULER's judges read
    (the judge is stood in). The rest is the dry run's own configuration.
    """
    placeholders = {name: SECRET_PLACEHOLDER for name in base if SECRET_VARIABLE.search(name)}
    placeholders.update(dict.fromkeys(JUDGE_KEY_NAMES, SECRET_PLACEHOLDER))
    placeholders.update(dict.fromkeys(script_variables, SECRET_PLACEHOLDER))
    env = sandbox_environment(home or record_path.parent, placeholders)
    package_root = str(PACKAGE_ROOT)
    env.update(
        {
            # Placeholders pass the scripts' startup checks; the real keys never reach the child.
            "OPENAI_API_KEY": OPENAI_KEY_PLACEHOLDER,
            "WANDB_API_KEY": WANDB_KEY_PLACEHOLDER,
            "WANDB_MODE": "offline",
            "WANDB_SILENT": "true",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "MPLCONFIGDIR": "/tmp/matplotlib",
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": package_root,
            INJECTED_PATH_ENV: package_root,
            RECORD_ENV: str(record_path),
            MAX_STEPS_ENV: str(max_steps),
        }
    )
    if pycache is not None:
        # Compiled by artbot and read-only to the child (checks.dryrun.bytecode).
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if stacks_at is not None:
        env[STACKS_AT_ENV] = f"{stacks_at:.3f}"
    if own_environment:
        env[OWN_ENVIRONMENT_ENV] = "1"
    return env


def stage_workdir(script: Path, workdir: Path) -> None:
    """Make the script's neighbours visible from `workdir`, where the script runs.

    Small files are copied (so writes stay in the dry run); folders and big files are
    linked, for reading the data a script loads by relative path. A working folder inside the
    script's folder is not linked to itself (a loop): it gets an empty folder of its name.
    """
    for entry in script.parent.iterdir():
        target = workdir / entry.name
        if entry.name.startswith(".") or entry.name == "__pycache__" or target.exists():
            continue
        if entry.resolve() == workdir.resolve():
            target.mkdir()
        elif entry.is_file() and entry.stat().st_size <= COPY_LIMIT_BYTES:
            shutil.copy2(entry, target)
        else:
            target.symlink_to(entry.resolve(), target_is_directory=entry.is_dir())


@contextlib.contextmanager
def _working_directory(workdir: Path | None) -> Iterator[Path]:
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        yield workdir
        return
    with tempfile.TemporaryDirectory(prefix="artbot-dryrun-") as temporary:
        yield Path(temporary)


def _wait_for_stacks(record_path: Path) -> None:
    # The bootstrap records where it is STACK_DUMP_WAIT_S before the timeout; give it that.
    deadline = time.monotonic() + STACK_DUMP_WAIT_S
    while time.monotonic() < deadline:
        record = load_record(record_path)
        if record is not None and record.stuck_at:
            return
        time.sleep(0.05)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    # The child leads its own session; in the sandbox, its PID namespace dies with it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def dryrun_limits(timeout_s: float) -> SandboxLimits:
    """What one dry run may use: CPU for two busy threads over the whole timeout."""
    return SandboxLimits(
        cpu_seconds=int(2 * timeout_s) + 10,
        memory_bytes=DRYRUN_MEMORY_BYTES,
        processes=DRYRUN_PROCESSES,
    )


def dryrun_script(
    path: Path,
    *,
    script_args: Sequence[str] = (),
    max_steps: int = 3,
    timeout_s: float = 300.0,
    workdir: Path | None = None,
    environment: EnvironmentChoice = "auto",
    env_cache_dir: Path | None = None,
    sandbox: Sandbox | None = None,
    data_files: Sequence[Path] = (),
    forks_from: Mapping[str, str] | None = None,
    child_env: Mapping[str, str] | None = None,
    shared_dirs: Sequence[Path] = (),
) -> DryrunReport:
    """Run the ART training script at `path` on a CPU with the stand-in policy and trainer.

    `environment` says where: the script's own PEP 723 environment (built once into
    `env_cache_dir`, default `$XDG_CACHE_HOME/artbot`), artbot's, or "auto" (its own unless
    it asks for openpipe-art[backend]). It runs in `sandbox` (default: this host's, see
    isolation.sandbox); an unconfined one runs it under rlimits only and says so, or, where it
    may not run code, nothing runs and the report says why. `data_files` are files the script
    reads by absolute path (a JSONL named in the terminal): the sandbox sees them, read-only.
    `forks_from` is the SFT model an RL script starts from (flows.wizards.start_from): the real one
    is in the SFT run's art path or on W&B, which the dry run never touches, so it forks a
    stand-in left in its own folder, and says so.
    `child_env` adds variables to the child's environment and `shared_dirs` are folders it may
    write to besides its own (the preflight's socket to its endpoint forwarder: checks.preflight).
    """
    script = path.resolve()
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {path}")
    if max_steps < 1:
        raise ValueError("max_steps must be at least 1")
    if environment not in ENVIRONMENT_CHOICES:
        raise ValueError(f"environment must be one of {', '.join(ENVIRONMENT_CHOICES)}")
    sandbox = sandbox or Sandbox.for_host()
    started = time.monotonic()
    if not sandbox.may_run:
        return setup_failure_report(script, f"not dry-run: {sandbox.refusal}", duration_s=0.0)
    cache_dir = env_cache_dir or artbot_cache_dir(os.environ)
    try:
        interpreter = choose_interpreter(script, environment, cache_dir)
    except (ScriptEnvError, ScriptMetadataError) as error:
        return setup_failure_report(
            script,
            f"the script's own environment could not be built: {error}",
            duration_s=time.monotonic() - started,
        )
    pycache = compiled_bytecode_dir(os.environ)
    compile_environment(interpreter.python, pycache)
    notes = [interpreter.note] if interpreter.note else []
    if not sandbox.confined:
        notes.append(f"ran without a sandbox ({sandbox.reason}): the script could reach this host")
    with _working_directory(workdir) as cwd:
        stage_workdir(script, cwd)
        if forks_from is not None:
            notes.append(plant_sft_model(cwd / ".art", forks_from))
        record_dir = Path(tempfile.mkdtemp(prefix="artbot-dryrun-record-"))
        try:
            record_path = record_dir / "record.json"
            read_only = [
                *python_paths(interpreter.python),
                *(PACKAGE_ROOT / package for package in SANDBOXED_PACKAGES),
                pycache,
                *(file for file in data_files if Path(file).is_file()),
            ]
            read_only_at: dict[Path, Path] = {}
            if sandbox.can_read(script.parent):
                read_only.append(script.parent)
            else:
                # A private folder (0700): the sandbox's uid sees the staged copy in its place.
                read_only_at[script.parent] = cwd
                notes.append(
                    "the script's folder is private (mode 0700), so the dry run saw a copy of "
                    f"its files under {COPY_LIMIT_BYTES // 1024**2} MB, not its subfolders"
                )
            env = dryrun_environment(
                os.environ,
                record_path=record_path,
                max_steps=max_steps,
                own_environment=interpreter.own_environment,
                home=cwd,
                pycache=pycache,
                stacks_at=time.time() + max(0.0, timeout_s - STACK_DUMP_WAIT_S),
                script_variables=keys_read_from_environment(script),
            )
            env.update(child_env or {})
            with sandbox.confine(
                [
                    interpreter.python,
                    "-m",
                    "checks.dryrun.child.bootstrap",
                    str(script),
                    *script_args,
                ],
                cwd=cwd,
                limits=dryrun_limits(timeout_s),
                read_only=read_only,
                writable=[cwd, record_dir, *shared_dirs],
                read_only_at=read_only_at,
            ) as command:
                process = subprocess.Popen(
                    command,
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                output = OutputTail()
                assert process.stdout is not None
                output.follow(process.stdout)
                exit_code: int | None
                try:
                    exit_code = process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    exit_code = None
                    _wait_for_stacks(record_path)
                # Also on a normal exit: leftovers of the script (its own children) go too.
                _kill_group(process)
                process.wait()
                output.wait(timeout=5)
                process.stdout.close()
            return build_report(
                script,
                load_record(record_path),
                exit_code=exit_code,
                timeout_s=timeout_s,
                output_tail=output.lines(),
                duration_s=time.monotonic() - started,
                own_environment=interpreter.own_environment,
                environment_note="; ".join(notes),
            )
        finally:
            shutil.rmtree(record_dir, ignore_errors=True)
