"""What the `train-rl` wizard's questions say beyond their text, on the branch the answers take:
notes, recommendations and their reasons, the names the user's code sees, and how answers are shown
back."""

from __future__ import annotations

import re
from typing import Any

from flows.code.third_party import suggested_requirements
from flows.definition.steps import Answers, Option
from flows.wizards.rl.branches import (
    ENVIRONMENT_REWARD,
    FINAL_ANSWER_NAME,
    NO_FINAL_ANSWER_TOOL,
    WITH_ENVIRONMENT,
    WITH_TOOLS,
    final_answer_tool,
    rollout_pattern,
    third_party_imports,
)

INVALID_ACTION_REWARD = -1  # the script's INVALID_ACTION_REWARD, said in the wizard
RULER_NOTE = (
    "*About RULER:* RULER is an LLM judge that compares the trajectories within a group and "
    "scores which ones are better, so you need no hand-written reward function. It needs an "
    "`OPENAI_API_KEY` (or the key of the judge's provider) where the training runs."
)
REPLAYABLE_RULE = (
    "The rule: choose *multi-turn RL* when an episode can be recreated and rolled out again and "
    "again from the same initial state (a game, a sandbox, tools that only read fixed data). "
    "Choose *single-turn* training on static examples when the task depends on live humans, "
    "mutable production systems or other state you cannot reset. Which is closer to your task?"
)
WIN_OR_LOSS = re.compile(
    r"\b(win|wins|won|winning|winner|lose|loses|lost|losing|loss|draw|checkmate|stalemate|"
    r"victory|defeat)\b",
    re.IGNORECASE,
)


def describes_an_outcome(answers: Answers) -> bool:
    """The task or the episode's end, in the user's words, names a win, a loss or a draw."""
    said = (answers.get("task"), answers.get("episode_end"))
    return any(isinstance(text, str) and WIN_OR_LOSS.search(text) for text in said)


def recommended_reward(answers: Answers) -> str:
    """Programmatic where the outcome is explicit (a game's state, a stated win or loss): code
    scores it exactly, where a judge only compares; RULER for the open-ended rest."""
    if WITH_ENVIRONMENT(answers) or describes_an_outcome(answers):
        return "programmatic"
    return "ruler"


def reward_reason(answers: Answers) -> str:
    if ENVIRONMENT_REWARD(answers):
        return (
            "Your environment has its own `compute_reward`: with a programmatic reward, it is the "
            "reward."
        )
    if WITH_ENVIRONMENT(answers) or describes_an_outcome(answers):
        where = "your game's state" if WITH_ENVIRONMENT(answers) else "what you described"
        return (
            f"The outcome is explicit in {where} (a win, a loss, a draw): code scores it exactly, "
            "so programmatic is recommended. RULER suits open-ended answers that only a judge can "
            "compare."
        )
    return (
        "Choose programmatic only when correctness is robustly checkable with code; custom only "
        "when the task genuinely mixes reward sources."
    )


def rows_display(rows: Any) -> str:
    return (
        f"{len(rows)} scenario{'s' if len(rows) != 1 else ''}"
        if isinstance(rows, list)
        else str(rows)
    )


def code_display(code: Any) -> str:
    text = code.get("code", "") if isinstance(code, dict) else str(code)
    lines = text.strip().splitlines()
    return (
        f"{len(lines)} line{'s' if len(lines) != 1 else ''} of code"
        if len(lines) > 1
        else text[:200]
    )


def first_line(text: str) -> str:
    """A long text answer shown back by its first line, cut to 80 characters."""
    lines = text.strip().splitlines() or [""]
    first = lines[0] if len(lines[0]) <= 80 else lines[0][:79] + "…"
    return first + (" (…)" if len(lines) > 1 else "")


def tools_display(tools: Any) -> str:
    return (
        ", ".join(t["function"]["name"] for t in tools) if isinstance(tools, list) else str(tools)
    )


def final_answer_options(answers: Answers) -> tuple[Option, ...]:
    tools = [t["function"]["name"] for t in answers.get("tools", [])]
    return (
        *(
            Option(name, name, "Calling it ends the episode")
            for name in tools
            if name != NO_FINAL_ANSWER_TOOL
        ),
        Option(
            NO_FINAL_ANSWER_TOOL,
            "None: the episode ends when the agent answers without a tool call",
        ),
    )


def recommend_final_answer_tool(answers: Answers) -> str:
    tools = [t["function"]["name"] for t in answers.get("tools", [])]
    return next((name for name in tools if FINAL_ANSWER_NAME.search(name)), NO_FINAL_ANSWER_TOOL)


TRAJECTORY_NAME = (
    "• `trajectory`: the episode as an `art.Trajectory`: `trajectory.messages()` is the "
    "conversation so far, `trajectory.metrics` a dict you may add numbers or bools to (they are "
    'logged with training), `trajectory.metadata["scenario_id"]` which scenario it was'
)


def answer_name(answers: Answers) -> str:
    """What the reward's `answer` holds on this branch."""
    if not WITH_TOOLS(answers):
        return "• `answer`: the agent's reply, as text"
    final = final_answer_tool(answers)
    if final is None:
        return (
            '• `answer`: the agent\'s last reply without a tool call, as text (`""` when the '
            "turn limit came first)"
        )
    parameters = final["function"].get("parameters", {}).get("properties", {})
    given = (
        "its argument, as text"
        if len(parameters) == 1
        else "its arguments as a JSON object in text (`json.loads(answer)`)"
    )
    return (
        f"• `answer`: what the agent passed to `{final['function']['name']}`: {given} "
        '(`""` when the turn limit came first)'
    )


def reward_names(answers: Answers) -> str:
    """How to write the reward on this branch: the names it sees, and an example."""
    if rollout_pattern(answers) == "game":
        names = [
            "• `scenario`: the episode's scenario, a dict",
            "• `game`: what your `create_game` returned, after the last move",
            TRAJECTORY_NAME,
        ]
        signature = "compute_reward(scenario, game, trajectory)"
        example = '1.0 if game["won"] else 0.0'
        after = (
            f" An invalid move (your `apply_action` raised ValueError) already scores "
            f"{INVALID_ACTION_REWARD}."
            if answers.get("invalid_action") == "end"
            else ' `trajectory.metrics["invalid_actions"]` counts the invalid moves.'
        )
    else:
        names = [
            '• `scenario`: the episode\'s scenario, a dict (e.g. `scenario["answer"]`)',
            answer_name(answers),
            TRAJECTORY_NAME,
        ]
        signature = "compute_reward(scenario, answer, trajectory)"
        example = '1.0 if answer.strip() == scenario["answer"] else 0.0'
        after = ""
    return (
        f"Write a Python expression, or a function `{signature}`, that gives a float: higher "
        f"is better.{after} Your code sees:\n" + "\n".join(names) + f"\nFor example: `{example}`"
    )


def tool_calls(answers: Answers) -> list[str]:
    """Each tool but the final-answer one as its call reads, `name(parameter, ...)`."""
    final = final_answer_tool(answers)
    calls = []
    for tool in answers.get("tools", []):
        name = tool["function"]["name"]
        if final is None or name != final["function"]["name"]:
            parameters = tool["function"].get("parameters", {}).get("properties", {})
            calls.append(f"`{name}({', '.join(parameters)})`")
    return calls


def tool_code_details(answers: Answers) -> str:
    final = final_answer_tool(answers)
    optional = (
        f" `{final['function']['name']}` ends the episode and needs no function (one is called "
        "first as a check when you define it)."
        if final is not None
        else ""
    )
    return (
        f"The functions to write: {', '.join(tool_calls(answers)) or 'none'}. "
        "Each gets the arguments the agent passed in its call, by the names of the tool's "
        f"parameters.{optional}"
    )


def tool_urls_details(answers: Answers) -> str:
    return (
        f"The tools: {', '.join(tool_calls(answers)) or 'none'}. With POST (the default), "
        'PUT or PATCH the script sends the call\'s arguments as a JSON object (`{"parameter": '
        "value, ...}`); with GET or DELETE, as the query string. A `{name}` in the URL's path is "
        "filled from the call's argument of that name, else from the scenario's field."
    )


def packages_details(answers: Answers) -> str:
    imports = third_party_imports(answers)
    suggested = suggested_requirements(imports)
    return (
        f"Your code imports {', '.join(f'`{m}`' for m in imports)}, which neither Python nor the "
        f"script's dependencies provide. My guess: {', '.join(f'`{r}`' for r in suggested)}. "
        "Reply `default` to use that, or name the packages (PEP 508, e.g. `pyyaml>=6`)."
    )


def packages_display(value: Any) -> str:
    if isinstance(value, dict) and isinstance(value.get("requirements"), list):
        return ", ".join(str(r) for r in value["requirements"])
    return str(value)


def validation_details(answers: Answers) -> str:
    if answers.get("reward") == "ruler":
        return (
            "With RULER alone, val/reward is relative: the judge scores a group's rollouts "
            "against each other, so it ranks checkpoints only roughly. The latest checkpoint is "
            "always kept too."
        )
    return "val/reward picks the best checkpoint to keep; the latest is always kept too."
