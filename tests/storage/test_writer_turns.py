"""SQLite writers take turns across threads and across processes (`storage.database.WriterTurns`):
several bot processes on one file queue on a lock that wakes them at once, not in SQLite's busy
handler, which sleeps up to 100 ms a try."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from storage.database import create_database_engine, writer_turns

HOLD_IN_A_CHILD = """
import sys
from storage.database import create_database_engine, writer_turns
turns = writer_turns(create_database_engine(sys.argv[1]))
with turns:
    print("holding", flush=True)
    sys.stdin.readline()
print("let go", flush=True)
"""


def someone_holds(lock_file: Path) -> bool:
    """Whether a process holds the writers' lock (probed without waiting, from a fresh open)."""
    descriptor = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return False
    finally:
        os.close(descriptor)


@pytest.fixture
def database(tmp_path: Path) -> tuple[str, Path]:
    file = tmp_path / "artbot.db"
    return f"sqlite:///{file}", tmp_path / "artbot.db-writers"


def test_a_writer_in_another_process_waits_for_this_ones_turn_and_gets_it_after(
    database: tuple[str, Path],
) -> None:
    url, lock_file = database
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_IN_A_CHILD, url],
        cwd=Path(__file__).resolve().parents[2],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "holding"
        assert someone_holds(lock_file)

        entered = threading.Event()

        def write_here() -> None:
            with writer_turns(create_database_engine(url)):
                entered.set()

        waiting = threading.Thread(target=write_here)
        waiting.start()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "let go"
        waiting.join(timeout=30)
        assert entered.is_set()
        assert not someone_holds(lock_file)
    finally:
        child.kill()
        child.wait()


def test_a_thread_holding_its_turn_can_enter_again_and_keeps_it_until_the_outermost_exit(
    database: tuple[str, Path],
) -> None:
    url, lock_file = database
    turns = writer_turns(create_database_engine(url))
    with turns:
        with turns:
            assert someone_holds(lock_file)
        assert someone_holds(lock_file)
    assert not someone_holds(lock_file)


def test_other_threads_of_the_process_wait_for_the_holder(database: tuple[str, Path]) -> None:
    url, _ = database
    turns = writer_turns(create_database_engine(url))
    order: list[str] = []
    inside = threading.Event()
    let_go = threading.Event()

    def first() -> None:
        with turns:
            inside.set()
            let_go.wait(timeout=30)
            order.append("first")

    def second() -> None:
        inside.wait(timeout=30)
        with turns:
            order.append("second")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    inside.wait(timeout=30)
    let_go.set()
    for thread in threads:
        thread.join(timeout=30)
    assert order == ["first", "second"]


def test_a_database_server_has_no_turns_to_take() -> None:
    engine = create_database_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    with writer_turns(engine) as held:
        assert held is None
