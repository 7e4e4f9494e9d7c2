"""What /healthz checks: the database answers, and in Socket Mode the socket is connected; and
what it tells without judging: whether users' code is sandboxed here."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.exc import SQLAlchemyError

from isolation.sandbox import Sandbox
from storage.database import database_problem
from storage.sql_store import SqlStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Health:
    """Each check's verdict ("ok", or what is wrong); healthy when every one is "ok"."""

    checks: dict[str, str]
    facts: dict[str, str] = field(default_factory=dict[str, str])
    """Said, not judged (the bot is healthy without a sandbox: it then runs no user code)."""

    @property
    def ok(self) -> bool:
        return all(verdict == "ok" for verdict in self.checks.values())

    def text(self) -> str:
        """One `name: verdict` line per check, then one per fact."""
        lines = {**self.checks, **self.facts}
        return "".join(f"{name}: {verdict}\n" for name, verdict in lines.items())


class HealthCheck:
    """The bot's probe: `store` must answer a query; `socket_connected`, when given (Socket
    Mode), must say the WebSocket to Slack is open."""

    def __init__(
        self,
        store: SqlStore,
        socket_connected: Callable[[], bool] | None = None,
        *,
        sandbox: Sandbox | None = None,
    ) -> None:
        self._store = store
        self._socket_connected = socket_connected
        self._sandbox = sandbox

    def __call__(self) -> Health:
        checks: dict[str, str] = {}
        try:
            self._store.ping()
            checks["database"] = "ok"
        except SQLAlchemyError as error:
            checks["database"] = database_problem(error)
            log.warning("health: the database does not answer: %s", checks["database"])
        if self._socket_connected is not None:
            checks["socket"] = "ok" if self._socket_connected() else "not connected to Slack"
        facts = {}
        if self._sandbox is not None:
            facts["sandbox"] = self._sandbox.description
        return Health(checks, facts)
