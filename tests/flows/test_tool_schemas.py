"""Tool schemas read from Python tool functions, without running them and without a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows import TRAIN_RL, InvalidAnswer, Reply, Session, advance, begin, tool_schemas_from_code

ART_E_TOOLS = '''
from __future__ import annotations

from typing import Literal

import sqlite3

DB = sqlite3.connect("enron.db")  # never opened: the code is parsed, not run


def search_inbox(
    keywords: list[str], from_addr: str | None = None, max_results: int = 10
) -> list[dict]:
    """Search the inbox for emails that contain all the keywords.

    Args:
        keywords: Words that must all appear in the subject or body,
            matched case-insensitively.
        from_addr: Only emails sent from this address.
        max_results: At most this many results, newest first.

    Returns:
        A list of {"message_id", "subject", "snippet"} dicts.
    """
    raise NotImplementedError


def read_email(message_id: str) -> dict | None:
    """Read one email by its message id.

    :param message_id: The id returned by search_inbox.
    :returns: the email, or None when there is no such email.
    """
    raise NotImplementedError


async def return_final_answer(
    answer: str, sources: list[str], confidence: Literal["low", "high"] = "high"
) -> None:
    """Give the final answer to the user's question, citing the emails it comes from."""


def label_email(message_id, labels: "dict[str, bool]", *, notify: bool = False):
    pass


def _connect() -> sqlite3.Connection:
    """Private helpers are not tools."""
    return DB
'''


def test_art_e_tools_become_openai_function_schemas() -> None:
    tools = tool_schemas_from_code(ART_E_TOOLS)

    assert [t["function"]["name"] for t in tools] == [
        "search_inbox",
        "read_email",
        "return_final_answer",
        "label_email",
    ]
    search = tools[0]
    assert search == {
        "type": "function",
        "function": {
            "name": "search_inbox",
            "description": "Search the inbox for emails that contain all the keywords.",
            "parameters": {
                "type": "object",
                "properties": {
                    "keywords": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Words that must all appear in the subject or body, "
                        "matched case-insensitively.",
                    },
                    "from_addr": {
                        "type": "string",
                        "description": "Only emails sent from this address.",
                    },
                    "max_results": {
                        "type": "integer",
                        "description": "At most this many results, newest first.",
                    },
                },
                "required": ["keywords"],
                "additionalProperties": False,
            },
        },
    }
    read = tools[1]["function"]
    assert read["description"] == "Read one email by its message id."
    assert read["parameters"]["properties"] == {
        "message_id": {"type": "string", "description": "The id returned by search_inbox."}
    }
    final = tools[2]["function"]["parameters"]
    assert final["properties"]["confidence"] == {"type": "string", "enum": ["low", "high"]}
    assert final["required"] == ["answer", "sources"]
    label = tools[3]["function"]
    assert label["description"] == "Label email."  # no docstring: the name says it
    assert label["parameters"]["properties"] == {
        "message_id": {},
        "labels": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "notify": {"type": "boolean"},
    }
    assert label["parameters"]["required"] == ["message_id", "labels"]


def test_the_schemas_are_a_valid_answer_to_the_tools_question() -> None:
    session = begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session
    for reply in (
        "yes",
        "multi",
        "Answer questions about the user's inbox.",
        "inline",
        '[{"question": "When is the offsite?"}]',
        "skip",
        "yes",
        "default",  # the agent is shown the question
    ):
        session = advance(TRAIN_RL, session, Reply(text=reply)).session
    step = TRAIN_RL.next_step(session.answers)
    assert step is not None and step.id == "tools"

    turn = advance(TRAIN_RL, session, Reply(text=json.dumps(tool_schemas_from_code(ART_E_TOOLS))))

    assert len(turn.session.answers["tools"]) == 4


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("def broken(:\n", "does not parse: line 1"),
        ("x = 1\n", "no public top-level function"),
        ("def _private(): pass\n", "no public top-level function"),
    ],
)
def test_code_without_tools_is_refused_plainly(code: str, error: str) -> None:
    with pytest.raises(InvalidAnswer, match=error):
        tool_schemas_from_code(code)


def test_nothing_in_the_code_runs(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    code = f"open({str(ran)!r}, 'w').close()\n\ndef f(x: int) -> int:\n    return x\n"

    assert tool_schemas_from_code(code)[0]["function"]["name"] == "f"
    assert not ran.exists()
