"""A bot wired to a fake Slack on loopback and a real database (SQLite, and PostgreSQL when set)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from assistant import assistant_from_environment
from bot.app import ArtbotApp, create_app
from bot.delivery.worker import OutboxWorker
from bot.services import Services, build_services, start_outbox
from bot.settings import BotSettings, load_settings
from bot.wizard.script_results import RESULT_CARD_HEAD
from checks.dryrun import DryrunReport
from isolation.sandbox import Sandbox
from storage.sessions import SessionKey
from tests.databases import BACKENDS, POSTGRES_URL, throwaway_schema
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import FakeSlack, Message
from tests.fakes.slack_requests import (
    SignedRequest,
    block_actions,
    event_callback,
    message_event,
    slash_command,
)
from tests.fakes.workspace import BOT_TOKEN, CHANNEL_ID, SIGNING_SECRET, TEAM_ID, USER_ID


@dataclass
class Database:
    url: str
    schema: str | None = None


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack() as slack:
        yield slack


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        yield Database(f"sqlite:///{tmp_path / 'artbot.db'}")
        return
    assert POSTGRES_URL is not None
    with throwaway_schema("artbot_bot") as schema:
        yield Database(POSTGRES_URL, schema)


@dataclass
class Bot:
    """One running bot: its Bolt app, its service, and the fake Slack it talks to."""

    app: ArtbotApp
    service: Services
    fake: FakeSlack
    settings: BotSettings
    executor: ThreadPoolExecutor
    outbox: OutboxWorker
    http_url: str | None = None
    """When set, requests go over real HTTP to `artbot serve`'s server instead of app.dispatch."""

    def dispatch(self, request: SignedRequest) -> int:
        if self.http_url is not None:
            return request.post(self.http_url).status
        response = self.app.dispatch(request.as_bolt_request())
        return response.status

    def works_done(self) -> int:
        """Listener works finished so far: every request a listener acked and handed on, done
        to its end (the bot's turn histogram counts each as it ends)."""
        total = 0.0
        for family in self.app.metrics.registry.collect():
            for sample in family.samples:
                if sample.name == "artbot_turn_seconds_count":
                    total += sample.value
        return int(total)

    def works_in_flight(self) -> int:
        """Listener works handed on after their acks and not finished yet (the bot's gauge)."""
        value = self.app.metrics.registry.get_sample_value("artbot_listener_works_in_flight")
        return int(value or 0)

    def wait_for_works_done(self, works: int, timeout: float = 10.0) -> None:
        """Block until `works` listener works have finished (not a quiet spell: an exact count)."""
        deadline = time.monotonic() + timeout
        while self.works_done() < works:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.works_done()} of {works} works done")
            time.sleep(0.01)

    def answer(self, request: SignedRequest) -> tuple[int, str]:
        """The status and body the bot acks `request` with (a modal's errors are in the body)."""
        response = self.app.dispatch(request.as_bolt_request())
        return response.status, response.body


@dataclass
class BotFactory:
    fake: FakeSlack
    database: Database
    scripts: Path
    made: list[Bot] = field(default_factory=list)
    token_keys: str = field(default_factory=lambda: Fernet.generate_key().decode())
    """The bots' ARTBOT_TOKEN_KEYS (one database, one key), unless a test gives its own: with
    none, an OAuth bot would make a key file in the data dir of whoever runs the tests."""

    def __call__(
        self,
        *,
        dryrun: Callable[[Path], DryrunReport] | None = None,
        sandbox: Sandbox | None = None,
        **env: str,
    ) -> Bot:
        environment = {
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": self.fake.base_url,
            "ARTBOT_DATABASE_URL": self.database.url,
            "ARTBOT_SCRIPTS_DIR": str(self.scripts),
            "ARTBOT_DRYRUN": "true" if dryrun else "false",
            "ARTBOT_TOKEN_KEYS": self.token_keys,
            **env,
        }
        if "SLACK_CLIENT_ID" in env:  # OAuth: any workspace installs the app, no one token
            del environment["SLACK_BOT_TOKEN"]
        settings = load_settings(environment)
        executor = ThreadPoolExecutor(max_workers=2)
        kwargs: dict[str, Any] = {"dryrun": dryrun} if dryrun else {}
        service = build_services(
            settings,
            executor=executor,
            schema=self.database.schema,
            assistant=assistant_from_environment(environment, sandbox),
            sandbox=sandbox,
            **kwargs,
        )
        app = create_app(settings, service)
        bot = Bot(
            app, service, self.fake, settings, executor, start_outbox(service, app.client_for)
        )
        self.made.append(bot)
        return bot


@pytest.fixture
def make_bot(fake: FakeSlack, database: Database, tmp_path: Path) -> Iterator[BotFactory]:
    factory = BotFactory(fake, database, tmp_path / "scripts")
    yield factory
    for bot in factory.made:
        bot.outbox.stop()
        bot.executor.shutdown(wait=True)
        bot.service.store.close()


@dataclass
class SlackUser:
    """A person in the fake workspace, talking to the bot the way Slack delivers it."""

    bot: Bot
    user: str = USER_ID
    channel: str = CHANNEL_ID
    thread: str = ""
    team: str = TEAM_ID
    channel_type: str = "channel"
    """"im" in the app's DM (the agent view)."""

    @property
    def fake(self) -> FakeSlack:
        return self.bot.fake

    @property
    def key(self) -> SessionKey:
        return SessionKey(self.team, self.channel, self.thread)

    def settle(self, quiet_s: float = 0.15, timeout: float = 30.0) -> None:
        """Wait until the bot has stopped talking to Slack for a moment: no listener work is in
        flight, its outbox is empty, and no call came for `quiet_s` (a turn can post and update
        several messages). Not quiet alone: on a busy machine a turn waiting for a core can be
        silent longer than any quiet spell."""
        deadline = time.monotonic() + timeout
        # A test may hold Slack on purpose (a fault in the fake): then quiet is all there is.
        held = min(timeout, 10.0)
        with contextlib.suppress(TimeoutError):
            self.fake.wait_for(
                lambda f: self.bot.works_in_flight() == 0,
                timeout=held if self.fake.holds_any() else timeout,
            )
        with contextlib.suppress(TimeoutError):
            self.fake.wait_for(lambda f: self.bot.service.outbox.depth() == 0, timeout=held)
        seen, since = len(self.fake.calls()), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = len(self.fake.calls())
            if now != seen:
                seen, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return

    def bot_messages(self) -> list[Message]:
        return [
            m
            for m in self.fake.thread(self.channel, self.thread)
            if m.bot_id and m.ts != self.thread
        ]

    def command(self, text: str = "", *, name: str = "/train-rl") -> str:
        before = len(self.fake.messages(self.channel))
        assert (
            self.bot.dispatch(
                slash_command(
                    name, text, user_id=self.user, channel_id=self.channel, team_id=self.team
                )
            )
            == 200
        )
        self.fake.wait_for(lambda f: any(m.is_reply for m in f.messages(self.channel)[before:]))
        self.settle()
        parents = [m for m in self.fake.messages(self.channel)[before:] if not m.is_reply]
        self.thread = parents[0].ts
        return self.thread

    def reply(
        self,
        text: str,
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        wait: bool = True,
    ) -> int:
        answered = self._answered()
        event = message_event(
            text,
            channel=self.channel,
            user=self.user,
            thread_ts=self.thread,
            channel_type=self.channel_type,
        )
        status = self.bot.dispatch(
            event_callback(event, event_id=event_id, retry_num=retry_num, team_id=self.team)
        )
        if wait:
            answered()
        return status

    def _answered(self) -> Callable[[], None]:
        """Something to call after a reply or a click: it waits for the bot's next message, or,
        when that reply completed the wizard (whose last answer posts nothing: its closing
        words go under the answer), for the thread to settle."""
        count = len(self.bot_messages())
        was_complete = self._status() == "complete"

        def wait() -> None:
            self.fake.wait_for(
                lambda f: (
                    len(self.bot_messages()) > count
                    or (not was_complete and self._status() == "complete")
                )
            )
            self.settle()

        return wait

    def _status(self) -> str | None:
        stored = self.bot.service.store.get(self.key) if self.thread else None
        return stored.session.status if stored is not None else None

    def open_question(self) -> Message:
        """The latest message in the thread that still has buttons."""
        message = self.open_question_or_none()
        if message is None:
            raise AssertionError("no question with buttons in the thread")
        return message

    def open_question_or_none(self) -> Message | None:
        for message in reversed(self.bot_messages()):
            if any(block.get("type") == "actions" for block in message.blocks or []):
                return message
        return None

    def click(self, label: str, *, wait: bool = True, on: Message | None = None) -> int:
        """Click the button whose text contains `label`, on the latest question (or `on`)."""
        message = on or self.open_question()
        for block in message.blocks or []:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if element["type"] == "button" and label in element["text"]["text"]:
                    answered = self._answered()
                    request = block_actions(
                        element["action_id"],
                        element["value"],
                        message_ts=message.ts,
                        user_id=self.user,
                        channel_id=self.channel,
                        team_id=self.team,
                        message=message.to_slack(),
                        trigger_id=self.fake.issue_trigger(self.user),
                    )
                    status = self.bot.dispatch(request)
                    if wait:
                        answered()
                    return status
        raise AssertionError(f"no button {label!r} on {message.text!r}")

    def result_cards(self) -> list[Message]:
        """The thread's result cards, one per generated script, oldest first."""
        return [m for m in self.bot_messages() if m.text.startswith(RESULT_CARD_HEAD)]

    def wait_for_result(self, count: int = 1, timeout: float = 60.0) -> Message:
        """The newest result card, once the thread has `count` of them (rendering and checking
        a script takes seconds on a busy machine)."""
        self.fake.wait_for(lambda f: len(self.result_cards()) >= count, timeout=timeout)
        self.settle()
        return self.result_cards()[-1]

    def last_text(self) -> str:
        return self.bot_messages()[-1].text

    def asked(self) -> str:
        """The step the bot asked last (from the engine's session, the record of truth)."""
        stored = self.bot.service.store.get(self.key)
        assert stored is not None
        from flows import FLOWS

        step = FLOWS[stored.session.flow].next_step(stored.session.answers)
        return step.id if step else "<done>"


def answer_after_the_reward(user: SlackUser) -> None:
    """The questions after the reward's, answered for a single-turn wizard on inline rows:
    all scenarios, a quarter held out, defaults, run name `math-solver-001`, local, epochs."""
    user.click("All scenarios")
    user.click("Hold out a fraction")
    user.reply("0.25")
    user.reply("default")
    user.reply("default")
    user.click("OpenPipe/Qwen3-14B-Instruct")
    user.reply("default")
    user.reply("math-solver-001")
    user.click("LocalBackend")
    user.click("Use defaults")
    user.click("Epochs over the fixed dataset")
    user.wait_for_result()


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    """The assistant's model: the fake OpenAI server, strict (a test that made it refuse what
    OpenAI would refuse fails)."""
    with FakeOpenAI() as server:
        yield server
        assert server.refused == [], "the fake refused requests OpenAI would refuse"


def with_the_assistant(make_bot: BotFactory, model: FakeOpenAI, **settings: str) -> SlackUser:
    """The owner of a new wizard on a bot whose assistant asks `model`."""
    environment = {
        "ARTBOT_LLM_MODEL": "gpt-test",
        "ARTBOT_LLM_BASE_URL": model.base_url,
        "ARTBOT_LLM_API_KEY": model.key,
        **settings,
    }
    bot = make_bot(**environment)
    owner = SlackUser(bot)
    owner.command()
    return owner
