"""Which bot process owns which conversations, when `artbot serve --workers N` runs several.

Every conversation of a channel belongs to one worker, `crc32("team/channel") % N` (the same in
every process, unlike `hash`): the router (`bot.process.router`) sends that channel's requests
there, and only that worker delivers its threads' Slack effects, follows its runs and expires its
sessions. So what one process keeps in memory per thread (its lock, its courier) is still the only
one.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from storage.sessions import SessionKey


@dataclass(frozen=True)
class Shard:
    """Worker `index` of `count` (0 of 1: the only process, owning everything)."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index} of {self.count}: want 0 <= index < count")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """'1/2' -> the second of two workers."""
        index, slash, count = text.partition("/")
        if not slash or not index.isdigit() or not count.isdigit():
            raise ValueError(f"a shard is INDEX/COUNT, e.g. 0/2, not {text!r}")
        return cls(int(index), int(count))

    @property
    def alone(self) -> bool:
        return self.count == 1

    def owns(self, key: SessionKey) -> bool:
        return self.alone or shard_of(key.team, key.channel, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


ALONE = Shard()
"""The only process: it owns every conversation."""


def shard_of(team: str, channel: str, count: int) -> int:
    """The worker, of `count`, that owns `channel`'s conversations."""
    return zlib.crc32(f"{team}/{channel}".encode()) % count
