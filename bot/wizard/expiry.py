"""Wizards that end unfinished: an idle one expires, and leaving a workspace (uninstalled, or
its bot token revoked) stops its wizards. A later reply is told which of the two happened.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from bot.delivery.effects import Post, Retire
from bot.delivery.outbox import Outbox
from bot.process.shards import ALONE, Shard
from bot.slack.blocks import text_message
from bot.slack.records import SlackRecords
from bot.workspaces.store import Workspaces
from storage.sessions import SessionKey, SessionStore, StoredSession

log = logging.getLogger(__name__)

DELIVERIES_KEPT = timedelta(days=1)
"""Longer than Slack retries a delivery."""
EXPIRED = "This wizard expired. Start a new one with `/train-rl` or `/train-sft`."
STOPPED = (
    "This wizard stopped when artbot was removed from this workspace "
    "(uninstalled, or its token revoked). Start a new one with `/train-rl` or `/train-sft`."
)


class Expiry:
    """Expires idle wizards, stops those of a workspace the app left, and says which ended a
    wizard."""

    def __init__(
        self,
        store: SessionStore,
        records: SlackRecords,
        outbox: Outbox,
        workspaces: Workspaces | None = None,
    ) -> None:
        self.store = store
        self.records = records
        self.outbox = outbox
        self.workspaces = workspaces
        """The workspaces served, and whether the app left them (None: not recorded)."""

    def ended(self, stored: StoredSession) -> str:
        """Why an expired wizard goes no further: idle, or stopped when the app left."""
        workspace = self.workspaces.get(stored.key.team) if self.workspaces else None
        if (
            workspace is not None
            and workspace.removed_at is not None
            and stored.expired_at is not None
            and stored.expired_at >= workspace.removed_at
        ):
            return STOPPED
        return EXPIRED

    def expire_idle(self, older_than: timedelta, shard: Shard = ALONE) -> list[SessionKey]:
        """Expire sessions (of `shard`'s channels) idle for longer than `older_than`, with a note
        in each thread (through the outbox: a team the app left gives it up)."""
        expired = self.store.expire_idle(older_than, None if shard.alone else shard.owns)
        hours = older_than.total_seconds() / 3600
        said = text_message(
            f":zzz: This wizard expired after {hours:g} hours without an answer. "
            "Start a new one with `/train-rl` or `/train-sft`."
        )
        for key in expired:  # its open question (or result card) loses its buttons
            self.outbox.enqueue(key, [Retire(None, "Expired"), Post(said)])
        return expired

    def tidy(self, idle: timedelta, shard: Shard = ALONE) -> None:
        """Expire idle sessions of `shard` (with a note in their threads) and forget old
        delivery ids."""
        self.expire_idle(idle, shard)
        self.records.forget_deliveries(DELIVERIES_KEPT)
        self.outbox.forget_delivered(DELIVERIES_KEPT)

    def workspace_removed(self, team: str, enterprise: str | None, reason: str) -> list[SessionKey]:
        """The app was uninstalled from `team` or its bot token revoked: the workspace is
        marked, its open wizards stop (a later reply is told why) and what the outbox still had
        to say there is given up. The stopped wizards' keys."""
        if self.workspaces is not None:
            self.workspaces.removed(team, enterprise, reason)
        stopped = self.store.expire_team(team)
        given_up = self.outbox.give_up_team(team, reason)
        log.info(
            "left workspace %s (%s): %d wizards stopped, %d outbox effects given up",
            team,
            reason,
            len(stopped),
            given_up,
        )
        return stopped
