"""The branches of the `train-rl` wizard, named once: the conditions its questions are asked under,
and what the answers say of the agent (its rollout, its final-answer tool, the code it runs and what
that imports)."""

from __future__ import annotations

import re
from typing import Any

from flows.code.entry_points import defines_function
from flows.code.third_party import imported_modules, third_party
from flows.definition.conditions import Holds, all_of, any_of, is_, not_
from flows.definition.steps import Answers
from flows.wizards.rl.simulated_user import has_simulated_user

# The branches, named once: the steps' `when=` guards and the helpers below read the same ones.
MULTI_TURN = is_("turns", "multi")
WITH_TOOLS = all_of(MULTI_TURN, is_("uses_tools", "yes"))
WITH_ENVIRONMENT = all_of(MULTI_TURN, is_("uses_tools", "no"))
FROM_GENERATOR = is_("scenario_source", "generator")
VALIDATED = any_of(
    is_("val_split", "held_out", "separate"),
    is_("val_generated", "generated", "separate"),
)
WITH_RULER = is_("reward", "ruler", "custom")
LOCAL_TOOLS = all_of(WITH_TOOLS, is_("tool_execution", "local"))
HTTP_TOOLS = all_of(WITH_TOOLS, is_("tool_execution", "http"))
WITH_SIMULATED_USER = all_of(WITH_TOOLS, Holds(("simulated_user",), has_simulated_user))
WITH_REWARD_CODE = is_("reward", "programmatic", "custom")


def environment_defines_reward(answers: Answers) -> bool:
    """The environment defines its own `compute_reward(game)`."""
    source = answers.get("environment")
    return isinstance(source, str) and defines_function(source, "compute_reward")


# A game whose environment has its own `compute_reward(game)`: that is the reward, not asked again.
ENVIRONMENT_REWARD = all_of(WITH_ENVIRONMENT, Holds(("environment",), environment_defines_reward))
ASKS_REWARD_LOGIC = all_of(WITH_REWARD_CODE, not_(ENVIRONMENT_REWARD))


def rollout_pattern(answers: Answers) -> str:
    """single, tools or game: which rollout the script uses."""
    if not MULTI_TURN(answers):
        return "single"
    return "tools" if WITH_TOOLS(answers) else "game"


NO_FINAL_ANSWER_TOOL = "none"
FINAL_ANSWER_NAME = re.compile(r"(^|_)(final|answer|submit|finish)(_|$)", re.IGNORECASE)


def final_answer_tool(answers: Answers) -> dict[str, Any] | None:
    """The schema of the tool whose call ends the episode, or None (the agent answers in text)."""
    wanted = answers.get("final_answer_tool", NO_FINAL_ANSWER_TOOL)
    if wanted == NO_FINAL_ANSWER_TOOL:
        return None  # even beside a tool named `none`, which is therefore never offered
    return next((t for t in answers.get("tools", []) if t["function"]["name"] == wanted), None)


def user_code(answers: Answers) -> list[str]:
    """The code the user sent that the script will contain, on the branch the answers take."""
    sources: list[Any] = []
    if FROM_GENERATOR(answers):
        sources.append(answers.get("scenario_generator"))
    if LOCAL_TOOLS(answers):
        sources.append(answers.get("tool_code"))
    if WITH_ENVIRONMENT(answers):
        sources.append(answers.get("environment"))
    logic = answers.get("reward_logic")
    if ASKS_REWARD_LOGIC(answers) and isinstance(logic, dict) and logic.get("kind") == "function":
        sources.append(logic.get("code"))
    return [source for source in sources if isinstance(source, str)]


def third_party_imports(answers: Answers) -> list[str]:
    """Modules the user's code imports that the script's own dependencies do not provide."""
    return third_party(imported_modules(user_code(answers)))


def imports_third_party(answers: Answers) -> bool:
    """The user's code imports a module that neither Python nor the script's dependencies
    provide."""
    return bool(third_party_imports(answers))


THIRD_PARTY_IMPORTS = Holds(
    ("scenario_generator", "tool_code", "environment", "reward_logic"), imports_third_party
)


def uses_ruler(answers: Answers) -> bool:
    """Whether RULER scores the rollouts (alone or mixed with the user's reward)."""
    return WITH_RULER(answers)
