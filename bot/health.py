"""What /healthz checks: the database answers, and in Socket Mode the socket is connected."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from storage.database import database_problem
from storage.sql_store import SqlStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Health:
    """Each check's verdict ("ok", or what is wrong); healthy when every one is "ok"."""

    checks: dict[str, str]

    @property
    def ok(self) -> bool:
        return all(verdict == "ok" for verdict in self.checks.values())

    def text(self) -> str:
        """One `name: verdict` line per check."""
        return "".join(f"{name}: {verdict}\n" for name, verdict in self.checks.items())


class HealthCheck:
    """The bot's probe: `store` must answer a query; `socket_connected`, when given (Socket
    Mode), must say the WebSocket to Slack is open."""

    def __init__(self, store: SqlStore, socket_connected: Callable[[], bool] | None = None) -> None:
        self._store = store
        self._socket_connected = socket_connected

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
        return Health(checks)
