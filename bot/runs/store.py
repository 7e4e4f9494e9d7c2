"""Approved scripts on their way through the runner: the run table and its store.

One row per run, with the job's event cursor: a restarted bot resumes following each job where it
stopped. The store returns the rows themselves, detached after their transaction.

What Slack sees of a run is its `public_id` (buttons, the modal, `/train-rl runs`, messages), 12
random characters, never the row's sequential id; and a run named from Slack is found by its
team and public id together (`RunRef`): a click or command from another workspace names nothing.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Dialect,
    Engine,
    Index,
    Integer,
    String,
    Table,
    TypeDecorator,
    select,
    update,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedAsDataclass, mapped_column

from storage.database import KEY_PART_MAX, JsonText, UTCDateTime
from storage.sessions import AlsoWrite, SessionKey
from storage.sql_store import SqlStore, utc_now

ACTIVE_STATES = (
    "submitting",
    "waiting_for_runner",
    "queued",
    "starting",
    "running",
    "stalled",  # running, and the runner said it stalled (bot.runs.reporter)
    "restarting",  # a stalled job being stopped, to be resumed in a new job (bot.runs.controls)
    "pausing",  # a job being stopped at its last checkpoint, for *Resume* later (bot.runs.controls)
)
RUNS_LISTED = 20
"""How many of a user's runs `/train-rl runs` shows, newest first."""
PUBLIC_ID_ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz"
"""Digits and lower-case letters, without 0, 1, i, l and o (read back from a screen, typed)."""
PUBLIC_ID_LENGTH = 12
"""31**12 (about 2**59) public ids: not guessed, and short enough to type in a command."""
PUBLIC_ID = re.compile(rf"[{PUBLIC_ID_ALPHABET}]{{{PUBLIC_ID_LENGTH}}}")


def new_public_id() -> str:
    """A run's public id: random, so run references in Slack tell nothing of other runs."""
    return "".join(secrets.choice(PUBLIC_ID_ALPHABET) for _ in range(PUBLIC_ID_LENGTH))


@dataclass(frozen=True)
class RunRef:
    """A run as Slack names it: the workspace the request came from and the public id it
    carries. Only a run of that team with that public id answers to it."""

    team: str
    public_id: str

    @classmethod
    def parse(cls, team: str, text: str) -> RunRef | None:
        """`text` (a button's value, a typed `#id`) as a reference from `team`; None when it
        is not a public id."""
        public_id = text.strip().removeprefix("#").lower()
        if not team or PUBLIC_ID.fullmatch(public_id) is None:
            return None
        return cls(team, public_id)


class JsonList(JsonText):
    """A JSON list in a TEXT column; NULL or an empty string reads as an empty list."""

    cache_ok = True

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        return super().process_result_value(value or "[]", dialect)


class IntegerFlag(TypeDecorator[bool]):
    """A yes/no kept as 0 or 1 in an INTEGER column; Python sees a bool."""

    impl = Integer
    cache_ok = True

    def process_bind_param(self, value: bool | None, dialect: Dialect) -> int | None:
        return None if value is None else int(bool(value))

    def process_result_value(self, value: int | None, dialect: Dialect) -> bool | None:
        return None if value is None else bool(value)


class Base(MappedAsDataclass, DeclarativeBase):
    pass


class Run(Base, kw_only=True):
    """One approved script sent (or being sent) to the runner."""

    __tablename__ = "artbot_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True, init=False)
    """The row's own id, sequential: never shown in Slack (`public_id` is)."""
    approval_id: Mapped[int] = mapped_column(Integer)
    team: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    channel: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    thread: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    owner: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    script_name: Mapped[str] = mapped_column(String(200))
    script_sha256: Mapped[str] = mapped_column(String(64))
    backend: Mapped[str] = mapped_column(String(16))
    args: Mapped[list[str]] = mapped_column("args_json", JsonList, default_factory=list)
    """Command-line arguments of the script (the fix buttons add some)."""
    resume_from_job: Mapped[str | None] = mapped_column(String(64), nullable=True, default=None)
    job_id: Mapped[str | None] = mapped_column(String(64), nullable=True, default=None)
    state: Mapped[str] = mapped_column(String(32))
    cursor: Mapped[int] = mapped_column(Integer, default=0)
    card_ts: Mapped[str | None] = mapped_column(String(64), nullable=True, default=None)
    card_updated_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime(), nullable=True, default=None
    )
    points: Mapped[list[dict[str, Any]]] = mapped_column(
        "points_json", JsonList, default_factory=list
    )
    """[{"step": n, "train": r|null, "val": r|null, "val_metrics": {...}}]: the reward curve for
    the plot; a validated step also keeps its numeric val/ metrics (`val_metrics`, absent on runs
    recorded before it existed), for the before-and-after table."""
    required_env: Mapped[list[str]] = mapped_column(
        "required_env_json", JsonList, default_factory=list
    )
    """The environment variable names the script needs (checked by the runner)."""
    submit_attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime(), nullable=True, default=None
    )
    unreachable_notified: Mapped[bool] = mapped_column(IntegerFlag, default=False)
    warnings_posted: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True, default=None)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True, default=None)
    result: Mapped[dict[str, Any] | None] = mapped_column(
        "result_json", JsonText, nullable=True, default=None
    )
    """What the `succeeded` event said: {"model", "inference_url", "step"} (`try` uses them)."""
    public_id: Mapped[str] = mapped_column(String(PUBLIC_ID_LENGTH), default_factory=new_public_id)
    """How Slack names the run (`RunRef`): random, unique."""

    __table_args__ = (
        Index("ix_artbot_runs_state", "state"),
        Index("ix_artbot_runs_thread", "team", "channel", "thread"),
        Index("ix_artbot_runs_owner", "owner", "team"),
        Index("ix_artbot_runs_public_id", "public_id", unique=True),
    )

    @property
    def ref(self) -> RunRef:
        """How Slack names this run."""
        return RunRef(self.team, self.public_id)

    @property
    def key(self) -> SessionKey:
        """The wizard's thread the run reports to."""
        return SessionKey(self.team, self.channel, self.thread)

    @property
    def active(self) -> bool:
        """Still on its way: submitting, waiting for the runner, or a job not finished yet."""
        return self.state in ACTIVE_STATES


metadata = Base.metadata
"""The run table, for the migrations (artbot.database.ARTBOT_TABLES)."""
RUNS = cast(Table, Run.__table__)


class RunStore(SqlStore):
    """Runs, on the bot's database. Each method is one transaction."""

    def __init__(
        self, engine: Engine, *, clock: Callable[[], datetime] = utc_now, schema: str | None = None
    ) -> None:
        super().__init__(engine, clock=clock, schema=schema)

    def create(
        self,
        *,
        approval_id: int,
        key: SessionKey,
        owner: str,
        script_name: str,
        script_sha256: str,
        backend: str,
        required_env: list[str] | None = None,
        args: list[str] | None = None,
        resume_from_job: str | None = None,
        points: list[dict[str, Any]] | None = None,
    ) -> Run:
        """A new run of an approval, `submitting`; a resumed run starts with the earlier run's
        `points` (its curve and base-model validation go on)."""
        run = Run(
            approval_id=approval_id,
            team=key.team,
            channel=key.channel,
            thread=key.thread,
            owner=owner,
            script_name=script_name,
            script_sha256=script_sha256,
            backend=backend,
            args=args or [],
            resume_from_job=resume_from_job,
            required_env=required_env or [],
            points=points or [],
            state="submitting",
            created_at=self._clock(),
        )
        with self._transaction() as orm:
            orm.add(run)
        return run

    def get(self, run_id: int) -> Run | None:
        """The run by its row id: for the bot's own bookkeeping (following, submitting), never
        for an id that came from Slack (`find`)."""
        with self._transaction() as orm:
            return orm.get(Run, run_id)

    def find(self, ref: RunRef) -> Run | None:
        """The run Slack names: of `ref`'s team and with its public id, else None (another
        team's run reads as not there)."""
        query = select(Run).where(Run.team == ref.team, Run.public_id == ref.public_id)
        with self._transaction() as orm:
            return orm.scalars(query).first()

    def moving_cursor(self, run_id: int, seq: int) -> AlsoWrite:
        """For another store's transaction (the outbox's): the run's cursor moves to `seq`, the
        event told, together with what telling it queued."""

        def write(connection: Connection) -> None:
            connection.execute(
                update(RUNS).where(RUNS.c.id == run_id, RUNS.c.cursor < seq).values(cursor=seq)
            )

        return write

    def update(self, run_id: int, **changes: Any) -> Run:
        """Set attributes of the run (`points=[...]`, `unreachable_notified=True`...); the run."""
        with self._transaction() as orm:
            run = orm.get(Run, run_id)
            if run is None:
                raise KeyError(run_id)
            for name, value in changes.items():
                setattr(run, name, value)
            return run

    def active(self) -> list[Run]:
        """The runs still on their way, oldest first."""
        with self._transaction() as orm:
            query = select(Run).where(Run.state.in_(ACTIVE_STATES)).order_by(Run.id)
            return list(orm.scalars(query))

    def for_thread(self, key: SessionKey) -> list[Run]:
        """The runs of one wizard's thread, oldest first."""
        where = (Run.team == key.team, Run.channel == key.channel, Run.thread == key.thread)
        with self._transaction() as orm:
            return list(orm.scalars(select(Run).where(*where).order_by(Run.id)))

    def for_owner(self, owner: str, team: str) -> list[Run]:
        """A user's latest runs in a team, newest first."""
        with self._transaction() as orm:
            query = (
                select(Run)
                .where(Run.owner == owner, Run.team == team)
                .order_by(Run.id.desc())
                .limit(RUNS_LISTED)
            )
            return list(orm.scalars(query))
