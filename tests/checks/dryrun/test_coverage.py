"""Did the user's code run? The counters the bootstrap puts in a script's functions, and the
verdict on a run that never reached the reward, the environment or a tool."""

from __future__ import annotations

import random
import traceback
from pathlib import Path
from typing import Any

import pytest

from checks.dryrun.child.user_calls import COUNTER_NAME, CallCounter, instrument, run_counted
from checks.dryrun.report import DryrunReport, build_report
from checks.dryrun.run_record import Finding, MoveSearchRecord, RunRecord, TrainedStep
from checks.dryrun.standins.move_candidates import example_answers, free_cells
from checks.dryrun.standins.policy_replies import text_answer

SOURCE = '''\
from __future__ import annotations


def apply_action(game: UndefinedAtRuntime, action: str) -> None:
    """Raise for a bad move."""
    if action != "ok":
        raise ValueError(f"bad move {action!r}")


async def compute_reward(scenario, answer, trajectory):
    return 1.0


def only_a_docstring():
    """Nothing runs here."""
'''


def run_instrumented(source: str) -> tuple[dict[str, Any], CallCounter]:
    code, defined = instrument(source, "user_script.py")
    counter = CallCounter()
    counter.defined = defined
    namespace: dict[str, Any] = {COUNTER_NAME: counter, "__name__": "user_script"}
    exec(code, namespace)
    return namespace, counter


def test_every_module_level_function_is_counted_and_behaves_as_written() -> None:
    namespace, counter = run_instrumented(SOURCE)

    namespace["apply_action"](None, "ok")
    with pytest.raises(ValueError, match="bad move 'left'") as raised:
        namespace["apply_action"](None, "left")

    assert counter.defined == ["apply_action", "compute_reward", "only_a_docstring"]
    assert counter.snapshot() == ({"apply_action": 2}, {"apply_action": 1})
    assert namespace["apply_action"].__doc__ == "Raise for a bad move."
    assert namespace["only_a_docstring"]() is None
    # The traceback points at the script's own line, as if nothing had been added.
    frame = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert (frame.filename, frame.lineno) == ("user_script.py", 7)


SCOPED_SOURCE = """\
def user_environment():
    import random

    def create_game(scenario):
        return {"secret": random.randint(1, 3)}

    def helper():
        return 1

    return create_game


create_game = user_environment()
"""


def test_the_users_functions_in_their_own_scope_are_counted_too() -> None:
    """Generated scripts place the user's code in a `user_*` function (flows/code/user_code.py)."""
    namespace, counter = run_instrumented(SCOPED_SOURCE)
    namespace["create_game"]({})
    namespace["create_game"]({})
    assert counter.defined == ["user_environment", "create_game", "helper"]
    assert counter.snapshot() == ({"user_environment": 1, "create_game": 2}, {})


def test_the_games_functions_pass_their_arguments_on_unless_the_call_is_the_dry_runs() -> None:
    seen: list[tuple[str, tuple[Any, ...]]] = []

    class Observer:
        def entered(self, name: str, arguments: tuple[Any, ...]) -> None:
            seen.append((name, arguments))

        def raised(self, name: str) -> None:
            seen.append((name, ()))

    namespace, counter = run_instrumented(SOURCE)
    counter.observer = Observer()
    game = {"board": []}
    namespace["apply_action"](game, "ok")
    with pytest.raises(ValueError):
        namespace["apply_action"](game, "bad")
    with counter.uncounted(), pytest.raises(ValueError):
        namespace["apply_action"](game, "tried on a copy")

    assert seen == [
        ("apply_action", (game, "ok")),
        ("apply_action", (game, "bad")),
        ("apply_action", ()),
    ]
    assert counter.snapshot() == ({"apply_action": 2}, {"apply_action": 1})


def test_an_async_function_is_counted_when_it_runs() -> None:
    import asyncio

    namespace, counter = run_instrumented(SOURCE)
    coroutine = namespace["compute_reward"](None, "", None)
    assert counter.snapshot() == ({}, {})  # created, not yet run
    assert asyncio.run(coroutine) == 1.0
    assert counter.snapshot() == ({"compute_reward": 1}, {})


def test_the_script_runs_as_main_with_its_own_future_imports(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        SOURCE + "\nif __name__ == '__main__':\n    apply_action(None, 'ok')\n"
        "    assert __file__ == " + repr(str(script)) + "\n"
    )
    counter = CallCounter()
    run_counted(script, counter)
    assert counter.snapshot() == ({"apply_action": 1}, {})


def record(**fields: Any) -> RunRecord:
    defaults: dict[str, Any] = {
        "script": "rl_train.py",
        "rollouts": 8,
        "reward_min": 0.0,
        "reward_max": 1.0,
        "steps": [TrainedStep(step=1, groups=2, trajectories=8, trainable_groups=1)],
        "finished": True,
        "exit_code": 0,
        "functions": ["rollout", "compute_reward", "create_game", "apply_action", "search"],
        "calls": {"rollout": 8, "compute_reward": 8, "create_game": 8, "apply_action": 20},
        "exceptions": {"apply_action": 4},
    }
    return RunRecord.model_validate({**defaults, **fields})


def verdict(run: RunRecord, exit_code: int = 0) -> DryrunReport:
    return build_report(
        Path("rl_train.py"), run, exit_code=exit_code, timeout_s=30, output_tail="", duration_s=1
    )


def test_the_report_says_how_often_the_users_code_ran() -> None:
    report = verdict(record(policy={"tools_offered": ["search"], "tools_called": {"search": 3}}))
    assert report.problems == (
        "your `search` never ran in 8 rollouts: the stand-in policy called the tool 3 time(s), "
        "but the script never ran its function, so the dry run proves nothing about it",
    )
    assert report.user_code_runs == (
        "compute_reward 8x",
        "create_game 8x",
        "apply_action 20x, 4 raised",
        "search 0x (policy called it 3x)",
    )
    assert "your code ran: compute_reward 8x; create_game 8x;" in report.format()
    # `rollout` is the script's own, not the user's: it is counted but not judged.
    assert not any(run.startswith("rollout") for run in report.user_code_runs)


def test_a_game_whose_every_move_was_invalid_fails_first_for_that() -> None:
    untrainable = [TrainedStep(step=1, groups=2, trajectories=8, trainable_groups=0)]
    report = verdict(
        record(
            steps=untrainable,
            reward_min=-1.0,
            reward_max=-1.0,
            calls={"create_game": 8, "apply_action": 8},
            exceptions={"apply_action": 8},
        )
    )
    assert not report.ok
    assert report.problems[0].startswith(
        "every move was invalid: your `apply_action` raised in all 8 calls"
    )
    assert report.problems[1].startswith("your `compute_reward` never ran in 8 rollouts")
    assert report.problems[2].startswith("it succeeds with nothing trainable")


BOARD = "  A B C\n1 x o x\n2 o o x\n3 x x o"
STUCK = MoveSearchRecord(
    positions=8,
    stuck=8,
    stuck_at=BOARD,
    stuck_tried=40,
    stuck_examples=["A1", "1A", "a1"],
    stuck_refusal="ValueError: the board is full",
)


def test_a_game_the_standin_could_not_play_is_inconclusive_not_a_failure_of_the_code() -> None:
    untrainable = [TrainedStep(step=1, groups=2, trajectories=8, trainable_groups=0)]
    stuck = record(
        steps=untrainable,
        reward_min=-1.0,
        reward_max=-1.0,
        calls={"create_game": 8, "apply_action": 8},
        exceptions={"apply_action": 8},
        moves=STUCK,
    )

    report = verdict(stuck)

    assert (report.verdict, report.ok, report.problems) == ("inconclusive", False, ())
    cause, consequence = report.inconclusive
    assert cause.startswith(
        "the stand-in player could not play this game: at 8 of 8 positions none of the 40 moves "
        "it read from the observation and the instructions (e.g. A1, 1A, a1) was accepted by "
        "your apply_action (its first refusal: ValueError: the board is full)."
    )
    assert cause.endswith("It was stuck at:\n" + BOARD)
    assert consequence.startswith("your `compute_reward` never ran in 8 rollouts")
    assert not any("every move was invalid" in line for line in report.format().splitlines())
    text = report.format()
    assert "dry run INCONCLUSIVE (the stand-in player could not play this game)" in text
    assert "      3 x x o" in text  # the board it was stuck at, under its item
    assert report.notes == (
        "the stand-in player tried candidate moves on a copy of the game at 8 positions and "
        "found none the game accepted (it guessed)",
    )
    # Coverage stays strict: something else wrong is still a failure.
    broken = stuck.model_copy(
        update={"findings": [Finding(kind="m", severity="problem", message="a metric is a str")]}
    )
    assert verdict(broken).verdict == "failed"
    assert verdict(broken).problems == ("a metric is a str",)


def test_a_standin_stuck_now_and_then_is_a_warning_on_a_good_run() -> None:
    report = verdict(record(moves=STUCK.model_copy(update={"positions": 30, "stuck": 2})))

    assert report.ok
    assert report.warnings[0].startswith(
        "the stand-in player could not play this game: at 2 of 30 positions"
    )
    assert (
        "the stand-in player tried candidate moves on a copy of the game at 30 positions and "
        "played one the game accepted at 28 (it guessed at the others)"
    ) in report.notes


def test_a_tool_that_refuses_every_guessed_argument_is_only_a_warning() -> None:
    report = verdict(
        record(
            functions=["search"],
            calls={"search": 5},
            exceptions={"search": 5},
            policy={"tools_offered": ["search"], "tools_called": {"search": 5}},
        )
    )
    assert report.ok
    assert report.warnings[0] == (
        "your tool `search` raised in every one of its 5 calls (with the stand-in policy's "
        "guessed arguments); only its error path was exercised"
    )


def test_after_a_crash_code_that_never_ran_is_not_blamed() -> None:
    report = verdict(record(uncaught_error="KeyError: 'x'", calls={}), exit_code=1)
    assert report.problems == ("the script raised KeyError: 'x' (exit code 1)",)


def test_trajectory_metrics_are_averaged_in_the_report() -> None:
    report = verdict(
        record(
            metric_sums={"answered": 6.0, "turns": 20.0}, metric_counts={"answered": 8, "turns": 8}
        )
    )
    assert report.metric_means == (("answered", 0.75), ("turns", 2.5))
    assert "trajectory metrics (mean): answered 0.75, turns 2.5" in report.format()


# --- the stand-in policy's moves ------------------------------------------------------------

TIC_TAC_TOE_PROMPT = (
    "Return your move as an XML object with a single property 'move', like so: <move>A1</move>. "
    "Optional moves are 'A1', 'B3', 'C2', etc."
)


def test_a_board_drawn_as_text_has_its_free_cells_read() -> None:
    assert free_cells("   1 2 3\nA  _ _ x\nB  _ o _\nC  x x o") == ["A1", "A2", "B1", "B3"]
    assert free_cells("   1   2\nA  x | .\nB  - | o\n") == ["A2", "B1"]
    assert free_cells("Guess my number from 1 to 9.") == []
    # Quoted words are taken as examples too, the property name with them: a fair miss.
    assert example_answers(TIC_TAC_TOE_PROMPT) == ["A1", "move", "A1", "B3", "C2"]
    assert example_answers('Reply with "up", "down", `left` or \'right\'. Don\'t wait.') == [
        "up",
        "down",
        "left",
        "right",
    ]


def test_the_standin_policy_mostly_plays_a_free_cell_of_the_board() -> None:
    board = "   1 2 3\nA  x _ o\nB  _ o _\nC  x _ x"
    messages = [
        {"role": "system", "content": TIC_TAC_TOE_PROMPT},
        {"role": "user", "content": board},
    ]
    rng = random.Random(0)
    moves = [text_answer(messages, rng) for _ in range(200)]
    free = {"A2", "B1", "B3", "C2"}
    valid = [m for m in moves if m.removeprefix("<move>").removesuffix("</move>") in free]
    assert len(valid) >= 120, moves[:20]
    assert len(valid) < 200  # and sometimes not: invalid moves stay exercised


def test_a_run_where_no_rollout_answered_is_warned_about() -> None:
    report = verdict(record(metric_sums={"answered": 0.0}, metric_counts={"answered": 8}))
    assert report.ok
    assert report.warnings[0] == (
        "no rollout ended with an answer (trajectory.metrics['answered'] was false in all 8): "
        "the reward only ever saw an empty answer"
    )
