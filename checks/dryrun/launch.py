"""Run a script under the dry run in a child process, with a timeout, and judge it."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from checks.dryrun.handoff import (
    INJECTED_PATH_ENV,
    MAX_STEPS_ENV,
    OPENAI_KEY_PLACEHOLDER,
    OWN_ENVIRONMENT_ENV,
    RECORD_ENV,
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
from checks.script_metadata import ScriptMetadataError, script_dependencies

COPY_LIMIT_BYTES = 5 * 1024 * 1024
STACK_DUMP_WAIT_S = 2.0
SECRET_NAME = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)$|^AWS_", re.IGNORECASE)
SECRET_PLACEHOLDER = "artbot-dryrun-placeholder"
# Set by the bootstrap to the stand-in policy; a stale value must not leak through.
DROPPED_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_BASE")
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


def dryrun_environment(
    base: Mapping[str, str], *, record_path: Path, max_steps: int, own_environment: bool = False
) -> dict[str, str]:
    """The child's environment: no real secrets, offline libraries, the bootstrap's config."""
    env = {
        name: (SECRET_PLACEHOLDER if SECRET_NAME.search(name) else value)
        for name, value in base.items()
        if name not in DROPPED_VARIABLES
    }
    package_root = str(Path(__file__).resolve().parents[2])
    if "PYTHONPYCACHEPREFIX" not in env:
        # A dry run imports ~2,700 modules (art, litellm, openai); compiling them afresh in
        # every run costs seconds. Cache the bytecode in artbot's own cache folder.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(bytecode_cache_dir(base))
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
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(p for p in (package_root, base.get("PYTHONPATH")) if p),
            INJECTED_PATH_ENV: package_root,
            RECORD_ENV: str(record_path),
            MAX_STEPS_ENV: str(max_steps),
        }
    )
    if own_environment:
        env[OWN_ENVIRONMENT_ENV] = "1"
    else:
        env.pop(OWN_ENVIRONMENT_ENV, None)
    return env


def bytecode_cache_dir(env: Mapping[str, str]) -> Path:
    """Where dry runs keep compiled bytecode: `$XDG_CACHE_HOME/artbot/pycache`."""
    return artbot_cache_dir(env) / "pycache"


def stage_workdir(script: Path, workdir: Path) -> None:
    """Make the script's neighbours visible from `workdir`, where the script runs.

    Small files are copied (so writes stay in the dry run); folders and big files are
    linked, for reading the data a script loads by relative path.
    """
    for entry in script.parent.iterdir():
        target = workdir / entry.name
        if entry.name.startswith(".") or entry.name == "__pycache__" or target.exists():
            continue
        if entry.is_file() and entry.stat().st_size <= COPY_LIMIT_BYTES:
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


def _ask_where_it_hangs(process: subprocess.Popen[bytes], record_path: Path) -> None:
    # The bootstrap answers SIGUSR1 by recording the stacks; give it a moment.
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGUSR1)
    deadline = time.monotonic() + STACK_DUMP_WAIT_S
    while time.monotonic() < deadline:
        record = load_record(record_path)
        if record is not None and record.stuck_at:
            return
        time.sleep(0.05)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    # The child leads its own session, so its group is exactly what this run started.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def dryrun_script(
    path: Path,
    *,
    script_args: Sequence[str] = (),
    max_steps: int = 3,
    timeout_s: float = 300.0,
    workdir: Path | None = None,
    environment: EnvironmentChoice = "auto",
    env_cache_dir: Path | None = None,
) -> DryrunReport:
    """Run the ART training script at `path` on a CPU with the stand-in policy and trainer.

    `environment` says where: the script's own PEP 723 environment (built once into
    `env_cache_dir`, default `$XDG_CACHE_HOME/artbot`), artbot's, or "auto" (its own unless
    it asks for openpipe-art[backend]).
    """
    script = path.resolve()
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {path}")
    if max_steps < 1:
        raise ValueError("max_steps must be at least 1")
    if environment not in ENVIRONMENT_CHOICES:
        raise ValueError(f"environment must be one of {', '.join(ENVIRONMENT_CHOICES)}")
    started = time.monotonic()
    try:
        interpreter = choose_interpreter(
            script, environment, env_cache_dir or artbot_cache_dir(os.environ)
        )
    except (ScriptEnvError, ScriptMetadataError) as error:
        return setup_failure_report(
            script,
            f"the script's own environment could not be built: {error}",
            duration_s=time.monotonic() - started,
        )
    with _working_directory(workdir) as cwd:
        stage_workdir(script, cwd)
        record_dir = Path(tempfile.mkdtemp(prefix="artbot-dryrun-record-"))
        try:
            record_path = record_dir / "record.json"
            process = subprocess.Popen(
                [interpreter.python, "-m", "checks.dryrun.bootstrap", str(script), *script_args],
                cwd=cwd,
                env=dryrun_environment(
                    os.environ,
                    record_path=record_path,
                    max_steps=max_steps,
                    own_environment=interpreter.own_environment,
                ),
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
                _ask_where_it_hangs(process, record_path)
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
                environment_note=interpreter.note,
            )
        finally:
            shutil.rmtree(record_dir, ignore_errors=True)
