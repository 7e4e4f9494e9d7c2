"""The Slack app manifests declare exactly what bot/slack/listeners/ listens to and what the bot
calls.

Three sources of truth are compared with both manifests:
- the listeners `create_app` registers (recorded as they are registered, and cross-checked
  with Bolt's own list), which fix the slash commands, the event subscriptions and interactivity;
- the Web API methods bot/ calls on a client (read from the source), which fix the scopes;
- Bolt itself: every subscribed event and the command, sent as signed requests, get a listener
  (Bolt answers 404 to a request no listener takes).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from slack_bolt import App
from slack_sdk import WebClient

from bot.app import REDIRECT_PATH, create_app
from bot.services import build_services
from bot.settings import load_settings
from bot.slack.blocks import TRY_MODAL
from bot.wizard.agent_view import SUGGESTED_PROMPTS
from bot.workspaces.installations import BOT_SCOPES
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import (
    SignedRequest,
    app_home_opened,
    app_mention_event,
    block_actions,
    event_callback,
    message_event,
    slash_command,
    view_submission,
)
from tests.fakes.workspace import BOT_TOKEN, SIGNING_SECRET

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = {
    "http": ROOT / "manifests" / "slack-app.http.yaml",
    "socket-mode": ROOT / "manifests" / "slack-app.socket-mode.yaml",
}
REQUEST_URL = "https://YOUR-HOST/slack/events"

# What an event type registered with Bolt needs in the manifest: its subscriptions and the
# scopes those subscriptions need. `message` is one listener for four subscriptions (one per
# kind of conversation); the bot answers in threads wherever it is.
SUBSCRIPTIONS_BY_EVENT: dict[str, dict[str, str | None]] = {
    "message": {
        "message.channels": "channels:history",
        "message.groups": "groups:history",
        "message.im": "im:history",
        "message.mpim": "mpim:history",
    },
    "app_home_opened": {"app_home_opened": None},
    "app_mention": {"app_mention": "app_mentions:read"},
    "app_uninstalled": {"app_uninstalled": None},
    "tokens_revoked": {"tokens_revoked": None},
}
# A message event's channel_type for each subscription, to send one of each through Bolt.
CHANNEL_TYPES = {
    "message.channels": "channel",
    "message.groups": "group",
    "message.im": "im",
    "message.mpim": "mpim",
}

# The bot token scope each Web API method the bot calls needs (None: no scope).
# A method missing here fails the test: add it with its scope, and the scope to the manifests.
SCOPE_BY_METHOD: dict[str, str | None] = {
    "auth_test": None,
    "chat_postMessage": "chat:write",
    "chat_postEphemeral": "chat:write",
    "chat_update": "chat:write",
    "chat_delete": "chat:write",
    "chat_getPermalink": None,
    # The outbox reads a thread after a crash; the manifests ask for all four *:history.
    "conversations_replies": "channels:history",
    "views_publish": None,  # the Home tab feature is what it needs
    "views_open": None,
    "views_update": None,
    "files_upload_v2": "files:write",
    "files_getUploadURLExternal": "files:write",
    "files_completeUploadExternal": "files:write",
    "files_info": "files:read",
    "reactions_add": "reactions:write",
    "users_info": "users:read",
    # Since 2026-03 a status takes chat:write (in channel threads too); titles are the agent
    # view's own.
    "assistant_threads_setStatus": "chat:write",
    "assistant_threads_setTitle": "assistant:write",
}
# Registration methods whose manifest side this test knows. Another one (shortcut,
# options, function...) needs manifest entries this test does not check yet: teach it first.
KNOWN_REGISTRATIONS = ("command", "event", "action", "view")
INTERACTIVE_REGISTRATIONS = ("action", "view")
"""Button clicks and modal submissions both come through the manifest's interactivity."""
RECORDED_REGISTRATIONS = (
    *KNOWN_REGISTRATIONS,
    "message",
    "shortcut",
    "global_shortcut",
    "message_shortcut",
    "block_action",
    "attachment_action",
    "dialog_submission",
    "dialog_cancellation",
    "view_submission",
    "view_closed",
    "options",
    "block_suggestion",
    "dialog_suggestion",
    "function",
)


@dataclass
class Registrations:
    """What `create_app` registered on its Bolt app, by registration method."""

    calls: list[tuple[str, Any]] = field(default_factory=list)

    def of(self, kind: str) -> list[Any]:
        return [target for name, target in self.calls if name == kind]

    @property
    def commands(self) -> set[str]:
        return set(self.of("command"))

    @property
    def event_types(self) -> set[str]:
        return {
            target if isinstance(target, str) else target.get("type") for target in self.of("event")
        }


@dataclass
class RunningBot:
    app: App
    registrations: Registrations
    fake: FakeSlack


@pytest.fixture
def bot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[RunningBot]:
    registrations = Registrations()

    def recording(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def register(self: App, *args: Any, **kwargs: Any) -> Any:
            target = args[0] if args else next(iter(kwargs.values()), None)
            registrations.calls.append((name, target))
            return original(self, *args, **kwargs)

        return register

    for name in RECORDED_REGISTRATIONS:
        monkeypatch.setattr(App, name, recording(name, getattr(App, name)))
    with FakeSlack() as fake:
        settings = load_settings(
            {
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_API_URL": fake.base_url,
                "ARTBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'artbot.db'}",
                "ARTBOT_SCRIPTS_DIR": str(tmp_path / "scripts"),
                "ARTBOT_DRYRUN": "false",
            }
        )
        service = build_services(settings, dryrun=None)
        app = create_app(settings, service)
        yield RunningBot(app, registrations, fake)
        service.store.close()


def load(path: Path) -> dict[str, Any]:
    manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(manifest, dict), f"{path.name}: not a YAML mapping"
    return manifest


def subscriptions(manifest: dict[str, Any]) -> list[str]:
    return list(manifest["settings"]["event_subscriptions"]["bot_events"])


def required_subscriptions(registrations: Registrations) -> dict[str, str | None]:
    required: dict[str, str | None] = {}
    for event_type in registrations.event_types:
        assert event_type in SUBSCRIPTIONS_BY_EVENT, (
            f"bot/slack/listeners/ listen to {event_type!r}: "
            "add its subscriptions and scopes to this test"
        )
        required.update(SUBSCRIPTIONS_BY_EVENT[event_type])
    return required


def called_methods() -> set[str]:
    """Web API methods called on a client anywhere in bot/ (`client.x(...)`, `app.client.x(...)`).

    Only WebClient's methods count: bot/ has other clients (the runner's) named `client` too.
    """
    web_api = {name for name in dir(WebClient) if not name.startswith("_")}
    methods: set[str] = set()
    for path in (ROOT / "bot").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
            if name == "client" and node.func.attr in web_api:
                methods.add(node.func.attr)
    return methods


def downloads_user_files() -> bool:
    # Files dropped into a thread are fetched from `url_private` with the bot token: files:read.
    return any(
        "url_private" in path.read_text(encoding="utf-8") for path in (ROOT / "bot").rglob("*.py")
    )


def required_scopes(registrations: Registrations) -> set[str]:
    methods = called_methods()
    unknown = sorted(methods - SCOPE_BY_METHOD.keys())
    assert not unknown, (
        f"bot/ calls {unknown}: add the scopes they need to SCOPE_BY_METHOD and the manifests"
    )
    scopes = {scope for method in methods if (scope := SCOPE_BY_METHOD[method])}
    scopes |= {scope for scope in required_subscriptions(registrations).values() if scope}
    if registrations.commands:
        scopes.add("commands")
    if downloads_user_files():
        scopes.add("files:read")
    return scopes


# --- the manifests against the code ---------------------------------------------------------


def test_the_recorded_registrations_are_every_listener_bolt_has(bot: RunningBot) -> None:
    kinds = {name for name, _ in bot.registrations.calls}
    assert kinds <= set(KNOWN_REGISTRATIONS), (
        f"bot/slack/listeners/ register {sorted(kinds - set(KNOWN_REGISTRATIONS))}: declare them "
        "in the manifests and teach this test to check them"
    )
    assert len(bot.registrations.calls) == len(bot.app._listeners)  # pyright: ignore[reportPrivateUsage]
    assert bot.registrations.commands == {"/train-rl", "/train-sft"}
    assert bot.registrations.event_types == {
        "message",
        "app_home_opened",
        "app_uninstalled",
        "tokens_revoked",
    }
    assert bot.registrations.of("action"), "the wizard's buttons have listeners"


@pytest.mark.parametrize("mode", MANIFESTS)
def test_slash_commands_are_the_registered_ones(bot: RunningBot, mode: str) -> None:
    manifest = load(MANIFESTS[mode])
    commands = manifest["features"]["slash_commands"]
    assert {c["command"] for c in commands} == bot.registrations.commands
    assert len(commands) == len(bot.registrations.commands)
    hints = {c["command"]: c["usage_hint"] for c in commands}
    assert hints == {
        "/train-rl": "[what should the agent get better at]",
        "/train-sft": "[what the model should learn]",
    }
    for command in commands:
        assert command["should_escape"] is False
        assert 0 < len(command["description"]) <= 100


@pytest.mark.parametrize("mode", MANIFESTS)
def test_event_subscriptions_are_exactly_what_the_listeners_need(
    bot: RunningBot, mode: str
) -> None:
    events = subscriptions(load(MANIFESTS[mode]))
    assert len(events) == len(set(events)), "an event is subscribed twice"
    assert set(events) == set(required_subscriptions(bot.registrations))
    assert "app_mention" not in events  # no listener: a mention would only get a 404


@pytest.mark.parametrize("mode", MANIFESTS)
def test_bot_scopes_are_exactly_what_the_bot_uses(bot: RunningBot, mode: str) -> None:
    scopes = load(MANIFESTS[mode])["oauth_config"]["scopes"]["bot"]
    assert len(scopes) == len(set(scopes)), "a scope is listed twice"
    assert set(scopes) == required_scopes(bot.registrations)
    # The bot acts as itself only: no user token, so no user scopes.
    assert "user" not in load(MANIFESTS[mode])["oauth_config"]["scopes"]


@pytest.mark.parametrize("mode", MANIFESTS)
def test_interactivity_and_the_home_tab_follow_the_listeners(bot: RunningBot, mode: str) -> None:
    manifest = load(MANIFESTS[mode])
    assert manifest["settings"]["interactivity"]["is_enabled"] is any(
        bot.registrations.of(kind) for kind in INTERACTIVE_REGISTRATIONS
    )
    home = manifest["features"]["app_home"]
    assert home["home_tab_enabled"] is ("app_home_opened" in bot.registrations.event_types)
    # The messages tab is where /train-rl and its thread work in a DM with the bot (message.im).
    assert home["messages_tab_enabled"] is True
    assert home["messages_tab_read_only_enabled"] is False
    assert manifest["features"]["bot_user"]["display_name"]


def test_http_mode_sends_everything_to_the_one_bolt_endpoint() -> None:
    manifest = load(MANIFESTS["http"])
    settings = manifest["settings"]
    assert settings["socket_mode_enabled"] is False
    assert settings["event_subscriptions"]["request_url"] == REQUEST_URL
    assert settings["interactivity"]["request_url"] == REQUEST_URL
    assert all(c["url"] == REQUEST_URL for c in manifest["features"]["slash_commands"])
    from bot.process.serve import EVENTS_PATH

    assert REQUEST_URL.endswith(EVENTS_PATH)


def test_socket_mode_has_no_urls() -> None:
    manifest = load(MANIFESTS["socket-mode"])
    settings = manifest["settings"]
    assert settings["socket_mode_enabled"] is True
    assert "request_url" not in settings["event_subscriptions"]
    assert "request_url" not in settings["interactivity"]
    assert all("url" not in c for c in manifest["features"]["slash_commands"])


def test_the_two_manifests_differ_only_in_transport() -> None:
    def without_transport(manifest: dict[str, Any]) -> dict[str, Any]:
        settings = manifest["settings"]
        settings.pop("socket_mode_enabled")
        settings["event_subscriptions"].pop("request_url", None)
        settings["interactivity"].pop("request_url", None)
        for command in manifest["features"]["slash_commands"]:
            command.pop("url", None)
        return manifest

    http, socket = (without_transport(load(path)) for path in MANIFESTS.values())
    assert http == socket


@pytest.mark.parametrize("mode", MANIFESTS)
def test_display_information_fits_slacks_limits(mode: str) -> None:
    info = load(MANIFESTS[mode])["display_information"]
    assert 0 < len(info["name"]) <= 35
    assert len(info["description"]) <= 140
    assert 175 <= len(info["long_description"]) <= 4000
    assert re.fullmatch(r"#[0-9a-fA-F]{6}", info["background_color"])


# --- what Slack would send, through Bolt ----------------------------------------------------


def test_every_subscribed_event_and_the_command_reach_a_listener(bot: RunningBot) -> None:
    """Bolt answers 404 to a request no listener takes; the manifest's requests all get 200."""
    requests: dict[str, SignedRequest] = {
        "/train-rl": slash_command(text="help", response_url=bot.fake.response_url())
    }
    for subscription in subscriptions(load(MANIFESTS["http"])):
        if subscription in CHANNEL_TYPES:
            event = message_event("hello", channel_type=CHANNEL_TYPES[subscription])
            requests[subscription] = event_callback(event)
        elif subscription == "app_home_opened":
            requests[subscription] = app_home_opened()
        elif subscription == "app_uninstalled":
            requests[subscription] = event_callback({"type": "app_uninstalled"})
        elif subscription == "tokens_revoked":
            revoked = {"type": "tokens_revoked", "tokens": {"oauth": ["U0USER"], "bot": []}}
            requests[subscription] = event_callback(revoked)
        else:
            raise AssertionError(f"no request to send for {subscription!r}: add one here")
    requests["interactivity"] = block_actions(
        "wizard_answer:1", "not-ours", message_ts="1700000000.000100"
    )
    # A modal's submission comes the same way (the Try it modal, of a run that is not there).
    modal = {"id": "V0MODAL", "type": "modal", "callback_id": TRY_MODAL, "private_metadata": "0"}
    requests["interactivity: a modal"] = view_submission(modal, {})
    statuses = {
        name: bot.app.dispatch(request.as_bolt_request()).status
        for name, request in requests.items()
    }
    assert statuses == dict.fromkeys(requests, 200)
    # What the manifest leaves out would reach no listener.
    mention = event_callback(app_mention_event("hi"))
    assert bot.app.dispatch(mention.as_bolt_request()).status == 404
    # Let the listeners that work after the ack finish before the database goes away.
    bot.fake.wait_for(lambda f: bool(f.calls("views.publish")) and bool(f.responses()))


@pytest.mark.parametrize("mode", sorted(MANIFESTS))
def test_the_manifests_ask_for_the_scopes_the_install_link_asks_for(mode: str) -> None:
    manifest = load(MANIFESTS[mode])
    assert sorted(manifest["oauth_config"]["scopes"]["bot"]) == sorted(BOT_SCOPES)
    assert manifest["oauth_config"]["redirect_urls"] == [
        REQUEST_URL.replace("/slack/events", REDIRECT_PATH)
    ]
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True


@pytest.mark.parametrize("mode", sorted(MANIFESTS))
def test_the_agent_view_offers_the_prompts_the_bot_understands(mode: str) -> None:
    agent_view = load(MANIFESTS[mode])["features"]["agent_view"]
    assert "assistant_view" not in load(MANIFESTS[mode])["features"]  # new apps: agent_view only
    assert 0 < len(agent_view["agent_description"]) <= 300  # Slack's limit
    offered = [(p["title"], p["message"]) for p in agent_view["suggested_prompts"]]
    assert offered == [(p.title, p.message) for p in SUGGESTED_PROMPTS]
