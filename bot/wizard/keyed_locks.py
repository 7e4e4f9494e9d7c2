"""One lock per conversation, so replies racing in one thread are handled one at a time."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from storage.sessions import SessionKey


class KeyedLocks:
    """A lock for each SessionKey, made on first use and dropped when no one holds it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: weakref.WeakValueDictionary[SessionKey, threading.Lock] = (
            weakref.WeakValueDictionary()
        )

    @contextmanager
    def hold(self, key: SessionKey) -> Iterator[None]:
        """Hold `key`'s lock for the `with` block."""
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = threading.Lock()
                self._locks[key] = lock
        with lock:
            yield
