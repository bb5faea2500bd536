"""The single LMDB writer on a real LogStore in tmp_path: group commit, FIFO, barrier, failures,
shutdown. Appends are queued before the writer starts (or while it is stopped) so that "queued
together" is a fact of the test, not of thread timing."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio
import trio.testing

from minikafka.common import TopicPartition
from minikafka.core.records import iter_batches, make_batch, peek_header
from minikafka.server.log_writer import LogWriter
from minikafka.storage import AppendWrite, LogStore, ReadSpec, StorageError, StoreConfig

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
CONFIG = StoreConfig(map_size_bytes=1 << 26, sync=False)


def batch(base: int, count: int = 1, tag: bytes = b"v") -> bytes:
    return make_batch([(0, None, tag * 10)] * count, base_offset=base, leader_epoch=0)


def write(tp: TopicPartition, base: int, count: int = 1) -> AppendWrite:
    return AppendWrite(tp=tp, batches=[batch(base, count, tag=bytes([65 + base % 26]))])


def read_all(store: LogStore, tp: TopicPartition = TP) -> list[tuple[int, int]]:
    [blob] = store.read(
        [ReadSpec(tp=tp, fetch_offset=0, max_offset=10**9, partition_max_bytes=1 << 30)], 1 << 30
    )
    return [(b.base_offset, b.count) for b in iter_batches(blob)]


@pytest.fixture
def store(tmp_path):
    s = LogStore(tmp_path / "lmdb", CONFIG)
    s.create_partition(TP)
    s.create_partition(TP1)
    yield s
    s.close()


def record_commits(writer: LogWriter) -> list[list[tuple[TopicPartition, int, int]]]:
    """Hook on_committed; each call is logged as [(tp, first base, new LEO) per write]."""
    log: list[list[tuple[TopicPartition, int, int]]] = []

    def hook(writes: Sequence[AppendWrite]) -> None:
        entry = []
        for w in writes:
            if w.batches:
                last_base, _e, last_count = peek_header(w.batches[-1])
                entry.append((w.tp, peek_header(w.batches[0])[0], last_base + last_count))
        log.append(entry)

    writer.on_committed = hook
    return log


async def test_queued_appends_commit_together_in_fifo_order(store):
    writer = LogWriter(store)
    committed = record_commits(writer)
    n = 8
    next_offset = 0
    done: list[int] = []

    async def produce(count: int) -> None:
        nonlocal next_offset
        base = next_offset  # reserve offsets and queue with no checkpoint in between
        next_offset += count
        await writer.append([write(TP, base, count)])
        done.append(base)

    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(produce, 1 + i % 3)
        await trio.testing.wait_all_tasks_blocked()  # all queued, none written yet
        assert writer.commits == 0 and done == []
        await nursery.start(writer.run)
        while len(done) < n:
            await trio.sleep(0)
        writer.close()
    assert writer.commits < n
    assert writer.commits == 1  # all eight were queued together: one transaction
    batches = read_all(store)
    # FIFO: whichever order the tasks ran in, the offsets they reserved are contiguous on disk.
    assert [base for base, _ in batches] == [sum(b[1] for b in batches[:i]) for i in range(n)]
    assert batches[-1][0] + batches[-1][1] == next_offset
    assert committed == [[(TP, 0, next_offset)]]  # one hook call, merged per partition


async def test_barrier_returns_after_earlier_appends_are_durable(store):
    writer = LogWriter(store)
    order: list[str] = []
    writer.on_committed = lambda writes: order.append(f"commit {len(writes)}")
    async with trio.open_nursery() as nursery:

        async def append(tp: TopicPartition, base: int) -> None:
            await writer.append([write(tp, base)])
            order.append(f"append {tp.partition}@{base} returned")

        nursery.start_soon(append, TP, 0)
        nursery.start_soon(append, TP1, 0)
        await trio.testing.wait_all_tasks_blocked()

        async def barrier() -> None:
            await writer.barrier()
            order.append("barrier returned")
            # Durable: a fresh read sees both appends.
            assert read_all(store, TP) == [(0, 1)] and read_all(store, TP1) == [(0, 1)]
            assert store.load_partition(TP).log_end_offset == 1

        nursery.start_soon(barrier)
        await trio.testing.wait_all_tasks_blocked()
        await nursery.start(writer.run)
        while "barrier returned" not in order:
            await trio.sleep(0)
        writer.close()
    assert order.index("commit 2") < order.index("barrier returned")
    assert writer.commits == 1


async def test_failing_append_raises_calls_on_failed_and_writer_goes_on(store):
    writer = LogWriter(store)
    committed = record_commits(writer)
    failed: list[Sequence[AppendWrite]] = []
    writer.on_failed = failed.append
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        await writer.append([write(TP, 0)])
        with pytest.raises(StorageError, match="starts below the log end"):
            await writer.append([write(TP, 0)])  # LEO is 1: it overlaps
        assert [w.tp for ws in failed for w in ws] == [TP]
        assert read_all(store) == [(0, 1)]  # nothing of it was written
        await writer.append([write(TP, 1)])  # later ops are served
        assert await writer.call(lambda: "ok") == "ok"
        writer.close()
    assert read_all(store) == [(0, 1), (1, 1)]
    assert [c[0][2] for c in committed] == [1, 2]


async def test_bad_append_in_a_group_does_not_fail_the_others(store):
    """Group commit is an optimisation: a bad append queued beside good ones must fail alone."""
    writer = LogWriter(store)
    failed: list[Sequence[AppendWrite]] = []
    writer.on_failed = failed.append
    outcomes: dict[str, object] = {}
    async with trio.open_nursery() as nursery:

        async def append(name: str, w: AppendWrite) -> None:
            try:
                await writer.append([w])
                outcomes[name] = "ok"
            except StorageError as exc:
                outcomes[name] = exc

        nursery.start_soon(append, "good-tp1", write(TP1, 0))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(append, "bad-tp0", AppendWrite(tp=TP, batches=[b"\x00" * 10]))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(append, "good-tp0", write(TP, 0))
        await trio.testing.wait_all_tasks_blocked()
        await nursery.start(writer.run)
        while len(outcomes) < 3:
            await trio.sleep(0)
        writer.close()
    assert outcomes["good-tp1"] == "ok"
    assert outcomes["good-tp0"] == "ok"
    assert isinstance(outcomes["bad-tp0"], StorageError)
    assert read_all(store, TP1) == [(0, 1)]
    assert read_all(store, TP) == [(0, 1)]
    assert [w.tp for ws in failed for w in ws] == [TP]


async def test_shutdown_releases_queued_waiters(store):
    writer = LogWriter(store)
    errors: list[BaseException] = []

    async def append(base: int) -> None:
        try:
            await writer.append([write(TP, base)])
        except RuntimeError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        for base in range(3):
            nursery.start_soon(append, base)
        await trio.testing.wait_all_tasks_blocked()
        with trio.CancelScope() as scope:
            scope.cancel()  # the writer stops at its first checkpoint, with 3 ops queued
            await writer.run()
    # The nursery exited: nobody hung on an op that will never run.
    assert len(errors) == 3
    assert all("stopped" in str(e) for e in errors)
    assert read_all(store) == []


async def test_a_caller_cancelled_with_the_writer_ends_cancelled_not_failed(store):
    """A node stopping cancels its writer and the tasks waiting on it together. A waiter used to
    get RuntimeError("the log writer stopped") instead of Cancelled, which its nursery reported
    as the node's crash: in simulated time that took the whole cluster down (found by the
    follower-behind-retention experiment, whose retention task waits on the writer often)."""
    writer = LogWriter(store)
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.append, [write(TP, 0)])
            await trio.testing.wait_all_tasks_blocked()  # queued, the writer not yet running
            scope.cancel()
            await writer.run()
    assert scope.cancelled_caught  # only Cancelled came out: no error group
    assert read_all(store) == []


async def test_ops_after_shutdown_fail_instead_of_hanging(store):
    writer = LogWriter(store)
    with trio.CancelScope() as scope:
        scope.cancel()
        await writer.run()
    outcome: list[object] = []

    async def late_append() -> None:
        try:
            await writer.append([write(TP, 0)])
            outcome.append("ok")
        except Exception as exc:  # noqa: BLE001
            outcome.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(late_append)
        await trio.testing.wait_all_tasks_blocked()
        hung = not outcome
        if hung:  # unblock the shielded waiter so that the test can report instead of hanging
            nursery.start_soon(writer.run)
            while not outcome:
                await trio.sleep(0)
            writer.close()
    assert not hung, "an append queued after the writer stopped waited forever"
    assert isinstance(outcome[0], Exception)
    assert read_all(store) == []
