"""Fetch byte caps: how many whole batches a fetch returns (KIP-74), one partition or a response.

This module owns the size policy of every read, leader-side consumer and replica fetches alike.
It works on batch sizes only, so the store (and the in-memory log of the test kit) can feed it
lazily from a cursor and stop reading as soon as the cap is reached.

The rules, mirroring Kafka's `ReplicaManager.readFromLocalLog` and `LogSegment.read` after
KIP-74 ("Add Fetch Response Size Limit in Bytes"):

1. Partitions are filled in request order. Each partition may take
   `min(partition_max_bytes, remaining_response_bytes)`, where the remaining response bytes are
   `response_max_bytes` minus everything already taken (never below zero).
2. Only whole batches are returned: batches are taken in log order while the running total
   stays <= the partition's limit.
3. The limits are soft for one batch only. Kafka starts with
   `minOneMessage = !hardMaxBytesLimit` and clears it once a partition returns any data
   ("Once we read from a non-empty partition, we stop ignoring request and partition level size
   limits"). While it is set, a first batch larger than the partition's limit is returned alone,
   so a consumer or follower can always make progress past an oversized batch (KIP-74: "the first
   message in the first non-empty partition of the fetch is returned even if it is larger than
   the limit").
4. For every later partition the limits are hard: a first batch larger than its limit returns
   nothing for that partition (Kafka: `firstEntryIncomplete` becomes an empty record set for
   fetch versions >= 3 rather than a partial batch; here we never return partial batches).

`hard_max_bytes_limit=True` mirrors pre-KIP-74 fetch versions (<= 2): no batch is ever returned
above a limit. Batch sizes are positive (a batch is at least its 38-byte header).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["ResponseBudget", "plan_response", "take_batches"]


def take_batches(sizes: Iterable[int], limit: int, min_one: bool) -> tuple[int, int]:
    """(number of batches taken, bytes taken) from the front of `sizes` under `limit`.

    Whole batches are taken in order while the running total stays <= `limit`. When `min_one` is
    set and the very first batch alone exceeds `limit`, exactly that batch is taken (KIP-74).
    `sizes` is consumed lazily: at most one size past the last batch taken is pulled.
    """
    taken = 0
    total = 0
    for size in sizes:
        if total + size > limit:
            if taken == 0 and min_one:
                return 1, size
            break
        taken += 1
        total += size
    return taken, total


class ResponseBudget:
    """The byte budget of one multi-partition read, filled partition by partition in request order.

    Mirrors the loop of Kafka's `ReplicaManager.readFromLocalLog`:

        var limitBytes = params.maxBytes
        var minOneMessage = !params.hardMaxBytesLimit
        for each partition:  read(tp, min(partitionMaxBytes, limitBytes), minOneMessage)
                             if (recordBatchSize > 0) minOneMessage = false
                             limitBytes = max(0, limitBytes - recordBatchSize)

    Use `take()` when the sizes are at hand, or `partition_limit()` + `record()` when the caller
    runs its own loop.
    """

    __slots__ = ("min_one", "remaining_bytes")

    def __init__(self, response_max_bytes: int, *, hard_max_bytes_limit: bool = False) -> None:
        self.remaining_bytes = max(0, response_max_bytes)
        # True until the first partition that returns any data (KIP-74's "first non-empty partition").
        self.min_one = not hard_max_bytes_limit

    def partition_limit(self, partition_max_bytes: int) -> int:
        """The cap of the next partition: min(partition_max_bytes, remaining response bytes)."""
        return max(0, min(partition_max_bytes, self.remaining_bytes))

    def exhausted(self) -> bool:
        """True when no later partition can return anything (no budget, no soft first batch)."""
        return self.remaining_bytes == 0 and not self.min_one

    def record(self, nbytes: int) -> None:
        """Charge the bytes a partition returned; any data ends the soft first batch."""
        if nbytes > 0:
            self.min_one = False
            self.remaining_bytes = max(0, self.remaining_bytes - nbytes)

    def take(self, sizes: Iterable[int], partition_max_bytes: int) -> tuple[int, int]:
        """Apply the policy to the next partition's batch sizes: (batches taken, bytes taken).

        `sizes` is not touched at all when the response is exhausted, so a lazy cursor-backed
        iterable costs nothing for the partitions after the cap.
        """
        if self.exhausted():
            return 0, 0
        taken = take_batches(sizes, self.partition_limit(partition_max_bytes), self.min_one)
        self.record(taken[1])
        return taken


def plan_response(
    partitions: Sequence[Sequence[int]],
    partition_max_bytes: int | Sequence[int],
    response_max_bytes: int,
    *,
    hard_max_bytes_limit: bool = False,
) -> list[tuple[int, int]]:
    """(batches, bytes) per partition for a whole response, given each partition's batch sizes.

    `partitions[i]` are the sizes of partition i's batches from its fetch offset on; the
    per-partition cap is one number for all or one per partition.
    """
    if isinstance(partition_max_bytes, int):
        caps: Sequence[int] = [partition_max_bytes] * len(partitions)
    else:
        caps = partition_max_bytes
        if len(caps) != len(partitions):
            raise ValueError("one partition_max_bytes per partition, or a single number")
    budget = ResponseBudget(response_max_bytes, hard_max_bytes_limit=hard_max_bytes_limit)
    return [budget.take(sizes, cap) for sizes, cap in zip(partitions, caps, strict=True)]
