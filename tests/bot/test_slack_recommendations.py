"""Recommendations in Slack threads: once the scenarios are given, the model's recommendations
for the questions ahead are checked against their options (the rest dropped) and shown when
each question comes, as its recommended button with the reason; the owner still picks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_slack_assistant import ROWS, buttons_of, stored_answers
from tests.fakes.openai_server import FakeOpenAI, Scripted

CHECKABLE = "The answers are exact numbers, which code can check."


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server
        assert server.refused == [], "the fake refused requests OpenAI would refuse"


@pytest.fixture
def user(make_bot: BotFactory, model: FakeOpenAI) -> SlackUser:
    bot = make_bot(
        ARTBOT_LLM_MODEL="gpt-test",
        ARTBOT_LLM_BASE_URL=model.base_url,
        ARTBOT_LLM_API_KEY=model.key,
    )
    owner = SlackUser(bot)
    owner.command()
    return owner


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
    assert "I will recommend answers for: reward." in said
    stored = user.bot.service.store.get(user.key)
    assert stored is not None
    assert set(stored.session.advice) == {"reward"}  # the invented judge model was dropped
    assert "reward" not in stored_answers(user)

    user.reply("skip")  # the system prompt; then the reward question

    question = user.open_question()
    assert f"The assistant recommends this: {CHECKABLE} Please confirm." in question.text
    assert buttons_of(question)[0] == "1. Programmatic (recommended)"
    assert "reward" not in stored_answers(user)

    user.click("Programmatic")

    assert stored_answers(user)["reward"] == "programmatic"
    assert len(model.requests) == 1
