"""artbot in Slack's agent view: a message in the app's DM begins a conversation in its own
thread, titled from what it asks, and the thread is a wizard's like any other, through to the
script file; the other suggested prompts (runs, RULER) are answered there, and a retried event
opens nothing twice."""

from __future__ import annotations

from bot.wizard.agent_view import ABOUT_RULER, FINE_TUNE_PROMPT, RULER_PROMPT, RUNS_PROMPT
from bot.wizard.command import NO_RUNNER
from checks.script_format import formatted_script
from flows import TRAIN_RL, replay
from tests.bot.conftest import Bot, BotFactory, SlackUser
from tests.bot.test_realistic_inputs import CORPUS, uploaded_script, walk_the_wizard
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import event_callback
from tests.fakes.workspace import TEAM_ID, USER_ID

DM = "D0ARTBOTDM"


def a_message_in_the_dm(bot: Bot, text: str, *, event_id: str | None = None) -> SlackUser:
    """`text` sent in the app's DM, not in a thread (the agent view's way to begin): the person,
    in the thread it heads."""
    event = bot.fake.post_as_user(DM, text, channel_type="im")
    assert bot.dispatch(event_callback(event, team_id=TEAM_ID, event_id=event_id)) == 200
    user = SlackUser(bot, channel=DM, thread=str(event["ts"]), channel_type="im")
    bot.fake.wait_for(lambda f: bool(user.bot_messages()))
    user.settle()
    return user


def test_a_task_typed_in_the_dm_opens_the_rl_wizard_in_its_thread_through_to_the_script(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    answers = CORPUS["math-reward"]
    user = a_message_in_the_dm(make_bot(), answers["task"])

    assert fake.title(DM, user.thread) == f"RL: {answers['task']}"[:82]
    stored = user.bot.service.store.get(user.key)
    assert stored is not None and stored.owner == USER_ID and stored.session.flow == TRAIN_RL.id
    walk_the_wizard(user, answers)

    script = uploaded_script(fake, f"{answers['run_name']}.py")
    assert script == formatted_script(replay(TRAIN_RL, answers).answers)
    card = user.wait_for_result()  # the card, in the DM's thread (it follows the upload)
    assert card.channel == DM and card.thread_ts == user.thread


def test_the_fine_tuning_prompt_opens_the_sft_wizard(make_bot: BotFactory, fake: FakeSlack) -> None:
    user = a_message_in_the_dm(make_bot(), FINE_TUNE_PROMPT.message)

    assert fake.title(DM, user.thread) == "Fine-tuning"
    stored = user.bot.service.store.get(user.key)
    assert stored is not None and stored.session.flow == "train-sft"
    assert user.open_question() is not None


def test_runs_and_ruler_are_answered_in_the_thread_without_a_wizard(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = make_bot()
    runs = a_message_in_the_dm(bot, RUNS_PROMPT.message)
    ruler = a_message_in_the_dm(bot, RULER_PROMPT.message)

    assert [m.text for m in runs.bot_messages()] == [NO_RUNNER]  # no GPU runner configured
    assert fake.title(DM, runs.thread) == "Your training runs"
    assert "*RULER* is ART's LLM judge" in ruler.bot_messages()[0].text
    assert ruler.bot_messages()[0].text.startswith(ABOUT_RULER[:40])
    assert fake.title(DM, ruler.thread) == "About RULER"
    assert bot.service.store.get(runs.key) is None and bot.service.store.get(ruler.key) is None


def test_a_retried_event_opens_the_conversation_once(make_bot: BotFactory, fake: FakeSlack) -> None:
    bot = make_bot()
    user = a_message_in_the_dm(bot, RULER_PROMPT.message, event_id="Ev0AGENTVIEW1")
    event = {"type": "message", "channel": DM, "channel_type": "im", "user": USER_ID}
    event |= {"text": RULER_PROMPT.message, "ts": user.thread, "team": TEAM_ID}
    assert bot.dispatch(event_callback(event, team_id=TEAM_ID, event_id="Ev0AGENTVIEW1")) == 200
    bot.wait_for_works_done(2)
    user.settle()
    assert len(user.bot_messages()) == 1
