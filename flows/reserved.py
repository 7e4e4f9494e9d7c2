"""Names the generated script defines itself, which code from the user must leave alone."""

from __future__ import annotations

import ast

# Names the template defines at module level: user code must not redefine them.
RESERVED_NAMES = frozenset(
    {
        "TASK",
        "SYSTEM_PROMPT",
        "BASE_MODEL",
        "PROJECT",
        "RUN_NAME",
        "LEARNING_RATE",
        "ROLLOUTS_PER_GROUP",
        "GROUPS_PER_STEP",
        "NUM_EPOCHS",
        "NUM_STEPS",
        "MAX_CONCURRENT",
        "SPLIT_SEED",
        "GPU_MEMORY_UTILIZATION",
        "JUDGE_MODEL",
        "RULER_WEIGHT",
        "MAX_TURNS",
        "EPISODE_END",
        "VAL_EVERY",
        "VAL_MAX_GROUPS",
        "JUDGE_KEY_ENV",
        "Scenario",
        "SCENARIOS",
        "SCENARIOS_PATH",
        "TRAIN_SOURCE",
        "TRAIN_FRACTION",
        "VAL_SOURCE",
        "VAL_FRACTION",
        "TOOLS",
        "TOOL_URLS",
        "TOOL_FUNCTIONS",
        "TOOL_TIMEOUT_S",
        "TOOL_RESULT_MAX_CHARS",
        "TRANSIENT_ERRORS",
        "RULER_RUBRIC",
        "INVALID_ACTION_REWARD",
        "MAX_FAILED_STEPS_IN_A_ROW",
        "check_environment",
        "parse_args",
        "scenario_id",
        "check_scenario",
        "load_jsonl",
        "generate_scenarios",
        "load_scenarios",
        "parse_tool_arguments",
        "execute_tool",
        "check_metrics",
        "first_messages",
        "rollout",
        "bounded",
        "score_group",
        "gather_groups",
        "average_reward",
        "report_failures",
        "train_on",
        "check_progress",
        "validate",
        "training_batch",
        "train",
        "print_usage",
        "main",
        # modules the script imports
        "argparse",
        "asyncio",
        "hashlib",
        "json",
        "os",
        "math",
        "random",
        "sys",
        "inspect",
        "traceback",
        "Awaitable",
        "Path",
        "Any",
        "art",
        "httpx",
        "openai",
        "load_dotenv",
        "LocalBackend",
        "ruler_score_group",
        "DEFAULT_RUBRIC",
        "iterate_dataset",
    }
)


def defined_names(source: str) -> set[str]:
    """Module-level names a piece of code binds (defs, classes, assignments, imports)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def check_user_code(source: str, what: str) -> str | None:
    """Why `source` cannot go into the script (it redefines one of the script's names), or None."""
    clashes = sorted(defined_names(source) & RESERVED_NAMES)
    if clashes:
        return (
            f"The {what} defines {', '.join(clashes)}, which the generated script defines "
            f"itself: rename {'them' if len(clashes) > 1 else 'it'}."
        )
    return None
