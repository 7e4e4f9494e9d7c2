"""A small agent repo dropped in a wizard's thread as a `.zip` (Slack's filetype "zip",
application/zip, downloaded with the bot token): read in memory like `.py` files, its tools
offered at the tools question and its code sent for recommendations elsewhere; a bad zip gets a
clear message and the session does not move."""

from __future__ import annotations

import json
import random

import pytest

from tests.assistant.test_repo_reply import EMAIL_AGENT_ZIP, TOOLS, zipped
from tests.bot.conftest import BotFactory, SlackUser, with_the_assistant
from tests.bot.test_slack_assistant import NO_ADVICE, buttons_of, proposals, stored_answers
from tests.bot.test_slack_drafts import INBOX_ROWS, TOOL_TASK
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.fakes.slack_requests import event_callback, file_share_event

READ = "Read 5 Python files from email-agent.zip and email-agent/pyproject.toml"


@pytest.fixture
def user(make_bot: BotFactory, model: FakeOpenAI) -> SlackUser:
    return with_the_assistant(make_bot, model)


def drop(user: SlackUser, name: str, content: bytes) -> None:
    """The owner drops a file in the thread; wait for the bot's answer."""
    shared = user.fake.add_user_file(name, content)
    assert (shared["filetype"], shared["mimetype"]) == ("zip", "application/zip")
    count = len(user.bot_messages())
    event = file_share_event([shared], channel=user.channel, user=user.user, thread_ts=user.thread)
    assert user.bot.dispatch(event_callback(event)) == 200
    user.fake.wait_for(lambda f: len(user.bot_messages()) > count)
    user.settle()


def to_the_tools(user: SlackUser, model: FakeOpenAI) -> None:
    model.script(NO_ADVICE)
    user.click("Episodes can be recreated")
    user.click("Multi-turn")
    user.reply(TOOL_TASK)
    user.click("Paste them here")
    user.reply(f"```\n{json.dumps(INBOX_ROWS)}\n```")
    user.reply("skip")
    user.click("Yes, it calls tools")
    user.reply("default")  # what the agent sees
    assert user.asked() == "tools"
    model.requests.clear()


def test_a_zipped_agent_repo_at_the_tools_question_offers_its_tools(
    user: SlackUser, model: FakeOpenAI
) -> None:
    to_the_tools(user, model)
    before = stored_answers(user)

    drop(user, "email-agent.zip", EMAIL_AGENT_ZIP)

    said = "\n".join(m.text for m in user.bot_messages())
    assert READ in said
    (offer,) = proposals(user)
    assert buttons_of(offer) == ["Accept", "Re-answer"]
    assert "From email-agent/email_agent/tools.py:" in offer.text
    assert "• search_inbox(keywords: array of string, sent_before: string (optional)" in offer.text
    assert "rows_matching" not in offer.text  # the helper module is not the tools
    assert stored_answers(user) == before
    assert model.requests == []  # read from the code, no model

    user.click("Accept")

    tools = stored_answers(user)["tools"]
    assert [t["function"]["name"] for t in tools] == [
        "search_inbox",
        "read_email",
        "return_final_answer",
    ]
    assert user.asked() == "final_answer_tool"


def test_a_zipped_agent_repo_gives_recommendations(user: SlackUser, model: FakeOpenAI) -> None:
    replayable = "The tools read a fixed SQLite snapshot of the inbox, so episodes replay."
    model.script(
        Scripted.json(
            {"recommendations": [{"step": "replayable", "value": "yes", "reason": replayable}]}
        )
    )

    drop(user, "email-agent.zip", EMAIL_AGENT_ZIP)

    question = user.open_question()
    assert READ in question.text
    assert f"The assistant recommends this: {replayable} Please confirm." in question.text
    assert buttons_of(question)[0] == "1. Episodes can be recreated (recommended)"
    assert stored_answers(user) == {}
    sent = model.requests[0]["messages"][0]["content"]
    assert "# file: email-agent/email_agent/tools.py" in sent and "def search_inbox" in sent

    user.click("Episodes can be recreated")

    assert stored_answers(user) == {"replayable": "yes"}


@pytest.mark.parametrize(
    ("content", "said"),
    [
        pytest.param(
            zipped({"email_agent/tools.py": b"#" * 5_000_000}),
            "skipped 1: email_agent/tools.py (compressed ",
            id="zip bomb",
        ),
        pytest.param(
            zipped({"../../../home/bot/tools.py": TOOLS}),
            "../../../home/bot/tools.py (a path outside the archive: ignored)",
            id="path traversal",
        ),
        pytest.param(
            zipped({f"agent/m{i}.py": b"x = 1\n" for i in range(400)}),
            "has 400 entries; the limit is 300",
            id="too many files",
        ),
        pytest.param(
            EMAIL_AGENT_ZIP[: len(EMAIL_AGENT_ZIP) // 2],
            "is not a zip file I can read (damaged, or not a zip)",
            id="corrupt",
        ),
    ],
)
def test_a_bad_zip_gets_a_clear_message_and_the_session_is_unchanged(
    user: SlackUser, model: FakeOpenAI, content: bytes, said: str
) -> None:
    to_the_tools(user, model)
    stored = user.bot.service.store.get(user.key)
    assert stored is not None

    drop(user, "agent.zip", content)

    question = user.bot_messages()[-1]  # the tools question (no buttons) asked again
    assert ":warning:" in question.text and said in question.text
    assert "Which tools can the agent call?" in question.text
    assert user.asked() == "tools"
    after = user.bot.service.store.get(user.key)
    assert after is not None and after.session == stored.session
    assert proposals(user) == []
    assert model.requests == []


def test_a_zip_over_the_limit_is_not_downloaded(user: SlackUser, model: FakeOpenAI) -> None:
    noise = random.Random(0)
    big = zipped({f"data/{i}.bin": noise.randbytes(100_000) for i in range(12)})
    assert len(big) > 1_000_000
    shared = user.fake.add_user_file("agent.zip", big)
    event = file_share_event([shared], channel=user.channel, user=user.user, thread_ts=user.thread)

    assert user.bot.dispatch(event_callback(event)) == 200

    user.fake.wait_for(lambda f: any("agent.zip" in m.text for m in f.ephemerals()))
    (refusal,) = [m.text for m in user.fake.ephemerals() if "agent.zip" in m.text]
    assert f"is {len(big):,} bytes; the limit is 1,000,000." in refusal
    assert not any(c.method == "files-pri" for c in user.fake.calls())
    assert stored_answers(user) == {}
    assert model.requests == []
