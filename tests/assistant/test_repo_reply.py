"""A small agent repo dropped as a `.zip`: its tool module read into tool schemas at the tools
question (no model), its code sent for recommendations elsewhere, what was read and skipped
said first; a bad archive is refused plainly and the session does not move."""

from __future__ import annotations

import io
import json
import zipfile

from assistant import Assistant
from assistant.repo_reply import code_for_model
from assistant.repo_zip import read_repo_zip
from flows import TRAIN_RL, Attachment, Notice, Problem, Reply, advance
from tests.assistant.conftest import USER, open_step, question_of, session_after
from tests.assistant.test_tool_offer import TO_TOOLS
from tests.fakes.openai_server import FakeOpenAI, Scripted

ROLLOUT = b'''"""An ART-E style email agent: answers questions about an inbox with tools."""

import art
from openai import AsyncOpenAI

from email_agent.tools import TOOLS, read_email, return_final_answer, search_inbox

MAX_TURNS = 10


async def rollout(model: art.Model, scenario: dict) -> art.Trajectory:
    client: AsyncOpenAI = model.openai_client()
    trajectory = art.Trajectory(messages_and_choices=[], reward=0.0)
    for _ in range(MAX_TURNS):
        ...  # call the model with TOOLS, run search_inbox / read_email, stop at the answer
    return trajectory
'''
TOOLS = b'''"""The tools the agent calls."""

from typing import Literal

from email_agent.email_db import connect, rows_matching


def search_inbox(keywords: list[str], sent_before: str | None = None) -> list[dict]:
    """Search the inbox for emails that contain all the keywords.

    Args:
        keywords: Words that must all appear in the email.
        sent_before: Only emails sent before this date (YYYY-MM-DD).
    """
    return rows_matching(connect(), keywords, sent_before)


def read_email(message_id: str) -> dict | None:
    """Read one email by its message id."""
    return connect().execute("SELECT * FROM emails WHERE id = ?", (message_id,)).fetchone()


def return_final_answer(answer: str, confidence: Literal["low", "high"] = "high") -> str:
    """Give the final answer to the user's question.

    Args:
        answer: The answer, in a sentence.
        confidence: How sure the agent is.
    """
    return answer


TOOLS = [search_inbox, read_email, return_final_answer]
'''
EMAIL_DB = b'''"""The inbox as SQLite: a fixed snapshot of the Enron emails."""

import sqlite3


def connect(path: str = "enron.db") -> sqlite3.Connection:
    return sqlite3.connect(path)


def rows_matching(db: sqlite3.Connection, keywords: list[str], before: str | None) -> list[dict]:
    return []
'''
PYPROJECT = b'[project]\nname = "email-agent"\ndependencies = ["openpipe-art==0.5.18"]\n'


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


EMAIL_AGENT_ZIP = zipped(
    {
        "email-agent/pyproject.toml": PYPROJECT,
        "email-agent/README.md": b"# Email agent\n",
        "email-agent/email_agent/__init__.py": b"",
        "email-agent/email_agent/rollout.py": ROLLOUT,
        "email-agent/email_agent/tools.py": TOOLS,
        "email-agent/email_agent/email_db.py": EMAIL_DB,
        "email-agent/tests/test_tools.py": b"def test_search():\n    assert True\n",
    }
)
READ_NOTE = (
    "Read 5 Python files from email-agent.zip and email-agent/pyproject.toml "
    "(email-agent/email_agent/__init__.py, email-agent/email_agent/email_db.py, "
    "email-agent/email_agent/rollout.py, email-agent/email_agent/tools.py, "
    "email-agent/tests/test_tools.py). 1 other file (not your Python code) left out."
)


def upload(content: bytes, name: str = "email-agent.zip") -> Reply:
    return Reply(attachments=(Attachment(name, content),))


def test_the_tool_module_of_a_zipped_repo_is_offered_as_tool_schemas(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_TOOLS)

    assisted = assistant.respond(TRAIN_RL, session, upload(EMAIL_AGENT_ZIP), USER)

    assert fake.requests == []  # read from the code, no model
    assert assisted.turn.session == session
    assert [m.text for m in assisted.turn.messages] == [READ_NOTE]
    proposal = assisted.proposal
    assert proposal is not None
    assert proposal.shown == "search_inbox, read_email, return_final_answer"  # not the helpers
    assert proposal.reason.startswith("From email-agent/email_agent/tools.py:\n")
    stored = advance(TRAIN_RL, session, proposal.as_reply()).session
    tools = stored.answers["tools"]
    assert [t["function"]["name"] for t in tools] == [
        "search_inbox",
        "read_email",
        "return_final_answer",
    ]
    assert tools[2]["function"]["parameters"]["properties"]["confidence"]["enum"] == [
        "low",
        "high",
    ]


def test_a_zipped_repo_at_a_choice_gives_recommendations_from_its_code(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    replayable = "The tools read a fixed SQLite snapshot of the inbox."
    fake.script(
        Scripted.json(
            {
                "recommendations": [
                    {"step": "replayable", "value": "yes", "reason": replayable},
                    {"step": "uses_tools", "value": "yes", "reason": "It calls search_inbox."},
                ]
            }
        )
    )
    session = session_after([])

    assisted = assistant.respond(TRAIN_RL, session, upload(EMAIL_AGENT_ZIP), USER)

    after = assisted.turn.session
    assert after.answers == {}
    assert set(after.advice) == {"replayable", "uses_tools"}
    said = [m.text for m in assisted.turn.messages if isinstance(m, Notice)]
    assert said[0] == READ_NOTE
    assert "From your code, I will recommend answers for: Replayability, Tool use." in said[1]
    assert question_of(assisted.turn.messages).step_id == "replayable"
    (request,) = fake.requests
    sent = request["messages"][0]["content"]
    assert "# file: email-agent/email_agent/tools.py\n" in sent
    assert "def rows_matching(db: sqlite3.Connection" in sent  # the helper module too
    assert 'dependencies = ["openpipe-art==0.5.18"]' in sent


def test_a_bad_zip_is_refused_with_the_reason_and_nothing_moves(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_TOOLS)
    bomb = zipped({"tools.py": b"#" * 5_000_000})

    for content, said in [
        (b"PK\x03\x04 not a zip at all", "is not a zip file I can read"),
        (bomb, "skipped 1: tools.py (compressed "),
        (zipped({"../../tools.py": TOOLS}), "a path outside the archive"),
        (zipped({"README.md": b"# hi\n"}), "There is no Python code to read."),
        (zipped({"agent.py": ROLLOUT, "db.py": EMAIL_DB}), "None of them looks like your tools"),
    ]:
        assisted = assistant.respond(TRAIN_RL, session, upload(content), USER)

        assert assisted.proposal is None
        assert assisted.turn.session == session
        (problem,) = [m for m in assisted.turn.messages if isinstance(m, Problem)]
        assert said in problem.text
        assert question_of(assisted.turn.messages).step_id == "tools"
    assert open_step(session) == "tools"
    assert fake.requests == []


def test_code_for_the_model_sends_whole_files_while_they_fit() -> None:
    repo = read_repo_zip("r.zip", zipped({"a.py": b"a = 1\n" * 10, "b.py": b"b = 2\n" * 100}))

    code, note = code_for_model(repo, 200)

    assert code.startswith("# file: a.py\na = 1\n") and "b = 2" not in code
    assert note == " Not sent to the model (over 200 characters in all): b.py."
    code, note = code_for_model(repo, 30)
    assert len(code) == 30 and note == " Only the first 30 characters of a.py went to the model."
    assert json.dumps(code_for_model(repo, 10_000)[1]) == '""'
