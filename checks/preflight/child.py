"""The preflight inside the sandbox: the script's policy is the real model, through a relay.

The relay takes the stand-in policy's place (same loopback server, same model-name check) but
answers each completion with the endpoint's, fetched through the parent's forwarder. After the
first gather of trajectory groups (the first step's), their rewards, exceptions and episodes go
to the parent, with how many groups the script left out (its `after_each` returned None, as the
generated scripts do for a group RULER could not score) and the exceptions raised in the script's
own functions, counted by the dry run's call counter: a tool that raises on every call, whose
error the script turns into a message for the agent, shows there and nowhere else. Then the run
stops as at the stand-in trainer's step limit: nothing is trained.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checks.dryrun.child.arg_caps import ArgCap, install_arg_caps
from checks.dryrun.child.user_calls import CallCounter
from checks.dryrun.run_record import Recorder
from checks.dryrun.standins.policy_replies import JsonObject
from checks.dryrun.standins.policy_server import PolicyRefusal, PolicyServer
from checks.preflight.wire import (
    COMPLETIONS_PATH,
    FINISHED_FIELD,
    GROUPS_ENV,
    GROUPS_PATH,
    REQUESTED_FIELD,
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
        requested = time.time()
        status, body = post_json(self._socket_path, COMPLETIONS_PATH, request, REQUEST_TIMEOUT_S)
        if status != 200 or not isinstance(body, dict):
            error = (body or {}).get("error") or {} if isinstance(body, dict) else {}
            raise PolicyRefusal(status, str(error.get("message", "")), error.get("code"))
        usage = body.get("usage") or {}
        choices = body.get("choices") or []
        for choice in choices:
            choice[FINISHED_FIELD] = time.time()
            choice[REQUESTED_FIELD] = requested
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
        raised = FirstTracebacks(recorder.user_calls) if recorder.user_calls is not None else None
        install_first_gather_stop(self.socket_path, raised)


class FirstTracebacks:
    """Wraps the call counter's `exception` to keep, per function, how many exceptions started
    there (not merely passed through on their way out) and the first one's traceback."""

    MARK = "__artbot_preflight_origin__"

    def __init__(self, counter: CallCounter) -> None:
        self._counter = counter
        self.started: dict[str, int] = {}
        self.first: dict[str, str] = {}
        counted = counter.exception

        def exception(name: str) -> None:
            counted(name)
            self._seen(name)

        counter.exception = exception  # type: ignore[method-assign]

    def _seen(self, name: str) -> None:
        error = sys.exc_info()[1]  # the counter is called in the function's `except`
        if error is None or getattr(error, self.MARK, None) is not None:
            return
        # An exception without a __dict__ is counted wherever it is seen.
        with contextlib.suppress(AttributeError):
            setattr(error, self.MARK, name)
        self.started[name] = self.started.get(name, 0) + 1
        if name not in self.first:
            self.first[name] = traceback.format_exc()

    def summary(self) -> list[JsonObject]:
        """Each function an exception started in: its calls, those exceptions, the first one."""
        calls, _ = self._counter.snapshot()
        return [
            {
                "name": name,
                "calls": calls.get(name, count),
                "raised": count,
                "first_traceback": self.first.get(name, ""),
            }
            for name, count in sorted(self.started.items())
        ]


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
    """Turns, completion tokens, truncation, tool calls and wall time of one rollout, from the
    choices kept in its trajectory (what the rollout itself read), and the tool errors it counted
    when the script keeps a `tool_errors` metric (the generated scripts do)."""
    from openai.types.chat.chat_completion import Choice

    choices = [item for item in trajectory.messages_and_choices if isinstance(item, Choice)]
    extras = [choice.model_extra or {} for choice in choices]
    tokens = [extra.get(USAGE_FIELD) for extra in extras]
    finished = [extra[FINISHED_FIELD] for extra in extras if FINISHED_FIELD in extra]
    # From its start, or its first request where that came earlier: ruler_score_group returns
    # new trajectories, started when they were judged.
    started = min(
        [trajectory.start_time.timestamp()]
        + [extra[REQUESTED_FIELD] for extra in extras if REQUESTED_FIELD in extra]
    )
    cut = sum(choice.finish_reason == "length" for choice in choices)
    tool_errors = trajectory.metrics.get("tool_errors")
    return {
        "turns": len(choices),
        "completion_tokens": sum(t for t in tokens if isinstance(t, int)),
        "truncated": cut > 0,
        "truncated_turns": cut,
        "tool_calls": sum(len(choice.message.tool_calls or []) for choice in choices),
        "tool_errors": tool_errors
        if isinstance(tool_errors, int | float) and not isinstance(tool_errors, bool)
        else None,
        "wall_s": max(finished) - started if finished else None,
    }


def group_summary(group: TrajectoryGroup) -> JsonObject:
    return {
        "rewards": [t.reward for t in group.trajectories],
        "exceptions": [e.traceback for e in group.exceptions],
        "episodes": [episode_of(t) for t in group.trajectories],
    }


def install_first_gather_stop(socket_path: str, raised: FirstTracebacks | None = None) -> None:
    """After the first `gather_trajectory_groups` (wrapped again, over the dry run's recording),
    send its groups (how many were asked for, and the exceptions `raised` in the script's
    functions) to the parent and stop the script cleanly."""
    import art
    import art.gather
    from art.trajectories import TrajectoryGroup

    from checks.dryrun.standins.session import DryrunStepLimit

    recorded = art.gather.gather_trajectory_groups

    async def first_gather_only(
        groups: Iterable[Awaitable[TrajectoryGroup]], **kwargs: Any
    ) -> list[TrajectoryGroup]:
        asked = list(groups)
        result = await recorded(asked, **kwargs)
        payload: JsonObject = {"asked": len(asked)}
        try:
            payload["groups"] = [group_summary(g) for g in result if isinstance(g, TrajectoryGroup)]
            payload["functions"] = raised.summary() if raised is not None else []
        except Exception:  # a broken summary must not pass for the script's error
            payload["groups"] = payload.get("groups", [])
            traceback.print_exc()
        post_json(socket_path, GROUPS_PATH, payload, REQUEST_TIMEOUT_S)
        raise DryrunStepLimit("artbot preflight: the first step's groups are gathered")

    for module in (art, art.gather):
        module.gather_trajectory_groups = first_gather_only  # type: ignore[assignment]
