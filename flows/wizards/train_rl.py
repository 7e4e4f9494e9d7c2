"""The `train-rl` wizard as data: every question of the product spec, in order, with its
branching, and the few parsers and displays that only its questions use."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from flows.code.entry_points import (
    check_tool_functions,
    defines_function,
    environment_calls,
    generator_call,
)
from flows.code.third_party import (
    imported_modules,
    requirements,
    suggested_requirements,
    third_party,
)
from flows.conversation import validators as v
from flows.definition.conditions import Condition, Holds, all_of, any_of, is_, not_
from flows.definition.flow import Flow, Part
from flows.definition.steps import Answers, Choice, InvalidAnswer, MenuField, Option, Parse, Text
from flows.wizards.agent_prompt import (
    agent_prompt_details,
    agent_prompt_display,
    answer_shown_caution,
    default_agent_prompt,
    parse_agent_prompt,
)
from flows.wizards.http_tools import tool_auth, tool_auth_display, tool_endpoints
from flows.wizards.judge_models import JUDGE_MODELS, judge_caution, judge_model_id
from flows.wizards.shared_steps import (
    CUSTOM_HYPERPARAMETERS,
    base_model_step,
    hyperparameter_steps,
    project_step,
    run_name_step,
)
from flows.wizards.simulated_user import has_simulated_user, simulated_user, simulated_user_display
from flows.wizards.start_from import (
    START_FROM,
    START_FROM_SFT,
    not_the_sft_model,
    recommend_start,
    same_as_start,
)

DEFAULT_HYPERPARAMETERS: dict[str, Any] = {
    "learning_rate": 1e-5,
    "rollouts_per_group": 4,
    "groups_per_step": 2,
    "num_steps": 50,
    "num_epochs": 3,
    "gpu_memory_utilization": 0.7,
    # Room to think, then answer: a reply cut off at the limit is scored as it stands.
    "max_completion_tokens": 1024,
}
MAX_TURNS = 1_000
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


def _environment_defines_reward(answers: Answers) -> bool:
    """The environment defines its own `compute_reward(game)`."""
    source = answers.get("environment")
    return isinstance(source, str) and defines_function(source, "compute_reward")


# A game whose environment has its own `compute_reward(game)`: that is the reward, not asked again.
ENVIRONMENT_REWARD = all_of(WITH_ENVIRONMENT, Holds(("environment",), _environment_defines_reward))
ASKS_REWARD_LOGIC = all_of(WITH_REWARD_CODE, not_(ENVIRONMENT_REWARD))

WIN_OR_LOSS = re.compile(
    r"\b(win|wins|won|winning|winner|lose|loses|lost|losing|loss|draw|checkmate|stalemate|"
    r"victory|defeat)\b",
    re.IGNORECASE,
)


def _describes_an_outcome(answers: Answers) -> bool:
    """The task or the episode's end, in the user's words, names a win, a loss or a draw."""
    said = (answers.get("task"), answers.get("episode_end"))
    return any(isinstance(text, str) and WIN_OR_LOSS.search(text) for text in said)


def _recommended_reward(answers: Answers) -> str:
    """Programmatic where the outcome is explicit (a game's state, a stated win or loss): code
    scores it exactly, where a judge only compares; RULER for the open-ended rest."""
    if WITH_ENVIRONMENT(answers) or _describes_an_outcome(answers):
        return "programmatic"
    return "ruler"


def _reward_reason(answers: Answers) -> str:
    if ENVIRONMENT_REWARD(answers):
        return (
            "Your environment has its own `compute_reward`: with a programmatic reward, it is the "
            "reward."
        )
    if WITH_ENVIRONMENT(answers) or _describes_an_outcome(answers):
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


def rollout_pattern(answers: Answers) -> str:
    """single, tools or game: which rollout the script uses."""
    if not MULTI_TURN(answers):
        return "single"
    return "tools" if WITH_TOOLS(answers) else "game"


def _rows_display(rows: Any) -> str:
    return (
        f"{len(rows)} scenario{'s' if len(rows) != 1 else ''}"
        if isinstance(rows, list)
        else str(rows)
    )


def _code_display(code: Any) -> str:
    text = code.get("code", "") if isinstance(code, dict) else str(code)
    lines = text.strip().splitlines()
    return (
        f"{len(lines)} line{'s' if len(lines) != 1 else ''} of code"
        if len(lines) > 1
        else text[:200]
    )


def _first_line(text: str) -> str:
    """A long text answer shown back by its first line, cut to 80 characters."""
    lines = text.strip().splitlines() or [""]
    first = lines[0] if len(lines[0]) <= 80 else lines[0][:79] + "…"
    return first + (" (…)" if len(lines) > 1 else "")


def _tools_display(tools: Any) -> str:
    return (
        ", ".join(t["function"]["name"] for t in tools) if isinstance(tools, list) else str(tools)
    )


NO_FINAL_ANSWER_TOOL = "none"
FINAL_ANSWER_NAME = re.compile(r"(^|_)(final|answer|submit|finish)(_|$)", re.IGNORECASE)


def final_answer_tool(answers: Answers) -> dict[str, Any] | None:
    """The schema of the tool whose call ends the episode, or None (the agent answers in text)."""
    wanted = answers.get("final_answer_tool", NO_FINAL_ANSWER_TOOL)
    if wanted == NO_FINAL_ANSWER_TOOL:
        return None  # even beside a tool named `none`, which is therefore never offered
    return next((t for t in answers.get("tools", []) if t["function"]["name"] == wanted), None)


def _final_answer_options(answers: Answers) -> tuple[Option, ...]:
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


def _recommend_final_answer_tool(answers: Answers) -> str:
    tools = [t["function"]["name"] for t in answers.get("tools", [])]
    return next((name for name in tools if FINAL_ANSWER_NAME.search(name)), NO_FINAL_ANSWER_TOOL)


TRAJECTORY_NAME = (
    "• `trajectory`: the episode as an `art.Trajectory`: `trajectory.messages()` is the "
    "conversation so far, `trajectory.metrics` a dict you may add numbers or bools to (they are "
    'logged with training), `trajectory.metadata["scenario_id"]` which scenario it was'
)


def _answer_name(answers: Answers) -> str:
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


def _reward_names(answers: Answers) -> str:
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
            _answer_name(answers),
            TRAJECTORY_NAME,
        ]
        signature = "compute_reward(scenario, answer, trajectory)"
        example = '1.0 if answer.strip() == scenario["answer"] else 0.0'
        after = ""
    return (
        f"Write a Python expression, or a function `{signature}`, that gives a float: higher "
        f"is better.{after} Your code sees:\n" + "\n".join(names) + f"\nFor example: `{example}`"
    )


def _tool_calls(answers: Answers) -> list[str]:
    """Each tool but the final-answer one as its call reads, `name(parameter, ...)`."""
    final = final_answer_tool(answers)
    calls = []
    for tool in answers.get("tools", []):
        name = tool["function"]["name"]
        if final is None or name != final["function"]["name"]:
            parameters = tool["function"].get("parameters", {}).get("properties", {})
            calls.append(f"`{name}({', '.join(parameters)})`")
    return calls


def _tool_code_details(answers: Answers) -> str:
    final = final_answer_tool(answers)
    optional = (
        f" `{final['function']['name']}` ends the episode and needs no function (one is called "
        "first as a check when you define it)."
        if final is not None
        else ""
    )
    return (
        f"The functions to write: {', '.join(_tool_calls(answers)) or 'none'}. "
        "Each gets the arguments the agent passed in its call, by the names of the tool's "
        f"parameters.{optional}"
    )


def _tool_urls_details(answers: Answers) -> str:
    return (
        f"The tools: {', '.join(_tool_calls(answers)) or 'none'}. With POST (the default), "
        'PUT or PATCH the script sends the call\'s arguments as a JSON object (`{"parameter": '
        "value, ...}`); with GET or DELETE, as the query string. A `{name}` in the URL's path is "
        "filled from the call's argument of that name, else from the scenario's field."
    )


def _tool_code(value: str, answers: Answers) -> str:
    """One function per tool, each accepting the tool's parameters by name. The final-answer
    tool needs none: when the code defines it, it is called as a check of the answer."""
    module = v.user_module(value, "tool code")
    final = final_answer_tool(answers)
    check_tool_functions(
        module, answers.get("tools", []), optional=final["function"]["name"] if final else None
    )
    return v.normalized_source(value)


def _environment_code(value: str, answers: Answers) -> str:
    environment_calls(v.user_module(value, "environment code"))
    return v.normalized_source(value)


def _generator_code(value: str, answers: Answers) -> str:
    generator_call(v.user_module(value, "generator"))
    return v.normalized_source(value)


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


def _imports_third_party(answers: Answers) -> bool:
    """The user's code imports a module that neither Python nor the script's dependencies
    provide."""
    return bool(third_party_imports(answers))


THIRD_PARTY_IMPORTS = Holds(
    ("scenario_generator", "tool_code", "environment", "reward_logic"), _imports_third_party
)


def _extra_packages(value: str, answers: Answers) -> dict[str, list[str]]:
    return {"imports": third_party_imports(answers), "requirements": requirements(value)}


def _suggested_packages(answers: Answers) -> dict[str, list[str]]:
    imports = third_party_imports(answers)
    return {"imports": imports, "requirements": suggested_requirements(imports)}


def _packages_details(answers: Answers) -> str:
    imports = third_party_imports(answers)
    suggested = suggested_requirements(imports)
    return (
        f"Your code imports {', '.join(f'`{m}`' for m in imports)}, which neither Python nor the "
        f"script's dependencies provide. My guess: {', '.join(f'`{r}`' for r in suggested)}. "
        "Reply `default` to use that, or name the packages (PEP 508, e.g. `pyyaml>=6`)."
    )


def _packages_display(value: Any) -> str:
    if isinstance(value, dict) and isinstance(value.get("requirements"), list):
        return ", ".join(str(r) for r in value["requirements"])
    return str(value)


def _check_val_fraction(value: float, answers: Answers) -> float:
    train = answers.get("train_fraction", 0.0) if answers.get("train_split") == "fraction" else 0.0
    if train + value > 1.0 + 1e-9:
        raise InvalidAnswer(
            f"Training ({train:g}) and validation ({value:g}) together take more than all "
            "scenarios: lower one of them."
        )
    rows = answers.get("scenario_rows")
    if isinstance(rows, list) and answers.get("train_split") == "all":
        held_out = max(1, round(value * len(rows)))
        if held_out >= len(rows):
            raise InvalidAnswer(
                f"With {len(rows)} scenarios, holding out {value:g} leaves none to train on."
            )
    return value


def _val_fraction(value: str, answers: Answers) -> float:
    return _check_val_fraction(
        v.float_in(0.0, 1.0, low_open=True, high_open=True)(value, answers), answers
    )


def _validation_details(answers: Answers) -> str:
    if answers.get("reward") == "ruler":
        return (
            "With RULER alone, val/reward is relative: the judge scores a group's rollouts "
            "against each other, so it ranks checkpoints only roughly. The latest checkpoint is "
            "always kept too."
        )
    return "val/reward picks the best checkpoint to keep; the latest is always kept too."


def _check_iteration(value: str, answers: Answers) -> None:
    if value == "dataset" and FROM_GENERATOR(answers):
        raise InvalidAnswer(
            "A generator has no fixed dataset to iterate over: choose the open-ended loop."
        )


def _hyperparameter(
    field_id: str, label: str, parse: Parse, *, hint: str, when: Condition | None = None
) -> MenuField:
    """A field of the hyperparameter menu, whose default is its DEFAULT_HYPERPARAMETERS value."""
    default = DEFAULT_HYPERPARAMETERS[field_id]
    return MenuField(field_id, label, parse, default, when=when, hint=hint)


def _run_name_step() -> Text:
    """The run's name: in a run that continues an SFT run, not the SFT model's own."""
    step = run_name_step(lambda answers: imported_modules(user_code(answers)), "math-solver-001")
    return replace(step, parse=not_the_sft_model(step.parse))


TRAIN_RL = Flow(
    "train-rl",
    template="train_rl/script.py.j2",
    steps=[
        Choice(
            "replayable",
            (
                "Can an episode of your task be recreated from the same initial state, again and "
                "again?"
            ),
            options=(
                Option("yes", "Episodes can be recreated", "From the same initial state"),
                Option(
                    "static", "Only logged or static scenarios", "Live humans or mutable systems"
                ),
                Option("unsure", "Not sure", explain=REPLAYABLE_RULE),
            ),
            help=(
                "Whether your environment can be reset and replayed decides between multi-turn RL "
                "and single-turn training."
            ),
            title="Replayability",
        ),
        Choice(
            "turns",
            "Single-turn or multi-turn?",
            options=(
                Option("single", "Single-turn", "One response per prompt, rewarded on its own"),
                Option("multi", "Multi-turn", "Several turns with an environment, tools or a game"),
            ),
            recommend=lambda a: "multi" if a.get("replayable") == "yes" else "single",
            recommend_reads=("replayable",),
            recommend_reason=lambda a: (
                (
                    "Your episodes can be replayed, so I recommend multi-turn RL. Please confirm "
                    "there is no hidden live dependency."
                )
                if a.get("replayable") == "yes"
                else "Your scenarios are static, so I recommend single-turn training."
            ),
            help=(
                "Single-turn: one response per prompt (solve a math problem, classify text). "
                "Multi-turn: the agent acts, sees the effect, and acts again (play a game, use "
                "tools)."
            ),
            title="Single or multi-turn",
        ),
        Text(
            "task",
            "What must the agent accomplish?",
            guide=(
                "Describe the task in a sentence or two, in plain words (RULER's judge reads it "
                "too). I write the training script from your answers; what only you know (a "
                "game's rules, your tools, a reward in code) comes from you, at its own question."
            ),
            parse=v.text(min_len=10, max_len=4000),
            help="A plain description of the behaviour to optimize. RULER's judge reads it too.",
            example="Answer grade-school math word problems with just the final number.",
            title="Task",
        ),
        Choice(
            "scenario_source",
            "Where do the training scenarios come from?",
            options=(
                Option("inline", "Paste them here", "A JSON array or JSONL in a reply"),
                Option("upload", "Upload a .jsonl file", "Into this conversation"),
                Option("runner_file", "A JSONL file on the runner host", "Give its path"),
                Option("generator", "A generator function", "Python code that makes a scenario"),
            ),
            guide=(
                "A scenario is one input the agent trains on: a JSON object, such as a prompt and "
                "its expected answer. Your reward code sees it as `scenario`."
            ),
            help="Scenarios are the inputs the agent trains on: one JSON object each.",
            title="Scenario source",
        ),
        Text(
            "scenario_rows",
            "What are the scenarios?",
            guide=(
                "Paste them as a JSON array of objects or as JSONL (one object per line), or "
                "upload a .jsonl file. Give each a field with what the agent is asked (e.g. "
                '"prompt" or "question") and any fields your reward reads, e.g. '
                '`scenario["answer"]`: you choose next what the agent is shown.'
            ),
            parse=v.scenario_rows,
            kind="json",
            when=is_("scenario_source", "inline", "upload"),
            accepts_files=(".jsonl", ".json"),
            display=_rows_display,
            help=(
                'One JSON object per scenario: what the agent is asked (e.g. a "prompt" or '
                '"question" field) and any fields your reward reads (e.g. "answer").'
            ),
            example=(
                '{"prompt": "What is 17 * 3?", "answer": "51"}\n'
                '{"prompt": "What is 9 + 10?", "answer": "19"}'
            ),
            title="Scenarios",
        ),
        Text(
            "scenarios_path",
            "Where is the JSONL file of scenarios on the runner host?",
            guide="Its path on the machine that trains: one JSON object per line.",
            parse=v.runner_path((".jsonl",)),
            kind="path",
            when=is_("scenario_source", "runner_file"),
            help=(
                "The script reads this file when it starts, on the machine that trains, and checks "
                "every row."
            ),
            example="/data/math/train.jsonl",
            title="Scenarios file",
        ),
        Text(
            "scenario_generator",
            "Which Python function generates a scenario?",
            guide=(
                "Write `generate_scenario(rng)`: `rng` is a seeded `random.Random`, and it "
                "returns one scenario, a dict (your reward sees it as `scenario`). Paste the "
                "code or upload a .py file; it goes into the script as you wrote it."
            ),
            parse=_generator_code,
            kind="code",
            when=FROM_GENERATOR,
            accepts_files=(".py",),
            display=_code_display,
            help="Python code, sent on purpose: it goes into the script as it is, after it parses.",
            example=(
                "def generate_scenario(rng):\n"
                "    a, b = rng.randint(1, 99), rng.randint(1, 99)\n"
                '    return {"prompt": f"What is {a} + {b}?", "answer": str(a + b)}'
            ),
            title="Scenario generator",
        ),
        Text(
            "system_prompt",
            "Which system prompt should the agent get, if any?",
            guide=(
                "Instructions the agent sees first in every episode. Reply `skip` for none: the "
                "script then uses your task description."
            ),
            parse=v.text(min_len=1, max_len=8000),
            default=lambda a: "",
            default_label="no system prompt",
            display=lambda value: value or "(none)",
            help="Instructions the agent sees first in every episode. Reply `skip` for none.",
            example="You are a careful math tutor. Reply with the final number only.",
            title="System prompt",
        ),
        Choice(
            "uses_tools",
            "Does the agent use tool calling?",
            options=(
                Option("yes", "Yes, it calls tools"),
                Option("no", "No, it plays an environment"),
            ),
            when=MULTI_TURN,
            title="Tool use",
        ),
        Text(
            "agent_prompt",
            "Which fields of a scenario is the agent shown?",
            guide=(
                "The agent's first message is made of these fields only; the rest of the row "
                "(the answer, anything your reward checks) stays hidden from it. Name one or more "
                "fields, separated by commas, or write `def render_prompt(scenario):` returning "
                "the text."
            ),
            details=agent_prompt_details,
            parse=parse_agent_prompt,
            kind="text",
            when=not_(WITH_ENVIRONMENT),
            default=default_agent_prompt,
            default_label="the recommended field",
            accepts_files=(".py",),
            display=agent_prompt_display,
            caution=answer_shown_caution,
            help=(
                "Field names of your scenarios (`question`, or `question, context`), or Python "
                "code defining `render_prompt(scenario)` that returns the agent's first message. "
                "Never show the agent the field your reward compares its answer with."
            ),
            example="question",
            title="What the agent sees",
        ),
        Text(
            "tools",
            "Which tools can the agent call?",
            guide=(
                "Paste them as a JSON list of OpenAI function-calling schemas, or upload a .json "
                "file. Each tool's name must be a Python identifier; its parameters are a "
                "JSON-Schema object."
            ),
            parse=v.tool_schemas,
            kind="json",
            when=WITH_TOOLS,
            accepts_files=(".json",),
            display=_tools_display,
            help=(
                'Each tool: {"type": "function", "function": {"name", "description", '
                '"parameters"}} where parameters is a JSON-Schema object. Names must be Python '
                "identifiers."
            ),
            example=(
                '[{"type": "function", "function": {"name": "search", "description": "Search the '
                'docs", "parameters": {"type": "object", "properties": {"query": {"type": '
                '"string"}}, "required": ["query"]}}}]'
            ),
            title="Tools",
        ),
        Choice(
            "final_answer_tool",
            "Which tool ends the episode?",
            guide=(
                "Calling it gives the agent's final answer: its arguments become the `answer` "
                "your reward sees."
            ),
            options_from=_final_answer_options,
            options_reads=("tools",),
            when=WITH_TOOLS,
            recommend=_recommend_final_answer_tool,
            recommend_reads=("tools",),
            recommend_reason=lambda a: (
                "It is named like a final-answer tool (the ART-E pattern: `return_final_answer`)."
                if _recommend_final_answer_tool(a) != NO_FINAL_ANSWER_TOOL
                else "No tool is named like a final answer, so the agent answers in text."
            ),
            help=(
                "A call of the final-answer tool ends the episode, and its arguments are the "
                "`answer` your reward sees: the argument's value when the tool has exactly one "
                "parameter (as text; a non-string value as JSON), otherwise all its arguments as "
                "a JSON object (`json.loads(answer)`). The tool is never executed over HTTP and "
                "needs no URL; local tool code need not define it (when it does, the function is "
                "called first, and an exception sends its error to the agent instead of ending "
                "the episode). With `none`, the episode ends when the agent answers without a "
                "tool call, and that text is the answer. An episode that hits the turn limit has "
                'no answer: the reward sees "" and the trajectory\'s metric `answered` is false.'
            ),
            title="Final-answer tool",
        ),
        Choice(
            "tool_execution",
            "How are tool calls executed?",
            options=(
                Option("local", "Local Python functions", "One function per tool, in the script"),
                Option("http", "An HTTP API", "A URL per tool; arguments are POSTed as JSON"),
            ),
            when=WITH_TOOLS,
            title="Tool execution",
        ),
        Text(
            "tool_code",
            "Which Python code runs the tools?",
            guide=(
                "One function per tool, named like the tool and taking its parameters by name "
                "(sync or async). What it returns is shown to the agent; an exception becomes an "
                "error message the agent sees. Paste it or upload a .py file."
            ),
            details=_tool_code_details,
            parse=_tool_code,
            kind="code",
            when=LOCAL_TOOLS,
            accepts_files=(".py",),
            display=_code_display,
            help=(
                "Functions may be sync or async and return anything printable; an exception "
                "becomes an error message the agent sees."
            ),
            example='def search(query: str) -> str:\n    return DOCS.get(query, "no match")',
            title="Tool code",
        ),
        Text(
            "tool_urls",
            "Which URL serves each tool?",
            guide=(
                "One `tool_name: [METHOD] https://...` per line (POST when no method is given), or "
                "a JSON object of them. Path parameters such as `{customer_id}` are filled per "
                "call."
            ),
            details=_tool_urls_details,
            parse=tool_endpoints,
            kind="text",
            when=HTTP_TOOLS,
            help=(
                "Each call goes to its tool's URL: arguments as JSON (POST, PUT, PATCH) or as the "
                "query string (GET, DELETE); `{name}` in the path takes the call's argument of "
                "that name, else the scenario's field (per-episode state, like a customer's id). "
                "Every call carries the scenario's id in the `X-Scenario-Id` header. The response "
                "text goes to the agent."
            ),
            example=(
                "search: https://tools.internal/search\n"
                "orders: GET https://crm.internal/customers/{customer_id}/orders"
            ),
            title="Tool URLs",
        ),
        Text(
            "tool_auth",
            "Which header authenticates the tool calls, if any?",
            guide=(
                "`Name: value`, with `$VARIABLE` where the key goes: the script reads that "
                "environment variable where training runs, so the key is never typed here. Reply "
                "`skip` for none."
            ),
            parse=tool_auth,
            kind="text",
            when=HTTP_TOOLS,
            default=lambda a: {},
            default_label="no header",
            display=tool_auth_display,
            help=(
                "For example `Authorization: Bearer $SUPPORT_API_KEY` or `X-Api-Key: $CRM_KEY`. "
                "The training run stops at start with a clear message when the variable is not set."
            ),
            example="Authorization: Bearer $SUPPORT_API_KEY",
            title="Tool authentication",
        ),
        Text(
            "simulated_user",
            "Should a simulated user talk with the agent?",
            guide=(
                "For conversation tasks (support, sales, tutoring): a model plays the person the "
                "agent talks with. Write its instructions; `{field}` puts in that scenario's "
                "field. The agent's replies go to it and its answers come back, until the agent "
                "calls its final-answer tool, the simulated user is done, or the turn limit. "
                "Reply `skip` for none: the agent's first answer without a tool ends the episode."
            ),
            parse=simulated_user,
            kind="text",
            when=WITH_TOOLS,
            default=lambda a: {},
            default_label="none",
            display=simulated_user_display,
            help=(
                "Instructions for the model that plays the user, e.g. `You are a customer. Your "
                "message: {message}. Answer the agent's questions briefly; you do not know your "
                "order id.` It is told to reply `<done>` when the conversation is over."
            ),
            example=(
                "You are a customer writing to support: {message} Answer the agent's questions "
                "in a sentence; you are polite but impatient."
            ),
            title="Simulated user",
        ),
        Choice(
            "simulated_user_model",
            "Which model plays the simulated user?",
            options=tuple(Option(m, m) for m in JUDGE_MODELS),
            when=WITH_SIMULATED_USER,
            recommend=lambda a: JUDGE_MODELS[-1],
            recommend_reads=(),
            other=judge_model_id,
            other_hint="Or type another LiteLLM model id, e.g. `anthropic/claude-sonnet-4-5`.",
            help=(
                "Any LiteLLM model id; its provider's key must be set where training runs. A "
                "cheaper model is usually enough to play a user."
            ),
            title="Simulated user's model",
        ),
        Text(
            "environment",
            "Which Python code is the environment?",
            guide=(
                "Four functions. `create_game(scenario)` returns the `game`: any object that holds "
                "one episode's state, made from its `scenario`. `render_observation(game)` is the "
                "text the agent sees each turn. `apply_action(game, action)` applies the agent's "
                "reply `action` (its text) and raises ValueError for an invalid move. "
                "`is_finished(game)` says when the episode is over. An optional "
                "`compute_reward(scenario, game, trajectory)` can be the reward. Paste the code "
                "or upload a .py file."
            ),
            parse=_environment_code,
            kind="code",
            when=WITH_ENVIRONMENT,
            accepts_files=(".py",),
            display=_code_display,
            help=(
                "Each turn the agent gets render_observation(game) and answers with its action as "
                "text; apply_action applies it. I won't invent game logic: it comes from you."
            ),
            example=(
                "def create_game(scenario):\n"
                '    return {"target": scenario["target"], "guesses": [], "won": False}\n'
                "\n"
                "def render_observation(game):\n"
                "    return f\"Guess a number from 1 to 10. Guesses so far: {game['guesses']}\"\n"
                "\n"
                "def apply_action(game, action):\n"
                "    guess = int(action.strip())\n"
                '    game["guesses"].append(guess)\n'
                '    game["won"] = guess == game["target"]\n'
                "\n"
                "def is_finished(game):\n"
                '    return game["won"] or len(game["guesses"]) >= 5'
            ),
            title="Environment",
        ),
        Choice(
            "invalid_action",
            "What happens when the agent's action is invalid?",
            guide=(
                "An action is invalid when your `apply_action` raises ValueError. Either way the "
                'script counts them in `trajectory.metrics["invalid_actions"]`.'
            ),
            options=(
                Option(
                    "end",
                    "End the episode",
                    f"A programmatic reward scores it {INVALID_ACTION_REWARD}",
                ),
                Option(
                    "continue",
                    "Tell the agent and go on",
                    "The error comes with the next observation",
                ),
            ),
            when=WITH_ENVIRONMENT,
            recommend=lambda a: "end",
            recommend_reads=(),
            recommend_reason=lambda a: (
                "Ending at a penalty is what ART's own games (2048, tic-tac-toe) do: a clear "
                "signal. Going on suits long games where one slip should not cost the episode."
            ),
            help=(
                f"End: the episode stops at the invalid action, and a programmatic reward gives "
                f"it {INVALID_ACTION_REWARD} (RULER's judge sees where it stopped). Go on: the "
                "agent's next message starts with `Your last action was invalid: <your error>`, "
                "the turn still counts toward the turn limit, and your reward decides what the "
                "invalid actions cost."
            ),
            title="Invalid actions",
        ),
        Text(
            "episode_end",
            "When does an episode end?",
            guide=(
                "In words: win or loss conditions, limits. It tells RULER's judge and the next "
                "engineer when an episode is over; the turn limit comes next."
            ),
            parse=v.text(min_len=3, max_len=2000),
            when=MULTI_TURN,
            help=(
                "In words: it tells the judge and the next engineer when an episode is over. The "
                "turn limit comes next."
            ),
            example="When the agent answers without calling a tool, or after 10 turns.",
            title="Episode end",
        ),
        Text(
            "max_turns",
            "At most how many turns may an episode take?",
            guide=(
                f"A whole number from 1 to {MAX_TURNS:,}: the episode stops there even if it is "
                "not over (a game of 2048 takes about 150 moves to reach 256)."
            ),
            parse=v.int_in(1, MAX_TURNS),
            kind="number",
            when=MULTI_TURN,
            default=lambda a: 10,
            default_label="10",
            help=(
                f"A whole number from 1 to {MAX_TURNS:,}; the episode stops there even if it is "
                "not finished. Each turn is one reply of the agent."
            ),
            example="10",
            title="Max turns",
        ),
        Choice(
            "reward",
            "How is the agent rewarded?",
            options=(
                Option("ruler", "RULER (LLM judge)", "No reward function needed"),
                Option("programmatic", "Programmatic", "Code checks the result"),
                Option("custom", "Custom mix", "Your code and RULER together"),
            ),
            recommend=_recommended_reward,
            recommend_reads=("turns", "uses_tools", "task", "environment", "episode_end"),
            recommend_reason=_reward_reason,
            help=(
                "RULER for open-ended answers and tool use; programmatic when code can check "
                "correctness (exact answers, game outcomes); custom mixes both."
            ),
            intro_note=RULER_NOTE,
            title="Reward",
        ),
        Text(
            "reward_logic",
            "How should an episode be scored?",
            details=_reward_names,
            parse=v.reward_logic(rollout_pattern),
            kind="code",
            when=ASKS_REWARD_LOGIC,
            caution=answer_shown_caution,
            accepts_files=(".py",),
            display=_code_display,
            help=(
                "An expression over `scenario` (the row), `answer` (the agent's final text) and "
                "`trajectory`; for games, `scenario`, `game` and `trajectory`. Patterns: binary "
                "(1/0), accuracy (fraction correct), game outcome (1 win / 0.5 draw / 0 loss / -1 "
                "invalid), scaled, composite. Extra signals go in trajectory.metrics and must be "
                "numbers or bools."
            ),
            title="Reward code",
        ),
        Text(
            "extra_packages",
            "Which packages does your code need, beyond the script's own?",
            parse=_extra_packages,
            kind="text",
            when=THIRD_PARTY_IMPORTS,
            details=_packages_details,
            default=_suggested_packages,
            default_label="the packages I guessed",
            display=_packages_display,
            help=(
                "They go into the script's dependency block, so `uv run` installs them. One "
                "requirement per line: a PyPI name, optional extras and versions; no URLs, paths "
                "or pip options."
            ),
            example="pyyaml>=6\nrequests",
            title="Extra packages",
        ),
        Text(
            "reward_mix",
            "How much of the final reward should come from RULER's score?",
            guide=(
                "A weight `w` from 0 to 1: reward = w * RULER's score + (1 - w) * your reward, so "
                "0.5 weighs them equally."
            ),
            parse=v.float_in(0.0, 1.0),
            kind="number",
            when=is_("reward", "custom"),
            default=lambda a: 0.5,
            default_label="0.5",
            help="reward = w * ruler_score + (1 - w) * your_reward, with w from 0 to 1.",
            example="0.5",
            title="Reward mix",
        ),
        Choice(
            "judge_model",
            "Which judge model should RULER use?",
            options=tuple(Option(m, m) for m in JUDGE_MODELS),
            when=WITH_RULER,
            recommend=lambda a: JUDGE_MODELS[0],
            recommend_reads=(),
            other=judge_model_id,
            caution=judge_caution,
            other_hint="Or type another LiteLLM model id, e.g. `anthropic/claude-sonnet-4-5`.",
            help=(
                "The listed judges are current OpenAI models; `openai/gpt-5.4-mini` is the cheaper "
                "one. Another LiteLLM id works too, with its provider's key where the training "
                "runs. A model OpenAI has shut down is refused, and one it has deprecated is taken "
                "with a warning."
            ),
            title="Judge model",
        ),
        Text(
            "ruler_rubric",
            "Which rubric should RULER's judge score by?",
            guide=(
                "`default` takes ART's rubric: a trajectory that reaches its goal scores well "
                "above one that does not, a more efficient one above a less efficient one, with "
                "partial credit for progress. Or paste your own, e.g. a bulleted list of what "
                "makes one trajectory better than another. Your task and when an episode ends are "
                "added to either."
            ),
            parse=v.text(min_len=20, max_len=v.MAX_TEXT_CHARS),
            when=WITH_RULER,
            default=lambda a: "",
            default_label="ART's default rubric",
            display=lambda value: "ART's default rubric" if not value else _first_line(value),
            help=(
                "RULER's judge reads the rubric with the trajectories of a group and scores each "
                "from 0 to 1. Say `default` for ART's, or write yours as plain text."
            ),
            example=(
                "- A correct final answer matters most; a wrong one scores below 0.2.\n"
                "- Among correct answers, fewer tool calls score higher.\n"
                "- Never reward an answer the tools did not support."
            ),
            title="RULER rubric",
        ),
        Choice(
            "train_split",
            "Which scenarios are used for training?",
            options=(
                Option("all", "All scenarios", "Except any held out for validation"),
                Option("fraction", "A fraction of them"),
                Option("separate", "A separate source", "A JSONL file on the runner host"),
            ),
            when=not_(FROM_GENERATOR),
            title="Training scenarios",
        ),
        Text(
            "train_fraction",
            "What fraction of the scenarios is used for training?",
            guide="A number above 0 and up to 1: 0.8 trains on 80% of them.",
            parse=v.float_in(0.0, 1.0, low_open=True),
            kind="number",
            when=is_("train_split", "fraction"),
            example="0.8",
            title="Training fraction",
        ),
        Text(
            "train_source",
            "Where is the training JSONL file on the runner host?",
            guide="Its path on the machine that trains: one JSON object per line.",
            parse=v.runner_path((".jsonl",)),
            kind="path",
            when=is_("train_split", "separate"),
            example="/data/math/train.jsonl",
            title="Training file",
        ),
        Choice(
            "val_split",
            "How should the model be checked during training?",
            options=(
                Option("held_out", "Hold out a fraction", "Of the scenarios, never trained on"),
                Option("separate", "A separate source", "A JSONL file on the runner host"),
                Option("none", "No validation"),
            ),
            when=not_(FROM_GENERATOR),
            recommend=lambda a: "held_out",
            recommend_reads=(),
            details=_validation_details,
            help="Validation logs val/reward, which picks the best checkpoint to keep.",
            title="Validation",
        ),
        Choice(
            "val_generated",
            "How should the model be checked during training?",
            options=(
                Option("generated", "A fixed set from the generator", "Same seed every time"),
                Option("separate", "A separate source", "A JSONL file on the runner host"),
                Option("none", "No validation"),
            ),
            when=FROM_GENERATOR,
            recommend=lambda a: "generated",
            recommend_reads=(),
            title="Validation",
        ),
        Text(
            "val_fraction",
            "What fraction of the scenarios should be held out for validation?",
            guide="A number between 0 and 1; held-out scenarios are never trained on.",
            parse=_val_fraction,
            kind="number",
            when=is_("val_split", "held_out"),
            default=lambda a: _check_val_fraction(0.1, a),
            default_label="0.1",
            example="0.1",
            title="Validation fraction",
        ),
        Text(
            "val_source",
            "Where is the validation JSONL file on the runner host?",
            guide="Its path on the machine that trains: one JSON object per line.",
            parse=v.runner_path((".jsonl",)),
            kind="path",
            when=any_of(is_("val_split", "separate"), is_("val_generated", "separate")),
            example="/data/math/val.jsonl",
            title="Validation file",
        ),
        Text(
            "val_every",
            "Every how many training steps should validation run?",
            parse=v.int_in(1, 10_000),
            kind="number",
            when=VALIDATED,
            default=lambda a: 10,
            default_label="every 10 steps",
            help="Validation also runs after the last step.",
            example="10",
            title="Validation interval",
        ),
        Text(
            "val_max_groups",
            "At most how many scenarios should one validation run use?",
            parse=v.int_in(1, 1_000),
            kind="number",
            when=VALIDATED,
            default=lambda a: 8,
            default_label="8",
            help="A cap keeps validation cheap: each scenario costs one group of rollouts.",
            example="8",
            title="Validation cap",
        ),
        # A run that continues an SFT run (flows.wizards.start_from) has these two settled: never
        # asked, and when reopened by `edit`, only the SFT run's answer is taken.
        base_model_step(
            recommend=recommend_start("base_model"),
            recommend_reads=(START_FROM,),
            check=same_as_start("base_model"),
        ),
        project_step("rl-project"),
        _run_name_step(),
        Choice(
            "backend",
            "Where does training run?",
            options=(
                Option("local", "LocalBackend", "On a GPU host (vLLM + Unsloth)"),
                Option("serverless", "ServerlessBackend", "W&B Training; needs WANDB_API_KEY"),
            ),
            recommend=recommend_start("backend"),
            recommend_reads=(START_FROM,),
            check=same_as_start("backend"),
            title="Backend",
        ),
        *hyperparameter_steps(
            (
                _hyperparameter(
                    "learning_rate",
                    "Learning rate",
                    v.float_in(1e-8, 1e-2),
                    hint="From 1e-8 to 1e-2.",
                ),
                _hyperparameter(
                    "rollouts_per_group",
                    "Rollouts per group",
                    v.int_in(2, 64),
                    hint="2 to 64: GRPO compares rollouts within a group, so it needs at least 2.",
                ),
                _hyperparameter(
                    "groups_per_step",
                    "Groups per step",
                    v.int_in(1, 64),
                    hint="1 to 64 scenarios per training step.",
                ),
                _hyperparameter(
                    "num_steps",
                    "Training steps (open-ended loop)",
                    v.int_in(1, 100_000),
                    hint="1 to 100000.",
                ),
                _hyperparameter(
                    "num_epochs",
                    "Epochs (dataset loop)",
                    v.int_in(1, 1_000),
                    hint="1 to 1000.",
                ),
                _hyperparameter(
                    "gpu_memory_utilization",
                    "GPU memory utilization",
                    v.float_in(0.1, 0.95),
                    when=is_("backend", "local"),
                    hint="0.1 to 0.95; lower it after a CUDA out-of-memory error.",
                ),
                _hyperparameter(
                    "max_completion_tokens",
                    "Completion tokens per reply",
                    v.int_in(16, 32_768),
                    hint=(
                        "16 to 32768: the longest reply the agent may write, each turn. Raise it "
                        "for a model that thinks before it answers; a reply cut off is scored as "
                        "it is."
                    ),
                ),
            ),
            guide=(
                "The defaults: learning rate 1e-5, 4 rollouts per group, 2 groups per step, 50 "
                "steps (open-ended loop) or 3 epochs (dataset loop), replies of up to 1024 tokens."
            ),
            example="2",
        ),
        Choice(
            "iteration",
            "How should training iterate?",
            options=(
                Option("dataset", "Epochs over the fixed dataset", "iterate_dataset, resumable"),
                Option("open_ended", "Open-ended step loop", "A fixed number of steps"),
            ),
            recommend=lambda a: "open_ended" if FROM_GENERATOR(a) else "dataset",
            recommend_reads=("scenario_source",),
            check=_check_iteration,
            title="Training loop",
        ),
    ],
    parts=[
        Part("Your task", "replayable"),
        Part("Scenarios", "scenario_source"),
        Part("The agent", "system_prompt"),
        Part("Reward", "reward"),
        Part("Training and validation data", "train_split"),
        Part("Model and run", "base_model"),
        Part("Training", "hyperparameters"),
    ],
    given=[START_FROM_SFT],
)


def hyperparameters(answers: Answers) -> dict[str, Any]:
    """The hyperparameters in force: defaults, overlaid with any customized values."""
    values = dict(DEFAULT_HYPERPARAMETERS)
    if CUSTOM_HYPERPARAMETERS(answers):
        values.update(answers.get("hyperparameter_values") or {})
    return values


def uses_ruler(answers: Answers) -> bool:
    """Whether RULER scores the rollouts (alone or mixed with the user's reward)."""
    return WITH_RULER(answers)
