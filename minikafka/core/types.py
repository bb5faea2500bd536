"""Small value types shared by the core, the shell and the clients."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# (leader_epoch, start_offset) entries of a leader-epoch cache, ascending in both.
EpochEntry = tuple[int, int]

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
