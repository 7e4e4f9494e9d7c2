"""The outbox table: effects come out in the order they went in, one claim at a time per thread,
and a claim of a worker that died is taken over; on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection

from assistant import Proposal
from bot.delivery.effects import (
    Ask,
    Generate,
    Offer,
    Post,
    Retire,
    ThreadEffect,
    Update,
    Upload,
)
from bot.delivery.outbox import Claimed, Outbox, Settlement, TurnEffects
from bot.migrations import BOT_DATABASE
from bot.slack.blocks import (
    PROPOSAL_STEP,
    RESULT_STEP,
    SlackMessage,
    proposal_message,
    text_message,
)
from bot.slack.records import SlackRecords
from bot.wizard.drafts import offer_effects
from flows import TRAIN_RL, Reply, Session, advance, begin
from storage import migrations
from storage.database import create_database_engine
from storage.sessions import SessionKey, SessionStore, StaleSession
from tests.bot.conftest import Database

A = SessionKey("T0", "C0", "1700000000.000100")
B = SessionKey("T0", "C0", "1700000000.000200")
LEASE = timedelta(minutes=2)


def one(claimed: list[Claimed]) -> Claimed | None:
    return claimed[0] if claimed else None


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def outbox(database: Database, clock: Clock) -> Iterator[Outbox]:
    migrations.upgrade(BOT_DATABASE, database.url, schema=database.schema)
    store = Outbox(create_database_engine(database.url), clock=clock, schema=database.schema)
    yield store
    store.close()


def test_effects_come_out_in_order_one_claim_at_a_time(outbox: Outbox) -> None:
    first, second = Retire("turns", "Single-turn"), Post(text_message("Noted."))
    third = Ask("task", "What must the agent accomplish?", text_message("What must..."))
    outbox.enqueue(A, [first, second, third])
    outbox.enqueue(B, [Post(text_message("other thread"))])
    assert outbox.depth() == 4

    claimed = one(outbox.claim(A, LEASE))
    assert claimed is not None and claimed.effect == first and claimed.attempts == 1
    assert one(outbox.claim(A, LEASE)) is None  # claimed: no second worker takes the thread
    other = one(outbox.claim(B, LEASE))
    assert other is not None  # other threads go on meanwhile
    outbox.delivered(claimed, None)
    after = one(outbox.claim(A, LEASE))
    assert after is not None and after.effect == second and not after.in_doubt
    outbox.delivered(after, "1700000000.000300")
    last = one(outbox.claim(A, LEASE))
    assert last is not None and last.effect == third
    outbox.delivered(last, "1700000000.000400")
    assert [row.ts for row in outbox.rows(A)] == [None, "1700000000.000300", "1700000000.000400"]
    assert outbox.depth() == 1


def test_every_kind_of_effect_comes_out_as_it_went_in(outbox: Outbox) -> None:
    card = SlackMessage(
        "Your training script", [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}]
    )
    effects = [
        Retire("epochs", "2", "That's every question."),
        Retire(None, "Cancelled"),
        Update(RESULT_STEP, card, "Your training script: x.py (sha256 0123456789ab)"),
        Generate(),
    ]
    outbox.enqueue(A, effects)
    came_out = []
    while (claimed := one(outbox.claim(A, LEASE))) is not None:
        came_out.append(claimed.effect)
        outbox.delivered(claimed, None)
    assert came_out == effects


def test_a_failed_attempt_waits_its_backoff_and_a_dead_workers_claim_is_taken_over(
    outbox: Outbox, clock: Clock
) -> None:
    outbox.enqueue(A, [Post(text_message("hello"))])
    claimed = one(outbox.claim(A, LEASE))
    assert claimed is not None
    outbox.retry_later(claimed, timedelta(seconds=30), "ratelimited")
    assert one(outbox.claim(A, LEASE)) is None
    assert outbox.due_threads(10) == [(A, clock.now + timedelta(seconds=30))]
    clock.now += timedelta(seconds=30)
    again = one(outbox.claim(A, LEASE))
    assert again is not None and again.attempts == 2 and not again.in_doubt

    # The worker holding it dies: its claim runs until the lease ends, unless taken over.
    assert one(outbox.claim(A, LEASE)) is None
    assert outbox.release_claims() == 1
    resumed = one(outbox.claim(A, LEASE))
    assert resumed is not None and resumed.in_doubt  # Slack may have it: look before posting
    outbox.give_up(resumed, "is_archived")
    assert outbox.depth() == 0 and outbox.rows(A)[0].error == "is_archived"
    clock.now += timedelta(days=2)
    assert outbox.forget_delivered(timedelta(days=1)) == 1
    assert outbox.rows(A) == []


def test_a_turn_and_what_it_says_are_saved_together_or_not_at_all(
    outbox: Outbox, database: Database
) -> None:
    store = SessionStore(create_database_engine(database.url), schema=database.schema)
    said = [Retire("replayable", "static"), Post(text_message("Single-turn or multi-turn?"))]

    def saying(connection: Connection) -> None:
        outbox.add(connection, A, said)

    first = begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session
    store.create(A, "U0OWNER", first)
    turn = advance(TRAIN_RL, first, Reply(text="static"))
    store.save(A, turn.session, expected_revision=first.revision, also=saying)
    assert outbox.depth() == 2

    # A racing reply computed on the same revision loses: neither it nor its messages are kept.
    raced = advance(TRAIN_RL, first, Reply(text="yes"))
    with pytest.raises(StaleSession):
        store.save(A, raced.session, expected_revision=first.revision, also=saying)
    assert outbox.depth() == 2

    # Messages that cannot be queued keep the answer from being saved.
    def failing(connection: Connection) -> None:
        outbox.add(connection, A, said)
        raise RuntimeError("the outbox is unwritable")

    later = advance(TRAIN_RL, turn.session, Reply(text="single"))
    with pytest.raises(RuntimeError):
        store.save(A, later.session, expected_revision=turn.session.revision, also=failing)
    stored = store.get(A)
    assert stored is not None and stored.session == turn.session
    assert outbox.depth() == 2
    store.close()


def test_a_proposal_is_kept_whole_and_remembered_once_posted(
    outbox: Outbox, database: Database
) -> None:
    proposal = Proposal("tools", '[{"type": "function"}]' * 200, "3 tools", "read from the code")
    assert len(proposal.to_json()) > 2_000  # too long for a button: Accept says "held"
    offer = Offer(proposal, proposal_message(proposal))
    outbox.enqueue(A, [offer])

    claimed = one(outbox.claim(A, LEASE))
    assert claimed is not None and claimed.effect == offer
    assert outbox.proposal_posted_as(A, "1700000000.000500") is None  # not posted yet
    outbox.delivered(claimed, "1700000000.000500")

    assert outbox.proposal_posted_as(A, "1700000000.000500") == proposal
    assert outbox.proposal_posted_as(B, "1700000000.000500") is None  # another thread's ts
    records = SlackRecords(create_database_engine(database.url), schema=database.schema)
    (live,) = records.live_questions(A, PROPOSAL_STEP)
    assert live.ts == "1700000000.000500" and live.text == proposal.text
    assert records.live_questions(A, "tools") == []  # not the question's own message
    records.close()


def test_a_drain_claims_a_threads_due_effects_together_and_settles_them_in_one_go(
    outbox: Outbox, database: Database, clock: Clock
) -> None:
    asked = Ask("task", "What must the agent accomplish?", text_message("What must..."))
    echo, retire = Post(text_message("Noted.")), Retire("task", "Add numbers")
    outbox.enqueue(A, [asked, echo, retire, Post(text_message("after"))])

    batch = outbox.claim(A, LEASE, limit=3)
    assert [claimed.effect for claimed in batch] == [asked, echo, retire]
    assert outbox.claim(A, LEASE, limit=3) == []  # the head is claimed: the thread is taken

    # The question is posted and answered within the drain; the last effect was never tried.
    question_ts = "1700000000.000600"
    outbox.settle(
        Settlement(
            A,
            delivered=[(batch[0], question_ts), (batch[1], "1700000000.000700")],
            retired=[question_ts],
            retry=(batch[2], timedelta(seconds=10), "ratelimited", False),
        )
    )
    records = SlackRecords(create_database_engine(database.url), schema=database.schema)
    assert records.live_questions(A, "task") == []  # remembered, and already answered
    records.close()
    assert [row.ts for row in outbox.rows(A)][:2] == [question_ts, "1700000000.000700"]
    assert outbox.claim(A, LEASE, limit=3) == []  # the retry waits its backoff, the rest too

    clock.now += timedelta(seconds=10)
    retried, last = outbox.claim(A, LEASE, limit=3)
    assert retried.effect == retire and retried.attempts == 2
    outbox.settle(Settlement(A, delivered=[(retried, None)], untried=[last]))
    # Claimed but not tried: as it was before, due now, not in doubt, its attempt not counted.
    (again,) = outbox.claim(A, LEASE, limit=3)
    assert again.id == last.id and again.attempts == 1 and not again.in_doubt


def test_a_long_draft_is_kept_as_its_file_then_its_offer_remembered_without_its_code(
    outbox: Outbox, database: Database
) -> None:
    code = (
        "".join(f"x{i} = {i}\n" for i in range(60)) + "def compute_reward(s, a):\n    return 1.0\n"
    )
    draft = Proposal("reward_logic", code, "Reward code", "A constant.", "draft")
    effects = offer_effects(draft)
    assert [type(e) for e in effects] == [Upload, Offer]
    outbox.enqueue(A, effects)

    upload, offer = outbox.claim(A, LEASE, limit=2)
    assert upload.effect == Upload("reward_logic_draft.py", "Draft: Reward code", code)
    assert offer.effect == effects[1]
    outbox.delivered(upload, None)
    outbox.delivered(offer, "1700000000.000600")

    records = SlackRecords(create_database_engine(database.url), schema=database.schema)
    (live,) = records.live_questions(A, PROPOSAL_STEP)
    assert "reward_logic_draft.py" in live.text and "x59 = 59" not in live.text
    records.close()


class RecordingCourier:
    """The outbox worker's side of the fast path, as `Outbox.turn` sees it: holds every thread
    it is asked for and records what is handed over or let go."""

    lease = LEASE

    def __init__(self) -> None:
        self.handed: list[tuple[SessionKey, list[Claimed], list[str]]] = []
        self.let_go_of: list[SessionKey] = []

    def hold(self, key: SessionKey) -> bool:
        return True

    def deliver_held(self, key: SessionKey, claimed: list[Claimed], questions: list[Any]) -> None:
        self.handed.append((key, claimed, [question.ts for question in questions]))

    def let_go(self, key: SessionKey) -> None:
        self.let_go_of.append(key)


@pytest.fixture
def sessions(database: Database) -> Iterator[SessionStore]:
    store = SessionStore(create_database_engine(database.url), schema=database.schema)
    yield store
    store.close()


def saved_turn(store: SessionStore, outbox: Outbox, said: list[ThreadEffect]) -> None:
    """Answer the first question of a new wizard in A, `said` going out with the answer."""
    first = begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session
    store.create(A, "U0OWNER", first)
    turn = advance(TRAIN_RL, first, Reply(text="static"))
    with outbox.turn(A) as effects:
        store.save(
            A, turn.session, expected_revision=first.revision, also=lambda o: effects.add(o, said)
        )


def test_a_turn_whose_thread_is_held_goes_out_claimed_with_its_live_questions(
    outbox: Outbox, sessions: SessionStore
) -> None:
    outbox.enqueue(A, [Ask("replayable", "Replayable?", text_message("Replayable?"))])
    (asked,) = outbox.claim(A, LEASE)
    outbox.delivered(asked, "1700000000.000100")  # the question the turn answers, live
    courier = RecordingCourier()
    outbox.attach(courier)
    said: list[ThreadEffect] = [Retire("replayable", "static"), Post(text_message("Noted."))]

    saved_turn(sessions, outbox, said)

    ((key, claimed, live),) = courier.handed
    assert key == A and [c.effect for c in claimed] == said and live == ["1700000000.000100"]
    assert all(c.attempts == 1 and not c.in_doubt for c in claimed)
    assert outbox.claim(A, LEASE, limit=5) == []  # no other worker takes them meanwhile
    assert outbox.depth() == 2 and courier.let_go_of == []
    outbox.settle(Settlement(A, delivered=[(c, None) for c in claimed]))
    assert outbox.depth() == 0


def test_a_turn_behind_a_waiting_retry_waits_its_turn_in_order(
    outbox: Outbox, sessions: SessionStore, clock: Clock
) -> None:
    earlier = Post(text_message("earlier"))
    outbox.enqueue(A, [earlier])
    (claimed,) = outbox.claim(A, LEASE)
    outbox.retry_later(claimed, timedelta(seconds=30), "ratelimited")
    courier, notified = RecordingCourier(), list[SessionKey]()
    outbox.attach(courier)
    outbox.subscribe(notified.append)
    said: list[ThreadEffect] = [Post(text_message("later"))]

    saved_turn(sessions, outbox, said)

    assert courier.handed == [] and courier.let_go_of == [A] and notified == [A]
    clock.now += timedelta(seconds=30)
    assert [c.effect for c in outbox.claim(A, LEASE, limit=5)] == [earlier, *said]


def test_a_turn_that_is_not_saved_lets_its_thread_go_and_queues_nothing(
    outbox: Outbox, sessions: SessionStore
) -> None:
    courier = RecordingCourier()
    outbox.attach(courier)
    first = begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session
    sessions.create(A, "U0OWNER", first)
    winner = advance(TRAIN_RL, first, Reply(text="static"))
    sessions.save(A, winner.session, expected_revision=first.revision)
    raced = advance(TRAIN_RL, first, Reply(text="yes"))

    with pytest.raises(StaleSession), outbox.turn(A) as effects:
        sessions.save(
            A,
            raced.session,
            expected_revision=first.revision,
            also=lambda o: effects.add(o, [Post(text_message("lost"))]),
        )

    assert courier.let_go_of == [A] and courier.handed == [] and outbox.depth() == 0


def test_what_a_turn_adds_in_two_parts_goes_out_claimed_together_in_order(
    outbox: Outbox, sessions: SessionStore
) -> None:
    courier = RecordingCourier()
    outbox.attach(courier)
    retire, post = Retire("replayable", "static"), Post(text_message("Noted."))
    first = begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session
    sessions.create(A, "U0OWNER", first)
    turn = advance(TRAIN_RL, first, Reply(text="static"))

    def in_two_parts(connection: Connection, effects: TurnEffects) -> None:
        effects.add(connection, [retire])
        effects.add(connection, [post])

    with outbox.turn(A) as effects:
        sessions.save(
            A,
            turn.session,
            expected_revision=first.revision,
            also=lambda connection: in_two_parts(connection, effects),
        )

    ((_, claimed, _),) = courier.handed
    assert [c.effect for c in claimed] == [retire, post]
    assert outbox.claim(A, LEASE, limit=5) == []  # both held by the courier
