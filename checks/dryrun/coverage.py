"""Did the user's code run? A dry run that never reached the reward, the environment or a tool
proves nothing about them, so it fails instead of passing on zero coverage."""

from __future__ import annotations

from dataclasses import dataclass

from checks.dryrun.child.user_calls import must_run
from checks.dryrun.run_record import RunRecord


@dataclass(frozen=True)
class FunctionRuns:
    """How often one of the user's functions ran, and how often it raised."""

    name: str
    calls: int
    raised: int
    is_tool: bool
    policy_calls: int = 0  # for a tool: how often the stand-in policy called it

    def format(self) -> str:
        raised = f", {self.raised} raised" if self.raised else ""
        asked = f" (policy called it {self.policy_calls}x)" if self.is_tool else ""
        return f"{self.name} {self.calls}x{raised}{asked}"


@dataclass(frozen=True)
class Coverage:
    """The user's functions and what the report makes of them."""

    runs: tuple[FunctionRuns, ...]
    problems: tuple[str, ...]
    warnings: tuple[str, ...]
    # Of the problems, those a stand-in player that could not play the game explains, restated
    # without blaming the code: the reward never reached (every move refused goes without saying).
    unplayed: tuple[str, ...] = ()
    unplayed_problems: tuple[str, ...] = ()


def _never_ran(run: FunctionRuns, rollouts: int) -> str:
    where = f"in {rollouts} rollouts" if rollouts else "in the whole run"
    if run.is_tool and run.policy_calls:
        why = (
            f"the stand-in policy called the tool {run.policy_calls} time(s), but the script never "
            "ran its function"
        )
    elif run.is_tool:
        why = "the stand-in policy was offered the tool but never called it"
    elif run.name == "compute_reward":
        why = (
            "no episode reached the reward (in a game: every episode ended on an invalid move "
            "or before the end)"
        )
    else:
        why = "the script never called it"
    return f"your `{run.name}` never ran {where}: {why}, so the dry run proves nothing about it"


def _always_raised(run: FunctionRuns) -> str:
    if run.name == "apply_action":
        return (
            f"every move was invalid: your `apply_action` raised in all {run.calls} calls, so no "
            "game ever progressed past its first move; check that it accepts moves written the "
            "way render_observation and the system prompt ask for them"
        )
    return (
        f"your `{run.name}` raised in every one of its {run.calls} calls: it never returned a "
        "result (the first traceback is in the output)"
    )


def judge_coverage(record: RunRecord) -> Coverage:
    """The user's entry points (reward, environment, generator, tools) and whether they ran."""
    offered = list(record.policy.get("tools_offered", []))
    called_by_policy: dict[str, int] = dict(record.policy.get("tools_called", {}))
    runs = tuple(
        FunctionRuns(
            name=name,
            calls=record.calls.get(name, 0),
            raised=record.exceptions.get(name, 0),
            is_tool=name in offered,
            policy_calls=called_by_policy.get(name, 0),
        )
        for name in must_run(record.functions, offered)
    )
    never_ran: list[str] = []
    failed: list[str] = []
    warnings: list[str] = []
    unplayed: list[str] = []
    unplayed_problems: list[str] = []
    for run in runs:
        if run.calls == 0:
            never_ran.append(_never_ran(run, record.rollouts))
            if run.name == "compute_reward":
                unplayed.append(never_ran[-1])
                unplayed_problems.append(never_ran[-1])
        elif run.raised == run.calls and run.is_tool:
            # The stand-in policy's arguments are guesses: a tool may fairly refuse them all.
            warnings.append(
                f"your tool `{run.name}` raised in every one of its {run.calls} calls (with the "
                "stand-in policy's guessed arguments); only its error path was exercised"
            )
        elif run.raised == run.calls:
            failed.append(_always_raised(run))
            if run.name == "apply_action":
                unplayed_problems.append(failed[-1])
    answered = record.metric_sums.get("answered")
    if answered == 0 and record.metric_counts.get("answered"):
        warnings.append(
            f"no rollout ended with an answer (trajectory.metrics['answered'] was false in all "
            f"{record.metric_counts['answered']}): the reward only ever saw an empty answer"
        )
    # A function that always raised is usually why the next one never ran: it comes first.
    return Coverage(
        runs, (*failed, *never_ran), tuple(warnings), tuple(unplayed), tuple(unplayed_problems)
    )


STUCK_AT_LINES = 20


def standin_was_stuck(record: RunRecord) -> str | None:
    """What to say when the stand-in player found no move the game accepted somewhere: its
    limit, with the position it was stuck at; None when it always found one."""
    moves = record.moves
    if not moves.stuck:
        return None
    lines = (moves.stuck_at or "").strip("\n").splitlines()
    position = "\n".join(lines[:STUCK_AT_LINES]) + ("\n..." if len(lines) > STUCK_AT_LINES else "")
    refusal = f" (its first refusal: {moves.stuck_refusal})" if moves.stuck_refusal else ""
    return (
        f"the stand-in player could not play this game: at {moves.stuck} of "
        f"{moves.positions + moves.learnt} positions none of the {moves.stuck_tried} moves it "
        f"read from the observation and the instructions (e.g. {', '.join(moves.stuck_examples)}) "
        f"was accepted by your apply_action{refusal}. It plays cells, words, numbers, quoted "
        "examples and JSON it is shown; a real model reads instructions better, so this is the "
        "stand-in's limit, not a fault found in your code (naming the moves in the system "
        "prompt, e.g. 'Answer north or south', lets it play). It was stuck at:\n" + position
    )


def metric_means(record: RunRecord) -> dict[str, float]:
    """Each trajectory metric's mean over the rollouts that recorded it."""
    return {
        name: record.metric_sums[name] / count
        for name, count in record.metric_counts.items()
        if count and name in record.metric_sums
    }
