"""The assistant's answers stream into the thread as the model writes them: in order, into one
message, redacted and escaped piece by piece, the question asked again after it and the answer
never posted twice; where Slack refuses the stream, at its start or part-way, the answer is
posted once, whole, as one message. The real `openai` client against the fake model, the real
slack_sdk against the fake Slack."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.slack.answer_stream import CUT_SHORT
from bot.slack.blocks import ANSWER_FEEDBACK_ACTION
from bot.slack.text import escape
from isolation.redaction import redact
from tests.bot.conftest import BotFactory, SlackUser, with_the_assistant
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.fakes.slack_api import Message
from tests.fakes.slack_requests import block_actions
from tests.fakes.workspace import USER_ID

SECRET = "sk-proj-abcdEFGH1234ijklMNOP5678qrst"
PIECES = (
    "Static means ",
    "your scenarios are <fixed> & logged; ",
    "put your key (",
    SECRET[:12],  # the secret comes in three pieces, none of them secret-looking alone
    SECRET[12:24],
    SECRET[24:] + ") in the environment, ",
    *(f"and step {n} follows " for n in range(12)),
    "and that is all.",
)
REPLY = "".join(PIECES)
SHOWN = escape(redact(REPLY))
"""What the thread must show: the model's text redacted, then escaped as user text is."""


@pytest.fixture
def user(make_bot: BotFactory, model: FakeOpenAI) -> SlackUser:
    # No test of a timeout here: the model has all the time a loaded CI host needs.
    return with_the_assistant(make_bot, model, ARTBOT_LLM_TIMEOUT_S="10")


def streamed(user: SlackUser) -> list[Message]:
    return [m for m in user.bot_messages() if user.fake.stream_chunks(m.channel, m.ts)]


def with_the_answer(user: SlackUser) -> list[Message]:
    return [m for m in user.bot_messages() if "Static means" in m.text]


def test_an_answer_streams_in_order_into_one_message_with_nothing_secret_in_any_chunk(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(Scripted.streamed(*PIECES))

    user.reply("what does static mean?")
    user.settle()

    (answer,) = streamed(user)
    chunks = user.fake.stream_chunks(answer.channel, answer.ts)
    assert len(chunks) >= 3  # started, appended, stopped
    assert "".join(chunks) == answer.text == SHOWN
    assert "&lt;fixed&gt; &amp; logged" in answer.text and "[REDACTED]" in answer.text
    for chunk in chunks:
        assert not any(part in chunk for part in (SECRET[:12], SECRET[12:24], SECRET[24:]))
    assert not answer.streaming
    assert with_the_answer(user) == [answer]  # not posted a second time
    question = user.open_question()
    assert "Only logged or static scenarios" in question.text
    assert float(question.ts) > float(answer.ts)  # asked again after it
    assert user.fake.statuses(user.channel, user.thread) == ["is thinking…", ""]


def test_where_slack_refuses_to_stream_the_answer_is_posted_once_as_one_message(
    user: SlackUser, model: FakeOpenAI
) -> None:
    user.fake.fail("chat.startStream", "missing_scope")
    model.script(Scripted.streamed(*PIECES))

    user.reply("what does static mean?")
    user.settle()

    assert streamed(user) == []
    (answer,) = with_the_answer(user)
    assert SHOWN in answer.text  # whole, before the question asked again
    assert answer == user.open_question()
    user.fake.wait_for(lambda f: f.status(user.channel, user.thread) == "")
    assert user.fake.statuses(user.channel, user.thread) == ["is thinking…", ""]


def test_a_stream_cut_short_part_way_is_said_so_and_the_whole_answer_posted_once(
    user: SlackUser, model: FakeOpenAI
) -> None:
    user.fake.fail("chat.appendStream", "internal_error")
    model.script(Scripted.streamed(*PIECES))

    user.reply("what does static mean?")
    user.settle()

    (cut,) = streamed(user)
    assert cut.text.endswith(CUT_SHORT) and not cut.streaming
    assert SHOWN.startswith(cut.text.removesuffix(CUT_SHORT))
    whole = [m for m in user.bot_messages() if SHOWN in m.text]
    assert whole == [user.open_question()]  # once, whole, with the question asked again
    for chunk in user.fake.stream_chunks(cut.channel, cut.ts):
        assert SECRET[:12] not in chunk and SECRET[24:] not in chunk


def test_feedback_under_a_streamed_answer_is_each_persons_last_word_and_counted(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(Scripted.streamed(*PIECES))
    user.reply("what does static mean?")
    user.settle()
    (answer,) = streamed(user)
    assert [b["type"] for b in answer.blocks or []] == ["context_actions"]

    def click(verdict: str, who: str) -> None:
        request = block_actions(
            ANSWER_FEEDBACK_ACTION,
            verdict,
            message_ts=answer.ts,
            message=answer.to_slack(),
            action_type="feedback_buttons",
            user_id=who,
        )
        assert user.bot.dispatch(request) == 200

    done = user.bot.works_done()
    click("helpful", USER_ID)
    click("unhelpful", USER_ID)  # changed their mind: the last word counts
    click("helpful", "U0COLLEAGUE")
    click("<forged>", "U0COLLEAGUE")  # not a value of ours: nothing recorded
    user.bot.wait_for_works_done(done + 3)

    assert user.bot.service.answer_feedback.counts() == {"helpful": 1, "unhelpful": 1}
    exposed = user.bot.app.metrics.exposition().decode()
    assert 'artbot_answer_feedback{verdict="helpful"} 1.0' in exposed
    assert 'artbot_answer_feedback{verdict="unhelpful"} 1.0' in exposed


def test_an_older_click_handled_last_does_not_replace_a_newer_one(make_bot: BotFactory) -> None:
    feedback = make_bot().service.answer_feedback
    newer = datetime(2026, 11, 27, 12, 0, 2, tzinfo=UTC)
    older = datetime(2026, 11, 27, 12, 0, 1, tzinfo=UTC)
    feedback.record("T1", "D1", "1.000001", "U1", "unhelpful", newer)
    feedback.record("T1", "D1", "1.000001", "U1", "helpful", older)
    assert feedback.counts() == {"helpful": 0, "unhelpful": 1}
