"""The Web API client that acts in a team, for what posts outside a request (the outbox worker,
the run follower, expiry): with one workspace the one client, with OAuth one per team with its
installation's bot token. Listeners get theirs from Bolt for each request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.process.work_slots import WorkSlots, YieldingWebClient
from bot.slack.web_api import KeepAliveWebClient
from bot.workspaces.installations import InstallationStore
from bot.workspaces.store import Workspaces

ClientFor = Callable[[str], WebClient]
"""The Web API client that acts in a team (its installation's bot token)."""


class NotInstalled(SlackApiError):
    """The app has no installation (or no bot token) in the team: nothing can be said there.
    A SlackApiError whose `error` is `not_installed`, so that callers that give up on Slack's
    refusals give up on this one too."""

    def __init__(self, team: str) -> None:
        super().__init__(
            f"artbot is not installed in {team}", {"ok": False, "error": "not_installed"}
        )
        self.team = team


CLIENT_CHECKED_EVERY_S = 60.0
"""How long a cached client is used before its team's token is read again. A (re)install or an
uninstall drops the cached client at once in the process that handled it; another worker of
`artbot serve --workers` learns of it from the database within this time."""


class SlackClients:
    """`client_for(team)`: one Web API client per team, with its installation's bot token,
    cached (its token read again every CLIENT_CHECKED_EVERY_S); or, with one workspace, the one
    client for every team."""

    def __init__(
        self,
        make_client: Callable[[str | None], WebClient],
        *,
        single: WebClient | None = None,
        installations: InstallationStore | None = None,
        workspaces: Workspaces | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (single is None) == (installations is None):
            raise ValueError("one client (one workspace) or an installation store (OAuth)")
        self._make = make_client
        self._single = single
        self._installations = installations
        self._workspaces = workspaces
        self._cache: dict[str, tuple[WebClient, float]] = {}
        """Per team: its client and when its token was last read."""
        self._clock = clock
        self._lock = threading.Lock()
        if installations is not None:
            installations.on_saved.append(self.forget)

    def client_for(self, team: str) -> WebClient:
        """The client that acts in `team`; NotInstalled when the app has no bot token there."""
        if self._single is not None:
            return self._single
        now = self._clock()
        with self._lock:
            cached = self._cache.get(team)
        if cached is not None and now - cached[1] < CLIENT_CHECKED_EVERY_S:
            return cached[0]
        token = self._bot_token(team)
        if token is None:
            self.forget(team)
            raise NotInstalled(team)
        client = cached[0] if cached is not None and cached[0].token == token else None
        client = client or self._make(token)
        with self._lock:
            self._cache[team] = (client, now)
        return client

    def forget(self, team: str) -> None:
        """Drop the cached client of `team` (reinstalled, uninstalled, token revoked)."""
        with self._lock:
            self._cache.pop(team, None)

    def tokens_gone(
        self, team: str | None, enterprise: str | None, enterprise_install: bool = False
    ) -> None:
        """The app was uninstalled from `team` or its bot token revoked: every stored copy of
        its tokens is deleted (OAuth) and its cached client dropped."""
        if self._installations is not None:
            self._installations.delete_team(
                enterprise_id=enterprise, team_id=team, enterprise_install=enterprise_install
            )
        if team or enterprise:
            self.forget(team or enterprise or "")

    def _bot_token(self, team: str) -> str | None:
        assert self._installations is not None
        workspace = self._workspaces.get(team) if self._workspaces is not None else None
        if workspace is not None and not workspace.active:
            return None
        enterprise = workspace.enterprise if workspace is not None else None
        bot = self._installations.find_bot(
            enterprise_id=enterprise,
            team_id=team,
            is_enterprise_install=workspace.enterprise_install if workspace else False,
        )
        return bot.bot_token if bot is not None else None


def web_client_maker(
    slots: WorkSlots | None = None, **options: Any
) -> Callable[[str | None], WebClient]:
    """Clients with `options` (base_url, retry handlers) and the token given, on kept-alive
    connections (`bot.slack.web_api`); given `slots`,
    each call gives its thread's work slot back while Slack answers (`YieldingWebClient`)."""
    if slots is not None:
        return lambda token: YieldingWebClient(slots, token=token, **options)
    return lambda token: KeepAliveWebClient(token=token, **options)
