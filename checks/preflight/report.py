"""The preflight's verdict: can GRPO learn from these groups, and what did they cost."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from checks.preflight.wire import SPEND_CAP_CODE

PreflightVerdict = Literal["ok", "problems", "inconclusive"]
EXIT_STATUS = {"ok": 0, "problems": 1, "inconclusive": 4}
ZERO_VARIANCE_ADVICE = (
    "GRPO learns only from differences within a group. Try more rollouts per group "
    "(--rollouts-per-group), a graded reward instead of a binary one (partial credit), or "
    "scenarios nearer the model's level (harder if it always succeeds, easier if it never does)."
)
TRUNCATION_ADVICE = (
    "A reply cut at the token limit usually loses its answer, and its reward with it. Raise the "
    "reply limit (--max-completion-tokens in a generated script) if the answers need the room, "
    "or ask for shorter replies in the prompts (and keep the prompts short, so that long "
    "episodes stay within the model's context)."
)
FAILING_FUNCTION_ADVICE = (
    "A function that fails on every call gives the model nothing to learn from it. Fix it (its "
    "first traceback is above), or what it needs where it runs: a service, a key, a file; the "
    "preflight's sandbox reaches no network but the model's endpoint, so a tool that calls a "
    "service fails here whatever it does on the GPU host."
)
JUDGE_ADVICE = (
    "RULER reads the judge's reply as JSON with one score per trajectory; a reply it cannot "
    "read scores nothing, and the generated scripts leave that group out of training. Use a "
    "judge model that supports structured output (response_format json_schema), or raise its "
    "max_tokens if its replies are cut."
)
MIN_CALLS_FOR_EVERY_CALL = 2  # one failed call does not say that every call fails


@dataclass(frozen=True)
class Episode:
    turns: int
    completion_tokens: int
    truncated: bool
    wall_s: float | None
    truncated_turns: int = 0  # its completions with finish_reason "length"
    tool_calls: int = 0  # function calls in its completions
    tool_errors: int | None = None  # the script's own `tool_errors` metric, when it keeps one

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Episode:
        wall = value.get("wall_s")
        errors = value.get("tool_errors")
        truncated = bool(value.get("truncated"))
        return cls(
            turns=int(value.get("turns") or 0),
            completion_tokens=int(value.get("completion_tokens") or 0),
            truncated=truncated,
            wall_s=float(wall) if isinstance(wall, int | float) else None,
            truncated_turns=int(value.get("truncated_turns") or truncated),
            tool_calls=int(value.get("tool_calls") or 0),
            tool_errors=int(errors) if isinstance(errors, int | float) else None,
        )


@dataclass(frozen=True)
class FunctionErrors:
    """Exceptions that started in one of the script's functions (caught by the script or not)."""

    name: str
    calls: int
    raised: int
    first_traceback: str

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> FunctionErrors:
        return cls(
            name=str(value.get("name") or "?"),
            calls=int(value.get("calls") or 0),
            raised=int(value.get("raised") or 0),
            first_traceback=str(value.get("first_traceback") or ""),
        )

    @property
    def every_call(self) -> bool:
        return self.raised >= self.calls >= MIN_CALLS_FOR_EVERY_CALL


@dataclass(frozen=True)
class GroupResult:
    """One scenario's rollouts: their rewards, the rollouts that raised, their episodes."""

    rewards: tuple[float, ...]
    exceptions: tuple[str, ...]
    episodes: tuple[Episode, ...]

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> GroupResult:
        return cls(
            rewards=tuple(float(r) for r in value.get("rewards") or []),
            exceptions=tuple(str(e) for e in value.get("exceptions") or []),
            episodes=tuple(Episode.from_json(e) for e in value.get("episodes") or []),
        )

    @property
    def cut_by_cap(self) -> bool:
        return any(SPEND_CAP_CODE in e for e in self.exceptions)

    @property
    def zero_variance(self) -> bool:
        # As checks.dryrun.standins.group_checks.is_trainable: two rollouts with different rewards.
        return len(self.rewards) < 2 or len(set(self.rewards)) < 2


@dataclass(frozen=True)
class PreflightReport:
    """The outcome of `artbot preflight SCRIPT`."""

    script: Path
    model: str
    endpoint: str  # the base URL without credentials
    base_model: str | None  # the script's BASE_MODEL
    groups: tuple[GroupResult, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    max_tokens_total: int = 0
    requests: int = 0
    refused_by_cap: int = 0
    truncations: int = 0
    endpoint_errors: tuple[str, ...] = ()
    unreachable: str | None = None  # why nothing ran: the endpoint is down
    timed_out: bool = False
    script_error: str | None = None  # the script died before its groups were gathered
    duration_s: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    groups_asked: int | None = None  # groups the first gather ran (None: it never reported)
    functions: tuple[FunctionErrors, ...] = ()  # the script's functions exceptions started in
    judge_model: str | None = None  # the model the endpoint was asked for RULER's judge calls
    script_judge_model: str | None = None  # the script's JUDGE_MODEL
    judge_requests: int = 0  # RULER judge calls the endpoint answered
    judge_scores: tuple[float, ...] = ()  # the scores of the replies RULER could read
    judge_malformed: tuple[str, ...] = ()  # per unreadable reply: why, and how it began

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def groups_left_out(self) -> int:
        """Groups the script dropped after gathering (its after_each returned None)."""
        return max(0, self.groups_asked - len(self.groups)) if self.groups_asked else 0

    @property
    def truncated_episodes(self) -> int:
        return sum(e.truncated for g in self.groups for e in g.episodes)

    @property
    def failing_functions(self) -> list[FunctionErrors]:
        """The script's functions that raised on every call."""
        return [f for f in self.functions if f.every_call]

    @property
    def cap_reached(self) -> bool:
        return self.refused_by_cap > 0 or self.tokens >= self.max_tokens_total > 0

    @property
    def measured(self) -> list[GroupResult]:
        """The groups that finished without the cap cutting them short."""
        return [g for g in self.groups if not g.cut_by_cap and (g.rewards or g.exceptions)]

    @property
    def rollouts(self) -> int:
        return sum(len(g.rewards) + len(g.exceptions) for g in self.groups)

    @property
    def exceptions(self) -> int:
        return sum(len(g.exceptions) for g in self.groups)

    @property
    def verdict(self) -> PreflightVerdict:
        measured = self.measured
        if self.unreachable or (self.requests and len(self.endpoint_errors) >= self.requests):
            return "inconclusive"  # the endpoint is down: nothing was measured
        if self.judge_malformed:
            return "problems"  # groups lose their scores, whatever else was measured
        if not measured:
            # Cut short by the cap or the clock, it proves nothing; dead of its own error, it does.
            stopped = self.cap_reached or self.timed_out or not self.script_error
            return "inconclusive" if stopped else "problems"
        if all(not g.rewards for g in measured):
            return "problems"  # every rollout raised
        if all(g.zero_variance for g in measured) or self.failing_functions:
            return "problems"
        return "ok"

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.verdict]

    @property
    def is_base_model(self) -> bool:
        return self.base_model is not None and self.model.lower() == self.base_model.lower()

    def format(self) -> str:
        """The report in plain words, as the terminal shows it."""
        heads = {
            "ok": "preflight ok: the reward varies within groups, so GRPO has something to learn",
            "problems": "preflight found problems",
            "inconclusive": "preflight inconclusive",
        }
        lines = [f"{self.script}: {heads[self.verdict]}", f"  {self._model_line()}"]
        if self.unreachable:
            lines.append(f"  endpoint down: {self.unreachable}; nothing ran")
            return "\n".join(lines)
        lines += self._group_lines()
        lines += self._function_lines()
        lines += self._episode_lines()
        lines += self._judge_lines()
        lines.append(
            f"  tokens spent: {self.tokens} ({self.prompt_tokens} prompt + "
            f"{self.completion_tokens} completion) of a cap of {self.max_tokens_total}, in "
            f"{self.requests} requests, {self.duration_s:.1f} s"
        )
        if self.cap_reached:
            lines.append(
                f"  spend cap reached: {self.refused_by_cap} request(s) refused, the rollouts "
                "that made them raised (requests already in flight may pass the cap)"
            )
        if self.endpoint_errors:
            lines.append(
                f"  endpoint errors: {len(self.endpoint_errors)}, first: {self.endpoint_errors[0]}"
            )
        if self.timed_out:
            lines.append("  timed out before the first step's groups were all gathered")
        if self.script_error and not self.groups:
            lines.append("  the script failed before its first groups were gathered:")
            lines += [f"    {line}" for line in self.script_error.rstrip().splitlines()[-15:]]
        if not self.measured and self.groups_left_out and not self.groups:
            lines.append("  no group reached training: the script left every group out")
        elif not self.measured and not self.script_error:
            lines.append("  no group finished: the preflight measured nothing")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    def _model_line(self) -> str:
        line = f"model: {self.model} at {self.endpoint}"
        if self.is_base_model:
            return line + " (the script's base model)"
        base = self.base_model or "unknown"
        return (
            line + f", a stand-in: not the script's base model ({base}), so the rewards only "
            "approximate the base model's"
        )

    def _group_lines(self) -> list[str]:
        lines: list[str] = []
        for index, group in enumerate(self.groups, start=1):
            if group.rewards:
                spread = statistics.pstdev(group.rewards) if len(group.rewards) > 1 else 0.0
                rewards = ", ".join(f"{r:.3g}" for r in group.rewards)
                text = f"mean {statistics.fmean(group.rewards):.3f}, std {spread:.3f} [{rewards}]"
            else:
                text = "no reward (every rollout raised)"
            if group.exceptions:
                text += f", {len(group.exceptions)} rollout(s) raised"
            if group.cut_by_cap:
                text += ", cut short by the spend cap"
            lines.append(f"  group {index}: {text}")
        if self.groups_left_out:
            lines.append(
                f"  groups the script left out after gathering: {self.groups_left_out} of "
                f"{self.groups_asked} (its after_each returned None, as a generated script does "
                "for a group RULER could not score): they are not trained on"
            )
        measured = self.measured
        zero = [g for g in measured if g.zero_variance]
        if measured:
            share = len(zero) / len(measured)
            every = " (zero variance in every group)" if len(zero) == len(measured) else ""
            lines.append(
                f"  groups with zero reward variance: {len(zero)} of {len(measured)} "
                f"({share:.0%}){every}"
            )
            if zero:
                lines.append(f"  what to do: {ZERO_VARIANCE_ADVICE}")
        if self.rollouts:
            lines.append(f"  rollouts that raised: {self.exceptions} of {self.rollouts}")
        first = next((e for g in self.groups for e in g.exceptions), None)
        if first:
            lines.append("  first traceback:")
            lines += [f"    {line}" for line in first.rstrip().splitlines()[-15:]]
        return lines

    def _episode_lines(self) -> list[str]:
        episodes = [e for g in self.groups for e in g.episodes]
        if not episodes:
            return []
        tokens = [e.completion_tokens for e in episodes]
        turns = [e.turns for e in episodes]
        walls = [e.wall_s for e in episodes if e.wall_s is not None]
        cut = sum(e.truncated_turns for e in episodes)
        completions = f"{cut} completions"
        if self.truncations != cut:
            completions += (
                f"; {self.truncations} of all the endpoint's replies, the judge's and those of "
                "retried or failed rollouts included"
            )
        lines = [
            f"  completion tokens per episode: median {statistics.median(tokens):g}, "
            f"max {max(tokens)}",
            f"  turns per episode: median {statistics.median(turns):g}, max {max(turns)}",
            f"  truncated at the token limit (finish_reason length): "
            f"{self.truncated_episodes} of {len(episodes)} episodes ({completions})",
        ]
        if self.truncated_episodes:
            lines.append(f"  what to do: {TRUNCATION_ADVICE}")
        lines += _tool_lines(episodes)
        if walls:
            lines.append(
                f"  wall time per rollout: median {statistics.median(walls):.2f} s, "
                f"max {max(walls):.2f} s"
            )
        return lines

    def _function_lines(self) -> list[str]:
        if not self.functions:
            return []
        said = ", ".join(
            f"{f.name} {f.raised} of {f.calls} call(s)" + (" (every call)" if f.every_call else "")
            for f in self.functions
        )
        lines = [f"  exceptions raised in the script's own functions (caught or not): {said}"]
        first = next((f for f in self.functions if f.every_call), self.functions[0])
        if first.first_traceback:
            lines.append(f"  first traceback in {first.name}:")
            lines += [f"    {line}" for line in first.first_traceback.rstrip().splitlines()[-15:]]
        if self.failing_functions:
            names = ", ".join(f.name for f in self.failing_functions)
            lines.append(f"  {names} raised on every call. What to do: {FAILING_FUNCTION_ADVICE}")
        return lines

    def _judge_lines(self) -> list[str]:
        if not self.judge_requests:
            return []
        judge = self.judge_model or self.model
        standing_in = (
            f", standing in for the script's judge {self.script_judge_model}"
            if self.script_judge_model and self.script_judge_model != judge
            else ""
        )
        lines = [
            f"  RULER judge: {_calls(self.judge_requests)} to {judge} at {self.endpoint}"
            f"{standing_in}; {_replies(len(self.judge_malformed))} RULER could not read"
        ]
        if self.judge_scores:
            scores = self.judge_scores
            lines.append(
                f"  judge scores: {len(scores)}, min {min(scores):.3g}, "
                f"median {statistics.median(scores):.3g}, max {max(scores):.3g}"
            )
        if self.judge_malformed:
            lines.append(f"  first malformed judge reply: {self.judge_malformed[0]}")
            lines.append(f"  what to do: {JUDGE_ADVICE}")
        return lines


def _tool_lines(episodes: list[Episode]) -> list[str]:
    calls = sum(e.tool_calls for e in episodes)
    if not calls:
        return []
    line = f"  tool calls: {calls} in {sum(e.tool_calls > 0 for e in episodes)} episode(s)"
    counted = [e for e in episodes if e.tool_errors is not None]
    if counted:
        errors = sum(e.tool_errors or 0 for e in counted)
        line += (
            f"; tool errors the script counted (its tool_errors metric): {errors} of "
            f"{sum(e.tool_calls for e in counted)} calls"
        )
    else:
        line += (
            "; the script keeps no tool_errors metric, so a tool's error returned as its "
            "result cannot be told from an answer (exceptions are listed above)"
        )
    return [line]


def _calls(count: int) -> str:
    return f"{count} call" if count == 1 else f"{count} calls"


def _replies(count: int) -> str:
    return f"{count} malformed reply" if count == 1 else f"{count} malformed replies"
