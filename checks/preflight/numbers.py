"""What a preflight measured, in the few numbers that outlive its report: the estimate prices a
run with them, the bot keeps them with the thread's script and shows them again after training."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from checks.preflight.report import PreflightReport


@dataclass(frozen=True)
class PreflightNumbers:
    """Per-rollout means of a preflight's finished groups, and how its rewards spread."""

    model: str
    """The model the preflight asked."""
    base_model: bool
    """Whether that model is the script's base model (else a stand-in's numbers)."""
    verdict: str
    rollouts: int
    """Rollouts that ended with a reward (the means are over them)."""
    groups: int
    mean_reward: float
    zero_variance_share: float
    """The share of groups whose rewards were all equal: GRPO trains on none of them."""
    prompt_tokens_per_rollout: float
    completion_tokens_per_rollout: float
    turns_per_rollout: float
    wall_s_per_rollout: float | None
    """The median wall time of a rollout; None when the script did not say."""
    truncated_share: float

    @classmethod
    def of(cls, report: PreflightReport) -> PreflightNumbers | None:
        """The numbers of `report`, or None when it measured nothing (no group finished)."""
        measured = [group for group in report.measured if group.rewards]
        rewards = [reward for group in measured for reward in group.rewards]
        episodes = [episode for group in measured for episode in group.episodes]
        if not rewards or not episodes:
            return None
        turns = sum(episode.turns for episode in episodes)
        walls = [episode.wall_s for episode in episodes if episode.wall_s is not None]
        # Prompt tokens are counted per request, not per episode: a turn's share of them.
        per_turn = report.prompt_tokens / report.requests if report.requests else 0.0
        return cls(
            model=report.model,
            base_model=report.is_base_model,
            verdict=report.verdict,
            rollouts=len(rewards),
            groups=len(measured),
            mean_reward=statistics.fmean(rewards),
            zero_variance_share=sum(g.zero_variance for g in measured) / len(measured),
            prompt_tokens_per_rollout=per_turn * turns / len(episodes),
            completion_tokens_per_rollout=statistics.fmean(
                episode.completion_tokens for episode in episodes
            ),
            turns_per_rollout=turns / len(episodes),
            wall_s_per_rollout=statistics.median(walls) if walls else None,
            truncated_share=sum(episode.truncated for episode in episodes) / len(episodes),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> PreflightNumbers | None:
        """The numbers `to_json` wrote; None for anything else (a row from another version)."""
        try:
            wall = value.get("wall_s_per_rollout")
            return cls(
                model=str(value["model"]),
                base_model=bool(value["base_model"]),
                verdict=str(value["verdict"]),
                rollouts=int(value["rollouts"]),
                groups=int(value["groups"]),
                mean_reward=float(value["mean_reward"]),
                zero_variance_share=float(value["zero_variance_share"]),
                prompt_tokens_per_rollout=float(value["prompt_tokens_per_rollout"]),
                completion_tokens_per_rollout=float(value["completion_tokens_per_rollout"]),
                turns_per_rollout=float(value["turns_per_rollout"]),
                wall_s_per_rollout=None if wall is None else float(wall),
                truncated_share=float(value["truncated_share"]),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def said(self) -> str:
        """One line: what the preflight saw, on which model."""
        model = f"`{self.model}`" + ("" if self.base_model else " (a stand-in for the base model)")
        return (
            f"The preflight on {model}: mean reward {self.mean_reward:.3f} over {self.rollouts} "
            f"rollouts in {self.groups} groups, {self.zero_variance_share:.0%} of the groups "
            "with zero reward variance."
        )
