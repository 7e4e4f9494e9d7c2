"""A multi-turn tool task finished in `artbot chat` without writing any code: an email-search
agent in the spirit of ART's ART-E example. The user types the task, pastes scenarios, asks a
question along the way and replies `draft` then `y` at the tools, the tool code and the reward;
every other answer is an option. The model is a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from checks.script_check import check_script
from tests.artbot.terminal.test_chat import chat as chat_without_a_model
from tests.artbot.terminal.test_chat import questions
from tests.artbot.terminal.test_chat_assistant import (
    ANSWER,
    NO_ADVICE,
    chat,
    stored_answers,
)
from tests.fakes.openai_server import FakeOpenAI, Scripted

TASK = (
    "Answer questions about the user's inbox: search their email, read the messages that "
    "matter, and give a short answer."
)
SCENARIOS = [
    {"prompt": "When was the Q3 budget review moved to?", "answer": "Thursday at 14:00"},
    {"prompt": "Which hotel is booked for the Berlin offsite?", "answer": "Hotel Adlon"},
    {"prompt": "What is the new VPN server address?", "answer": "vpn2.acme.example"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_inbox",
            "description": "Search the inbox for messages containing all the keywords.",
            "parameters": {
                "type": "object",
                "properties": {
                    "keywords": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Words every matching message contains.",
                    }
                },
                "required": ["keywords"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_email",
            "description": "Read one message in full by its id.",
            "parameters": {
                "type": "object",
                "properties": {
                    "message_id": {"type": "string", "description": "The id search returned."}
                },
                "required": ["message_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "return_final_answer",
            "description": "Give the final answer to the question and end.",
            "parameters": {
                "type": "object",
                "properties": {"answer": {"type": "string", "description": "The answer."}},
                "required": ["answer"],
            },
        },
    },
]
TOOL_CODE = """\
INBOX = {
    "m1": {
        "subject": "Q3 budget review moved",
        "body": "The Q3 budget review is now on Thursday at 14:00 in room 4B.",
    },
    "m2": {
        "subject": "Berlin offsite: travel",
        "body": "We booked Hotel Adlon for the Berlin offsite, check-in Monday.",
    },
    "m3": {
        "subject": "IT: VPN change",
        "body": "From Monday connect to vpn2.acme.example; the old server goes away.",
    },
}


def search_inbox(keywords: list[str]) -> str:
    words = [str(w).lower() for w in keywords]
    found = [
        f"{key}: {mail['subject']}"
        for key, mail in INBOX.items()
        if all(w in (mail["subject"] + " " + mail["body"]).lower() for w in words)
    ]
    return "\\n".join(found) or "No messages match."


def read_email(message_id: str) -> str:
    mail = INBOX.get(message_id)
    if mail is None:
        raise ValueError(f"No message {message_id!r}.")
    return f"Subject: {mail['subject']}\\n\\n{mail['body']}"
"""
REWARD = (
    "def compute_reward(scenario, answer):\n"
    "    return 1.0 if scenario['answer'].lower() in answer.lower() else 0.0\n"
)
QUESTION = "which model fits a 24 GB GPU?"
PASTED_SCENARIOS = ["```json", *json.dumps(SCENARIOS, indent=1).splitlines(), "```"]
TO_TOOLS = ["yes", "multi", TASK, "inline", *PASTED_SCENARIOS, "skip", "yes", "default"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server
        assert server.refused == []


def drafted(field: str, text: str, summary: str) -> Scripted:
    return Scripted.json({field: text, "summary": summary})


def test_a_multi_turn_tool_task_is_finished_with_drafts_and_no_code_typed(
    home: Path, fake: FakeOpenAI
) -> None:
    fake.script(
        NO_ADVICE,
        drafted("tools_json", json.dumps(TOOLS), "Search, read and answer, as in ART-E."),
        drafted("code", TOOL_CODE, "A small inbox the tools search and read."),
        drafted("code", REWARD, "Full marks when the answer names the expected fact."),
        Scripted.text(ANSWER),
    )
    replies = [
        *TO_TOOLS,
        "draft",
        "y",
        "return_final_answer",
        "local",
        "draft",
        "y",
        "skip",  # no simulated user
        "When it calls return_final_answer, or after 10 turns.",
        "default",  # turn limit
        "programmatic",
        "draft",
        "y",
        "all",  # training scenarios
        "none",  # validation
        QUESTION,
        "1",  # base model
        "default",  # project
        "chat-email-001",
        "serverless",
        "defaults",
        "dataset",
    ]

    result = chat(home, fake, replies)

    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    typed = "\n".join(replies)
    assert "def " not in typed and '"function"' not in typed  # no code, no schema typed
    assert "A draft of the Tools" in out
    assert "A draft of the Tool code" in out
    assert "A draft of the Reward code" in out
    assert ANSWER in out
    asked = questions(out)
    base_model = [q for q in asked if q.startswith("Which base model")]
    assert len(base_model) == 2  # asked, then again after the answer
    answers = stored_answers(home)
    assert answers["tools"] == TOOLS
    assert answers["tool_code"] == TOOL_CODE
    assert answers["reward_logic"] == {"kind": "function", "code": REWARD}
    tools_request = fake.requests[1]
    schema = tools_request["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["tools_json", "summary"]
    assert TASK in tools_request["messages"][0]["content"]
    assert "Hotel Adlon" in tools_request["messages"][0]["content"]  # the scenarios, as data
    assert "search_inbox" in fake.requests[2]["messages"][0]["content"]  # the code fits the tools
    script = home / "work" / "chat-email-001.py"
    source = script.read_text()
    assert "def search_inbox" in source and "return_final_answer" in source
    report = check_script(script)
    assert report.problems == (), report.problems
    assert fake.unused == 0


def test_without_a_model_draft_at_tools_says_so_and_nothing_changes(home: Path) -> None:
    result = chat_without_a_model(home, [*TO_TOOLS, "draft"])

    assert result.returncode == 3, result.stdout + result.stderr
    assert "The assistant is not configured, so I cannot draft" in result.stdout
    assert questions(result.stdout)[-1] == "Which tools can the agent call?"
    answers = stored_answers(home)
    assert "tools" not in answers and answers["uses_tools"] == "yes"
