"""Recommendations in Slack threads: once the scenarios are given, the model's recommendations
for the questions ahead are checked against their options (the rest dropped) and shown when
each question comes, as its recommended button with the reason; the owner still picks."""

from __future__ import annotations

import pytest

from tests.assistant.test_recommendations import AGENT
from tests.bot.conftest import BotFactory, SlackUser, with_the_assistant
from tests.bot.test_slack_assistant import ROWS, buttons_of, stored_answers
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.fakes.slack_requests import event_callback, file_share_event
from tests.fakes.workspace import CHANNEL_ID, USER_ID

CHECKABLE = "The answers are exact numbers, which code can check."


@pytest.fixture
def user(make_bot: BotFactory, model: FakeOpenAI) -> SlackUser:
    return with_the_assistant(make_bot, model)


def test_a_recommendation_is_shown_on_its_question_and_counts_only_when_picked(
    user: SlackUser, model: FakeOpenAI
) -> None:
    user.click("Only logged or static scenarios")
    user.click("Single-turn")
    user.reply("Answer arithmetic questions with only the final number.")
    user.click("Paste them here")
    model.script(
        Scripted.json(
            {
                "recommendations": [
                    {"step": "reward", "value": "programmatic", "reason": CHECKABLE},
                    {"step": "judge_model", "value": "openai/gpt-99", "reason": "Invented."},
                ]
            }
        )
    )

    user.reply(f"```\n{ROWS}\n```")

    said = "\n".join(m.text for m in user.bot_messages())
    assert "I will recommend answers for: Reward." in said
    stored = user.bot.service.store.get(user.key)
    assert stored is not None
    assert set(stored.session.advice) == {"reward"}  # the invented judge model was dropped
    assert "reward" not in stored_answers(user)

    user.reply("skip")  # the system prompt
    user.reply("default")  # what the agent sees; then the reward question

    question = user.open_question()
    assert f"The assistant recommends this: {CHECKABLE} Please confirm." in question.text
    assert buttons_of(question)[0] == "1. Programmatic (recommended)"
    assert "reward" not in stored_answers(user)

    user.click("Programmatic")

    assert stored_answers(user)["reward"] == "programmatic"
    assert len(model.requests) == 1


def test_an_agent_file_dropped_in_the_thread_gives_recommendations(
    user: SlackUser, model: FakeOpenAI
) -> None:
    replayable = "The tools only read a fixed docs snapshot, so episodes can be replayed."
    model.script(
        Scripted.json(
            {
                "recommendations": [
                    {"step": "replayable", "value": "yes", "reason": replayable},
                    {"step": "replayable", "value": "maybe", "reason": "Not an option."},
                ]
            }
        )
    )
    agent = user.fake.add_user_file("agent.py", AGENT)
    count = len(user.bot_messages())

    user.bot.dispatch(
        event_callback(
            file_share_event([agent], channel=CHANNEL_ID, user=USER_ID, thread_ts=user.thread)
        )
    )

    user.fake.wait_for(lambda f: len(user.bot_messages()) > count)
    user.settle()
    question = user.open_question()
    assert f"The assistant recommends this: {replayable} Please confirm." in question.text
    assert buttons_of(question)[0] == "1. Episodes can be recreated (recommended)"
    assert stored_answers(user) == {}
    assert "def search_docs" in model.requests[0]["messages"][0]["content"]

    user.click("Episodes can be recreated")

    assert stored_answers(user) == {"replayable": "yes"}
