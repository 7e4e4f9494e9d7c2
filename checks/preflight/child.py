"""The preflight inside the sandbox: the script's policy is the real model, through a relay.

The relay takes the stand-in policy's place (same loopback server, same model-name check) but
answers each completion with the endpoint's, fetched through the parent's forwarder. After the
first gather of trajectory groups (the first step's), their rewards, exceptions and episodes go
to the parent, and the run stops as at the stand-in trainer's step limit: nothing is trained.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checks.dryrun.arg_caps import ArgCap, install_arg_caps
from checks.dryrun.policy_replies import JsonObject
from checks.dryrun.policy_server import PolicyRefusal, PolicyServer
from checks.dryrun.run_record import Recorder
from checks.preflight.wire import (
    COMPLETIONS_PATH,
    FINISHED_FIELD,
    GROUPS_ENV,
    GROUPS_PATH,
    SOCKET_ENV,
    USAGE_FIELD,
    post_json,
)

if TYPE_CHECKING:
    # Imported on use: the bootstrap reads the preflight's variables before `art` is imported.
    from art.trajectories import Trajectory, TrajectoryGroup

REQUEST_TIMEOUT_S = 600.0


class EndpointRelay(PolicyServer):
    """The stand-in policy's server, answering with the real endpoint's completions."""

    def __init__(self, socket_path: str) -> None:
        super().__init__()
        self._socket_path = socket_path

    def complete(self, request: JsonObject) -> JsonObject:
        model = str(request.get("model", ""))
        with self._lock:
            self._check_model_name(model)
            self.stats.requests += 1
            self.stats.models_asked[model] += 1
        status, body = post_json(self._socket_path, COMPLETIONS_PATH, request, REQUEST_TIMEOUT_S)
        if status != 200 or not isinstance(body, dict):
            error = (body or {}).get("error") or {} if isinstance(body, dict) else {}
            raise PolicyRefusal(status, str(error.get("message", "")), error.get("code"))
        usage = body.get("usage") or {}
        choices = body.get("choices") or []
        for choice in choices:
            choice[FINISHED_FIELD] = time.time()
            if len(choices) == 1:
                choice[USAGE_FIELD] = usage.get("completion_tokens")
        return body


@dataclass(frozen=True)
class PreflightChild:
    """The child's side of one preflight, from the variables the parent set."""

    socket_path: str
    groups: int

    def relay(self) -> EndpointRelay:
        return EndpointRelay(self.socket_path)

    def install(self, recorder: Recorder) -> None:
        """Cap the script's flags for one step of `groups` scenarios and stop after its gather."""
        install_arg_caps(
            preflight_caps(self.groups),
            lambda change: recorder.finding(f"cap {change.split()[0]}", "note", f"set {change}"),
        )
        install_first_gather_stop(self.socket_path)


def preflight_from_env() -> PreflightChild | None:
    """The preflight the parent asked for, or None in a dry run."""
    path = os.environ.get(SOCKET_ENV)
    if not path:
        return None
    return PreflightChild(path, int(os.environ.get(GROUPS_ENV, "2")))


def preflight_caps(groups: int) -> list[ArgCap]:
    """One step of `groups` scenarios, each with the script's own rollouts per group."""

    def exactly(value: Any, _: Any) -> Any:
        return groups if isinstance(value, int) and not isinstance(value, bool) else value

    def at_most_one(value: Any, _: Any) -> Any:
        return min(value, 1) if isinstance(value, int) and not isinstance(value, bool) else value

    return [
        ArgCap("groups_per_step", exactly),
        ArgCap("num_steps", at_most_one),
        ArgCap("num_epochs", at_most_one),
    ]


def episode_of(trajectory: Trajectory) -> JsonObject:
    """Turns, completion tokens, truncation and wall time of one rollout, from its choices."""
    from openai.types.chat.chat_completion import Choice

    choices = [item for item in trajectory.messages_and_choices if isinstance(item, Choice)]
    extras = [choice.model_extra or {} for choice in choices]
    tokens = [extra.get(USAGE_FIELD) for extra in extras]
    finished = [extra[FINISHED_FIELD] for extra in extras if FINISHED_FIELD in extra]
    return {
        "turns": len(choices),
        "completion_tokens": sum(t for t in tokens if isinstance(t, int)),
        "truncated": any(choice.finish_reason == "length" for choice in choices),
        "wall_s": max(finished) - trajectory.start_time.timestamp() if finished else None,
    }


def group_summary(group: TrajectoryGroup) -> JsonObject:
    return {
        "rewards": [t.reward for t in group.trajectories],
        "exceptions": [e.traceback for e in group.exceptions],
        "episodes": [episode_of(t) for t in group.trajectories],
    }


def install_first_gather_stop(socket_path: str) -> None:
    """After the first `gather_trajectory_groups` (wrapped again, over the dry run's recording),
    send its groups to the parent and stop the script cleanly."""
    import art
    import art.gather
    from art.trajectories import TrajectoryGroup

    from checks.dryrun.standin_backend import DryrunStepLimit

    recorded = art.gather.gather_trajectory_groups

    async def first_gather_only(
        groups: Iterable[Awaitable[TrajectoryGroup]], **kwargs: Any
    ) -> list[TrajectoryGroup]:
        result = await recorded(groups, **kwargs)
        try:
            summaries = [group_summary(g) for g in result if isinstance(g, TrajectoryGroup)]
        except Exception:  # a broken summary must not pass for the script's error
            summaries = []
            traceback.print_exc()
        post_json(socket_path, GROUPS_PATH, {"groups": summaries}, REQUEST_TIMEOUT_S)
        raise DryrunStepLimit("artbot preflight: the first step's groups are gathered")

    for module in (art, art.gather):
        module.gather_trajectory_groups = first_gather_only  # type: ignore[assignment]
