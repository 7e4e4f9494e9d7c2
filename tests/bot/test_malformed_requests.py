"""Signed requests whose payload is not shaped as Slack documents it (a click without a user, a
dict where text goes, an App Home event without a user...) are logged and answered 200, and
nothing changes: no Slack call, no session, no run. Slack retries anything but a 2xx, and a
retry of the same payload would fail the same way.

Each request goes over real HTTP to the bot's server (uvicorn, Bolt's ASGI adapter), so a
failure anywhere between the socket and the listener shows as it would in production."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from bot.process.serve import BotServer, web_for
from bot.services import Services
from bot.slack.blocks import RESULT_ACTIONS, TRY_MODAL
from tests.bot.conftest import Bot, BotFactory, SlackUser
from tests.bot.test_run_followups import BASELINE, a_bot, a_finished_run
from tests.fakes.slack_api import FakeSlack, Message
from tests.fakes.slack_requests import (
    FORM,
    JSON,
    SignedRequest,
    app_home_opened,
    block_actions,
    event_callback,
    message_changed_event,
    message_event,
    sign,
    slash_command,
    view_submission,
)
from tests.fakes.workspace import CHANNEL_ID, TEAM_ID, USER_ID

Payload = dict[str, Any]


def resigned(request: SignedRequest, change: Callable[[Payload], object]) -> SignedRequest:
    """`request` with its payload changed by `change`, signed again (so only its shape is off)."""
    payload = request.payload()
    change(payload)
    if request.headers["Content-Type"].startswith(JSON):
        return sign(json.dumps(payload), content_type=JSON)
    if "payload=" in request.body:
        return sign(urlencode({"payload": json.dumps(payload)}), content_type=FORM)
    return sign(urlencode(payload), content_type=FORM)


def drop(*path: str) -> Callable[[Payload], None]:
    """Take the field at `path` out of a payload."""

    def change(payload: Payload) -> None:
        *parents, last = path
        for key in parents:
            payload = payload[key]
        del payload[last]

    return change


def put(value: object, *path: str | int) -> Callable[[Payload], None]:
    """Set the field at `path` (through dicts and lists) of a payload to `value`."""

    def change(payload: Payload) -> None:
        *parents, last = path
        here: Any = payload
        for key in parents:
            here = here[key]
        here[last] = value

    return change


def the_button(message: Message, label: str) -> dict[str, Any]:
    for block in message.blocks or []:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if label in element["text"]["text"]:
                return element
    raise AssertionError(f"no button {label!r}")


def click_of(user: SlackUser, message: Message, label: str) -> SignedRequest:
    """A well-formed click on `message`'s button, as Slack sends it (the base to break)."""
    button = the_button(message, label)
    return block_actions(
        button["action_id"],
        button["value"],
        message_ts=message.ts,
        user_id=user.user,
        message=message.to_slack(),
        response_url=user.fake.response_url(),
    )


def the_state(bot: Bot, fake: FakeSlack, users: list[SlackUser]) -> object:
    """Everything a request could change: the Slack calls made, the sessions, the runs."""
    service: Services = bot.service
    sessions = []
    for user in users:
        stored = service.store.get(user.key)
        assert stored is not None
        sessions.append((stored.session.status, dict(stored.session.answers), stored.updated_at))
    runs = service.runs.runs.for_owner(USER_ID, TEAM_ID) if service.runs else []
    return (
        [(call.method, call.params) for call in fake.calls()],
        fake.responses(),
        service.store.count_by_status(),
        sessions,
        [(run.id, run.state, run.job_id) for run in runs],
    )


@pytest.fixture
def served(make_bot: BotFactory) -> Iterator[Bot]:
    bot = a_bot(make_bot)
    with BotServer(web_for(bot.app, bot.service)) as server:
        bot.http_url = f"{server.base_url}/slack/events"
        yield bot


def test_malformed_signed_requests_are_answered_200_and_change_nothing(
    served: Bot, fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    bot = served
    wizard = SlackUser(bot)
    wizard.command()
    question = wizard.open_question()
    finished, _ = a_finished_run(bot, BASELINE, rewards=[0.1], succeeded=False)
    failure = finished.open_question()
    answer = click_of(wizard, question, "Only logged")
    reply = event_callback(message_event("I want math", thread_ts=wizard.thread))
    command = slash_command(text="list", response_url=fake.response_url())
    rerun = click_of(finished, failure, "Run again with changes")
    result = block_actions(
        RESULT_ACTIONS[0],
        f"{TEAM_ID}|{CHANNEL_ID}|{finished.thread}",
        message_ts=failure.ts,
        thread_ts=finished.thread,
        response_url=fake.response_url(),
    )
    try_modal = {"id": "V0TRY", "callback_id": TRY_MODAL, "private_metadata": "1 C0CHAN"}
    try_modal |= {"blocks": [], "state": {"values": {}}}
    modal = view_submission(try_modal, {})
    home = app_home_opened()

    malformed: dict[str, SignedRequest] = {
        "command without a user": resigned(command, drop("user_id")),
        "command without a channel": resigned(command, drop("channel_id")),
        "command with a dict as text": sign(
            json.dumps({**command.payload(), "text": {"a": 1}}), content_type=JSON
        ),
        "command with a list as user": sign(
            json.dumps({**command.payload(), "user_id": ["U1"]}), content_type=JSON
        ),
        "click without a user": resigned(answer, drop("user")),
        "click with a string as user": resigned(answer, put("U0USER", "user")),
        "click with a user without id": resigned(answer, drop("user", "id")),
        "click with a dict as value": resigned(answer, put({"v": 1}, "actions", 0, "value")),
        "click with a string as message": resigned(answer, put("hello", "message")),
        "click with a string as channel": resigned(answer, put("C0CHAN", "channel")),
        "click with no actions": resigned(answer, put([], "actions")),
        "click with a string as action": resigned(answer, put(["x"], "actions")),
        "result click without a user": resigned(result, drop("user")),
        "result click with a dict as value": resigned(result, put({}, "actions", 0, "value")),
        "run click without a user": resigned(rerun, drop("user")),
        "run click with a list as value": resigned(rerun, put([1], "actions", 0, "value")),
        "modal without a user": resigned(modal, drop("user")),
        "modal with a list as state": resigned(modal, put([], "view", "state")),
        "modal with a dict as metadata": resigned(modal, put({}, "view", "private_metadata")),
        "App Home without a user": resigned(home, drop("event", "user")),
        "App Home with a dict as user": resigned(home, put({"id": "U1"}, "event", "user")),
        "reply with a dict as text": resigned(reply, put({"t": 1}, "event", "text")),
        "reply with a dict as thread": resigned(reply, put({}, "event", "thread_ts")),
        "reply with a list as channel": resigned(reply, put([], "event", "channel")),
        "reply with a dict as files": resigned(reply, put({"f": 1}, "event", "files")),
        "reply with strings as files": resigned(reply, put(["f"], "event", "files")),
        "edit with a string as message": sign(
            json.dumps(
                {
                    **reply.payload(),
                    "event": {
                        **message_changed_event(reply.payload()["event"], "x"),
                        "message": "x",
                    },
                }
            ),
            content_type=JSON,
        ),
        "event that is a string": resigned(reply, put("message", "event")),
        "tokens revoked with a list as tokens": resigned(
            reply, put({"type": "tokens_revoked", "tokens": ["xoxb"]}, "event")
        ),
    }
    wizard.settle()
    finished.settle()
    users = [wizard, finished]
    before = the_state(bot, fake, users)

    wrong: dict[str, str] = {}
    for name, request in malformed.items():
        caplog.clear()
        with caplog.at_level(logging.INFO):
            status = request.post(bot.http_url or "").status
            wizard.settle()
        if status != 200:
            wrong[name] = f"answered {status}"
        elif the_state(bot, fake, users) != before:
            wrong[name] = "changed something"
            before = the_state(bot, fake, users)
        elif not any("malformed" in record.getMessage() for record in caplog.records):
            wrong[name] = "not logged as malformed"
    assert wrong == {}

    # The well-formed requests they were made from still work.
    assert answer.post(bot.http_url or "").status == 200
    wizard.settle()
    assert the_state(bot, fake, users) != before


def test_a_body_that_is_not_an_object_is_a_bad_request_not_a_crash(
    served: Bot, fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    """Bolt reads the body before it checks the signature, and cannot read a JSON list or a
    number: nothing Slack sends. 400, logged, nothing done."""
    bot = served
    for body, content_type in (("[1, 2]", JSON), ("7", JSON), ("payload=%5B%5D", FORM)):
        caplog.clear()
        with caplog.at_level(logging.INFO):
            assert sign(body, content_type=content_type).post(bot.http_url or "").status == 400
        assert any("not an object" in record.getMessage() for record in caplog.records)
    assert [call.method for call in fake.calls() if call.method != "auth.test"] == []
