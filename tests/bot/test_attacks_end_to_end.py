"""An attack on a real `artbot serve`, as a Slack user would make it: hostile reward code typed
into a wizard (run by the dry run) and drafted by the model (run by the draft trial), against a
bot with two workspaces installed through OAuth and canary secrets in its environment.

The code (tests/bot/hostile_code.py) reads the bot's /proc environ and its database, prints its
own environment, connects to a listener on the host's loopback by `socket`, `_socket` and a
subprocess, writes outside its scratch folder, leaves a detached `sleep`, and sends back all it
found, raw and reversed, by the widest channel it has. Then: no canary anywhere in what Slack or
the model received or in the bot's logs, no connection, no file, no process left, the attempts
reported as failed, and the bot still serving both workspaces.

SQLite only: the attacker reads the database file (a PostgreSQL server would be one more
address on a network the sandbox does not have). Linux only (bubblewrap). As root the bot's
sandboxes run as a uid pool of their own (ARTBOT_SANDBOX_UID_BASE), so that a process left in
it is this bot's, whatever other tests run meanwhile."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from cryptography.fernet import Fernet

from bot.wizard.script_results import DRYRUN_RUNNING, RESULT_CARD_HEAD
from flows import TRAIN_RL
from isolation.sandbox import UID_POOL_SIZE
from storage.database import create_database_engine
from storage.sessions import SessionKey, SessionStore
from tests.bot.bot_process import ROOT, SERVE, free_port
from tests.bot.hostile_code import MUST_FAIL, Targets, hostile_reward
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.fakes.slack_api import FakeSlack, Message
from tests.fakes.slack_requests import block_actions, event_callback, message_event, slash_command
from tests.flows.matrix import MATH_ROWS

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the sandbox is Linux namespaces (bubblewrap)"
)

GENEROUS_S = 120.0
"""A cap on every wait (a loaded machine), never a measurement."""
DRYRUN_WITHIN_S = 300.0
"""A cap on the dry run (about 10 s here; the first one on a machine compiles the bytecode)."""
CLIENT_ID = "1111.2222"
NORTH, SOUTH = "T0NORTH", "T0SOUTH"
CHANNELS = {NORTH: "C0NORTH", SOUTH: "C0SOUTH"}
ATTACKER, VICTIM = "U0MALLORY", "U0VICTIM"
ROWS = "\n".join(json.dumps(row) for row in MATH_ROWS)
NO_ADVICE = Scripted.json({"recommendations": []})
"""The reply to the recommendations asked for once the scenarios are given: none."""
DRAFT_FAILED = "I could not write"
GONE_WITHIN_S = 30.0
"""How long a sandbox's processes may take to be gone (reaped) after its verdict was posted."""
SANDBOX_ERRORS = frozenset(
    {"FileNotFoundError", "PermissionError", "ConnectionRefusedError", "ConnectionError", "OSError"}
)
"""How an attempt fails in the sandbox: nothing there, not allowed, no network, read-only."""
UID_BASE = 992_000 + UID_POOL_SIZE * (os.getpid() % 64)
"""The bot's sandbox uid pool (ARTBOT_SANDBOX_UID_BASE): one of its own, so that what other
tests' sandboxes run at the same time is never taken for a process this bot left behind."""


# ---- the secrets an attacker wants -------------------------------------------------------------


@dataclass(frozen=True)
class Canaries:
    """Values that must never leave the bot: its secrets, and another workspace's data."""

    signing_secret: str
    client_secret: str
    runner_token: str
    llm_api_key: str
    openai_api_key: str
    token_keys: str
    north_token: str
    south_token: str
    south_private: str
    """Typed by the victim in the other workspace: in the bot's database, nowhere of the north's."""

    @classmethod
    def fresh(cls) -> Canaries:
        def canary(prefix: str) -> str:
            return f"{prefix}{secrets.token_hex(16)}"

        return cls(
            signing_secret=canary("signing-"),
            client_secret=canary("client-"),
            runner_token=canary("runner-"),
            llm_api_key=canary("sk-llm-"),
            openai_api_key=canary("sk-openai-"),
            token_keys=Fernet.generate_key().decode(),
            north_token=canary("xoxb-north-"),
            south_token=canary("xoxb-south-"),
            south_private=canary("SOUTH-PRIVATE-"),
        )

    def secrets(self) -> dict[str, str]:
        """The bot's own secrets, by name (everything but the victim's data)."""
        return {k: v for k, v in vars(self).items() if k != "south_private"}


def sightings(values: dict[str, str], places: dict[str, str]) -> list[str]:
    """Where any of `values` appears in `places`, raw or reversed (the attacker's own encoding,
    which no redaction of known values catches)."""
    found = []
    for place, text in places.items():
        for name, value in values.items():
            if value in text:
                found.append(f"{name} in {place}")
            if value[::-1] in text:
                found.append(f"{name} (reversed) in {place}")
    return found


def shown_to_the_victim(params: dict[str, Any]) -> bool:
    """A Slack call about the victim's own channel or Home tab."""
    channel = params.get("channel") or params.get("channel_id")
    return channel == CHANNELS[SOUTH] or params.get("user_id") == VICTIM


def as_text(value: Any) -> str:
    return json.dumps(
        value, default=lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else repr(v)
    )


# ---- what the attacker aims at on the host -----------------------------------------------------


class Listener:
    """A TCP listener on the host's 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._socket.getsockname()[1])
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return  # closed
            self.connections += 1
            connection.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Listener:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def process_table() -> list[tuple[int, int, str, str]]:
    """Every process now: pid, real uid, state, command line."""
    table = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = int(fields["Uid"].split()[0])
        state = fields["State"].split()[0]
        table.append((int(entry.name), uid, state, command))
    return table


def left_behind(sleeper: str) -> list[str]:
    """Live processes (zombies are dead: only their parent's wait is missing) of this bot's
    sandbox uids, or running the attacker's `sleep`, whatever their uid."""
    pool = range(UID_BASE, UID_BASE + UID_POOL_SIZE) if os.geteuid() == 0 else range(0)
    return [
        f"pid {pid} uid {uid}: {command}"
        for pid, uid, state, command in process_table()
        if state != "Z" and (uid in pool or f"sleep {sleeper}" in command)
    ]


def left_after_waiting(sleeper: str) -> list[str]:
    """What is still left behind once the sandbox had time to go (a leftover would sleep for a
    day); each is killed then, by its pid, so that a failing run leaves nothing either."""
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: not left_behind(sleeper), GONE_WITHIN_S, "")
    left = left_behind(sleeper)
    for line in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(line.split()[1]), signal.SIGKILL)
    return left


def not_failed(where: str, text: str, attempts: tuple[str, ...] = MUST_FAIL) -> list[str]:
    """The attempts that `text` does not report failed, for a reason a sandbox gives."""
    problems = []
    for name in attempts:
        said = re.search(rf"\[{re.escape(name)}\] (GOT|FAILED (\w+))", text)
        if said is None:
            problems.append(f"{where} does not report the attempt [{name}]")
        elif said.group(2) not in SANDBOX_ERRORS:
            problems.append(f"{where}: [{name}] {said.group(1)}")
    return problems


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str | Callable[[], str]
) -> None:
    """Poll `condition` until it holds; TimeoutError saying `what` (called then) after `timeout`."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout} s: {what() if callable(what) else what}")
        time.sleep(0.05)


# ---- the bot ---------------------------------------------------------------------------------


class ServedBot:
    """`artbot serve` in a process of its own, with OAuth, the assistant, real dry runs and
    draft trials, and `environment` (the canaries) in its environment."""

    def __init__(self, folder: Path, environment: dict[str, str]) -> None:
        self.port = free_port()
        self.log = folder / "serve.log"
        inherited = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SLACK_", "ARTBOT_", "OPENAI_", "WANDB_"))
        }
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    SERVE,
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                ],
                cwd=ROOT,
                env={**inherited, **environment},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._healthy, GENEROUS_S, f"artbot serve started: {self.log_text()}")

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _healthy(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"artbot serve exited: {self.log_text()}")
        return self.health() == 200

    def health(self) -> int | None:
        try:
            with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=10) as reply:
                return reply.status
        except urllib.error.HTTPError as error:
            return error.code
        except OSError:
            return None

    def get(self, path: str, cookie: str | None = None) -> tuple[int, str, dict[str, str]]:
        request = urllib.request.Request(
            f"{self.base_url}{path}", headers={"Cookie": cookie} if cookie else {}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return (
                    reply.status,
                    reply.read().decode(),
                    {k.lower(): v for k, v in reply.headers.items()},
                )
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(), {}

    def install(self, fake: FakeSlack, team: str) -> None:
        """A person in `team` installs the app: Bolt's OAuth round trip through the fake Slack."""
        status, page, headers = self.get("/slack/install")
        assert status == 200, page
        link = re.search(r'href="(https://slack\.com/oauth/v2/authorize\?[^"]+)"', page)
        assert link is not None, page
        query = parse_qs(urlsplit(link.group(1).replace("&amp;", "&")).query)
        cookie = headers["set-cookie"].split(";")[0]
        code = fake.authorize(team, scopes=query["scope"][0].split(","))
        status, page, _ = self.get(
            "/slack/oauth_redirect?" + urlencode({"code": code, "state": query["state"][0]}),
            cookie,
        )
        assert status == 200, page

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)

    def __enter__(self) -> ServedBot:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


# ---- a person in a workspace -----------------------------------------------------------------


def is_live(message: Message) -> bool:
    """A question not yet retired: its buttons or its reply hint still shown."""
    return any(block.get("type") in ("actions", "context") for block in message.blocks or [])


@dataclass
class Person:
    """Someone in one workspace's channel, talking to the bot over signed HTTP, one thread."""

    bot: ServedBot
    fake: FakeSlack
    sessions: SessionStore
    signing_secret: str
    team: str
    user: str
    thread: str = ""
    channel: str = field(init=False)

    def __post_init__(self) -> None:
        self.channel = CHANNELS[self.team]

    @property
    def events_url(self) -> str:
        return f"{self.bot.base_url}/slack/events"

    def messages(self) -> list[Message]:
        return [
            m
            for m in self.fake.thread(self.channel, self.thread)
            if m.bot_id and m.ts != self.thread
        ]

    def step(self) -> str:
        """The question the session is at (the database's record), "<done>" once complete."""
        stored = self.sessions.get(SessionKey(self.team, self.channel, self.thread))
        assert stored is not None
        step = TRAIN_RL.next_step(stored.session.answers)
        return step.id if step is not None else "<done>"

    def asking(self, step: str) -> bool:
        """Whether the thread's last message is the live question `step`."""
        messages = self.messages()
        prompt = TRAIN_RL.step(step).prompt[:20]
        return bool(messages) and is_live(messages[-1]) and prompt in messages[-1].text

    def command(self, text: str = "") -> None:
        parents = {m.ts for m in self.fake.messages(self.channel) if not m.is_reply}
        request = slash_command(
            text=text,
            user_id=self.user,
            channel_id=self.channel,
            team_id=self.team,
            signing_secret=self.signing_secret,
        )
        assert request.post(self.events_url).status == 200
        self.fake.wait_for(
            lambda f: any(not m.is_reply and m.ts not in parents for m in f.messages(self.channel)),
            GENEROUS_S,
        )
        (self.thread,) = [
            m.ts for m in self.fake.messages(self.channel) if not m.is_reply and m.ts not in parents
        ]
        self.fake.wait_for(lambda f: self.asking(TRAIN_RL.steps[0].id), GENEROUS_S)

    def say(self, text: str) -> None:
        event = message_event(text, channel=self.channel, user=self.user, thread_ts=self.thread)
        request = event_callback(event, team_id=self.team, signing_secret=self.signing_secret)
        assert request.post(self.events_url).status == 200

    def press(self, label: str) -> None:
        question = next(
            m
            for m in reversed(self.messages())
            if any(b.get("type") == "actions" for b in m.blocks or [])
        )
        for block in question.blocks or []:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if label in element["text"]["text"]:
                    request = block_actions(
                        element["action_id"],
                        element["value"],
                        message_ts=question.ts,
                        user_id=self.user,
                        channel_id=self.channel,
                        team_id=self.team,
                        message=question.to_slack(),
                        signing_secret=self.signing_secret,
                    )
                    assert request.post(self.events_url).status == 200
                    return
        raise AssertionError(f"no button {label!r} on {question.text!r}")

    def answer(self, answer: str) -> None:
        """Press the open question's button labelled `answer`, else reply it; then wait until the
        session has moved on and its next question is shown (or it is complete)."""
        before = self.step()
        labels = [
            e["text"]["text"]
            for m in self.messages()[-1:]
            for b in m.blocks or []
            if b.get("type") == "actions"
            for e in b["elements"]
        ]
        if any(answer in label for label in labels):
            self.press(answer)
        else:
            self.say(answer)

        def moved_on() -> bool:
            now = self.step()
            return now != before and (now == "<done>" or self.asking(now))

        self.fake.wait_for(lambda f: moved_on(), GENEROUS_S)

    def result_card(self) -> Message | None:
        return next((m for m in self.messages() if m.text.startswith(RESULT_CARD_HEAD)), None)


def to_the_reward_code(person: Person, model: FakeOpenAI) -> None:
    for answer in ("Only logged or static scenarios", "Single-turn"):
        person.answer(answer)
    person.answer("Answer arithmetic questions with only the final number.")
    person.answer("Paste them here")
    model.script(NO_ADVICE)
    person.answer(f"```\n{ROWS}\n```")
    person.answer("skip")
    person.answer("default")  # what the agent sees
    person.answer("Programmatic")
    assert person.step() == "reward_logic"


AFTER_THE_REWARD = (
    "All scenarios",
    "Hold out a fraction",
    "0.25",
    "default",
    "default",
    "OpenPipe/Qwen3-14B-Instruct",
    "default",
    "attack-001",
    "LocalBackend",
    "Use defaults",
    "Epochs over the fixed dataset",
)


def dryrun_said(person: Person) -> bool:
    """Whether the result card shows the dry run's verdict (it says it is running until then)."""
    card = person.result_card()
    return card is not None and "Dry run" in card.text and DRYRUN_RUNNING not in card.text


def drafted(code: str) -> Scripted:
    return Scripted.json({"code": code, "summary": "Exact match with the expected answer."})


# ---- the attack ------------------------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack() as slack:
        yield slack


def test_hostile_code_in_a_dry_run_and_a_draft_reaches_no_secret_and_nothing_on_the_host(
    fake: FakeSlack, tmp_path: Path
) -> None:
    canaries = Canaries.fresh()
    fake.add_workspace(NORTH, [CHANNELS[NORTH]], bot_token=canaries.north_token)
    fake.add_workspace(SOUTH, [CHANNELS[SOUTH]], bot_token=canaries.south_token)
    fake.oauth_app(CLIENT_ID, canaries.client_secret)
    database = tmp_path / "artbot.db"
    url = f"sqlite:///{database}"
    outside = tmp_path / "written-from-the-sandbox.txt"
    with (
        Listener() as listener,
        FakeOpenAI(key=canaries.llm_api_key) as model,
        ServedBot(
            tmp_path,
            {
                "SLACK_CLIENT_ID": CLIENT_ID,
                "SLACK_CLIENT_SECRET": canaries.client_secret,
                "SLACK_SIGNING_SECRET": canaries.signing_secret,
                "SLACK_API_URL": fake.base_url,
                "ARTBOT_DATABASE_URL": url,
                "ARTBOT_SCRIPTS_DIR": str(tmp_path / "scripts"),
                "ARTBOT_DRYRUN": "true",
                "ARTBOT_TOKEN_KEYS": canaries.token_keys,
                "ARTBOT_RUNNER_TOKEN": canaries.runner_token,
                "ARTBOT_LLM_MODEL": "gpt-test",
                "ARTBOT_LLM_BASE_URL": model.base_url,
                "ARTBOT_LLM_API_KEY": canaries.llm_api_key,
                "OPENAI_API_KEY": canaries.openai_api_key,
                "ARTBOT_SANDBOX_UID_BASE": str(UID_BASE),
            },
        ) as bot,
    ):
        sessions = SessionStore(create_database_engine(url))
        try:
            bot.install(fake, NORTH)
            bot.install(fake, SOUTH)

            def person(team: str, user: str) -> Person:
                return Person(bot, fake, sessions, canaries.signing_secret, team, user)

            # The victim's data, in the bot's database: what the attacker greps it for.
            victim = person(SOUTH, VICTIM)
            victim.command()
            victim.answer("Only logged or static scenarios")
            victim.answer("Single-turn")
            victim.answer(f"Summarize support tickets for account {canaries.south_private}.")

            attacker = person(NORTH, ATTACKER)
            attacker.command()
            to_the_reward_code(attacker, model)

            def targets(sleeper: str) -> Targets:
                return Targets(bot.pid, database, listener.port, outside, sleeper, "PRIVATE")

            # 2. A hostile draft: the model answers `draft` with the attack, twice (a failed
            # draft is sent back once with why it failed, then reported).
            draft_sleeper = f"86400.{secrets.randbelow(10**6):06d}"
            model.script(*[drafted(hostile_reward(targets(draft_sleeper)))] * 2)
            attacker.say("draft")
            fake.wait_for(
                lambda f: (
                    any(DRAFT_FAILED in m.text for m in attacker.messages())
                    and attacker.asking("reward_logic")
                ),
                GENEROUS_S,
            )
            draft_left = left_after_waiting(draft_sleeper)

            # 1. Hostile user code in the dry run: typed, the wizard completed, the script
            # generated and dry-run for real in the serve process.
            typed_sleeper = f"86400.{secrets.randbelow(10**6):06d}"
            attacker.answer(f"```\n{hostile_reward(targets(typed_sleeper))}```")
            for answer in AFTER_THE_REWARD:
                attacker.answer(answer)
            assert attacker.step() == "<done>"
            wait_until(
                lambda: dryrun_said(attacker),
                DRYRUN_WITHIN_S,
                lambda: f"the dry run's verdict: {[m.text for m in attacker.messages()[-2:]]}",
            )
            dryrun_left = left_after_waiting(typed_sleeper)

            # The bot still serves, both workspaces.
            assert bot.health() == 200
            again = person(SOUTH, VICTIM)
            again.command()
            assert again.asking(TRAIN_RL.steps[0].id)
        finally:
            sessions.close()
        requests = list(model.requests)
        refused = list(model.refused)
    log = bot.log_text()

    # What the attack said: in the dry run's report (on the card, whole in a file when long)
    # and in the draft's failure (in the thread, and sent to the model with the retry).
    card = attacker.result_card()
    assert card is not None and ":x: Dry run failed" in card.text, card.text if card else None
    report = "\n".join(
        [card.text]
        + [
            u.content.decode(errors="replace")
            for u in fake.uploaded_files()
            if u.name.endswith(".dryrun.txt")
        ]
    )
    draft_failure = next(m.text for m in attacker.messages() if DRAFT_FAILED in m.text)
    retry = next(
        (m["content"] for r in requests for m in r["messages"] if "What failed:" in m["content"]),
        "",
    )
    problems = [
        *not_failed("the dry run's report in Slack", report),
        *not_failed("the draft's retry request to the model", retry),
        *not_failed("the draft's failure in Slack", draft_failure, MUST_FAIL[:1]),
    ]
    if "ran without a sandbox" in report:
        problems.append("the dry run's report says it ran without a sandbox")

    # Nothing secret anywhere it went: Slack (every call's arguments, every file), the model,
    # the bot's own logs.
    calls = {f"Slack {call.method} #{i}": call for i, call in enumerate(fake.calls())}
    slack_places = {place: as_text(call.params) for place, call in calls.items()}
    files = {
        f"Slack file {u.name}": u.content.decode(errors="replace") for u in fake.uploaded_files()
    }
    model_places = {f"model request #{i}": as_text(body) for i, body in enumerate(requests)}
    everywhere = {**slack_places, **files, **model_places, "the bot's log": log}
    problems += sightings(canaries.secrets(), everywhere)
    # The victim's data, nowhere but what the bot shows the victim.
    not_the_victims = {
        place: text
        for place, text in everywhere.items()
        if place not in calls or not shown_to_the_victim(calls[place].params)
    }
    problems += sightings({"south_private": canaries.south_private}, not_the_victims)

    # Nothing reached the host: no connection, no file, no process left.
    if listener.connections:
        problems.append(f"the listener on the host got {listener.connections} connection(s)")
    if outside.exists():
        problems.append(f"{outside} was written: {outside.read_text()!r}")
    problems += [f"left running after the draft: {p}" for p in draft_left]
    problems += [f"left running after the dry run: {p}" for p in dryrun_left]
    assert problems == [], "\n".join(problems)
    assert refused == [], "the fake model refused requests OpenAI would refuse, or was not scripted"
