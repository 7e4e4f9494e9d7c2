"""The assistant in Slack threads: questions answered without moving the session, free text
proposed with Accept / Re-answer buttons and stored only on the owner's Accept, failures
degraded to the plain question. A real `openai` client against the scripted fake model on
loopback, the fake Slack, a real database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from assistant import Assistant, ChatModel, Completion, Proposal
from assistant.model import ChatMessage
from bot.delivery.outbox import Outbox
from bot.services import LISTENER_SLOTS
from bot.slack.blocks import PROPOSAL_ACCEPT, PROPOSAL_HELD, proposal_message
from bot.wizard.replies import Incoming
from flows import TRAIN_RL, Reply, advance
from tests.bot.conftest import BotFactory, SlackUser, with_the_assistant
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.fakes.slack_api import FakeSlack, Message
from tests.fakes.slack_requests import block_actions
from tests.fakes.workspace import BOT_TOKEN, SIGNING_SECRET, USER_ID
from tests.flows.matrix import MATH_ROWS

ROWS = "\n".join(json.dumps(row) for row in MATH_ROWS)
BIGGER_QWEN = "Qwen/Qwen3-30B-A3B-Instruct-2507"
OTHER_USER = "U0OTHER"


@pytest.fixture
def user(make_bot: BotFactory, model: FakeOpenAI) -> SlackUser:
    return with_the_assistant(make_bot, model, ARTBOT_LLM_TIMEOUT_S="0.5")


def reading(value: str | None, reason: str = "") -> Scripted:
    return Scripted.json({"understood": value is not None, "value": value, "reason": reason})


def stored_answers(user: SlackUser) -> dict[str, object]:
    stored = user.bot.service.store.get(user.key)
    assert stored is not None
    return dict(stored.session.answers)


NO_ADVICE = Scripted.json({"recommendations": []})
"""The reply to the recommendations asked for once the scenarios are given: none."""


def to_the_base_model(user: SlackUser, model: FakeOpenAI) -> None:
    user.click("Only logged or static scenarios")
    user.click("Single-turn")
    user.reply("Answer arithmetic questions with only the final number.")
    user.click("Paste them here")
    model.script(NO_ADVICE)
    user.reply(f"```\n{ROWS}\n```")
    user.reply("skip")
    user.reply("default")  # what the agent sees
    user.click("RULER")
    user.click("openai/gpt-5.4")
    user.reply("default")  # RULER's rubric: ART's
    user.click("All scenarios")
    user.click("Hold out a fraction")
    user.reply("0.25")
    user.reply("default")
    user.reply("default")
    assert user.asked() == "base_model"


def proposals(user: SlackUser) -> list[Message]:
    return [
        m
        for m in user.bot_messages()
        if any(b.get("block_id", "").startswith("proposal:") for b in m.blocks or [])
    ]


def now_shown(user: SlackUser, offer: Message) -> Message:
    """The message `offer` as Slack shows it now (after updates)."""
    message = user.fake.message(offer.channel, offer.ts)
    assert message is not None
    return message


def accept_value(offer: Message) -> str:
    actions = next(b for b in offer.blocks or [] if b.get("type") == "actions")
    return str(actions["elements"][0]["value"])


def buttons_of(message: Message) -> list[str]:
    return [
        element["text"]["text"]
        for block in message.blocks or []
        if block.get("type") == "actions"
        for element in block.get("elements", [])
    ]


def test_a_question_is_answered_and_asked_again_without_moving_the_session(
    user: SlackUser, model: FakeOpenAI
) -> None:
    step, before = user.asked(), stored_answers(user)
    model.script(Scripted.text("Static means your scenarios are <fixed> & logged."))

    user.reply("what does static mean?")

    assert user.asked() == step
    assert stored_answers(user) == before
    texts = [m.text for m in user.bot_messages()]
    answer = next(t for t in texts if "Static means" in t)
    assert "&lt;fixed&gt; &amp; logged" in answer  # the model's text escaped like user text
    assert "Only logged or static scenarios" in user.open_question().text  # asked again
    assert len(model.requests) == 1
    # While the model read the reply the thread's status said so; the answer cleared it.
    user.fake.wait_for(lambda f: f.status(user.channel, user.thread) == "")
    assert user.fake.statuses(user.channel, user.thread) == ["is thinking…", ""]


def test_slack_retrying_a_question_does_not_put_it_to_the_model_again(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(Scripted.text("Static means your scenarios are fixed."))
    user.reply("what does static mean?", event_id="Ev0ASKED")
    user.settle()
    posted, before = len(user.bot_messages()), stored_answers(user)

    # Slack's retry of that event, handled to the end here (not on the listeners' pool).
    retry = Incoming(user.key, USER_ID, Reply(text="what does static mean?"), "Ev0ASKED")
    user.bot.service.replies.handle(user.bot.app.client, retry)

    assert len(model.requests) == 1
    assert user.bot.service.outbox.pending(user.key) == []  # nothing queued for the thread
    assert len(user.bot_messages()) == posted
    assert stored_answers(user) == before


def test_free_text_is_proposed_and_stored_only_when_the_owner_accepts(
    user: SlackUser, model: FakeOpenAI
) -> None:
    to_the_base_model(user, model)
    before = stored_answers(user)
    model.script(reading(BIGGER_QWEN, "The bigger of the two Qwen models."))

    user.reply("the bigger Qwen")

    assert stored_answers(user) == before  # nothing stored yet
    (offer,) = proposals(user)
    assert f"I read that as: *{BIGGER_QWEN}*" in offer.text
    assert buttons_of(offer) == ["Accept", "Re-answer"]

    user.click("Accept")

    assert stored_answers(user)["base_model"] == BIGGER_QWEN
    assert user.asked() == "project"
    assert len(model.requests) == 2  # the advice, the reading: Accept goes through the engine
    retired = now_shown(user, offer)
    assert buttons_of(retired) == []
    assert "Accepted" in retired.text


def test_re_answer_stores_nothing_and_asks_the_question_again(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(reading("static", "Logged conversations are static."))
    before = stored_answers(user)
    user.reply("we have logs of past chats")
    (offer,) = proposals(user)
    posted = len(user.bot_messages())

    user.click("Re-answer")

    assert stored_answers(user) == before
    assert buttons_of(now_shown(user, offer)) == []
    assert len(user.bot_messages()) == posted + 1  # the question, asked again
    again = user.bot_messages()[-1]
    assert again.ts != offer.ts and "Only logged or static scenarios" in buttons_of(again)[1]


def test_a_late_accept_after_the_question_was_answered_changes_nothing(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(reading("static", "Logged conversations are static."))
    user.reply("we have logs of past chats")
    (offer,) = proposals(user)
    user.reply("1")  # answered by typing option 1 ("yes") instead
    assert buttons_of(now_shown(user, offer)) == []  # the next question superseded it
    answers = stored_answers(user)
    assert answers["replayable"] == "yes"

    late = block_actions(
        PROPOSAL_ACCEPT,
        Proposal.from_json(accept_value(offer)).to_json(),
        message_ts=offer.ts,
        message=offer.to_slack(),
    )
    count = len(user.bot_messages())
    assert user.bot.dispatch(late) == 200
    user.fake.wait_for(lambda f: len(user.bot_messages()) > count)
    user.settle()

    assert stored_answers(user) == answers  # the engine refused it as stale
    said = [m.text for m in user.bot_messages()[count:]]
    assert "That button belongs to an earlier question" in said[0]
    assert len(model.requests) == 1


@pytest.mark.parametrize(("typed", "stored"), [("yes", "static"), ("no", None)])
def test_yes_or_no_typed_under_a_proposal_work_as_its_buttons(
    user: SlackUser, model: FakeOpenAI, typed: str, stored: str | None
) -> None:
    model.script(reading("static", "Logged conversations are static."))
    user.reply("we have logs of past chats")
    (offer,) = proposals(user)

    user.reply(typed)  # "yes" is also one of the question's values: the proposal wins

    assert stored_answers(user).get("replayable") == stored
    assert buttons_of(now_shown(user, offer)) == []
    assert len(model.requests) == 1


def test_a_forged_accept_and_a_stranger_s_click_are_refused(
    user: SlackUser, model: FakeOpenAI, fake: FakeSlack
) -> None:
    model.script(reading("static", "Logged conversations are static."))
    before = stored_answers(user)
    user.reply("we have logs of past chats")
    (offer,) = proposals(user)

    forged = block_actions(
        PROPOSAL_ACCEPT,
        '{"step": "replayable"}',
        message_ts=offer.ts,
        user_id=USER_ID,
        message=offer.to_slack(),
    )
    assert user.bot.dispatch(forged) == 200
    fake.wait_for(lambda f: any(m.ephemeral_to == USER_ID for m in f.ephemerals()))
    note = next(m for m in fake.ephemerals() if m.ephemeral_to == USER_ID)
    assert "not used" in note.text

    stranger = SlackUser(user.bot, user=OTHER_USER, thread=user.thread)
    assert stranger.click("Accept", wait=False) == 200
    fake.wait_for(lambda f: any(m.ephemeral_to == OTHER_USER for m in f.ephemerals()))
    note = next(m for m in fake.ephemerals() if m.ephemeral_to == OTHER_USER)
    assert f"Only <@{USER_ID}>" in note.text
    user.bot.wait_for_works_done(4)  # the command, the reply and both clicks, to their end
    assert stored_answers(user) == before
    assert buttons_of(now_shown(user, offer)) == ["Accept", "Re-answer"]


def test_a_proposal_too_long_for_a_button_is_kept_by_the_bot(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(reading("static", "Logged. " * 60))  # the reason is clipped to 300
    user.reply("we have logs of past chats")
    (offer,) = proposals(user)
    outbox: Outbox = user.bot.service.outbox
    held = outbox.proposal_posted_as(user.key, offer.ts)
    assert held is not None and held.reply_text == "static"
    # A long proposal (tool schemas) would not fit the button: the bot answers from its copy.
    long = Proposal(held.step_id, held.reply_text, held.shown, "x" * 2_100)
    assert len(long.to_json()) > 2_000
    accept = proposal_message(long).blocks[-1]["elements"][0]
    assert accept["value"] == PROPOSAL_HELD
    held_click = block_actions(
        PROPOSAL_ACCEPT, PROPOSAL_HELD, message_ts=offer.ts, message=offer.to_slack()
    )
    count = len(user.bot_messages())
    assert user.bot.dispatch(held_click) == 200
    user.fake.wait_for(lambda f: len(user.bot_messages()) > count)
    user.settle()
    assert stored_answers(user)["replayable"] == "static"


@dataclass(frozen=True)
class WhileItThinks:
    """The real model, with `meanwhile` run each time it is asked, before it answers."""

    model: ChatModel
    meanwhile: Callable[[], None]

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int,
    ) -> Completion:
        self.meanwhile()
        return self.model.complete(messages, schema=schema, max_tokens=max_tokens)


def test_a_listener_thread_gives_its_work_slot_back_while_the_model_thinks(
    user: SlackUser, model: FakeOpenAI
) -> None:
    service = user.bot.service
    assert service.assistant is not None
    seen: list[tuple[bool, int]] = []  # does the listener thread hold a slot; how many are free
    watched = WhileItThinks(
        service.assistant.model,
        lambda: seen.append((service.slots.held_here(), service.slots.free)),
    )
    service.turns.assistant = Assistant(watched, service.assistant.budget)
    model.script(reading("static", "Logged conversations are static."))

    user.reply("we have logs of past chats")

    # Seconds of waiting on a model must not keep one of the few slots every turn needs.
    assert seen == [(False, LISTENER_SLOTS)]
    assert proposals(user) != []
    assert service.slots.free == LISTENER_SLOTS


def save_another_answer(user: SlackUser, answer: str) -> None:
    """Another reply of the owner saved while the model thinks (the race a slow model call
    makes likely)."""
    service = user.bot.service
    stored = service.store.get(user.key)
    assert stored is not None
    answered = advance(TRAIN_RL, stored.session, Reply(text=answer)).session
    service.store.save(user.key, answered, expected_revision=stored.session.revision)


def test_after_a_lost_race_the_reply_goes_to_the_engine_alone(
    user: SlackUser, model: FakeOpenAI
) -> None:
    service = user.bot.service
    assert service.assistant is not None
    racing = WhileItThinks(service.assistant.model, lambda: save_another_answer(user, "static"))
    service.turns.assistant = Assistant(racing, service.assistant.budget)
    model.script(reading("yes", "Replayable."))

    user.reply("we can replay them")

    assert len(model.requests) == 1  # not asked again for the session that won
    assert stored_answers(user)["replayable"] == "static"  # what won the race stays
    assert proposals(user) == []  # the reading was for a question that moved on
    assert user.asked() == "turns"


@pytest.mark.parametrize(
    "failure", [Scripted.error(429), Scripted.text("not json {")], ids=["429", "malformed"]
)
def test_a_model_failure_gives_the_plain_question_with_one_note(
    user: SlackUser, model: FakeOpenAI, failure: Scripted
) -> None:
    before = stored_answers(user)
    model.script(failure)

    user.reply("we have logs of past chats")

    assert stored_answers(user) == before
    assert proposals(user) == []
    texts = [m.text for m in user.bot_messages()]
    notes = [t for t in texts if "The assistant could not help this time" in t]
    assert len(notes) == 1
    assert "Only logged or static scenarios" in user.open_question().text


def test_artbot_serve_refuses_to_start_with_bad_assistant_settings(
    fake: FakeSlack, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "ARTBOT_"))}
    env |= {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": fake.base_url,
        "ARTBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'artbot.db'}",
        "ARTBOT_LLM_MODEL": "gpt-test",
        "ARTBOT_LLM_TIMEOUT_S": "0",
    }
    result = subprocess.run(
        [sys.executable, "-m", "artbot.cli", "serve", "--host", "127.0.0.1", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "Cannot start artbot: the assistant's settings:" in result.stderr
    assert "ARTBOT_LLM_TIMEOUT_S" in result.stderr
    assert fake.calls() == []  # stopped before anything talked to Slack


def test_with_no_model_configured_a_question_is_just_an_invalid_answer(
    make_bot: BotFactory, model: FakeOpenAI
) -> None:
    user = SlackUser(make_bot())
    user.command()
    user.reply("what does static mean?")
    assert model.requests == []
    assert proposals(user) == []
    assert "The assistant" not in " ".join(m.text for m in user.bot_messages())
