"""How the dry run swaps itself into an unmodified script's `art`.

- `art.local` (and `art.local.backend`) become a module whose `LocalBackend` is the
  stand-in; `art.ServerlessBackend` and `art.serverless.ServerlessBackend` likewise.
- `art.gather_trajectory_groups` / `art.gather_trajectories` are wrapped to count groups,
  rollouts, swallowed exceptions and rewards.
- W&B is never touched: `Model._get_wandb_run` returns None (after importing wandb, as
  the real one does, when the script runs in its own environment).
- litellm calls go to the stand-in policy, whatever provider the judge model names.
"""

from __future__ import annotations

import importlib
import re
import sys
import traceback
import types
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

import art
import art.gather
import art.serverless
import art.serverless.backend
from art.trajectories import Trajectory, TrajectoryGroup

from checks.dryrun.run_record import Recorder
from checks.dryrun.standins.standin_backend import StandinLocalBackend, StandinServerlessBackend

AfterEach = Callable[[TrajectoryGroup], Awaitable[TrajectoryGroup | list[TrajectoryGroup] | None]]
# litellm providers that already speak the OpenAI wire format.
OPENAI_COMPATIBLE = frozenset({"openai", "hosted_vllm", "openai_like", "text-completion-openai"})


def install_standin_backends() -> None:
    """Make `from art.local import LocalBackend` and `art.ServerlessBackend` the stand-ins."""
    local = types.ModuleType("art.local", "artbot dryrun: the stand-in LocalBackend.")
    local.__path__ = []  # a package, so that `import art.local.backend` resolves too
    local.LocalBackend = StandinLocalBackend  # type: ignore[attr-defined]
    local.__all__ = ["LocalBackend"]  # type: ignore[attr-defined]
    local_backend = types.ModuleType("art.local.backend")
    local_backend.LocalBackend = StandinLocalBackend  # type: ignore[attr-defined]
    local.backend = local_backend  # type: ignore[attr-defined]
    sys.modules["art.local"] = local
    sys.modules["art.local.backend"] = local_backend
    art.local = local  # type: ignore[attr-defined]
    for module in (art, art.serverless, art.serverless.backend):
        module.ServerlessBackend = StandinServerlessBackend  # type: ignore[attr-defined, misc]


def silence_wandb(*, import_it: bool) -> Callable[[], bool]:
    """No W&B run, ever: `Model._get_wandb_run` returns None.

    ART asks for the run in `model.log` whenever WANDB_API_KEY is set, and ServerlessBackend's
    `train` always; the real method's first line is `import wandb`. With `import_it` (the
    script's own environment) the stand-in imports it too, so a block that forgets wandb fails
    here as it would on the GPU host; in artbot's environment, which lacks wandb, it does not.
    Returns a test of whether the script itself imported wandb (not just the stand-in).
    """
    loaded_before_standin: list[bool] = []

    def no_wandb_run(self: art.Model) -> None:
        if import_it:
            if not loaded_before_standin:
                loaded_before_standin.append("wandb" in sys.modules)
            importlib.import_module("wandb")
        return None

    def imported_by_script() -> bool:
        if "wandb" not in sys.modules:
            return False
        return loaded_before_standin[0] if loaded_before_standin else True

    art.Model._get_wandb_run = no_wandb_run  # type: ignore[method-assign, assignment]
    return imported_by_script


def _traceback_text(text: str) -> str:
    # TrajectoryGroup joins already newline-terminated lines with "\n".
    return re.sub(r"\n{2,}", "\n", text).rstrip() + "\n"


def _exception_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


def install_gather_recording(recorder: Recorder) -> None:
    """Wrap ART's gather functions so the recorder sees every group, exception and reward."""
    original_groups = art.gather.gather_trajectory_groups
    original_trajectories = art.gather.gather_trajectories

    async def gather_trajectory_groups(
        groups: Iterable[Awaitable[TrajectoryGroup]],
        *,
        after_each: AfterEach | None = None,
        **kwargs: Any,
    ) -> list[TrajectoryGroup]:
        async def observed(group: TrajectoryGroup) -> Any:
            # Before after_each: ruler_score_group returns a new group without exceptions.
            recorder.rollouts_finished(
                len(group.trajectories), [_traceback_text(e.traceback) for e in group.exceptions]
            )
            if after_each is None:
                return group
            result = await after_each(group)
            if result is None and group.trajectories:
                recorder.group_dropped()
            return result

        result = await original_groups(groups, after_each=observed, **kwargs)
        recorder.rewards_seen([t.reward for g in result for t in g.trajectories])
        recorder.metrics_seen([t.metrics for g in result for t in g.trajectories])
        recorder.gather_finished()
        return result

    async def gather_trajectories(trajectories: Iterable[Any], **kwargs: Any) -> Any:
        results = await original_trajectories(trajectories, **kwargs)
        found: list[Trajectory] = []
        errors: list[str] = []
        for item in cast(list[Any], results):
            if isinstance(item, BaseException):
                errors.append(_exception_text(item))
            elif isinstance(item, Trajectory):
                found.append(item)
            else:
                found.extend(t for t in item if isinstance(t, Trajectory))
        recorder.rollouts_finished(len(found), errors)
        recorder.rewards_seen([t.reward for t in found])
        recorder.metrics_seen([t.metrics for t in found])
        recorder.gather_finished()
        return results

    for module in (art, art.gather):
        module.gather_trajectory_groups = gather_trajectory_groups  # type: ignore[assignment]
        module.gather_trajectories = gather_trajectories  # type: ignore[assignment]


def route_litellm(base_url: str, api_key: str) -> None:
    """Send every litellm completion to the stand-in policy, as an OpenAI-compatible call.

    `OPENAI_API_BASE` already covers `openai/...` judges; this covers `anthropic/...` and
    the rest, which would otherwise try their provider (and meet the network guard).
    """
    import litellm

    litellm.suppress_debug_info = True  # its "Provider List" banner for unpriced models

    def rerouted(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        names = ("model", "messages")
        kwargs = {**dict(zip(names, args, strict=False)), **kwargs}
        model = str(kwargs.get("model", ""))
        provider = kwargs.get("custom_llm_provider") or (
            model.split("/", 1)[0] if "/" in model else ""
        )
        if provider not in OPENAI_COMPATIBLE:
            kwargs["model"] = f"openai/{model}"
            kwargs.pop("custom_llm_provider", None)
        kwargs["api_base"] = base_url
        kwargs.pop("base_url", None)
        kwargs["api_key"] = api_key
        return kwargs

    original_acompletion = litellm.acompletion
    original_completion = litellm.completion

    async def acompletion(*args: Any, **kwargs: Any) -> Any:
        return await original_acompletion(**rerouted(args, kwargs))

    def completion(*args: Any, **kwargs: Any) -> Any:
        return original_completion(**rerouted(args, kwargs))

    litellm.acompletion = acompletion  # type: ignore[assignment]
    litellm.completion = completion  # type: ignore[assignment]
    ruler = sys.modules.get("art.rewards.ruler")
    if ruler is not None:
        ruler.acompletion = acompletion  # type: ignore[attr-defined]
