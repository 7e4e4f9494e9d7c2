"""`python -m checks.dryrun.child.bootstrap SCRIPT [ARGS...]`: run SCRIPT inside the dry run.

Before the script runs as `__main__`, this process blocks the network, starts the stand-in
policy, points OpenAI clients and litellm at it, swaps the stand-in trainer into `art`,
lets the stand-in player search a game's legal moves before each request, caps the script's
size flags (and points a distillation's teacher at the stand-in policy) and starts recording.
The script runs as `__main__` with a counter in each of its functions
(`checks.dryrun.child.user_calls`). Its configuration comes from the environment that
`checks.dryrun.launch` prepares (the `ARTBOT_DRYRUN_*` variables).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from checks.dryrun.child.script_frames import script_traceback, where_it_is
from checks.dryrun.handoff import (
    INJECTED_PATH_ENV,
    MAX_STEPS_ENV,
    OPENAI_KEY_PLACEHOLDER,
    OWN_ENVIRONMENT_ENV,
    RECORD_ENV,
    SEED_ENV,
    STACKS_AT_ENV,
    WANDB_KEY_PLACEHOLDER,
)

if TYPE_CHECKING:
    from checks.dryrun.run_record import Recorder


@dataclass(frozen=True)
class BootstrapConfig:
    """What the parent process asks for."""

    record_path: Path
    max_steps: int
    seed: int
    own_environment: bool = False  # the script's own PEP 723 environment, not artbot's
    stacks_at: float | None = None  # when (time.time()) to record where it is: a timeout comes

    @property
    def step_limit(self) -> int:
        """The stand-in trainer's hard cap: slack for dataset loops the caps only shorten."""
        return 2 * self.max_steps

    @classmethod
    def from_env(cls) -> BootstrapConfig:
        """Read the `ARTBOT_DRYRUN_*` variables."""
        return cls(
            record_path=Path(os.environ[RECORD_ENV]),
            max_steps=int(os.environ.get(MAX_STEPS_ENV, "3")),
            seed=int(os.environ.get(SEED_ENV, "0")),
            own_environment=os.environ.get(OWN_ENVIRONMENT_ENV) == "1",
            stacks_at=float(os.environ[STACKS_AT_ENV]) if os.environ.get(STACKS_AT_ENV) else None,
        )


def _record_stacks_at(when: float) -> None:
    # The SIGUSR1 handler runs on the main thread, where the event loop and its tasks are.
    timer = threading.Timer(max(0.0, when - time.time()), os.kill, (os.getpid(), signal.SIGUSR1))
    timer.daemon = True
    timer.start()


def _is_step_limit(error: BaseException) -> bool:
    from checks.dryrun.standins.session import DryrunStepLimit

    if isinstance(error, BaseExceptionGroup):
        return all(_is_step_limit(e) for e in error.exceptions)
    return isinstance(error, DryrunStepLimit)


def _exit_code(error: SystemExit) -> int:
    if error.code is None:
        return 0
    if isinstance(error.code, int):
        return error.code
    print(error.code, file=sys.stderr)
    return 1


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def run(script: Path, script_args: list[str], config: BootstrapConfig) -> int:
    """Run `script` under the dry run; returns its exit code."""
    from checks.dryrun.child.network_guard import install_network_guard
    from checks.dryrun.child.user_calls import CallCounter, run_counted
    from checks.dryrun.run_record import Recorder

    recorder = Recorder(config.record_path, script=str(script), argv=script_args)
    counter = CallCounter()
    recorder.user_calls = counter
    recorder.flush()
    install_network_guard(
        lambda target: recorder.finding(
            "network_blocked",
            "warning",
            f"the script tried to reach {target}; the dry run blocked it (it makes no "
            "external call)",
        )
    )
    from checks.dryrun.standins.policy_server import PolicyServer
    from checks.preflight.child import preflight_from_env

    # A preflight (checks.preflight): the real model through a relay, one step's groups.
    preflight = preflight_from_env()
    policy = (preflight.relay() if preflight else PolicyServer(seed=config.seed)).start()
    recorder.policy_stats = policy.stats_json
    os.environ["OPENAI_BASE_URL"] = policy.base_url
    os.environ["OPENAI_API_BASE"] = policy.base_url
    os.environ["OPENAI_API_KEY"] = OPENAI_KEY_PLACEHOLDER
    os.environ.setdefault("WANDB_API_KEY", WANDB_KEY_PLACEHOLDER)
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

    from checks.dryrun.child import art_patches
    from checks.dryrun.child.arg_caps import dryrun_caps, install_arg_caps
    from checks.dryrun.standins.session import DryrunSession, install_session

    install_session(
        DryrunSession(
            policy=policy,
            recorder=recorder,
            step_limit=config.step_limit,
            art_root=Path.cwd() / ".art",
        )
    )
    art_patches.install_standin_backends()
    wandb_imported_by_script = art_patches.silence_wandb(import_it=config.own_environment)
    art_patches.install_gather_recording(recorder)
    art_patches.route_litellm(policy.base_url, OPENAI_KEY_PLACEHOLDER)
    from checks.dryrun.standins.move_search import MoveSearch, install_request_hook

    if preflight is not None:
        preflight.install(recorder)
    else:
        # The stand-in player: legal moves found on a copy of the game, played by the policy.
        move_search = MoveSearch(counter, policy.know_moves)
        counter.observer = move_search
        recorder.move_search = move_search.snapshot
        install_request_hook(move_search)
        install_arg_caps(
            dryrun_caps(config.max_steps, teacher_url=policy.base_url),
            lambda change: recorder.finding(f"cap {change.split()[0]}", "note", f"capped {change}"),
        )

    injected = os.environ.pop(INJECTED_PATH_ENV, None)
    if injected and injected in sys.path:
        sys.path.remove(injected)
    # As `python SCRIPT` would: the script's folder (not the working directory) first on
    # the path, and its argv.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path[0] = str(script.parent)
    else:
        sys.path.insert(0, str(script.parent))
    sys.argv = [str(script), *script_args]
    # SIGUSR1 before a run that timed out is killed: say where it hangs.
    signal.signal(signal.SIGUSR1, lambda _, frame: recorder.stuck(where_it_is(frame, script)))
    # In the sandbox the parent cannot signal this process: it signals itself, just before
    # the parent's timeout.
    if config.stacks_at is not None:
        _record_stacks_at(config.stacks_at)
    stopped = False
    exit_code = 0
    try:
        run_counted(script, counter)
    except SystemExit as error:
        exit_code = _exit_code(error)
        if exit_code != 0:
            recorder.uncaught(f"SystemExit: {error.code}", script_traceback(error, script))
    except BaseException as error:
        if _is_step_limit(error):
            stopped = True
            print(f"[artbot dryrun] {_first_line(str(error))}", file=sys.stderr)
        else:
            text = script_traceback(error, script)
            sys.stderr.write(text)
            summary = f"{type(error).__name__}: {_first_line(str(error))}".rstrip(": ")
            recorder.uncaught(summary, text)
            exit_code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    _check_shutdown(
        recorder,
        clean_exit=exit_code == 0 and not stopped,
        wandb_imported=wandb_imported_by_script(),
    )
    recorder.finish(exit_code, stopped_at_step_limit=stopped)
    policy.stop()
    return exit_code


def _check_shutdown(recorder: Recorder, *, clean_exit: bool, wandb_imported: bool) -> None:
    from checks.dryrun.standins.session import current_session

    if clean_exit and current_session().unclosed_backends:
        recorder.finding(
            "backend_not_closed",
            "warning",
            "the script never awaited backend.close(): a real LocalBackend would leave its "
            "vLLM server running (close it in a `finally`)",
        )
    if wandb_imported:
        recorder.finding(
            "wandb_imported",
            "warning",
            "wandb was imported during the dry run (by the script itself: ART's own W&B "
            "logging is switched off here)",
        )


def main() -> None:
    """Entry point: `python -m checks.dryrun.child.bootstrap SCRIPT [ARGS...]`."""
    if len(sys.argv) < 2:
        print("usage: python -m checks.dryrun.child.bootstrap SCRIPT [ARGS...]", file=sys.stderr)
        raise SystemExit(2)
    script = Path(sys.argv[1]).resolve()
    sys.exit(run(script, sys.argv[2:], BootstrapConfig.from_env()))


if __name__ == "__main__":
    main()
