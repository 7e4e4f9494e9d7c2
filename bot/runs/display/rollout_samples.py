"""Sample rollouts in a run's thread: the best and the worst validation rollout of a step, as a
readable excerpt (each message, its tool calls, the reward), or as a file when too long to read
in a message.

When they are posted (one message per validation at most, and only a few validations):
- the first validation's, when it arrives (what the model does before it learned much; with a
  step-0 validation, the base model's),
- the last validation's, when the run succeeds (what it learned), unless it is the first,
- any validation's on request: `show rollouts [step]` typed in the run's thread (the latest
  validation when no step is given), by anyone in the channel: it only shows what the thread's
  run already did, nothing is started.
A post per validation would be the noisiest part of a long run's thread, as validation posts
were (the status card shows every validation's reward).

The runner redacts secrets from the rollouts before it stores them (runner.records.redact); here
the texts are escaped for mrkdwn and clipped, and a file holds the plain text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.delivery.effects import Post, ThreadEffect, Upload
from bot.delivery.outbox import Outbox
from bot.runs.store import Run
from bot.slack.blocks import text_message
from bot.slack.text import clip, escape
from runner.schemas import Rollout, RolloutMessage, ValidationRollouts

MAX_POSTED_CHARS = 3_500
"""An excerpt longer than this goes into the thread as a file (with a short summary)."""
SUMMARY_ANSWER_CHARS = 300
CARD_ANSWER_CHARS = 120
"""The status card shows each validation's best and worst last answer clipped to this."""

SHOW_ROLLOUTS = re.compile(r"^\s*show\s+rollouts?(?:\s+(?:step\s+)?(\d{1,9}))?\s*$", re.I)


@dataclass(frozen=True)
class RolloutsRequest:
    """`show rollouts [step]`: a validation step, or None for the latest."""

    step: int | None


def rollouts_request(text: str) -> RolloutsRequest | None:
    """The request that `text` is, or None when it is something else."""
    match = SHOW_ROLLOUTS.match(text)
    if match is None:
        return None
    return RolloutsRequest(int(match.group(1)) if match.group(1) else None)


def heading(rollouts: ValidationRollouts, why: str = "") -> str:
    step = f"step {rollouts.step}" if rollouts.step else "step 0 (the base model)"
    reason = f" ({why})" if why else ""
    return (
        f":mag: *Validation rollouts at {step}*{reason}: best and worst of "
        f"{rollouts.count} by reward."
    )


def rollouts_text(rollouts: ValidationRollouts, why: str = "") -> str:
    """The excerpt posted in the thread (mrkdwn)."""
    parts = [heading(rollouts, why)]
    for label, rollout in (("Best", rollouts.best), ("Worst", rollouts.worst)):
        parts.append(f"*{label}: reward {_number(rollout.reward)}*{_metrics(rollout)}")
        parts.extend(_message_mrkdwn(message) for message in rollout.messages)
        if rollout.cut:
            parts.append("_(shortened by the runner)_")
    return "\n".join(parts)


def rollouts_file(rollouts: ValidationRollouts) -> str:
    """The whole excerpt as plain text, for a file."""
    lines = [f"Validation rollouts at step {rollouts.step}: best and worst of {rollouts.count}."]
    for label, rollout in (("BEST", rollouts.best), ("WORST", rollouts.worst)):
        metrics = _metrics(rollout, mrkdwn=False)
        lines += ["", f"===== {label}: reward {_number(rollout.reward)}{metrics} ====="]
        for message in rollout.messages:
            lines.append(f"--- {_speaker(message)}")
            if message.content:
                lines.append(message.content)
            for call in message.tool_calls:
                function = call.get("function", {})
                lines.append(f"[tool call] {function.get('name')}({function.get('arguments')})")
        if rollout.cut:
            lines.append("(shortened by the runner)")
    return "\n".join(lines) + "\n"


def rollouts_summary(rollouts: ValidationRollouts, why: str = "") -> str:
    """What is said with the file: the rewards and each one's last answer, clipped."""
    parts = [heading(rollouts, why)]
    for label, rollout in (("Best", rollouts.best), ("Worst", rollouts.worst)):
        answer = _last_answer(rollout)
        said = f": _{escape(clip(answer, SUMMARY_ANSWER_CHARS))}_" if answer else ""
        parts.append(f"*{label}: reward {_number(rollout.reward)}*{said}")
    parts.append("The full rollouts are in the file.")
    return "\n".join(parts)


def with_samples(
    points: list[dict[str, Any]], rollouts: ValidationRollouts
) -> list[dict[str, Any]]:
    """The run's points with this validation's gist (`samples`: the best and the worst
    rollout's reward and last answer, clipped) kept on its step's point, for the status card."""
    samples = {
        "best": _gist(rollouts.best),
        "worst": _gist(rollouts.worst),
        "count": rollouts.count,
    }
    updated = [dict(p) for p in points]
    for point in updated:
        if point["step"] == rollouts.step:
            point["samples"] = samples
            return updated
    updated.append({"step": rollouts.step, "train": None, "val": None, "samples": samples})
    return sorted(updated, key=lambda p: p["step"])


def samples_line(points: Sequence[Mapping[str, Any]]) -> str:
    """The latest validation's gist, for the status card (mrkdwn; "" before any)."""
    point = next((p for p in reversed(points) if p.get("samples")), None)
    if point is None:
        return ""
    samples = point["samples"]
    told = []
    for label in ("best", "worst"):
        gist = samples[label]
        said = f" _{escape(gist['answer'])}_" if gist.get("answer") else ""
        told.append(f"{label} {_number(gist['reward'])}{said}")
    return (
        f":mag: Validation at step {point['step']} ({samples['count']} rollouts): "
        f"{'; '.join(told)} · `show rollouts {point['step']}` for the whole"
    )


def _gist(rollout: Rollout) -> dict[str, Any]:
    return {"reward": rollout.reward, "answer": clip(_last_answer(rollout), CARD_ANSWER_CHARS)}


def first_validation(run: Run, step: int) -> bool:
    """Whether `step` is the run's first validation (no validation before it on the card)."""
    return not any(p.get("val") is not None and p["step"] < step for p in run.points)


def post_rollouts(outbox: Outbox, run: Run, rollouts: ValidationRollouts, why: str = "") -> None:
    """One message in the run's thread, through the outbox: the excerpt, or a file (with a
    summary as its comment) when the excerpt is too long to read in a message."""
    outbox.enqueue(run.key, rollouts_said(run, rollouts, why))


def rollouts_said(run: Run, rollouts: ValidationRollouts, why: str = "") -> list[ThreadEffect]:
    """`post_rollouts`, for the caller to queue in a transaction of its own: the excerpt as a
    post, or as a file with the summary as its comment."""
    text = rollouts_text(rollouts, why)
    if len(text) <= MAX_POSTED_CHARS:
        return [Post(text_message(text))]
    name = run.script_name.removesuffix(".py")
    return [
        Upload(
            f"{name}-rollouts-step-{rollouts.step}.txt",
            f"Validation rollouts at step {rollouts.step}",
            rollouts_file(rollouts),
            rollouts_summary(rollouts, why),
        )
    ]


def _message_mrkdwn(message: RolloutMessage) -> str:
    lines = [f"> *{_speaker(message)}*"]
    if message.content:
        lines += [f"> {line}" for line in escape(message.content).split("\n")]
    for call in message.tool_calls:
        function = call.get("function", {})
        name = escape(str(function.get("name")))
        arguments = escape(str(function.get("arguments")))
        lines.append(f"> :hammer_and_wrench: `{name}` {arguments}")
    return "\n".join(lines)


def _speaker(message: RolloutMessage) -> str:
    if message.role == "assistant":
        return "model" if message.trainable else "assistant"
    if message.role == "tool" and message.tool_call_id:
        return f"tool ({message.tool_call_id})"
    return message.role


def _last_answer(rollout: Rollout) -> str:
    for message in reversed(rollout.messages):
        if message.role == "assistant" and message.content:
            return message.content
    return ""


def _metrics(rollout: Rollout, *, mrkdwn: bool = True) -> str:
    shown = ", ".join(f"{name} {_number(v)}" for name, v in list(rollout.metrics.items())[:6])
    return f" ({escape(shown) if mrkdwn else shown})" if shown else ""


def _number(value: float | int | bool | None) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
