"""A turn's effects are durable: what a saved answer must say in its thread reaches Slack once,
in order, through races, 429s, refusals and a killed bot; superseded questions lose their
buttons, and a stuck thread gets its open question again.

The crash tests run `artbot serve` as a real process and kill it with SIGKILL."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bot.wizard.script_results import RESULT_CARD_HEAD
from flows import TRAIN_RL
from storage.database import create_database_engine
from storage.sessions import SessionKey, SessionStore
from tests.bot.bot_process import BotProcess, process_database_url
from tests.bot.conftest import Bot, BotFactory, Database, SlackUser
from tests.fakes.slack_api import FakeSlack, Message
from tests.fakes.slack_requests import block_actions, event_callback, message_event, slash_command
from tests.fakes.workspace import CHANNEL_ID, TEAM_ID, USER_ID
from tests.flows.matrix import MATH_ROWS

FIRST = "Can an episode"
TURNS = "Single-turn or multi-turn?"
TASK = "What must the agent accomplish"
SETTLED_WITHIN_S = 90.0
ROWS = "\n".join(json.dumps(row) for row in MATH_ROWS)


def is_live(message: Message) -> bool:
    """A question not yet retired: still showing its buttons or its reply hint (a retired one
    is plain sections: its text and what became of it)."""
    return any(block.get("type") in ("actions", "context") for block in message.blocks or [])


def live(messages: list[Message]) -> list[Message]:
    return [m for m in messages if is_live(m)]


def with_buttons(messages: list[Message]) -> list[Message]:
    return [m for m in messages if any(b.get("type") == "actions" for b in m.blocks or [])]


def starting(messages: list[Message], prefix: str) -> list[Message]:
    return [m for m in messages if m.text.startswith(prefix)]


def asking(messages: list[Message], question: str) -> list[Message]:
    """The messages that ask `question`, alone or after a note or a problem."""
    return [m for m in messages if m.text.startswith(question) or f"\n\n{question}" in m.text]


def delivered(bot: Bot) -> None:
    """Wait until the bot's outbox is empty (everything said is in Slack)."""
    bot.fake.wait_for(lambda f: bot.service.outbox.depth() == 0, timeout=SETTLED_WITHIN_S)


def stale_click(user: SlackUser, snapshot: dict[str, Any], label: str) -> int:
    """Click `label` on a message as a Slack client that has not refreshed it still shows it."""
    for block in snapshot.get("blocks") or []:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if label in element["text"]["text"]:
                request = block_actions(
                    element["action_id"],
                    element["value"],
                    message_ts=snapshot["ts"],
                    user_id=user.user,
                    channel_id=user.channel,
                    message=snapshot,
                )
                return user.bot.dispatch(request)
    raise AssertionError(f"no button {label!r} in {snapshot.get('text')!r}")


def current_step(bot: Bot, key: SessionKey) -> str | None:
    stored = bot.service.store.get(key)
    assert stored is not None
    return stored.step


# ---- in one process ------------------------------------------------------------------------


def test_racing_replies_leave_exactly_one_live_question(make_bot: BotFactory) -> None:
    bot = make_bot()
    users = [SlackUser(bot, channel=f"C0RACE{n}") for n in range(3)]
    for user in users:
        user.command()
    # "2" and "1" sent to the first question at the same moment, in each of three threads.
    requests = [
        event_callback(message_event(text, channel=u.channel, user=USER_ID, thread_ts=u.thread))
        for u in users
        for text in ("2", "1")
    ]
    racers = [threading.Thread(target=bot.dispatch, args=(r,)) for r in requests]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    for user in users:
        bot.fake.wait_for(lambda f, u=user: current_step(bot, u.key) == "task", SETTLED_WITHIN_S)
    delivered(bot)

    for user in users:
        messages = user.bot_messages()
        assert [m.text for m in live(messages)] == [starting(messages, TASK)[-1].text]
        assert with_buttons(messages) == []  # the two answered choices lost theirs
        assert len(starting(messages, TASK)) == 1


def test_a_run_of_429s_beyond_the_clients_retries_delays_the_question_once(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = make_bot()
    user = SlackUser(bot)
    user.command()
    # The client retries a 429 three times itself; six in a row outlast it.
    fake.rate_limit("chat.postMessage", times=6, retry_after=0)
    user.click("Only logged")

    fake.wait_for(lambda f: starting(user.bot_messages(), TURNS) != [], SETTLED_WITHIN_S)
    delivered(bot)
    assert [c.status for c in fake.calls("chat.postMessage")].count(429) == 6
    assert bot.outbox.retried >= 1
    messages = user.bot_messages()
    assert len(starting(messages, TURNS)) == 1
    assert live(messages) == starting(messages, TURNS)
    user.click("Single-turn")
    assert current_step(bot, user.key) == "task"


def test_a_click_on_a_superseded_button_asks_the_open_question_again(
    make_bot: BotFactory,
) -> None:
    bot = make_bot()
    user = SlackUser(bot)
    user.command()
    first = user.open_question().to_slack()  # as a Slack client that never refreshed shows it
    user.click("Only logged")
    delivered(bot)

    # The other answer of the answered question: the open question comes again, and the
    # message that asked it before is no longer live.
    count = len(user.bot_messages())
    assert stale_click(user, first, "Episodes can be recreated") == 200
    bot.fake.wait_for(lambda f: len(asking(user.bot_messages(), TURNS)) == 2)
    delivered(bot)
    messages = user.bot_messages()
    # One message: what was wrong with the click, then the open question.
    assert len(messages) == count + 1 and "earlier question" in messages[-1].text
    older, newer = asking(messages, TURNS)
    assert live(messages) == [newer] and not is_live(older)
    assert current_step(bot, user.key) == "turns"


def test_a_stuck_thread_gets_its_open_question_again_on_a_click_or_a_reply(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = make_bot()
    user = SlackUser(bot)
    user.command()
    first = user.open_question().to_slack()
    fake.fail("chat.postMessage", error="restricted_action")  # refused for good, once
    user.click("Only logged", wait=False)
    fake.wait_for(lambda f: bot.outbox.given_up == 1, SETTLED_WITHIN_S)
    delivered(bot)
    assert starting(user.bot_messages(), TURNS) == []  # the answer is saved; its question lost

    # Today's click on the old button again (same value) asks the open question again.
    assert stale_click(user, first, "Only logged") == 200
    fake.wait_for(lambda f: starting(user.bot_messages(), TURNS) != [], SETTLED_WITHIN_S)
    delivered(bot)
    assert live(user.bot_messages()) == starting(user.bot_messages(), TURNS)
    stored = bot.service.store.get(user.key)
    assert stored is not None and stored.session.answers["replayable"] == "static"

    # Lost again, then a reply: not taken as an answer to a question nobody saw, but asked.
    fake.fail("chat.postMessage", error="restricted_action")
    user.click("Single-turn", wait=False)
    fake.wait_for(lambda f: bot.outbox.given_up == 2, SETTLED_WITHIN_S)
    delivered(bot)
    user.reply("Answer arithmetic questions with only the number.")
    delivered(bot)
    messages = user.bot_messages()
    assert len(starting(messages, TASK)) == 1 and live(messages) == starting(messages, TASK)
    stored = bot.service.store.get(user.key)
    assert stored is not None and "task" not in stored.session.answers


def test_every_superseded_question_loses_its_buttons(make_bot: BotFactory) -> None:
    bot = make_bot()
    user = SlackUser(bot)

    def one_live_question() -> None:
        delivered(bot)
        messages = user.bot_messages()
        shown = live(messages)
        assert len(shown) == 1, [m.text for m in shown]
        step = current_step(bot, user.key)
        assert step is not None and asking(shown, TRAIN_RL.step(step).prompt[:20]) == shown

    user.command()
    one_live_question()
    user.click("Only logged")
    one_live_question()
    user.reply("single")  # typed instead of clicked: the buttons go all the same
    one_live_question()
    user.reply("hi")  # too short: a problem, and the question again
    one_live_question()
    user.reply("back")
    one_live_question()
    user.click("Multi-turn")
    one_live_question()
    user.reply("cancel")
    delivered(bot)
    assert live(user.bot_messages()) == []


# ---- a real bot process, killed --------------------------------------------------------------


class HttpUser:
    """A person talking to a bot process over signed HTTP, one thread at a time."""

    def __init__(self, fake: FakeSlack, channel: str = CHANNEL_ID, user: str = USER_ID) -> None:
        self.fake = fake
        self.channel = channel
        self.user = user
        self.thread = ""

    def messages(self) -> list[Message]:
        return [
            m
            for m in self.fake.thread(self.channel, self.thread)
            if m.bot_id and m.ts != self.thread
        ]

    def command(self, bot: BotProcess) -> None:
        request = slash_command(user_id=self.user, channel_id=self.channel)
        assert request.post(bot.events_url).status == 200
        self.fake.wait_for(
            lambda f: any(not m.is_reply for m in f.messages(self.channel)), SETTLED_WITHIN_S
        )
        self.thread = next(m.ts for m in self.fake.messages(self.channel) if not m.is_reply)

    def step(self, bot: BotProcess, answer: str) -> None:
        """Click `answer` if the open question has such a button, else reply it; then wait for
        the next question (the last message, live)."""
        before = len(self.messages())
        buttons = with_buttons(self.messages())
        labels = [
            e["text"]["text"]
            for m in buttons[-1:]
            for b in m.blocks or []
            if b.get("type") == "actions"
            for e in b["elements"]
        ]
        if any(answer in label for label in labels):
            self.click(bot, answer)
        else:
            event = message_event(
                answer, channel=self.channel, user=self.user, thread_ts=self.thread
            )
            assert event_callback(event).post(bot.events_url).status == 200
        self.fake.wait_for(
            lambda f: len(self.messages()) > before and is_live(self.messages()[-1]),
            SETTLED_WITHIN_S,
        )

    def click(self, bot: BotProcess, label: str) -> None:
        question = with_buttons(self.messages())[-1]
        for block in question.blocks or []:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if label in element["text"]["text"]:
                    request = block_actions(
                        element["action_id"],
                        element["value"],
                        message_ts=question.ts,
                        user_id=self.user,
                        channel_id=self.channel,
                        message=question.to_slack(),
                    )
                    assert request.post(bot.events_url).status == 200
                    return
        raise AssertionError(f"no button {label!r}")


def stored_session(database: Database, key: SessionKey) -> dict[str, Any]:
    store = SessionStore(create_database_engine(database.url), schema=database.schema)
    try:
        stored = store.get(key)
        assert stored is not None
        return dict(stored.session.answers)
    finally:
        store.close()


def crash_after_the_answer(
    fake: FakeSlack,
    database: Database,
    tmp_path: Path,
    crash_while: Callable[[HttpUser], None],
) -> tuple[HttpUser, list[Message]]:
    """Answer the first question, kill the bot once `crash_while` says the next question's post
    is under way, start it again: the thread as it is once everything is delivered."""
    url = process_database_url(database.url, database.schema)
    user = HttpUser(fake)
    with BotProcess(fake, url, tmp_path) as first:
        user.command(first)
        fake.wait_for(lambda f: starting(user.messages(), FIRST) != [], SETTLED_WITHIN_S)
        crash_while(user)
        user.click(first, "Only logged")
        fake.wait_for(
            lambda f: (
                f.holding("chat.postMessage") == 1
                or any(c.status == 429 for c in f.calls("chat.postMessage"))
            ),
            SETTLED_WITHIN_S,
        )
        held = fake.holding("chat.postMessage")
        posts = len(fake.calls("chat.postMessage"))
        first.kill()
    fake.release("chat.postMessage")  # what Slack was still doing when the bot died, it does
    if held:
        fake.wait_for(lambda f: len(f.calls("chat.postMessage")) > posts, SETTLED_WITHIN_S)
    assert stored_session(database, SessionKey(TEAM_ID, CHANNEL_ID, user.thread)) == {
        "replayable": "static"
    }
    with BotProcess(fake, url, tmp_path) as second:
        fake.wait_for(lambda f: starting(user.messages(), TURNS) != [], SETTLED_WITHIN_S)
        user.click(second, "Single-turn")
        fake.wait_for(lambda f: starting(user.messages(), TASK) != [], SETTLED_WITHIN_S)
    return user, user.messages()


def test_a_bot_killed_before_slack_took_the_next_question_posts_it_once_after_a_restart(
    fake: FakeSlack, database: Database, tmp_path: Path
) -> None:
    def rate_limited_for_long(user: HttpUser) -> None:
        # The client sleeps out Retry-After before its retry: it dies asleep.
        fake.rate_limit("chat.postMessage", times=1, retry_after=600)

    _, messages = crash_after_the_answer(fake, database, tmp_path, rate_limited_for_long)
    assert len(starting(messages, TURNS)) == 1
    assert len(starting(messages, TASK)) == 1
    assert live(messages) == starting(messages, TASK)
    assert fake.calls("conversations.replies") != []  # it looked before posting again


def test_a_bot_killed_after_slack_took_the_next_question_does_not_post_it_again(
    fake: FakeSlack, database: Database, tmp_path: Path
) -> None:
    def answer_held(user: HttpUser) -> None:
        # Slack has the post but the bot never hears back: it dies waiting.
        fake.hold("chat.postMessage")

    _, messages = crash_after_the_answer(fake, database, tmp_path, answer_held)
    assert fake.calls("conversations.replies") != []  # found it there: not posted again
    assert len(starting(messages, TURNS)) == 1
    assert len(starting(messages, TASK)) == 1
    assert live(messages) == starting(messages, TASK)


def test_many_first_requests_on_a_fresh_database_all_get_their_first_question(
    fake: FakeSlack, database: Database, tmp_path: Path
) -> None:
    url = process_database_url(database.url, database.schema)
    users = [HttpUser(fake, channel=f"C0FRESH{n:02d}", user=f"U0FRESH{n:02d}") for n in range(20)]
    with BotProcess(fake, url, tmp_path) as bot:  # migrates the fresh database as it starts
        with ThreadPoolExecutor(max_workers=len(users)) as pool:
            statuses = list(
                pool.map(
                    lambda u: (
                        slash_command(user_id=u.user, channel_id=u.channel)
                        .post(bot.events_url)
                        .status
                    ),
                    users,
                )
            )
        assert statuses == [200] * len(users)
        for user in users:
            fake.wait_for(
                lambda f, u=user: any(not m.is_reply for m in f.messages(u.channel)),
                SETTLED_WITHIN_S,
            )
            user.thread = next(m.ts for m in fake.messages(user.channel) if not m.is_reply)
            fake.wait_for(lambda f, u=user: starting(u.messages(), FIRST) != [], SETTLED_WITHIN_S)
    for user in users:
        assert len(starting(user.messages(), FIRST)) == 1
        assert len(with_buttons(user.messages())) == 1


WIZARD_UP_TO_THE_LAST_ANSWER = [
    "Only logged or static scenarios",
    "Single-turn",
    "Answer arithmetic questions with only the final number.",
    "Paste them here",
    f"```\n{ROWS}\n```",
    "skip",
    "default",  # what the agent sees
    "RULER",
    "openai/gpt-5.4",
    "default",  # RULER's rubric: ART's
    "All scenarios",
    "Hold out a fraction",
    "0.25",
    "default",
    "default",
    "OpenPipe/Qwen3-14B-Instruct",
    "default",
    "math-solver-001",
    "LocalBackend",
    "Use defaults",
]


def test_a_bot_killed_right_after_the_last_answer_generates_the_script_after_a_restart(
    fake: FakeSlack, database: Database, tmp_path: Path
) -> None:
    url = process_database_url(database.url, database.schema)
    user = HttpUser(fake)
    with BotProcess(fake, url, tmp_path) as first:
        user.command(first)
        fake.wait_for(lambda f: starting(user.messages(), FIRST) != [], SETTLED_WITHIN_S)
        for answer in WIZARD_UP_TO_THE_LAST_ANSWER:
            user.step(first, answer)
        # What the turn says (the answered question, with "That's every question" under it)
        # is stuck on its way: the script comes only after it.
        fake.hold("chat.update")
        user.click(first, "Epochs over the fixed dataset")
        fake.wait_for(lambda f: f.holding("chat.update") == 1, SETTLED_WITHIN_S)
        updates = len(fake.calls("chat.update"))
        first.kill()
    assert fake.uploaded_files() == []
    fake.release("chat.update")
    fake.wait_for(lambda f: len(f.calls("chat.update")) > updates, SETTLED_WITHIN_S)
    with BotProcess(fake, url, tmp_path):
        fake.wait_for(lambda f: starting(user.messages(), RESULT_CARD_HEAD) != [], SETTLED_WITHIN_S)
    messages = user.messages()
    assert [u.name for u in fake.uploaded_files()] == ["math-solver-001.py"]
    assert len(starting(messages, RESULT_CARD_HEAD)) == 1
    last_question = messages[-2]
    assert "That's every question" in last_question.text and messages[-1].text.startswith(
        RESULT_CARD_HEAD
    )
