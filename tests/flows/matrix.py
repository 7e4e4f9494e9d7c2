"""Answer sets for every combination of the spec's matrix, as the wizard would store them."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from flows import rl_session_after_sft

PATTERNS = ("single", "game", "tools")
REWARDS = ("programmatic", "ruler", "custom")
LOOPS = ("dataset", "open_ended")
BACKENDS = ("local", "serverless")
VALIDATIONS = (True, False)

MATH_ROWS = [
    {"prompt": f"What is {a} + {b}? Reply with the number only.", "answer": str(a + b)}
    for a, b in [(2, 2), (3, 4), (1, 1), (5, 3), (6, 1), (2, 7), (4, 4), (9, 0)]
]
GUESS_ROWS = [{"target": t} for t in (3, 7, 1, 9, 5, 2, 8, 4)]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]
TOOL_CODE = "def add(a: int, b: int) -> str:\n    return str(int(a) + int(b))\n"
ENVIRONMENT = """\
def create_game(scenario):
    return {"target": int(scenario["target"]), "guesses": [], "won": False}


def render_observation(game):
    return f"Guess my number from 1 to 9. Guesses so far: {game['guesses']}"


def apply_action(game, action):
    digits = [c for c in action if c.isdigit()]
    if not digits:
        raise ValueError(f"not a number: {action!r}")
    guess = int(digits[0])
    game["guesses"].append(guess)
    game["won"] = guess == game["target"]


def is_finished(game):
    return game["won"] or len(game["guesses"]) >= 5
"""
# Composite rewards (correctness minus a verbosity penalty): they vary even under the dry run's
# stand-in policy, which rarely gets an exact answer right by chance.
REWARD_BY_PATTERN = {
    "single": {
        "kind": "expression",
        "code": (
            "(1.0 if answer.strip() == scenario['answer'] else 0.0) - 0.01 * len(answer.split())"
        ),
    },
    "tools": {
        "kind": "expression",
        "code": "(1.0 if scenario['answer'] in answer else 0.0) - 0.01 * len(answer)",
    },
    "game": {
        "kind": "function",
        "code": (
            "def compute_reward(scenario, game, trajectory):\n"
            "    return 1.0 if game['won'] else 0.0\n"
        ),
    },
}


def answers_for(
    pattern: str, reward: str, loop: str, backend: str, validation: bool, **overrides: Any
) -> dict[str, Any]:
    """A complete answer set for one cell of the matrix."""
    answers: dict[str, Any] = {
        "replayable": "static" if pattern == "single" else "yes",
        "turns": "single" if pattern == "single" else "multi",
        "task": "Add small numbers and answer with the sum only.",
        "scenario_source": "inline",
        "scenario_rows": GUESS_ROWS if pattern == "game" else MATH_ROWS,
        "system_prompt": "" if pattern == "tools" else "Answer with one number.",
        "reward": reward,
        "train_split": "all",
        "val_split": "held_out" if validation else "none",
        "base_model": "OpenPipe/Qwen3-14B-Instruct",
        "project": "matrix",
        "run_name": f"{pattern}-{reward}-{loop}-{backend}-{'val' if validation else 'noval'}",
        "backend": backend,
        "hyperparameters": "defaults",
        "iteration": loop,
    }
    if pattern != "game":
        answers["agent_prompt"] = {"fields": ["prompt"]}
    if pattern != "single":
        answers["uses_tools"] = "yes" if pattern == "tools" else "no"
        answers["episode_end"] = "When the agent answers or the turn limit is reached."
        answers["max_turns"] = 4
    if pattern == "tools":
        answers["simulated_user"] = {}
        answers["tools"] = TOOLS
        answers["final_answer_tool"] = "none"
        answers["tool_execution"] = "local"
        answers["tool_code"] = TOOL_CODE
    if pattern == "game":
        answers["environment"] = ENVIRONMENT
        answers["invalid_action"] = "end"
    if reward in ("programmatic", "custom"):
        answers["reward_logic"] = REWARD_BY_PATTERN[pattern]
    if reward == "custom":
        answers["reward_mix"] = 0.5
    if reward in ("ruler", "custom"):
        answers["judge_model"] = "openai/gpt-5.4"
        answers["ruler_rubric"] = ""  # ART's default
    if validation:
        answers["val_fraction"] = 0.25
        answers["val_every"] = 2
        answers["val_max_groups"] = 2
    answers.update(overrides)
    return answers


def matrix() -> list[tuple[str, str, str, str, bool]]:
    return list(itertools.product(PATTERNS, REWARDS, LOOPS, BACKENDS, VALIDATIONS))


def variant_id(cell: tuple[str, str, str, str, bool]) -> str:
    pattern, reward, loop, backend, validation = cell
    return f"{pattern}-{reward}-{loop}-{backend}-{'val' if validation else 'noval'}"


def after_sft(answers: Mapping[str, Any], sft_answers: Mapping[str, Any]) -> dict[str, Any]:
    """`answers` of a train-rl run that continues the train-sft run of `sft_answers`: the start
    it carries, and the base model and backend that start settles."""
    return {**answers, **rl_session_after_sft(sft_answers).answers}
