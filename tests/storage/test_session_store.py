"""The session store, one suite for every backend: SQLite files always, PostgreSQL when
ARTBOT_TEST_POSTGRES_URL names a server (each test in a schema of its own, dropped after)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.migrations import BOT_DATABASE
from flows import TRAIN_RL, Reply, Session, advance, begin
from storage import migrations
from storage.database import (
    DatabaseUrlError,
    create_database_engine,
    data_dir,
    default_database_url,
    normalize_database_url,
)
from storage.sessions import (
    DuplicateSession,
    SessionExpired,
    SessionKey,
    SessionNotFound,
    SessionStore,
    StaleSession,
)
from tests.databases import BACKENDS, POSTGRES_URL, throwaway_schema
from tests.flows.matrix import MATH_ROWS

KEY = SessionKey("T0001", "C0001", "1712345678.000100")


@dataclass
class Clock:
    """A clock the test moves by hand, so idle times are exact."""

    now: datetime = field(default_factory=lambda: datetime(2025, 1, 1, 12, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def tick(self, **delta: float) -> None:
        self.now += timedelta(**delta)


StoreFactory = Callable[..., SessionStore]


@pytest.fixture(params=BACKENDS)
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Opens stores on one fresh database: each call is a separate engine, like another process."""
    stores: list[SessionStore] = []
    with contextlib.ExitStack() as cleanup:
        if request.param == "sqlite":
            url, schema = f"sqlite:///{tmp_path / 'sessions.db'}", None
        else:
            assert POSTGRES_URL is not None
            url, schema = POSTGRES_URL, cleanup.enter_context(throwaway_schema("artbot_test"))
        cleanup.callback(lambda: [store.close() for store in stores])  # before the drop
        migrations.upgrade(BOT_DATABASE, url, schema=schema)  # as every program does first

        def factory(**options: Any) -> SessionStore:
            store = SessionStore(create_database_engine(url), schema=schema, **options)
            stores.append(store)
            return store

        yield factory


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(open_store: StoreFactory, clock: Clock) -> SessionStore:
    return open_store(clock=clock)


def started() -> Session:
    return begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session


def answered(session: Session, *replies: str) -> Session:
    for reply in replies:
        session = advance(TRAIN_RL, session, Reply(text=reply)).session
    return session


# ---- create and get ----------------------------------------------------------------------


def test_a_created_session_comes_back_as_it_was(store: SessionStore, clock: Clock) -> None:
    session = answered(started(), "static", "single")
    created = store.create(KEY, "U123", session)

    stored = store.get(KEY)

    assert stored is not None
    assert stored == created
    assert stored.session == session
    assert (stored.key, stored.owner, stored.step) == (KEY, "U123", "task")
    assert stored.created_at == stored.updated_at == clock.now
    assert stored.created_at.tzinfo is not None
    assert stored.resumable and not stored.expired


def test_get_of_an_unknown_key_is_none(store: SessionStore) -> None:
    assert store.get(KEY) is None


def test_create_refuses_a_key_that_has_a_session(store: SessionStore) -> None:
    store.create(KEY, "U123", started())

    with pytest.raises(DuplicateSession):
        store.create(KEY, "U999", started())

    stored = store.get(KEY)
    assert stored is not None and stored.owner == "U123"


def test_keys_differ_by_any_part(store: SessionStore) -> None:
    for key in (
        KEY,
        SessionKey("T0002", KEY.channel, KEY.thread),
        SessionKey(KEY.team, KEY.channel, "2"),
    ):
        store.create(key, "U1", started())
    assert len(store.list_for_owner("U1")) == 3


# ---- save --------------------------------------------------------------------------------


def test_save_replaces_the_session_and_moves_the_open_step(
    store: SessionStore, clock: Clock
) -> None:
    first = started()
    store.create(KEY, "U123", first)
    clock.tick(minutes=5)
    second = answered(first, "static")

    store.save(KEY, second, expected_revision=first.revision)

    stored = store.get(KEY)
    assert stored is not None
    assert stored.session == second
    assert stored.step == "turns"
    assert stored.updated_at == clock.now
    assert stored.created_at == clock.now - timedelta(minutes=5)


def test_a_save_from_an_old_revision_is_refused_and_changes_nothing(store: SessionStore) -> None:
    first = started()
    store.create(KEY, "U123", first)
    second = answered(first, "static")
    store.save(KEY, second, expected_revision=first.revision)
    late = answered(first, "yes")  # computed from the first revision, like a reply that lost a race

    with pytest.raises(StaleSession) as raised:
        store.save(KEY, late, expected_revision=first.revision)

    assert (raised.value.expected, raised.value.stored) == (first.revision, second.revision)
    stored = store.get(KEY)
    assert stored is not None and stored.session.answers == {"replayable": "static"}


def test_racing_replies_from_separate_processes_advance_the_session_once(
    open_store: StoreFactory,
) -> None:
    base = started()
    open_store().create(KEY, "U123", base)
    replies = ["static", "yes"] * 4
    stores = [open_store() for _ in replies]
    barrier = threading.Barrier(len(replies))
    outcomes: list[str] = []
    lock = threading.Lock()

    def reply(store: SessionStore, text_: str) -> None:
        stored = store.get(KEY)
        assert stored is not None
        turn = advance(TRAIN_RL, stored.session, Reply(text=text_))
        barrier.wait()
        try:
            store.save(KEY, turn.session, expected_revision=stored.session.revision)
            outcome = f"saved {text_}"
        except StaleSession:
            outcome = "stale"
        with lock:
            outcomes.append(outcome)

    threads = [
        threading.Thread(target=reply, args=pair) for pair in zip(stores, replies, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    saved = [o for o in outcomes if o.startswith("saved")]
    assert len(outcomes) == len(replies)
    assert len(saved) == 1 and outcomes.count("stale") == len(replies) - 1
    stored = open_store().get(KEY)
    assert stored is not None
    assert stored.session.answers == {"replayable": saved[0].removeprefix("saved ")}
    assert stored.session.revision == base.revision + 1


def test_many_writers_on_different_sessions_all_succeed(open_store: StoreFactory) -> None:
    """SQLite has one writer at a time: the others wait for the lock instead of failing."""
    errors: list[BaseException] = []

    def converse(index: int) -> None:
        try:
            store = open_store()
            key = SessionKey("T1", "C1", f"thread-{index}")
            session = started()
            store.create(key, f"U{index}", session)
            for text_ in ("static", "single", "Add small numbers and answer with the sum only."):
                after = answered(session, text_)
                store.save(key, after, expected_revision=session.revision)
                session = after
        except BaseException as error:  # collected: an exception in a thread fails nothing
            errors.append(error)

    threads = [threading.Thread(target=converse, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    check = open_store()
    for index in range(8):
        stored = check.get(SessionKey("T1", "C1", f"thread-{index}"))
        assert stored is not None and stored.step == "scenario_source"


def test_save_of_an_unknown_key_says_so(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.save(KEY, answered(started(), "static"), expected_revision=0)


def test_save_refuses_a_session_older_than_the_revision_it_replaces(store: SessionStore) -> None:
    session = answered(started(), "static")
    store.create(KEY, "U1", session)
    with pytest.raises(ValueError):
        store.save(KEY, started(), expected_revision=session.revision)


def test_saving_an_unchanged_session_refreshes_its_activity(
    store: SessionStore, clock: Clock
) -> None:
    session = started()
    store.create(KEY, "U1", session)
    clock.tick(hours=1)
    store.save(KEY, session, expected_revision=session.revision)
    stored = store.get(KEY)
    assert stored is not None and stored.updated_at == clock.now


def test_finished_sessions_have_no_open_step(store: SessionStore) -> None:
    session = answered(started(), "static")
    store.create(KEY, "U1", session)
    cancelled = answered(session, "cancel")
    store.save(KEY, cancelled, expected_revision=session.revision)
    stored = store.get(KEY)
    assert stored is not None
    assert stored.session.status == "cancelled" and stored.step is None and not stored.resumable


# ---- list --------------------------------------------------------------------------------


def test_list_for_owner_gives_their_sessions_most_recent_first(
    store: SessionStore, clock: Clock
) -> None:
    keys = [SessionKey("T1", "C1", "a"), SessionKey("T1", "C2", "b"), SessionKey("T2", "C1", "c")]
    for key in keys:
        store.create(key, "U1", started())
        clock.tick(minutes=1)
    store.create(SessionKey("T1", "C1", "theirs"), "U2", started())
    first = store.get(keys[0])
    assert first is not None
    store.save(keys[0], answered(first.session, "static"), expected_revision=first.session.revision)

    mine = store.list_for_owner("U1")
    in_t1 = store.list_for_owner("U1", team="T1")

    assert [s.key for s in mine] == [keys[0], keys[2], keys[1]]
    assert [s.key for s in in_t1] == [keys[0], keys[1]]
    assert store.list_for_owner("nobody") == []


# ---- expiry ------------------------------------------------------------------------------


def test_expire_idle_marks_only_idle_active_sessions(store: SessionStore, clock: Clock) -> None:
    idle, fresh, done = (SessionKey("T1", "C1", name) for name in ("idle", "fresh", "done"))
    session = answered(started(), "static")
    store.create(idle, "U1", session)
    store.create(done, "U1", answered(session, "cancel"))
    clock.tick(hours=30)
    store.create(fresh, "U1", session)

    expired = store.expire_idle(timedelta(hours=24))

    assert expired == [idle]
    stored = store.get(idle)
    assert stored is not None
    assert stored.expired and not stored.resumable
    assert stored.expired_at == clock.now
    # The wizard's state is untouched: only the store stopped offering it.
    assert stored.session == session and stored.session.status == "active"
    assert store.expire_idle(timedelta(hours=24)) == []
    still = store.get(fresh)
    assert still is not None and still.resumable


def test_a_worker_of_several_expires_only_the_sessions_it_owns(
    store: SessionStore, clock: Clock
) -> None:
    mine, theirs = SessionKey("T1", "C1", "1.1"), SessionKey("T1", "C2", "1.2")
    for key in (mine, theirs):
        store.create(key, "U1", answered(started(), "static"))
    clock.tick(hours=30)

    assert store.expire_idle(timedelta(hours=24), owns=lambda key: key.channel == "C1") == [mine]

    other = store.get(theirs)
    assert other is not None and other.resumable  # its own worker expires it
    assert store.expire_idle(timedelta(hours=24), owns=lambda key: key.channel == "C3") == []
    assert store.expire_idle(timedelta(hours=24)) == [theirs]


def test_a_late_reply_does_not_revive_an_expired_session(store: SessionStore, clock: Clock) -> None:
    session = started()
    store.create(KEY, "U1", session)
    clock.tick(days=2)
    store.expire_idle(timedelta(days=1))

    with pytest.raises(SessionExpired):
        store.save(KEY, answered(session, "static"), expected_revision=session.revision)


def test_expired_sessions_stay_listed_with_their_flag(store: SessionStore, clock: Clock) -> None:
    store.create(KEY, "U1", started())
    clock.tick(days=2)
    store.expire_idle(timedelta(days=1))
    assert [s.expired for s in store.list_for_owner("U1")] == [True]


# ---- delete ------------------------------------------------------------------------------


def test_delete_forgets_a_session_so_the_key_can_start_again(store: SessionStore) -> None:
    store.create(KEY, "U1", answered(started(), "static"))

    assert store.delete(KEY) is True
    assert store.get(KEY) is None
    assert store.delete(KEY) is False
    store.create(KEY, "U1", started())
    assert store.get(KEY) is not None


# ---- content -----------------------------------------------------------------------------


def test_a_session_of_several_megabytes_round_trips(store: SessionStore) -> None:
    rows = [{**row, "context": "x" * 2_000, "index": i} for i, row in enumerate(MATH_ROWS * 250)]
    session = Session(flow=TRAIN_RL.id, answers={"scenario_rows": rows}, revision=7)
    assert len(session.to_json()) > 4_000_000

    store.create(KEY, "U1", session)
    stored = store.get(KEY)

    assert stored is not None and stored.session == session


def test_unicode_keys_owners_and_answers_round_trip(store: SessionStore) -> None:
    key = SessionKey("équipe", "канал", "スレッド🧵")
    answers = {"task": "Réponds en français 🙂, 中文, עברית, and a NUL \x00 inside"}
    session = Session(flow=TRAIN_RL.id, answers=answers, prefill={"task": "ü"})

    store.create(key, "Zoë", session)

    stored = store.get(key)
    assert stored is not None and stored.session == session and stored.owner == "Zoë"
    assert [s.key for s in store.list_for_owner("Zoë", team="équipe")] == [key]


def test_answers_keep_their_keys_in_the_order_given(store: SessionStore) -> None:
    """A scenario's or a tool schema's fields reach the script in the order the user wrote."""
    rows = [{"prompt": "When is the offsite?", "id": "q1", "answer": "Sept 14"}]
    tool = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
    key = SessionKey("T1", "C1", "1.0")
    store.create(key, "U1", Session(flow=TRAIN_RL.id, answers={"rows": rows, "tools": [tool]}))

    stored = store.get(key)
    assert stored is not None
    assert list(stored.session.answers["rows"][0]) == ["prompt", "id", "answer"]
    assert list(stored.session.answers["tools"][0]) == ["type", "function"]
    assert list(stored.session.answers["tools"][0]["function"]) == ["name", "parameters"]


def test_keys_and_owners_are_checked() -> None:
    for bad in ("", "x" * 256, "a\x00b"):
        with pytest.raises(ValueError):
            SessionKey("T1", "C1", bad)


def test_owner_with_nul_is_refused(store: SessionStore) -> None:
    with pytest.raises(ValueError):
        store.create(KEY, "U\x00", started())


# ---- where the database is ---------------------------------------------------------------


def test_the_default_database_is_a_wal_sqlite_file_in_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert data_dir() == tmp_path / "data" / "artbot"
    assert default_database_url() == f"sqlite:///{tmp_path / 'data' / 'artbot' / 'artbot.db'}"

    migrations.upgrade(BOT_DATABASE)  # the default database, as `artbot chat` does first
    store = SessionStore.open()
    store.create(KEY, "U1", started())
    store.close()

    database = tmp_path / "data" / "artbot" / "artbot.db"
    assert database.is_file()
    with sqlite3.connect(database) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_without_xdg_data_home_the_data_dir_is_under_home() -> None:
    assert data_dir({}) == Path.home() / ".local" / "share" / "artbot"


def test_database_urls() -> None:
    assert normalize_database_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_database_url("postgres://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_database_url("sqlite:///x.db").drivername == "sqlite"
    for bad in ("mysql://u@h/db", "not a url"):
        with pytest.raises(DatabaseUrlError):
            normalize_database_url(bad)
