"""The outbox: what a turn must say in its thread, stored in the transaction that saves the turn.

A wizard's reply is saved together with the thread messages it calls for (posts, questions, and
old questions to retire), so a crash or a run of 429s after the commit delays them but cannot
lose them. `bot.delivery.worker` delivers them, oldest first, one at a time per thread; each row
records the ts of the message it posted (the table, and an effect as a row of it:
bot.delivery.outbox_rows).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    bindparam,
    delete,
    false,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import CursorResult

from assistant import Proposal
from bot.delivery.effects import Ask, Offer, ThreadEffect
from bot.delivery.outbox_rows import OUTBOX, OutboxRow, effect_row, row_effect
from bot.process.shards import ALONE, Shard
from bot.slack.blocks import PROPOSAL_STEP
from bot.slack.records import QUESTIONS, QuestionMessage, unanswered_questions
from bot.wizard.drafts import offered_text
from storage.sessions import AlsoWrite, SessionKey, key_params
from storage.sql_store import SqlStore, utc_now


@dataclass(frozen=True)
class Claimed:
    """A thread's oldest pending effect, claimed by one worker for a lease."""

    id: int
    key: SessionKey
    effect: ThreadEffect
    attempts: int
    """Attempts so far, this one included."""
    in_doubt: bool
    """An earlier attempt died mid-call: Slack may have its message already."""


@dataclass
class Settlement:
    """What one drain of a thread came to, written in one transaction (`Outbox.settle`)."""

    key: SessionKey
    delivered: list[tuple[Claimed, str | None]] = field(default_factory=list)
    """Done, with the ts of the message each posted (a question's is remembered)."""
    given_up: list[tuple[Claimed, str]] = field(default_factory=list)
    """Refused by Slack for good, and why: the thread's later effects go on without them."""
    retired: list[str] = field(default_factory=list)
    """Question messages (their ts) that lost their buttons."""
    retry: tuple[Claimed, timedelta, str, bool] | None = None
    """The effect that failed this time: try it again after the delay; the error; whether Slack
    may have its message all the same (in doubt)."""
    untried: list[Claimed] = field(default_factory=list)
    """Claimed but not attempted (behind a failure, or the worker stopping): due now again, as
    if never claimed."""


class Courier(Protocol):
    """Who delivers a turn's effects right after its commit: the outbox worker's fast path."""

    lease: timedelta

    def hold(self, key: SessionKey) -> bool:
        """Take the thread's delivery for a turn being saved; False if a drain has it."""
        ...

    def deliver_held(
        self, key: SessionKey, claimed: list[Claimed], questions: list[QuestionMessage]
    ) -> None:
        """Deliver `claimed` (committed already claimed), then whatever else is due in the
        thread, and let the thread go."""
        ...

    def let_go(self, key: SessionKey) -> None:
        """Give back a thread held for a turn that claimed nothing (or was not saved)."""
        ...


class TurnEffects:
    """What a turn says, written in the transaction that saves it (`Outbox.turn`)."""

    def __init__(self, outbox: Outbox, key: SessionKey, lease: timedelta | None) -> None:
        self._outbox = outbox
        self._key = key
        self._lease = lease
        self.added = False
        self.claimed: list[Claimed] = []
        self.questions: list[QuestionMessage] = []

    def add(self, connection: Connection, effects: Sequence[ThreadEffect]) -> None:
        """Queue `effects` in the open transaction on `connection`: already claimed for the courier
        holding the thread when nothing older is pending there (a retry waiting, an earlier
        turn's leftovers), so it delivers them without a claim transaction of its own."""
        if not effects:
            return
        self.added = True
        # What this turn claimed already is pending too, and is this courier's to deliver.
        outbox, key = self._outbox, self._key
        if self._lease is None or (not self.claimed and outbox.has_pending(connection, key)):
            outbox.add(connection, key, effects)
            return
        self.claimed += outbox.add_claimed(connection, key, effects, self._lease)
        self.questions = unanswered_questions(connection, key)


# ---- the store -----------------------------------------------------------------------------


class Outbox(SqlStore):
    """Pending thread effects on the sessions' database. `add` writes in a caller's transaction
    (the one that saves the turn); every other method is one transaction."""

    def __init__(
        self, engine: Engine, *, clock: Callable[[], datetime] = utc_now, schema: str | None = None
    ) -> None:
        super().__init__(engine, clock=clock, schema=schema)
        self._listeners: list[Callable[[SessionKey], None]] = []
        self._courier: Courier | None = None

    # -- writing --

    def add(self, connection: Connection, key: SessionKey, effects: Iterable[ThreadEffect]) -> None:
        """Queue `effects` for the thread `key` in the open transaction on `connection`; call
        `notify(key)` once it has committed."""
        now = self._clock()
        rows = [effect_row(key, effect, now) for effect in effects]
        if rows:
            connection.execute(insert(OUTBOX), rows)

    def add_claimed(
        self,
        connection: Connection,
        key: SessionKey,
        effects: Sequence[ThreadEffect],
        lease: timedelta,
    ) -> list[Claimed]:
        """Queue `effects` in the open transaction on `connection` already claimed for `lease`,
        as `claim` would claim them (the caller has made sure nothing older is pending in the
        thread)."""
        now = self._clock()
        rows = [
            effect_row(key, effect, now)
            | {"next_attempt_at": now + lease, "attempts": 1, "in_doubt": 1}
            for effect in effects
        ]
        inserted = connection.execute(
            insert(OUTBOX).returning(OUTBOX.c.id, sort_by_parameter_order=True), rows
        )
        ids = [int(row_id) for row_id in inserted.scalars()]
        return [
            Claimed(row_id, key, effect, 1, in_doubt=False)
            for row_id, effect in zip(ids, effects, strict=True)
        ]

    def has_pending(self, connection: Connection, key: SessionKey) -> bool:
        """Is anything of the thread `key` still to be delivered (in the open transaction)?"""
        found = connection.execute(_PENDING_IN_THREAD, key_params(key))
        return found.first() is not None

    def attach(self, courier: Courier | None) -> None:
        """The fast path: `courier` delivers each turn's effects right after its commit."""
        self._courier = courier

    @contextlib.contextmanager
    def turn(self, key: SessionKey) -> Iterator[TurnEffects]:
        """For a turn being saved: `add` its effects in the save's transaction. Leaving, they
        are delivered at once by the courier when it held the thread (else the workers are
        notified); an exception (the save lost a race, say) lets the thread go."""
        courier = self._courier
        held = courier is not None and courier.hold(key)
        said = TurnEffects(self, key, courier.lease if courier is not None and held else None)
        try:
            yield said
        except BaseException:
            if courier is not None and held:
                courier.let_go(key)
            raise
        if courier is not None and held:
            if said.claimed:
                courier.deliver_held(key, said.claimed, said.questions)
                return
            courier.let_go(key)
        if said.added:
            self.notify(key)

    def enqueue(
        self,
        key: SessionKey,
        effects: Sequence[ThreadEffect],
        *,
        also: AlsoWrite | None = None,
    ) -> None:
        """Queue `effects` in a transaction of their own (with what `also` writes), and wake
        the workers."""
        if not effects and also is None:
            return
        with self._writing() as connection:
            if also is not None:
                also(connection)
            self.add(connection, key, effects)
        if effects:
            self.notify(key)

    def subscribe(self, listener: Callable[[SessionKey], None]) -> None:
        """Call `listener(key)` whenever something was queued for the thread `key`, from the
        thread that queued it (the worker delivers it there and then)."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[SessionKey], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def notify(self, key: SessionKey) -> None:
        for listener in list(self._listeners):
            listener(key)

    # -- reading --

    def depth(self) -> int:
        """How many effects wait to be delivered (a metric: it should stay near 0)."""
        with self._reading() as orm:
            return int(
                orm.scalar(select(func.count()).select_from(OutboxRow).where(_pending())) or 0
            )

    def pending(self, key: SessionKey) -> list[OutboxRow]:
        """The thread's undelivered effects, in delivery order."""
        with self._reading() as orm:
            return list(
                orm.scalars(select(OutboxRow).where(_in(key), _pending()).order_by(OutboxRow.id))
            )

    def proposal_posted_as(self, key: SessionKey, ts: str) -> Proposal | None:
        """The proposal the message `ts` of the thread offers (None: not one, or forgotten)."""
        with self._reading() as orm:
            row = orm.scalars(
                select(OutboxRow).where(_in(key), OutboxRow.ts == ts, OutboxRow.kind == "offer")
            ).first()
            return Proposal.from_json(row.text) if row is not None else None

    def rows(self, key: SessionKey) -> list[OutboxRow]:
        """Every effect of the thread still kept, delivered or not, in order."""
        with self._transaction() as orm:
            return list(orm.scalars(select(OutboxRow).where(_in(key)).order_by(OutboxRow.id)))

    def due_threads(self, limit: int) -> list[tuple[SessionKey, datetime]]:
        """Threads with pending effects and when their oldest one may be tried (oldest first)."""
        heads = (
            select(func.min(OutboxRow.id))
            .where(_pending())
            .group_by(OutboxRow.team, OutboxRow.channel, OutboxRow.thread)
        )
        query = (
            select(OutboxRow.team, OutboxRow.channel, OutboxRow.thread, OutboxRow.next_attempt_at)
            .where(OutboxRow.id.in_(heads))
            .order_by(OutboxRow.next_attempt_at, OutboxRow.id)
            .limit(limit)
        )
        with self._reading() as orm:
            return [(SessionKey(t, c, th), at) for t, c, th, at in orm.execute(query)]

    # -- delivering --

    def claim(self, key: SessionKey, lease: timedelta, limit: int = 1) -> list[Claimed]:
        """The thread's oldest pending effects (up to `limit`, in order) if the oldest is due,
        claimed for `lease` (no other worker takes them meanwhile); none if there are none, the
        oldest is not due, or another worker has them."""
        return self._claim(key, lease, limit, with_questions=False)[0]

    def claim_for_drain(
        self, key: SessionKey, lease: timedelta, limit: int
    ) -> tuple[list[Claimed], list[QuestionMessage]]:
        """`claim`, and in the same transaction the thread's question messages that still show
        their buttons, oldest first (what the drain may have to retire)."""
        return self._claim(key, lease, limit, with_questions=True)

    def _claim(
        self, key: SessionKey, lease: timedelta, limit: int, *, with_questions: bool
    ) -> tuple[list[Claimed], list[QuestionMessage]]:
        now = self._clock()
        try:
            with self._writing() as connection:
                rows = list(connection.execute(_OLDEST_PENDING, key_params(key) | {"n": limit}))
                due = list(itertools.takewhile(lambda row: row.next_attempt_at <= now, rows))
                if not due:
                    return [], []
                claimed = [
                    Claimed(
                        row.id, key, row_effect(row), row.attempts + 1, in_doubt=bool(row.in_doubt)
                    )
                    for row in due
                ]
                taken = connection.execute(
                    update(OUTBOX)
                    .where(
                        OUTBOX.c.id.in_([row.id for row in due]), OUTBOX.c.delivered_at.is_(None)
                    )
                    .where(OUTBOX.c.next_attempt_at <= now)
                    .values(next_attempt_at=now + lease, attempts=OUTBOX.c.attempts + 1, in_doubt=1)
                )
                if _rowcount(taken) != len(due):  # another worker took some: leave them all to it
                    raise _TakenMeanwhile
                questions = unanswered_questions(connection, key) if with_questions else []
                return claimed, questions
        except _TakenMeanwhile:
            return [], []

    def settle(self, settlement: Settlement) -> None:
        """Record what a drain came to, in one transaction: delivered effects with their ts (a
        question remembered, so a later Retire finds it), refusals, the question messages that
        lost their buttons, the failure to try again, and what was claimed but not tried."""
        now = self._clock()
        key = settlement.key
        with self._writing() as connection:
            done = [
                {"row_id": claimed.id, "at": now, "ts": ts, "error": None}
                for claimed, ts in settlement.delivered
            ] + [
                {"row_id": claimed.id, "at": now, "ts": None, "error": refused[:200]}
                for claimed, refused in settlement.given_up
            ]
            if done:
                connection.execute(_DONE, done)
            asked = [
                question_values(question)
                for claimed, ts in settlement.delivered
                if (question := question_asked(claimed, ts)) is not None
            ]
            if asked:
                connection.execute(_insert_new_questions(connection.dialect.name), asked)
            if settlement.retired:
                connection.execute(
                    update(QUESTIONS)
                    .where(
                        QUESTIONS.c.team == key.team,
                        QUESTIONS.c.channel == key.channel,
                        QUESTIONS.c.thread == key.thread,
                        QUESTIONS.c.ts.in_(settlement.retired),
                    )
                    .values(answered=1)
                )
            if settlement.retry is not None:
                claimed, delay, error, in_doubt = settlement.retry
                _mark(
                    connection,
                    claimed,
                    next_attempt_at=now + delay,
                    in_doubt=int(in_doubt),
                    error=error[:200],
                )
            for claimed in settlement.untried:
                _mark(
                    connection,
                    claimed,
                    next_attempt_at=now,
                    attempts=claimed.attempts - 1,
                    in_doubt=int(claimed.in_doubt),
                )

    def delivered(self, claimed: Claimed, ts: str | None) -> None:
        """Done: record the posted message's ts (a question is remembered with it)."""
        self.settle(Settlement(claimed.key, delivered=[(claimed, ts)]))

    def retry_later(
        self, claimed: Claimed, delay: timedelta, error: str, *, in_doubt: bool = False
    ) -> None:
        """The attempt failed: try again after `delay`. `in_doubt`: Slack may have its message
        all the same (the next attempt looks for it first)."""
        self.settle(Settlement(claimed.key, retry=(claimed, delay, error, in_doubt)))

    def give_up(self, claimed: Claimed, error: str) -> None:
        """Slack refuses this effect for good (an archived channel, a deleted message): the
        thread's later effects go on without it."""
        self.settle(Settlement(claimed.key, given_up=[(claimed, error)]))

    def give_up_team(self, team: str, error: str) -> int:
        """The app left `team` (uninstalled, token revoked): its pending effects are given up
        rather than retried forever; how many."""
        with self._transaction() as orm:
            result = orm.execute(
                update(OutboxRow)
                .where(_pending(), OutboxRow.team == team)
                .values(delivered_at=self._clock(), in_doubt=0, error=error[:200])
                .execution_options(synchronize_session=False)
            )
            return _rowcount(result)

    def release_claims(self, shard: Shard = ALONE) -> int:
        """Make effects claimed by a worker that is gone (an earlier process of `shard`) due now.
        Only for the one worker of a database, or of a shard, at its start."""
        claimed = and_(_pending(), OutboxRow.in_doubt == 1)
        with self._transaction() as orm:
            if not shard.alone:  # only this shard's threads: the other workers' are live
                threads = orm.execute(
                    select(OutboxRow.team, OutboxRow.channel, OutboxRow.thread)
                    .where(claimed)
                    .distinct()
                )
                mine = [key for key in (SessionKey(*row) for row in threads) if shard.owns(key)]
                claimed = and_(
                    claimed,
                    or_(*(_in(key) for key in mine)) if mine else false(),
                )
            result = orm.execute(
                update(OutboxRow)
                .where(claimed)
                .values(next_attempt_at=self._clock())
                .execution_options(synchronize_session=False)
            )
            return _rowcount(result)

    def forget_delivered(self, older_than: timedelta) -> int:
        """Drop rows delivered longer ago than `older_than` (keeps the table small)."""
        with self._transaction() as orm:
            result = orm.execute(
                delete(OutboxRow).where(OutboxRow.delivered_at < self._clock() - older_than)
            )
            return _rowcount(result)


class _TakenMeanwhile(Exception):
    """Another worker claimed some of the rows between the read and the update."""


_PENDING_IN_THE_THREAD = and_(
    OUTBOX.c.team == bindparam("k_team"),
    OUTBOX.c.channel == bindparam("k_channel"),
    OUTBOX.c.thread == bindparam("k_thread"),
    OUTBOX.c.delivered_at.is_(None),
)
"""The thread's (`key_params`) undelivered rows."""
_PENDING_IN_THREAD = select(OUTBOX.c.id).where(_PENDING_IN_THE_THREAD).limit(1)
"""Built once: a statement object caches its compiled form and cache key."""
_OLDEST_PENDING = (
    select(OUTBOX).where(_PENDING_IN_THE_THREAD).order_by(OUTBOX.c.id).limit(bindparam("n"))
)
_DONE = (
    update(OUTBOX)
    .where(OUTBOX.c.id == bindparam("row_id"))
    .values(delivered_at=bindparam("at"), ts=bindparam("ts"), error=bindparam("error"), in_doubt=0)
)
"""Delivered (with its ts) or given up (with why): one executemany per settlement."""


def _insert_new_questions(dialect: str) -> Any:
    """Insert question messages, skipping one already remembered (its ts is its identity)."""
    if dialect == "postgresql":
        return postgresql.insert(QUESTIONS).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(QUESTIONS).on_conflict_do_nothing()
    return insert(QUESTIONS)


def question_values(question: QuestionMessage) -> dict[str, Any]:
    return {
        "team": question.team,
        "channel": question.channel,
        "thread": question.thread,
        "ts": question.ts,
        "step_id": question.step_id,
        "text": question.text,
        "answered": question.answered,
    }


def _mark(connection: Connection, claimed: Claimed, **values: Any) -> None:
    connection.execute(update(OUTBOX).where(OUTBOX.c.id == claimed.id).values(**values))


def question_asked(claimed: Claimed, ts: str | None) -> QuestionMessage | None:
    """The question message a delivered Ask or Offer posted, to remember."""
    effect, key = claimed.effect, claimed.key
    if not ts or not isinstance(effect, Ask | Offer):
        return None
    step_id, text = (
        (effect.step_id, effect.text)
        if isinstance(effect, Ask)
        else (PROPOSAL_STEP, offered_text(effect.proposal))
    )
    return QuestionMessage(
        team=key.team, channel=key.channel, thread=key.thread, ts=ts, step_id=step_id, text=text
    )


def _pending() -> Any:
    return OutboxRow.delivered_at.is_(None)


def _in(key: SessionKey) -> Any:
    return (
        (OutboxRow.team == key.team)
        & (OutboxRow.channel == key.channel)
        & (OutboxRow.thread == key.thread)
    )


def _rowcount(result: Any) -> int:
    return cast(CursorResult[Any], result).rowcount
