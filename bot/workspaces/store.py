"""The workspaces the bot serves (`artbot_workspaces`): each team's enterprise (where Slack gives
one) and, once the app was uninstalled or its bot token revoked, when and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Engine, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from bot.workspaces.token_keys import TokenCipher
from storage.database import KEY_PART_MAX, UTCDateTime
from storage.sql_store import SqlStore

KEY = KEY_PART_MAX


class Base(DeclarativeBase):
    pass


metadata = Base.metadata
"""`artbot_workspaces`; bot.workspaces.installations adds slack_sdk's tables to it."""


class WorkspaceRow(Base):
    __tablename__ = "artbot_workspaces"

    team: Mapped[str] = mapped_column(String(KEY), primary_key=True)
    enterprise: Mapped[str | None] = mapped_column(String(KEY))
    """The Enterprise Grid organization, where Slack gives one."""
    enterprise_install: Mapped[bool] = mapped_column(Boolean, default=False)
    """Installed org-wide: the token is the organization's, found by `enterprise`."""
    installed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the app was last uninstalled or its bot token revoked (kept after a reinstall)."""
    removed_reason: Mapped[str | None] = mapped_column(String(32))
    active: Mapped[bool] = mapped_column(Boolean, default=True)


@dataclass(frozen=True)
class Workspace:
    team: str
    enterprise: str | None
    enterprise_install: bool
    active: bool
    removed_at: datetime | None
    removed_reason: str | None


class Workspaces(SqlStore):
    """The teams the bot serves: their enterprise, and whether the app is still installed; and
    the cipher of their stored tokens (None: no key, as with one workspace)."""

    def __init__(
        self, engine: Engine, *, token_cipher: TokenCipher | None = None, **options: Any
    ) -> None:
        super().__init__(engine, **options)
        self.token_cipher = token_cipher

    @property
    def engine(self) -> Engine:
        """The engine this store uses (its schema applied): slack_sdk's stores share it."""
        return self._engine

    def get(self, team: str) -> Workspace | None:
        with self._transaction() as orm:
            row = orm.get(WorkspaceRow, team)
            return _workspace(row) if row is not None else None

    def seen(self, team: str, enterprise: str | None, enterprise_install: bool = False) -> None:
        """A request came from `team`: remember its enterprise (for tokens found by it)."""
        with self._transaction() as orm:
            row = orm.get(WorkspaceRow, team)
            if row is None:
                orm.add(
                    WorkspaceRow(
                        team=team,
                        enterprise=enterprise,
                        enterprise_install=enterprise_install,
                        active=True,
                    )
                )
            elif enterprise is not None and row.enterprise != enterprise:
                row.enterprise = enterprise

    def installed(self, team: str, enterprise: str | None, enterprise_install: bool) -> None:
        """An installation was saved: the team is served (again)."""
        now = self.now()
        with self._transaction() as orm:
            row = orm.get(WorkspaceRow, team)
            if row is None:
                row = WorkspaceRow(team=team)
                orm.add(row)
            row.enterprise = enterprise
            row.enterprise_install = enterprise_install
            row.installed_at = now
            row.active = True

    def removed(self, team: str, enterprise: str | None, reason: str) -> datetime:
        """The app was uninstalled from `team` or its bot token revoked: marked, not deleted."""
        now = self.now()
        with self._transaction() as orm:
            row = orm.get(WorkspaceRow, team)
            if row is None:
                row = WorkspaceRow(team=team, enterprise=enterprise, enterprise_install=False)
                orm.add(row)
            row.active = False
            row.removed_at = now
            row.removed_reason = reason
        return now


def _workspace(row: WorkspaceRow) -> Workspace:
    return Workspace(
        row.team,
        row.enterprise,
        bool(row.enterprise_install),
        bool(row.active),
        row.removed_at,
        row.removed_reason,
    )
