"""What the stand-in trainer checks in the trajectory groups a script hands to `train`.

The real LocalBackend skips, without a word, what it cannot train on: a trajectory whose
assistant turns are dicts (no logprobs), a group whose rewards are all equal. These checks
say so instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from art.trajectories import Trajectory, TrajectoryGroup
from openai.types.chat.chat_completion import Choice

from checks.dryrun.run_record import Severity

METADATA_TYPES = (float, int, str, bool, type(None))


@dataclass(frozen=True)
class GroupFinding:
    """One thing wrong (or worth a warning) in the groups given to a train step."""

    kind: str
    severity: Severity
    message: str


@dataclass
class GroupCheck:
    """The verdict on one train step's groups."""

    groups: int = 0
    trajectories: int = 0
    trainable_groups: int = 0
    findings: list[GroupFinding] = field(default_factory=list)


def _where(step: int, group: int, trajectory: int) -> str:
    return f"step {step}, group {group}, trajectory {trajectory}"


def check_trajectory(trajectory: Trajectory, where: str) -> list[GroupFinding]:
    """Problems of one trajectory: no trainable Choice, non-numeric metrics, bad reward."""
    findings: list[GroupFinding] = []
    items = trajectory.messages_and_choices
    choices = [item for item in items if isinstance(item, Choice)]
    if not choices:
        dict_turns = sum(
            1 for item in items if isinstance(item, dict) and item.get("role") == "assistant"
        )
        detail = (
            f"its {dict_turns} assistant turn(s) are dicts built from the response"
            if dict_turns
            else "it has no assistant turn at all"
        )
        findings.append(
            GroupFinding(
                "no_choice",
                "problem",
                f"a trajectory has no Choice objects ({where}): {detail}. A dict carries no "
                "logprobs, so the trainer cannot train on it; append response.choices[0] itself "
                "to messages_and_choices.",
            )
        )
    elif not any(choice.logprobs for choice in choices):
        findings.append(
            GroupFinding(
                "no_logprobs",
                "problem",
                f"a trajectory's Choice objects carry no logprobs ({where}): the trainer skips "
                "it. Use the Choice returned by model.openai_client() unchanged.",
            )
        )
    for name, value in trajectory.metrics.items():
        if not isinstance(value, int | float):
            findings.append(
                GroupFinding(
                    "metric_type",
                    "problem",
                    f"metric {name!r} is {type(value).__name__} {value!r} ({where}): "
                    "trajectory metrics must be float, int or bool.",
                )
            )
    for name, value in trajectory.metadata.items():
        if not isinstance(value, METADATA_TYPES):
            findings.append(
                GroupFinding(
                    "metadata_type",
                    "problem",
                    f"metadata {name!r} is {type(value).__name__} ({where}): trajectory "
                    "metadata must be float, int, str, bool or None.",
                )
            )
    if not isinstance(trajectory.reward, int | float) or not math.isfinite(trajectory.reward):
        findings.append(
            GroupFinding(
                "reward_not_finite",
                "problem",
                f"reward is {trajectory.reward!r} ({where}): rewards must be finite numbers.",
            )
        )
    return findings


def is_trainable(group: TrajectoryGroup) -> bool:
    """GRPO learns from a group only when it has two trajectories with different rewards."""
    rewards = {t.reward for t in group.trajectories}
    return len(group.trajectories) >= 2 and len(rewards) >= 2


def check_groups(groups: Iterable[TrajectoryGroup], *, step: int) -> GroupCheck:
    """Check every group handed to the train call that makes `step`."""
    check = GroupCheck()
    for g, group in enumerate(groups, start=1):
        if not isinstance(group, TrajectoryGroup):
            check.findings.append(
                GroupFinding(
                    "not_a_group",
                    "problem",
                    f"train got a {type(group).__name__} where a TrajectoryGroup belongs "
                    f"(step {step}, item {g}).",
                )
            )
            continue
        check.groups += 1
        check.trajectories += len(group.trajectories)
        if is_trainable(group):
            check.trainable_groups += 1
        if len(group.trajectories) < 2:
            check.findings.append(
                GroupFinding(
                    "small_group",
                    "warning",
                    f"a group reached train with {len(group.trajectories)} trajectory(ies) "
                    f"(step {step}, group {g}): GRPO compares trajectories within a group and "
                    "needs at least 2.",
                )
            )
        for t, trajectory in enumerate(group.trajectories, start=1):
            check.findings.extend(check_trajectory(trajectory, _where(step, g, t)))
    return check
