"""What the agent is shown of a scenario is a decision: the fields the user names (recommended
from the data) or their `render_prompt`, never the whole row; and the episode's scenario reaches
the tools that ask for it, never from the model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from checks.script_format import formatted_script
from flows.code.code_calls import code_calls
from flows.conversation.replay import replay
from flows.definition.steps import InvalidAnswer
from flows.wizards.rl.agent_prompt import (
    answer_shown_caution,
    generated_fields,
    parse_agent_prompt,
    reward_fields,
    shown_fields,
)
from flows.wizards.rl.train_rl import TRAIN_RL
from tests.flows.conversation import Conversation
from tests.flows.matrix import answers_for
from tests.flows.realistic import REALISTIC
from tests.flows.realistic_agents import email_agent
from tests.flows.realistic_tasks import (
    ART_E_REWARD,
    ART_E_SCENARIOS,
    ART_E_TOOL_CODE,
    art_e,
    codenames,
    support_agent_with_a_customer,
    temporal_clue,
)
from tests.flows.test_final_answer import load_script

ROWS_WITHOUT_A_PROMPT = [
    {"board": "..X/.O./...", "best_move": "A1"},
    {"board": "X../.O./..X", "best_move": "C1"},
]


def without(answers: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in answers.items() if k not in keys}


def test_an_art_e_agent_is_shown_the_question_and_never_the_answer(tmp_path: Path) -> None:
    # Left to its default, the question is the field the data names like a prompt.
    session = replay(TRAIN_RL, without(art_e(), "agent_prompt"))
    assert session.answers["agent_prompt"] == {"fields": ["question"]}

    script = load_script(formatted_script(session.answers), tmp_path, "art_e_sees")

    for scenario in ART_E_SCENARIOS:
        system, user = script.first_messages(scenario)
        assert system["role"] == "system" and user == {
            "role": "user",
            "content": scenario["question"],
        }
        shown = json.dumps(script.first_messages(scenario))
        assert scenario["answer"] not in shown and scenario["inbox_address"] not in shown


def test_a_row_without_its_shown_field_is_refused_when_the_script_loads_it(tmp_path: Path) -> None:
    script = load_script(formatted_script(art_e()), tmp_path, "art_e_checks")
    assert script.check_scenario(ART_E_SCENARIOS[0], "line 1") is ART_E_SCENARIOS[0]
    with pytest.raises(ValueError, match="line 3: the scenario has no 'question'"):
        script.check_scenario({"id": 3, "answer": "Priya"}, "line 3")


def test_tools_that_take_the_scenario_search_that_episodes_inbox_up_to_its_date(
    tmp_path: Path,
) -> None:
    script = load_script(formatted_script(art_e()), tmp_path, "art_e_tools")
    dana_in_august, dana_in_september, lee = (ART_E_SCENARIOS[i] for i in (0, 1, 2))
    search = json.dumps({"keywords": ["berlin"]})

    found, ok = asyncio.run(script.execute_tool("search_inbox", search, dana_in_september))
    assert ok and json.loads(found) == [{"message_id": "d2", "subject": "Berlin trip"}]
    found, ok = asyncio.run(script.execute_tool("search_inbox", search, dana_in_august))
    assert ok and json.loads(found) == []  # d2 came later, d3 later still
    found, ok = asyncio.run(script.execute_tool("search_inbox", search, lee))
    assert ok and json.loads(found) == []  # another person's inbox
    email, ok = asyncio.run(
        script.execute_tool("read_email", json.dumps({"message_id": "l1"}), lee)
    )
    assert ok and "$4.2 million" in email
    # The model cannot hand a tool another scenario.
    forged = json.dumps({"keywords": ["budget"], "scenario": lee})
    refused, ok = asyncio.run(script.execute_tool("search_inbox", forged, dana_in_september))
    assert not ok and refused == "Error: ValueError: unexpected argument 'scenario'"


def test_the_recommended_field_follows_the_data() -> None:
    session = replay(
        TRAIN_RL,
        without(
            answers_for(
                "single",
                "programmatic",
                "dataset",
                "local",
                False,
                scenario_rows=[{"task": "Sort 3 1 2", "expected": "1 2 3"}],
                reward_logic={"kind": "expression", "code": "answer == scenario['expected']"},
            ),
            "agent_prompt",
        ),
    )
    assert session.answers["agent_prompt"] == {"fields": ["task"]}


def test_rows_with_no_field_named_like_a_prompt_must_name_one() -> None:
    chat = Conversation()
    chat.play(
        [
            ("static", "turns"),
            ("single", "task"),
            ("Pick the best tic-tac-toe move for X on the board given.", "scenario_source"),
            ("inline", "scenario_rows"),
            ("\n".join(json.dumps(r) for r in ROWS_WITHOUT_A_PROMPT), "system_prompt"),
            ("skip", "agent_prompt"),
        ]
    )
    chat.say("default")
    assert chat.problem() is not None
    assert "None of your scenarios' fields is named like a prompt (`board`, `best_move`)" in (
        chat.problem() or ""
    )
    chat.say("board, move")
    assert (
        chat.problem()
        == "“move” is not a field of your scenarios. The fields: `board`, `best_move`."
    )
    chat.say("board")
    assert chat.problem() is None and chat.session.answers["agent_prompt"] == {"fields": ["board"]}


def test_a_shown_field_the_reward_reads_is_cautioned_not_refused() -> None:
    session = replay(TRAIN_RL, art_e(agent_prompt={"fields": ["question", "answer"]}))
    chat = Conversation(session=session)
    chat.say("edit reward code")
    chat.say(ART_E_REWARD)
    assert chat.problem() is None
    [caution] = [n for n in chat.notices() if ":warning:" in n]
    assert "Your reward reads `answer`, and the agent is shown `answer`" in caution
    # Shown only the question, the same reward draws no caution.
    chat = Conversation(session=replay(TRAIN_RL, art_e()))
    chat.say("edit reward code")
    chat.say(ART_E_REWARD)
    assert chat.problem() is None and not [n for n in chat.notices() if ":warning:" in n]


def test_a_render_prompt_function_writes_the_first_message(tmp_path: Path) -> None:
    code = (
        "def render_prompt(scenario):\n"
        "    return f\"Inbox of {scenario['inbox_address']} on {scenario['query_date']}: \""
        " + scenario['question']\n"
    )
    answers = art_e(agent_prompt=parse_agent_prompt(code, art_e()))
    script = load_script(formatted_script(answers), tmp_path, "art_e_render_prompt")
    _, user = script.first_messages(ART_E_SCENARIOS[2])
    assert user["content"] == (
        "Inbox of lee@example.com on 2024-07-15: What is the new budget for the Atlas project?"
    )

    returns_a_dict = "def render_prompt(scenario):\n    return dict(scenario)\n"
    answers = art_e(agent_prompt=parse_agent_prompt(returns_a_dict, art_e()))
    script = load_script(formatted_script(answers), tmp_path, "art_e_render_dict")
    with pytest.raises(TypeError, match="render_prompt returned a dict"):
        script.first_messages(ART_E_SCENARIOS[0])


def test_several_fields_are_shown_one_per_paragraph_with_their_names(tmp_path: Path) -> None:
    answers = art_e(agent_prompt={"fields": ["question", "query_date"]})
    script = load_script(formatted_script(answers), tmp_path, "art_e_two_fields")
    _, user = script.first_messages(ART_E_SCENARIOS[0])
    assert user["content"] == "question: When is the Q3 planning offsite?\n\nquery_date: 2024-08-01"


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("def render_prompt():\n    return 'hi'\n", "does not match how the script calls it"),
        ("async def render_prompt(scenario):\n    return 'hi'\n", "must be a plain function"),
        ("def render_prompt(scenario):\n    return (\n", "does not parse"),
        ("question; import os", "is not a field name"),
        ("question, question", "A field is named twice"),
    ],
)
def test_a_wrong_answer_says_what_is_wrong(reply: str, why: str) -> None:
    with pytest.raises(InvalidAnswer, match=why):
        parse_agent_prompt(reply, art_e())


def test_a_generators_fields_are_read_from_the_dicts_it_returns() -> None:
    generator = (
        "def generate_scenario(rng):\n"
        "    a, b = rng.randint(1, 9), rng.randint(1, 9)\n"
        "    if a > b:\n"
        '        return {"question": f"{a} - {b}?", "answer": str(a - b)}\n'
        '    return {"question": f"{a} + {b}?", "answer": str(a + b), "easy": True}\n'
    )
    assert generated_fields(generator) == ["question", "answer"]
    built = "def generate_scenario(rng):\n    return dict(question='x', answer='y')\n"
    assert generated_fields(built) is None  # not read here: the script checks each row


AGENTS_SHOWN_A_SCENARIO = {
    **{name: answers for name, answers in REALISTIC.items() if answers["turns"] == "single"},
    "tools": REALISTIC["tools"],
    "email-agent": email_agent(),
    "art-e": art_e(),
    "support-agent": support_agent_with_a_customer("https://crm.internal"),
    "temporal-clue": temporal_clue(),
}


@pytest.mark.parametrize("name", sorted(AGENTS_SHOWN_A_SCENARIO))
def test_no_realistic_agent_is_shown_a_field_its_reward_reads(name: str, tmp_path: Path) -> None:
    answers = replay(TRAIN_RL, {**AGENTS_SHOWN_A_SCENARIO[name], "backend": "serverless"}).answers
    shown, read = shown_fields(answers), reward_fields(answers)
    assert shown and not shown & read, (shown, read)
    script = load_script(formatted_script(answers), tmp_path, f"sees_{name.replace('-', '_')}")
    for scenario in answers["scenario_rows"]:
        _, user = script.first_messages(scenario)
        [field] = answers["agent_prompt"]["fields"]
        assert user["content"] == scenario[field]  # that field, nothing else of the row


def test_a_draft_of_tools_that_take_the_scenario_is_tried_with_each_scenario() -> None:
    answers = art_e()
    calls = code_calls("tool_code", answers, ART_E_TOOL_CODE)
    assert calls is not None
    tried = {call.what: call.call for call in calls.calls}
    assert tried["the tool `search_inbox`"].endswith(", scenario=scenario)")
    assert tried["the tool `read_email`"] == "read_email(message_id='test', scenario=scenario)"
    assert calls.scenarios == tuple(ART_E_SCENARIOS[: len(calls.scenarios)]) and calls.scenarios


def test_a_spymaster_shown_the_board_its_reward_reads_is_cautioned_and_shown_both_fields(
    tmp_path: Path,
) -> None:
    answers = replay(TRAIN_RL, codenames()).answers
    assert shown_fields(answers) & reward_fields(answers) == {"board", "team"}
    assert answer_shown_caution(answers) is not None  # said, and the user chose it on purpose
    script = load_script(formatted_script(answers), tmp_path, "codenames_sees")
    scenario = script.generate_scenarios(1, 0)[0]
    _, user = script.first_messages(scenario)
    assert user["content"] == f"board: {scenario['board']}\n\nteam: {scenario['team']}"
    assert scenario["avoid"] not in user["content"].split("team:")[1]
