"""Realistic user code, written the way people write it for ART (after ART's tic-tac-toe and
tool-use examples and the seeds' patterns): imports, helpers, constants that share the script's
names, `from __future__`, dataclasses, module state. Answers are in the `artbot render` form
(what a user types), so they go through every question's validation."""

from __future__ import annotations

from typing import Any

from tests.flows.matrix import MATH_ROWS, TOOLS

# ART's tic-tac-toe example, as one paste: the agent plays X against a seeded random opponent.
# It names things as the script does (SYSTEM_PROMPT, validate, Scenario), keeps module state
# behind `global`, and brings its own `compute_reward(game)`.
TIC_TAC_TOE = '''\
"""Tic-tac-toe against a random opponent, after ART's tic-tac-toe example."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

Scenario = dict[str, Any]
SYSTEM_PROMPT = "You play tic-tac-toe as X. Reply with one free square, like <move>B2</move>."
ROWS = "ABC"
COLUMNS = "123"
SQUARE = re.compile(r"\\b([A-C][1-3]|[1-9])\\b")  # B2, or its number on a keypad: 5
WINNING_LINES = [
    ("A1", "A2", "A3"), ("B1", "B2", "B3"), ("C1", "C2", "C3"),
    ("A1", "B1", "C1"), ("A2", "B2", "C2"), ("A3", "B3", "C3"),
    ("A1", "B2", "C3"), ("A3", "B2", "C1"),
]
games_started = 0


@dataclass
class TicTacToeGame:
    rng: random.Random
    board: dict[str, str] = field(
        default_factory=lambda: {row + column: " " for row in ROWS for column in COLUMNS}
    )
    winner: str | None = None


def free_squares(game: TicTacToeGame) -> list[str]:
    return [square for square, mark in game.board.items() if mark == " "]


def number_of(square: str) -> int:
    return ROWS.index(square[0]) * 3 + int(square[1])


def square_of(action: str) -> str:
    found = SQUARE.search(action.upper())
    if found is None:
        raise ValueError(f"no square in {action!r}")
    square = found.group(1)
    if square.isdigit():
        index = int(square) - 1
        return ROWS[index // 3] + COLUMNS[index % 3]
    return square


def validate(game: TicTacToeGame, square: str) -> None:
    if square not in game.board:
        raise ValueError(f"{square} is not a square")
    if game.board[square] != " ":
        raise ValueError(f"{square} is taken")


def check_winner(game: TicTacToeGame) -> str | None:
    for line in WINNING_LINES:
        marks = {game.board[square] for square in line}
        if len(marks) == 1 and " " not in marks:
            return marks.pop()
    return None


def create_game(scenario: Scenario) -> TicTacToeGame:
    global games_started
    games_started += 1
    game = TicTacToeGame(rng=random.Random(scenario["seed"]))
    if scenario.get("opponent_starts"):
        game.board[game.rng.choice(free_squares(game))] = "O"
    return game


def render_observation(game: TicTacToeGame) -> str:
    marks = {"X": "x", "O": "o", " ": "-"}
    rows = ["".join(marks[game.board[row + column]] for column in COLUMNS) for row in ROWS]
    free = free_squares(game)
    return (
        "Board (x is you, o the opponent, - is free):\\n"
        + "\\n".join(rows)
        + f"\\nFree squares: {' '.join(free)} (or by number: "
        + " ".join(str(number_of(square)) for square in free)
        + ")\\n"
        + f"Reply with one of them, like <move>{free[0]}</move>."
    )


def apply_action(game: TicTacToeGame, action: str) -> None:
    square = square_of(action)
    validate(game, square)
    game.board[square] = "X"
    game.winner = check_winner(game)
    if game.winner is None and free_squares(game):
        game.board[game.rng.choice(free_squares(game))] = "O"
        game.winner = check_winner(game)


def is_finished(game: TicTacToeGame) -> bool:
    return game.winner is not None or not free_squares(game)


def compute_reward(game: TicTacToeGame) -> float:
    """1 for a win, 0.5 for a draw, 0 for a loss (an invalid move is -1, set by the script)."""
    if game.winner == "X":
        return 1.0
    return 0.0 if game.winner == "O" else 0.5
'''

TIC_TAC_TOE_ROWS = [{"seed": seed, "opponent_starts": seed % 2 == 1} for seed in range(8)]

# Seed 000's game loop: `create_game()` takes nothing, the reward is `compute_reward(game)`.
GUESSING_GAME = """\
import random
from typing import Any

MAX_GUESSES = 4  # the script has a MAX_TURNS of its own; this one is the game's


def create_game() -> dict[str, Any]:
    return {"target": random.randint(1, 9), "guesses": []}


def render_observation(game: dict[str, Any]) -> str:
    tried = ", ".join(str(g) for g in game["guesses"]) or "none"
    return f"Guess my number from 1 to 9 (tried: {tried}). Reply with 1, 2, 3, 4, 5, 6, 7, 8 or 9."


def apply_action(game: dict[str, Any], action: str) -> None:
    digits = [c for c in action if c.isdigit()]
    if not digits:
        raise ValueError(f"not a number: {action!r}")
    game["guesses"].append(int(digits[0]))


def is_finished(game: dict[str, Any]) -> bool:
    return game["target"] in game["guesses"] or len(game["guesses"]) >= MAX_GUESSES


def compute_reward(game: dict[str, Any]) -> float:
    if game["target"] not in game["guesses"]:
        return 0.0
    return 1.0 - 0.2 * (len(game["guesses"]) - 1)
"""

# A strict exact-match math reward with `import re` and a helper; it takes (answer, scenario) in
# its own order and no trajectory.
MATH_REWARD = """\
import re
from typing import Any

NUMBER = re.compile(r"-?\\d+(?:\\.\\d+)?")


def last_number(text: str) -> str | None:
    numbers = NUMBER.findall(text)
    return numbers[-1] if numbers else None


def compute_reward(answer: str, scenario: dict[str, Any]) -> float:
    exact = 1.0 if last_number(answer) == scenario["answer"] else 0.0
    return exact - 0.01 * len(answer.split())
"""

# Local tools with `import json`, a helper and module state (the tool is `add`, as in TOOLS).
TOOL_CODE = """\
import json
from typing import Any

MAX_OPERAND = 1_000_000
calls: list[dict[str, Any]] = []


def checked(value: Any) -> int:
    number = int(value)
    if abs(number) > MAX_OPERAND:
        raise ValueError(f"{number} is too large")
    return number


def add(a: int, b: int) -> str:
    total = checked(a) + checked(b)
    calls.append({"a": a, "b": b})
    return json.dumps({"sum": total, "call": len(calls)})
"""

# Rewards the episode when the tool's own JSON came back: proof that the tool code ran.
TOOL_REWARD = """\
import json


def used_the_tool(trajectory) -> bool:
    for message in trajectory.messages():
        if message["role"] == "tool":
            try:
                return "sum" in json.loads(str(message.get("content")))
            except ValueError:
                return False
    return False


def compute_reward(scenario, answer, trajectory):
    return (1.0 if used_the_tool(trajectory) else 0.0) - 0.01 * len(answer)
"""

# A third-party import: PyYAML, which neither Python nor the script's dependencies provide.
YAML_REWARD = """\
from typing import Any

import yaml


def parsed(answer: str) -> Any:
    try:
        return yaml.safe_load(answer)
    except yaml.YAMLError:
        return None


def compute_reward(scenario, answer, trajectory):
    value = parsed(answer)
    trajectory.metrics["parsed"] = value is not None
    return (1.0 if str(value) == scenario["answer"] else 0.0) - 0.01 * len(answer)
"""


def _base(name: str, **answers: Any) -> dict[str, Any]:
    return {
        "replayable": "static",
        "turns": "single",
        "task": "Answer arithmetic questions with the number only.",
        "scenario_source": "inline",
        "scenario_rows": MATH_ROWS,
        "system_prompt": "skip",
        "reward": "programmatic",
        "train_split": "all",
        "val_split": "held_out",
        "val_fraction": 0.25,
        "val_every": 2,
        "val_max_groups": 2,
        "base_model": "OpenPipe/Qwen3-14B-Instruct",
        "project": "realistic",
        "run_name": name,
        "backend": "local",
        "hyperparameters": "defaults",
        "iteration": "dataset",
        **answers,
    }


def _game(name: str, environment: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return _base(
        name,
        replayable="yes",
        turns="multi",
        task="Win the game.",
        scenario_rows=rows,
        uses_tools="no",
        environment=environment,
        invalid_action="end",
        episode_end="When the game is won, lost or drawn.",
        max_turns=9,
    )


REALISTIC: dict[str, dict[str, Any]] = {
    "tic-tac-toe": _game("tic-tac-toe-001", TIC_TAC_TOE, TIC_TAC_TOE_ROWS),
    "tic-tac-toe-mix": {
        **_game("tic-tac-toe-002", TIC_TAC_TOE, TIC_TAC_TOE_ROWS),
        "reward": "custom",
        "reward_mix": 0.5,
        "judge_model": "openai/gpt-5.4",
        "ruler_rubric": "",
    },
    "guessing-game": _game("guess-001", GUESSING_GAME, [{"id": i} for i in range(8)]),
    "math-reward": _base("math-001", reward_logic=MATH_REWARD),
    "tools": _base(
        "tools-001",
        replayable="yes",
        turns="multi",
        uses_tools="yes",
        tools=TOOLS,
        final_answer_tool="none",
        tool_execution="local",
        tool_code=TOOL_CODE,
        episode_end="When the agent answers without a tool.",
        max_turns=4,
        reward_logic=TOOL_REWARD,
    ),
    "yaml-reward": _base("yaml-001", reward_logic=YAML_REWARD, extra_packages="pyyaml>=6"),
}
