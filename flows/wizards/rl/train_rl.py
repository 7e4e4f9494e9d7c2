"""The `train-rl` wizard as data: every question of the product spec, in order, with its
branching (flows.wizards.rl.branches), its wording beyond the questions' text
(flows.wizards.rl.wording) and the parsers only it uses (flows.wizards.rl.parsers)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flows.code.third_party import imported_modules
from flows.conversation import validators as v
from flows.definition.conditions import Condition, any_of, is_, not_
from flows.definition.flow import Flow, Part
from flows.definition.steps import Answers, Choice, MenuField, Option, Parse, Text
from flows.wizards.rl.agent_prompt import (
    agent_prompt_details,
    agent_prompt_display,
    answer_shown_caution,
    default_agent_prompt,
    parse_agent_prompt,
)
from flows.wizards.rl.branches import (
    ASKS_REWARD_LOGIC,
    FROM_GENERATOR,
    HTTP_TOOLS,
    LOCAL_TOOLS,
    MULTI_TURN,
    NO_FINAL_ANSWER_TOOL,
    THIRD_PARTY_IMPORTS,
    VALIDATED,
    WITH_ENVIRONMENT,
    WITH_RULER,
    WITH_SIMULATED_USER,
    WITH_TOOLS,
    rollout_pattern,
    user_code,
)
from flows.wizards.rl.http_tools import tool_auth, tool_auth_display, tool_endpoints
from flows.wizards.rl.judge_models import JUDGE_MODELS, judge_caution, judge_model_id
from flows.wizards.rl.parsers import (
    check_iteration,
    check_val_fraction,
    environment_code,
    extra_packages,
    generator_code,
    suggested_packages,
    tool_code,
    val_fraction,
)
from flows.wizards.rl.simulated_user import simulated_user, simulated_user_display
from flows.wizards.rl.wording import (
    INVALID_ACTION_REWARD,
    REPLAYABLE_RULE,
    RULER_NOTE,
    code_display,
    final_answer_options,
    first_line,
    packages_details,
    packages_display,
    recommend_final_answer_tool,
    recommended_reward,
    reward_names,
    reward_reason,
    rows_display,
    tool_code_details,
    tool_urls_details,
    tools_display,
    validation_details,
)
from flows.wizards.shared_steps import (
    CUSTOM_HYPERPARAMETERS,
    base_model_step,
    hyperparameter_steps,
    project_step,
    run_name_step,
)
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
            display=rows_display,
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
            parse=generator_code,
            kind="code",
            when=FROM_GENERATOR,
            accepts_files=(".py",),
            display=code_display,
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
            display=tools_display,
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
            options_from=final_answer_options,
            options_reads=("tools",),
            when=WITH_TOOLS,
            recommend=recommend_final_answer_tool,
            recommend_reads=("tools",),
            recommend_reason=lambda a: (
                "It is named like a final-answer tool (the ART-E pattern: `return_final_answer`)."
                if recommend_final_answer_tool(a) != NO_FINAL_ANSWER_TOOL
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
            details=tool_code_details,
            parse=tool_code,
            kind="code",
            when=LOCAL_TOOLS,
            accepts_files=(".py",),
            display=code_display,
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
            details=tool_urls_details,
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
            parse=environment_code,
            kind="code",
            when=WITH_ENVIRONMENT,
            accepts_files=(".py",),
            display=code_display,
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
            recommend=recommended_reward,
            recommend_reads=("turns", "uses_tools", "task", "environment", "episode_end"),
            recommend_reason=reward_reason,
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
            details=reward_names,
            parse=v.reward_logic(rollout_pattern),
            kind="code",
            when=ASKS_REWARD_LOGIC,
            caution=answer_shown_caution,
            accepts_files=(".py",),
            display=code_display,
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
            parse=extra_packages,
            kind="text",
            when=THIRD_PARTY_IMPORTS,
            details=packages_details,
            default=suggested_packages,
            default_label="the packages I guessed",
            display=packages_display,
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
            display=lambda value: "ART's default rubric" if not value else first_line(value),
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
            details=validation_details,
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
            parse=val_fraction,
            kind="number",
            when=is_("val_split", "held_out"),
            default=lambda a: check_val_fraction(0.1, a),
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
            check=check_iteration,
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
