"""The app leaving a workspace (`app_uninstalled`, `tokens_revoked`), the workspaces requests
come from (their enterprise, for org-wide installs), and the Home tab's link buttons."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App, BoltContext, BoltResponse

from bot.services import Services
from bot.slack.listeners.guard import AfterAck
from bot.slack.listeners.payloads import Malformed, optional_list, value_at
from bot.wizard.home import OPEN_THREAD_ACTION
from bot.workspaces.clients import SlackClients

UNINSTALLED = "app_uninstalled"
BOT_TOKEN_REVOKED = "tokens_revoked"


def register(app: App, services: Services, after_ack: AfterAck, clients: SlackClients) -> None:
    """The install lifecycle on `app`; `clients` forget a team's client when its token goes."""
    seen: set[tuple[str, str]] = set()

    @app.middleware
    def note_enterprise(context: BoltContext, next: Callable[[], BoltResponse]) -> BoltResponse:
        """Remember which organization a team belongs to, once per process: an org-wide
        install's token is found by its enterprise, and the outbox only knows the team."""
        team, enterprise = context.team_id, context.enterprise_id
        if team and enterprise and (team, enterprise) not in seen:
            services.workspaces.seen(team, enterprise, bool(context.is_enterprise_install))
            seen.add((team, enterprise))
        return next()

    def left(context: BoltContext, reason: str) -> None:
        team = context.team_id or context.enterprise_id
        if not team:
            return
        # Either way every stored copy of the team's tokens goes (OAuth): a revoked bot token is
        # dead, and it was kept in the installation rows too (slack_sdk's own listener for
        # tokens_revoked deletes only the bot rows).
        clients.tokens_gone(
            context.team_id, context.enterprise_id, bool(context.is_enterprise_install)
        )
        services.expiry.workspace_removed(team, context.enterprise_id, reason)

    @app.event(UNINSTALLED)
    def on_uninstalled(context: BoltContext) -> None:
        after_ack.submit(context, "event", lambda: left(context, UNINSTALLED), team=context.team_id)

    @app.event(BOT_TOKEN_REVOKED)
    def on_tokens_revoked(event: dict[str, Any], context: BoltContext) -> None:
        tokens = value_at(event, "tokens")
        if not isinstance(tokens, dict):
            raise Malformed("tokens_revoked without its tokens")
        users, bots = optional_list(tokens, "oauth"), optional_list(tokens, "bot")
        if not all(isinstance(user, str) for user in users):
            raise Malformed("revoked user tokens that are not user ids")
        store = app.installation_store
        for user in users:  # user tokens: the bot asks for none, but forget
            if store is not None:
                store.delete_installation(
                    enterprise_id=context.enterprise_id, team_id=context.team_id, user_id=user
                )
        if bots:
            after_ack.submit(
                context, "event", lambda: left(context, BOT_TOKEN_REVOKED), team=context.team_id
            )

    @app.action(re.compile(rf"^{OPEN_THREAD_ACTION}:"))
    def on_open_thread(ack: Ack) -> None:
        ack()  # a link button: Slack opens the link; the click only needs its ack
