"""Rendering: user text only ever becomes an equal string constant; the template decides every
statement."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from checks.script_format import formatted_script
from flows.script.literals import PyLiteral, finalize, py_literal
from flows.script.render import RenderError, script_context
from tests.flows.matrix import after_sft, answers_for
from tests.flows.sft_matrix import VARIANTS as SFT_VARIANTS

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
HOSTILE = [
    "'''",
    '"""',
    "\\",
    "\\'; import os; os.system('id') #",
    '") ; __import__("os").system("rm -rf /") ; ("',
    "{{ 7 * 7 }}",
    "{% for x in range(3) %}boom{% endfor %}",
    "__import__('os').system('touch /tmp/pwned')",
    "line one\nline two\r\nline three\u2028\u2029",
    "emoji 🎉, RTL \u202e, zero-width \u200b, CJK 漢字, combining é",
    "\t\x0b\x0c tabs and feeds",
    "# just a comment\nimport os",
    "\\N{BULLET} \\x41 \\u0041 \\n",
]


def statements_shape(source: str) -> str:
    """The script's AST with every string constant blanked: what the template put there."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = "S"
    return ast.dump(tree)


def constant_assigned(source: str, name: str) -> Any:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if (
                any(isinstance(t, ast.Name) and t.id == name for t in targets)
                and node.value is not None
            ):
                return ast.literal_eval(node.value)
    raise AssertionError(f"{name} is not assigned a literal")


BASELINES = {
    pattern: answers_for(pattern, "ruler", "dataset", "local", True)
    for pattern in ("single", "tools", "game")
}
user_text = st.one_of(st.sampled_from(HOSTILE), st.text(min_size=1, max_size=300)).filter(
    lambda s: "\x00" not in s
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=st.sampled_from(["single", "tools", "game"]),
    task=user_text,
    system_prompt=user_text,
    episode_end=user_text,
    field_value=user_text,
    field_name=user_text,
)
@example(
    pattern="single",
    task=HOSTILE[3],
    system_prompt="",
    episode_end="",
    field_value=HOSTILE[6],
    field_name="prompt",
)
@example(
    pattern="tools",
    task=HOSTILE[4],
    system_prompt=HOSTILE[0],
    episode_end=HOSTILE[5],
    field_value=HOSTILE[7],
    field_name=HOSTILE[1],
)
def test_hostile_answers_become_equal_constants_and_add_no_statement(
    pattern: str, task: str, system_prompt: str, episode_end: str, field_value: str, field_name: str
) -> None:
    def answers_with(
        task: str, system_prompt: str, episode_end: str, name: str, value: str
    ) -> dict[str, Any]:
        answers = dict(BASELINES[pattern])
        answers.update(task=task, system_prompt=system_prompt)
        if pattern != "single":
            answers["episode_end"] = episode_end
        answers["scenario_rows"] = [dict(row, **{name: value}) for row in answers["scenario_rows"]]
        return answers

    answers = answers_with(task, system_prompt, episode_end, field_name, field_value)
    rows = answers["scenario_rows"]
    # Same number of keys as the hostile rows: override the same existing key, or add a new one.
    original = BASELINES[pattern]["scenario_rows"][0]
    benign_name = field_name if field_name in original else "zz_benign"
    benign = answers_with("a benign task", "benign", "benign end", benign_name, "benign value")

    script = formatted_script(answers)

    assert statements_shape(script) == statements_shape(formatted_script(benign))
    assert constant_assigned(script, "TASK") == task
    assert constant_assigned(script, "SYSTEM_PROMPT") == system_prompt
    assert constant_assigned(script, "SCENARIOS") == rows
    if pattern != "single":
        assert constant_assigned(script, "EPISODE_END") == episode_end


@settings(max_examples=60, deadline=None)
@given(path=user_text.filter(lambda s: "\n" not in s and "\r" not in s))
def test_hostile_paths_and_urls_stay_strings(path: str) -> None:
    answers = answers_for("tools", "programmatic", "open_ended", "local", True)
    answers.update(
        scenario_source="runner_file",
        scenarios_path=path + ".jsonl",
        val_split="separate",
        val_source=path,
        tool_execution="http",
        tool_urls={"add": "https://tools.example/add?q=" + path},
    )
    del answers["tool_code"]
    script = formatted_script(answers)
    ast.parse(script)
    assert constant_assigned(script, "SCENARIOS_PATH") == path + ".jsonl"
    assert constant_assigned(script, "VAL_SOURCE") == path
    assert constant_assigned(script, "TOOL_URLS") == {"add": "https://tools.example/add?q=" + path}


def test_a_template_cannot_print_a_plain_string() -> None:
    with pytest.raises(TypeError, match="unmarked str"):
        finalize("import os")
    assert finalize(py_literal("it's")) == repr("it's")
    assert finalize(PyLiteral("'x'")) == "'x'"


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_py_literal_evaluates_to_the_same_value(value: Any) -> None:
    assert ast.literal_eval(py_literal(value)) == value


def _function(script: str, name: str) -> ast.FunctionDef:
    found = [
        node
        for node in ast.parse(script).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
    ]
    assert len(found) == 1, f"{name} is defined {len(found)} times at the script's top level"
    assert isinstance(found[0], ast.FunctionDef)
    return found[0]


def test_user_code_is_inserted_only_where_code_belongs_and_only_when_it_parses() -> None:
    answers = answers_for("game", "programmatic", "open_ended", "local", False)
    script = formatted_script(answers)
    # The environment is the body of a function of its own, statement for statement, followed by
    # the return of its entry points.
    placed = _function(script, "user_environment")
    expected = ast.parse(answers["environment"]).body
    assert ast.dump(ast.Module(placed.body[:-1], [])) == ast.dump(ast.Module(expected, []))
    assert ast.unparse(placed.body[-1]) == (
        "return (create_game, render_observation, apply_action, is_finished)"
    )
    answers["environment"] = "def create_game(s):\n  return (\n"
    with pytest.raises(SyntaxError):
        formatted_script(answers)


def test_reward_code_with_the_script_s_own_names_keeps_them_to_itself() -> None:
    answers = answers_for("single", "programmatic", "dataset", "local", False)
    answers["reward_logic"] = {
        "kind": "function",
        "code": (
            "import random\nfrom random import random as rollout\n\nTASK = 'mine'\n\n\n"
            "def compute_reward(scenario, answer, trajectory):\n    return rollout() + len(TASK)\n"
        ),
    }
    script = formatted_script(answers)
    module = ast.parse(script)
    top_level = [
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "rollout"
    ]
    assert top_level == ["rollout"]  # the script's own, untouched
    assert "TASK = 'mine'" in ast.unparse(_function(script, "user_reward"))
    assert "compute_reward = user_reward()" in script


def test_missing_answers_are_named() -> None:
    answers = answers_for("single", "ruler", "dataset", "local", True)
    del answers["run_name"]
    with pytest.raises(RenderError, match="run_name"):
        script_context(answers)


def test_stale_answers_from_an_abandoned_branch_are_ignored() -> None:
    answers = answers_for("single", "ruler", "dataset", "local", True)
    answers["tools"] = [{"type": "function", "function": {"name": "x", "description": "y"}}]
    answers["judge_model"] = "openai/o3"
    assert "TOOLS" not in formatted_script(answers)


GOLDEN_CASES = {
    "single_ruler_dataset_local_val": answers_for("single", "ruler", "dataset", "local", True),
    "tools_programmatic_open_ended_serverless": answers_for(
        "tools", "programmatic", "open_ended", "serverless", False
    ),
    "game_custom_dataset_local_val": answers_for("game", "custom", "dataset", "local", True),
    # RL after SFT (flows.wizards.start_from): the script forks the SFT model, its steps follow
    # the SFT's.
    "single_programmatic_open_ended_local_val_after_sft": after_sft(
        answers_for("single", "programmatic", "open_ended", "local", True),
        SFT_VARIANTS["file-local-paste"],
    ),
    "tools_ruler_dataset_serverless_val_after_sft": after_sft(
        answers_for("tools", "ruler", "dataset", "serverless", True),
        SFT_VARIANTS["file-serverless-upload-val"],
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_representative_scripts_match_their_golden_files(name: str) -> None:
    script = formatted_script(GOLDEN_CASES[name])
    golden = GOLDEN / f"{name}.py"
    if os.environ.get("ARTBOT_UPDATE_GOLDEN") == "1":
        golden.write_text(script)
    assert golden.exists(), f"run with ARTBOT_UPDATE_GOLDEN=1 to create {golden}"
    assert script == golden.read_text(), (
        f"{golden.name} changed: review, then ARTBOT_UPDATE_GOLDEN=1"
    )
