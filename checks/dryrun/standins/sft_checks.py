"""What the stand-in trainer checks in the examples a script hands to `train_sft`: that they are
trajectories, that some end with the assistant's reply (what SFT learns from), and that the
learning rates cover every batch."""

from __future__ import annotations

from art.trajectories import Trajectory

from checks.dryrun.run_record import Severity


def ends_with_reply(example: Trajectory) -> bool:
    """Whether the example ends with the assistant's reply: what SFT learns from it."""
    messages = example.messages()
    return bool(messages) and messages[-1].get("role") == "assistant"


def sft_findings(
    examples: list[Trajectory], rates: list[float], batches: int
) -> list[tuple[str, Severity, str]]:
    """What is wrong with one train_sft call: examples it cannot learn from, a schedule that
    does not fit its batches."""
    findings: list[tuple[str, Severity, str]] = []
    wrong = [e for e in examples if not isinstance(e, Trajectory)]
    if wrong:
        findings.append(
            (
                "sft_not_trajectories",
                "problem",
                f"train_sft got {type(wrong[0]).__name__}s, not art.Trajectory",
            )
        )
    elif not examples:
        findings.append(("sft_empty", "warning", "train_sft was called with no examples"))
    elif not any(ends_with_reply(e) for e in examples):
        findings.append(
            (
                "sft_no_reply",
                "problem",
                "no example handed to train_sft ends with the assistant's reply: SFT learns "
                "nothing from them",
            )
        )
    if len(rates) < batches:
        findings.append(
            (
                "sft_schedule_short",
                "problem",
                f"train_sft got {len(rates)} learning rates for {batches} batches",
            )
        )
    return findings
