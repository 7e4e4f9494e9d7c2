"""The verdict on a dry run: what happened, and why it is (not) ok, in plain words."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from checks.dryrun.coverage import judge_coverage, metric_means, standin_was_stuck
from checks.dryrun.run_record import RunRecord
from checks.dryrun.standins.model_dirs import read_history

Verdict = Literal["ok", "failed", "inconclusive"]

# Errors that ART 0.5.18 scripts commonly die of, and what to do about them (see art-notes).
ERROR_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"cannot import name 'LocalBackend' from 'art'"
            r"|module 'art' has no attribute 'LocalBackend'"
        ),
        "art.LocalBackend is listed in art.__all__ but never defined: use "
        "`from art.local import LocalBackend`",
    ),
    (
        re.compile(r"has no attribute 'train'|TrainConfig"),
        "TrainableModel.train(...) and art.TrainConfig are gone in openpipe-art 0.5: use "
        "`await backend.train(model, groups, learning_rate=...)` then `await model.log(...)`",
    ),
    (
        re.compile(r"has no attribute 'final_answer'|object has no field \"final_answer\""),
        "art.Trajectory has no final_answer field: use a subclass or `metadata`",
    ),
)


MISSING_MODULE = re.compile(r"No module named '(?!art\b)([\w.]+)'")
NOTHING_TRAINABLE = "it succeeds with nothing trainable"


def hint_for(error: str, *, own_environment: bool = False) -> str | None:
    """Advice for an error message that ART scripts commonly hit, if it is one of those."""
    if MISSING_MODULE.search(error):
        if own_environment:
            return (
                "the dry run ran in the script's own environment, built from its `# /// script` "
                "block: add the package that provides this module to its dependencies"
            )
        return (
            "the dry run used artbot's own Python environment; a dependency the script "
            "declares beyond openpipe-art and its pins is not installed there"
        )
    return next((hint for pattern, hint in ERROR_HINTS if pattern.search(error)), None)


@dataclass(frozen=True)
class DryrunReport:
    """The outcome of `artbot dryrun SCRIPT`."""

    script: Path
    exit_code: int | None  # None on timeout
    rollouts: int
    rollout_exceptions: int
    reward_min: float | None
    reward_max: float | None
    steps_trained: int
    validations: int
    last_val_reward: float | None
    first_error: str | None  # first real error, with its traceback
    problems: tuple[str, ...]  # why it is not ok, in plain words
    output_tail: str  # last lines of the script's output
    warnings: tuple[str, ...] = ()  # worth a look, but the run is still ok
    notes: tuple[str, ...] = ()  # what the dry run changed (caps, redirected paths)
    duration_s: float = 0.0
    stuck_at: str | None = None  # on timeout: the stacks where the script was waiting
    policy_requests: int = 0  # chat completions the stand-in policy answered
    judge_requests: int = 0  # of those, RULER judge calls
    tool_call_replies: int = 0  # of those, answered with a tool call
    own_environment: bool = False  # ran in the script's PEP 723 environment, not artbot's
    tools_called: tuple[tuple[str, int], ...] = ()  # tool calls the policy made, per tool
    user_code_runs: tuple[str, ...] = ()  # the user's functions: "name Nx, M raised"
    metric_means: tuple[tuple[str, float], ...] = ()  # trajectory metrics, mean per rollout
    # Why the run proves nothing, through no fault found in the script: the stand-in player
    # could not play the game (and what therefore never ran).
    inconclusive: tuple[str, ...] = ()
    sft_steps: int = 0  # of the steps trained, model.train_sft calls
    sft_examples: int = 0  # the examples those calls trained on

    @property
    def verdict(self) -> Verdict:
        """ "failed" on a problem; "inconclusive" when the stand-in could not exercise the code;
        else "ok"."""
        if self.problems:
            return "failed"
        return "inconclusive" if self.inconclusive else "ok"

    @property
    def ok(self) -> bool:
        """True when the script ran to the end, trained something learnable and ran the
        user's code."""
        return self.verdict == "ok"

    def format(self) -> str:
        """A human summary: verdict, numbers, problems, warnings, first error, output tail."""
        verdict = {
            "ok": "ok",
            "failed": f"FAILED ({len(self.problems)} problem(s))",
            "inconclusive": "INCONCLUSIVE (the stand-in player could not play this game)",
        }[self.verdict]
        exit_text = "timed out" if self.exit_code is None else f"exit code {self.exit_code}"
        lines = [
            f"{self.script}: dry run {verdict}",
            f"  {exit_text} after {self.duration_s:.1f} s",
        ]
        rewards = (
            f", rewards {self.reward_min:g}..{self.reward_max:g}"
            if self.reward_min is not None and self.reward_max is not None
            else ""
        )
        raised = f" ({self.rollout_exceptions} raised)" if self.rollout_exceptions else ""
        if self.rollouts or self.rollout_exceptions or not self.sft_steps:
            lines.append(f"  rollouts: {self.rollouts}{raised}{rewards}")
        if self.sft_steps:
            lines.append(
                f"  SFT: {self.sft_examples} examples in {self.sft_steps} train_sft call(s)"
            )
        validation = (
            f", last val/reward {self.last_val_reward:g}"
            if self.last_val_reward is not None
            else ""
        )
        lines.append(
            f"  steps trained: {self.steps_trained}, validations: {self.validations}{validation}"
        )
        if self.policy_requests:
            per_tool = ", ".join(f"{name} {count}x" for name, count in self.tools_called)
            lines.append(
                f"  policy: {self.policy_requests} requests ({self.judge_requests} RULER judge, "
                f"{self.tool_call_replies} answered with a tool call"
                + (f": {per_tool})" if per_tool else ")")
            )
        if self.user_code_runs:
            lines.append(f"  your code ran: {'; '.join(self.user_code_runs)}")
        if self.metric_means:
            means = ", ".join(f"{name} {value:.3g}" for name, value in self.metric_means)
            lines.append(f"  trajectory metrics (mean): {means}")
        for title, items in (
            ("problems", self.problems),
            ("why it proves nothing (not a failure of your code)", self.inconclusive),
            ("warnings (not failures)", self.warnings),
            ("dry-run notes", self.notes),
        ):
            if items:
                lines.append(f"  {title}:")
                # An item may quote a board: its lines stay under it.
                lines.extend("    - " + item.replace("\n", "\n      ") for item in items)
        if self.first_error:
            lines.append("  first error:")
            lines.extend(f"    {line}" for line in self.first_error.rstrip().splitlines())
        if self.stuck_at:
            lines.append("  where it was when it was killed:")
            lines.extend(f"    {line}" for line in self.stuck_at.rstrip().splitlines())
        if self.output_tail and self.verdict == "failed":
            lines.append("  output (last lines):")
            lines.extend(f"    | {line}" for line in self.output_tail.rstrip().splitlines())
        return "\n".join(lines)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def build_report(
    script: Path,
    record: RunRecord | None,
    *,
    exit_code: int | None,
    timeout_s: float,
    output_tail: str,
    duration_s: float,
    own_environment: bool = False,
    environment_note: str = "",
) -> DryrunReport:
    """Judge a finished (or killed) dry run from its record and its models' history."""
    missing = record is None
    record = record or RunRecord(script=str(script))
    history = read_history(record.model_dirs)
    problems: list[str] = []
    warnings: list[str] = []
    notes = [environment_note] if environment_note else []
    notes += [f.message for f in record.findings if f.severity == "note"]
    steps_trained = len(record.steps)
    rollouts = record.rollouts or (
        0 if record.gathers else sum(s.trajectories for s in record.steps)
    )

    if exit_code is None:
        cause = (
            "the script had finished but the process did not exit (a non-daemon thread or "
            "child process kept it alive)"
            if record.finished
            else f"after {_plural(steps_trained, 'trained step')}"
        )
        problems.append(f"it timed out after {timeout_s:g} s and was killed: {cause}")
    elif missing:
        problems.append(
            f"the dry run failed before the script ran (exit code {exit_code}, no record "
            "written): see the output"
        )
    elif exit_code != 0:
        if record.uncaught_error:
            hint = hint_for(record.uncaught_error, own_environment=own_environment)
            problems.append(
                f"the script raised {record.uncaught_error} (exit code {exit_code})"
                + (f"; hint: {hint}" if hint else "")
            )
        else:
            problems.append(f"the script exited with code {exit_code}")
    if rollouts == 0 and record.rollout_exceptions:
        problems.append(
            f"every rollout raised ({record.rollout_exceptions} of {record.rollout_exceptions}): "
            "there was nothing to train on"
        )
    rl_steps = [step for step in record.steps if step.kind == "rl"]
    sft_examples = sum(step.examples for step in record.steps if step.kind == "sft")
    if steps_trained == 0:
        problems.append("it trained zero steps: backend.train(...) never completed")
    elif rl_steps and not any(step.trainable_groups for step in rl_steps):
        rewards = (
            f" (every reward was {record.reward_min:g})"
            if record.reward_min is not None and record.reward_min == record.reward_max
            else ""
        )
        problems.append(
            f"{NOTHING_TRAINABLE}: in every group handed to backend.train all "
            f"rewards were equal{rewards}, and GRPO learns nothing from a group whose "
            "rewards are all the same"
        )
    coverage = judge_coverage(record)
    inconclusive: list[str] = []
    stuck = standin_was_stuck(record)
    if exit_code == 0 and not missing:
        # First: code that never ran is the cause of what follows (e.g. equal rewards). After a
        # crash or a timeout, "never ran" would say nothing new.
        problems[:0] = coverage.problems
        if stuck is not None and coverage.unplayed_problems:
            # No playable move is why every move was refused, the reward never ran and all
            # rewards were equal: the stand-in's limit, not a fault found in the code.
            inconclusive = [stuck, *coverage.unplayed]
            problems = [
                p
                for p in problems
                if p not in coverage.unplayed_problems and not p.startswith(NOTHING_TRAINABLE)
            ]
    if stuck is not None and not inconclusive:
        warnings.append(stuck)
    warnings.extend(coverage.warnings)
    for finding in record.findings:
        times = f" [{_plural(finding.count, 'time')}]" if finding.count > 1 else ""
        if finding.severity == "problem":
            problems.append(finding.message + times)
        elif finding.severity == "warning":
            warnings.append(finding.message + times)

    if rollouts and record.rollout_exceptions:
        warnings.insert(
            0,
            f"{record.rollout_exceptions} of {rollouts + record.rollout_exceptions} rollouts "
            "raised and were swallowed by max_exceptions; the others succeeded, so this is a "
            "warning, not a failure (the first traceback is below)",
        )
    if record.groups_dropped:
        warnings.append(
            f"after_each returned None for {_plural(record.groups_dropped, 'group')}, which "
            "gather_trajectory_groups then dropped (ruler_score_group does this when "
            "swallow_exceptions=True hides a judge error)"
        )
    if steps_trained and history.train_rows == 0:
        warnings.append('model.log(..., split="train") never wrote train metrics to history.jsonl')
    policy = record.policy
    if policy.get("stale_model_requests"):
        warnings.append(
            f"{policy['stale_model_requests']} policy request(s) named an older checkpoint than "
            f"the newest (e.g. {policy.get('stale_example')}): call "
            "model.get_inference_name() for each request, not once"
        )
    notes.extend(move_search_notes(record))
    if record.stopped_at_step_limit:
        notes.append(
            f"the stand-in trainer stopped the run after {_plural(steps_trained, 'step')} (its "
            "hard cap); code after the training loop did not run"
        )

    return DryrunReport(
        script=script,
        exit_code=exit_code,
        rollouts=rollouts,
        rollout_exceptions=record.rollout_exceptions,
        reward_min=record.reward_min,
        reward_max=record.reward_max,
        steps_trained=steps_trained,
        validations=history.validations,
        last_val_reward=history.last_val_reward,
        first_error=record.first_error,
        problems=tuple(problems),
        output_tail=output_tail,
        warnings=tuple(warnings),
        notes=tuple(notes),
        duration_s=duration_s,
        stuck_at=record.stuck_at,
        policy_requests=int(policy.get("requests", 0)),
        judge_requests=int(policy.get("judge_requests", 0)),
        tool_call_replies=int(policy.get("tool_call_replies", 0)),
        own_environment=own_environment,
        tools_called=tuple(sorted(dict(policy.get("tools_called", {})).items())),
        user_code_runs=tuple(run.format() for run in coverage.runs),
        metric_means=tuple(sorted(metric_means(record).items())),
        inconclusive=tuple(inconclusive),
        sft_steps=steps_trained - len(rl_steps),
        sft_examples=sft_examples,
    )


def move_search_notes(record: RunRecord) -> list[str]:
    """How the stand-in player found its moves, when it played a game."""
    moves = record.moves
    notes: list[str] = []
    if moves.positions:
        found = moves.positions - moves.stuck
        outcome = (
            "played one the game accepted at every one"
            if found == moves.positions
            else f"played one the game accepted at {found} (it guessed at the others)"
            if found
            else "found none the game accepted (it guessed)"
        )
        notes.append(
            "the stand-in player tried candidate moves on a copy of the game at "
            f"{_plural(moves.positions, 'position')} and {outcome}"
        )
    if moves.learnt:
        notes.append(
            f"the game could not be copied ({moves.copy_error}), so the stand-in player learnt "
            f"its moves from the game's own replies at {_plural(moves.learnt, 'position')} (a "
            "move your apply_action refused there was not offered there again)"
        )
    return notes


def setup_failure_report(script: Path, problem: str, *, duration_s: float) -> DryrunReport:
    """The verdict when the script could not even be started (its environment failed)."""
    return DryrunReport(
        script=script,
        exit_code=1,
        rollouts=0,
        rollout_exceptions=0,
        reward_min=None,
        reward_max=None,
        steps_trained=0,
        validations=0,
        last_val_reward=None,
        first_error=None,
        problems=(problem,),
        output_tail="",
        duration_s=duration_s,
    )
