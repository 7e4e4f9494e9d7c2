"""The script's options and small promises: the completion token limit reaches every chat
completion of the agent, the docstring names the script's own file, the usage block names the key
to pass and never a secret, a custom RULER rubric replaces ART's, and nothing is emitted that the
script never uses."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
from types import SimpleNamespace
from typing import Any

import pytest

from checks.script_format import formatted_script
from tests.flows.matrix import answers_for
from tests.flows.test_render import HOSTILE, constant_assigned, statements_shape


def _calls_to(script: str, method: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(ast.parse(script))
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(method)
    ]


@pytest.mark.parametrize("pattern", ["single", "tools", "game"])
def test_every_chat_completion_of_the_agent_is_capped_by_the_completion_token_limit(
    pattern: str,
) -> None:
    answers = answers_for(pattern, "programmatic", "dataset", "local", False)
    answers.update(
        hyperparameters="customize", hyperparameter_values={"max_completion_tokens": 3000}
    )
    script = formatted_script(answers)
    assert constant_assigned(script, "MAX_COMPLETION_TOKENS") == 3000
    calls = _calls_to(script, "chat.completions.create")
    assert calls
    for call in calls:
        limits = [k for k in call.keywords if k.arg == "max_completion_tokens"]
        assert [ast.unparse(k.value) for k in limits] == ["args.max_completion_tokens"]
    flag = next(
        c
        for c in _calls_to(script, "add_argument")
        if ast.literal_eval(c.args[0]) == "--max-completion-tokens"
    )
    assert {k.arg: ast.unparse(k.value) for k in flag.keywords}[
        "default"
    ] == "MAX_COMPLETION_TOKENS"
    defaults = formatted_script(answers_for(pattern, "programmatic", "dataset", "local", False))
    assert constant_assigned(defaults, "MAX_COMPLETION_TOKENS") == 1024


def _docstring(script: str) -> str:
    docstring = ast.get_docstring(ast.parse(script))
    assert docstring is not None
    return docstring


def test_the_docstring_tells_to_run_the_file_the_script_is_saved_as() -> None:
    answers = answers_for("single", "ruler", "dataset", "local", False, run_name="math-solver-001")
    assert "Run it with `uv run math-solver-001.py`." in _docstring(formatted_script(answers))
    assert "Run it with `uv run train.py`." in _docstring(formatted_script(answers, "train.py"))
    # A file name that could not sit in a docstring is not written into it.
    odd = _docstring(formatted_script(answers, 'it\'s """ mine.py'))
    assert "Run it with `uv run` and this file's name." in odd and "mine" not in odd
    assert "rl_train.py" not in _docstring(formatted_script(answers))


def _names(script: str) -> set[str]:
    return {
        node.name if isinstance(node, ast.FunctionDef) else ast.unparse(node.targets[0])
        for node in ast.parse(script).body
        if isinstance(node, ast.FunctionDef | ast.Assign)
    }


def test_what_the_script_defines_it_uses() -> None:
    inline = formatted_script(answers_for("game", "programmatic", "dataset", "local", True))
    assert "load_jsonl" not in inline and "EPISODE_END" not in inline
    from_files = answers_for("game", "ruler", "dataset", "local", True)
    from_files.update(scenario_source="runner_file", scenarios_path="/data/guess.jsonl")
    del from_files["scenario_rows"]
    script = formatted_script(from_files)
    assert {"load_jsonl", "EPISODE_END"} <= _names(script)
    assert "pool = load_jsonl(SCENARIOS_PATH)" in script
    assert 'RULER_RUBRIC += "\\n- The episode ends: " + EPISODE_END' in script


def _usage(backend: str, inference_api_key: str) -> str:
    """What the script's print_usage prints for a model served with this key."""
    script = formatted_script(answers_for("single", "ruler", "dataset", backend, False))
    function = next(
        node
        for node in ast.parse(script).body
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "print_usage"
    )
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module([function], []), "print_usage", "exec"), namespace)

    async def get_step() -> int:
        return 12

    model = SimpleNamespace(
        get_step=get_step,
        get_inference_name=lambda: "math-solver-001@12",
        openai_client=lambda: SimpleNamespace(base_url="http://10.0.0.5:8000/v1/"),
        inference_api_key=inference_api_key,
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        asyncio.run(namespace["print_usage"](model, "OpenPipe/Qwen3-14B-Instruct"))
    return printed.getvalue()


def test_the_usage_block_names_the_key_to_pass_and_never_a_secret() -> None:
    local = _usage("local", "default")  # what ART's LocalBackend serves with unless configured
    assert 'api_key="default",' in local and 'Authorization: Bearer default"' in local
    configured = _usage("local", "s3cret-server-key")
    assert "s3cret" not in configured
    assert 'api_key="<the api_key of your server config>",' in configured
    serverless = _usage("serverless", "wandb-v1-abcdef0123456789")
    assert "abcdef0123456789" not in serverless
    assert "import os\n\nfrom openai import OpenAI" in serverless
    assert 'api_key=os.environ["WANDB_API_KEY"],' in serverless
    assert 'Authorization: Bearer $WANDB_API_KEY"' in serverless
    assert all("not-needed" not in usage for usage in (local, configured, serverless))


def test_a_custom_rubric_replaces_arts_default_and_still_tells_the_task() -> None:
    default = formatted_script(answers_for("tools", "ruler", "dataset", "local", False))
    assert "from art.rewards.ruler import DEFAULT_RUBRIC" in default
    assert 'RULER_RUBRIC = DEFAULT_RUBRIC + "\\n- The agent\'s task: " + TASK' in default
    rubric = "- Correct sums score 1.\n- Fewer tool calls score higher."
    answers = answers_for("tools", "ruler", "dataset", "local", False, ruler_rubric=rubric)
    script = formatted_script(answers)
    assert constant_assigned(script, "YOUR_RUBRIC") == rubric
    assert 'RULER_RUBRIC = YOUR_RUBRIC + "\\n- The agent\'s task: " + TASK' in script
    assert "import DEFAULT_RUBRIC" not in script and "DEFAULT_RUBRIC +" not in script
    assert "rubric=RULER_RUBRIC" in script


@pytest.mark.parametrize("rubric", HOSTILE)
def test_a_hostile_rubric_is_an_equal_constant_and_adds_no_statement(rubric: str) -> None:
    benign = answers_for("game", "custom", "dataset", "local", True, ruler_rubric="be fair to all")
    hostile = answers_for("game", "custom", "dataset", "local", True, ruler_rubric=rubric)
    script = formatted_script(hostile)
    assert constant_assigned(script, "YOUR_RUBRIC") == rubric
    assert statements_shape(script) == statements_shape(formatted_script(benign))
