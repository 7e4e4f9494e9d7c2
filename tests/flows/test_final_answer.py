"""The final-answer tool: which tool ends a tool-use episode, and what the reward sees of it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from checks.script_format import formatted_script
from flows import AnswersError, RenderError, replay
from flows.wizards.rl.train_rl import TRAIN_RL
from tests.flows.conversation import Conversation
from tests.flows.matrix import MATH_ROWS, TOOLS, answers_for
from tests.flows.realistic_agents import EMAIL_TOOL_CODE, EMAIL_TOOLS, email_agent


def conversation_at_the_final_answer_question(tools: list[dict[str, Any]]) -> Conversation:
    chat = Conversation()
    chat.play(
        [
            ("Episodes can be recreated", "turns"),
            ("Multi-turn", "task"),
            ("Answer questions about the inbox by searching it.", "scenario_source"),
            ("inline", "scenario_rows"),
            (json.dumps(MATH_ROWS), "system_prompt"),
            ("skip", "uses_tools"),
            ("yes", "agent_prompt"),
            ("default", "tools"),
            (json.dumps(tools), "final_answer_tool"),
        ]
    )
    return chat


def test_the_tools_are_offered_and_a_final_answer_name_is_recommended() -> None:
    chat = conversation_at_the_final_answer_question(EMAIL_TOOLS)
    asked = chat.asked()
    assert asked is not None
    assert [(o.value, o.recommended) for o in asked.options] == [
        ("return_final_answer", True),
        ("search_inbox", False),
        ("read_email", False),
        ("none", False),
    ]
    assert asked.options[-1].label == (
        "None: the episode ends when the agent answers without a tool call"
    )
    chat.say("1")
    assert chat.problem() is None
    assert chat.session.answers["final_answer_tool"] == "return_final_answer"


def test_without_a_final_answer_name_none_is_recommended_and_a_tool_can_be_typed() -> None:
    chat = conversation_at_the_final_answer_question(TOOLS)
    asked = chat.asked()
    assert asked is not None
    assert [(o.value, o.recommended) for o in asked.options] == [("none", True), ("add", False)]
    chat.say("submit")
    assert "is not one of the options" in (chat.problem() or "")
    chat.say("add")
    assert chat.session.answers["final_answer_tool"] == "add"


def test_the_final_answer_tool_needs_no_code_and_no_url() -> None:
    # EMAIL_TOOL_CODE defines search_inbox and read_email only.
    assert "def return_final_answer" not in EMAIL_TOOL_CODE
    session = replay(TRAIN_RL, email_agent())
    assert session.answers["final_answer_tool"] == "return_final_answer"
    http = email_agent(
        tool_execution="http",
        tool_urls={
            "search_inbox": "https://mail.example/search",
            "read_email": "https://mail.example/read",
        },
    )
    del http["tool_code"]
    assert "TOOL_URLS" in formatted_script(http)
    # Without a final-answer tool, every tool needs its function.
    with pytest.raises(AnswersError, match=r"tool_code: .* `return_final_answer`"):
        replay(TRAIN_RL, email_agent(final_answer_tool="none"))


def test_an_answers_file_must_name_a_tool_that_exists() -> None:
    with pytest.raises(AnswersError, match="final_answer_tool: 'submit' is not one of"):
        replay(TRAIN_RL, email_agent(final_answer_tool="submit"))


def test_a_final_answer_tool_the_edited_tools_lost_is_not_silently_dropped() -> None:
    session = replay(TRAIN_RL, email_agent())
    edited = {**session.answers, "tools": EMAIL_TOOLS[:2]}  # `edit tools`, without the third
    with pytest.raises(RenderError, match="'return_final_answer' is no longer one of the tools"):
        formatted_script(edited)


def test_a_button_press_picks_a_tool() -> None:
    chat = conversation_at_the_final_answer_question(EMAIL_TOOLS)
    chat.click("search_inbox")
    assert chat.problem() is None
    assert chat.session.answers["final_answer_tool"] == "search_inbox"
    assert chat.asking() == "tool_execution"


def load_script(source: str, tmp_path: Path, name: str) -> ModuleType:
    """The rendered script as a module (its `main()` does not run)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_several_arguments_reach_the_reward_as_a_json_object(tmp_path: Path) -> None:
    # ServerlessBackend: a LocalBackend script imports torch, which tests do not install.
    answers = email_agent(backend="serverless")
    script = load_script(formatted_script(answers), tmp_path, "email_agent_script")
    arguments = json.dumps({"answer": "Hotel Adlon", "reference_message_ids": ["m2"]})

    answer, error = asyncio.run(script.read_final_answer(arguments))

    assert error == ""
    assert json.loads(answer) == {"answer": "Hotel Adlon", "reference_message_ids": ["m2"]}
    assert asyncio.run(script.read_final_answer("not json")) == (
        None,
        "Error: the arguments are not valid JSON (Expecting value)",
    )
    assert "return_final_answer" not in script.TOOL_FUNCTIONS  # never executed


ONE_ARGUMENT_TOOLS = [
    TOOLS[0],
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Submit the sum.",
            "parameters": {"type": "object", "properties": {"total": {"type": "integer"}}},
        },
    },
]


def test_a_single_argument_is_the_answer_itself_and_a_defined_tool_checks_it(
    tmp_path: Path,
) -> None:
    code = (
        "def add(a: int, b: int) -> str:\n    return str(a + b)\n\n\n"
        "def submit(total: int) -> str:\n"
        "    if total < 0:\n"
        "        raise ValueError('the sum of two small numbers is not negative')\n"
        "    return 'ok'\n"
    )
    answers = answers_for(
        "tools",
        "programmatic",
        "dataset",
        "serverless",
        False,
        tools=ONE_ARGUMENT_TOOLS,
        final_answer_tool="submit",
        tool_code=code,
    )
    script = load_script(formatted_script(answers), tmp_path, "one_argument_script")

    assert asyncio.run(script.read_final_answer('{"total": 7}', {})) == ("7", "")
    assert asyncio.run(script.read_final_answer("{}", {})) == (
        None,
        "Error: the argument 'total' is missing.",
    )
    assert asyncio.run(script.read_final_answer('{"total": -1}', {})) == (
        None,
        "Error: ValueError: the sum of two small numbers is not negative",
    )
