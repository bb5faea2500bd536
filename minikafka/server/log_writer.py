"""The single writer of a node's LMDB environment (LMDB allows one write transaction at a time).

Every change to the logs (appends from producers and from replica fetchers, truncations,
checkpoints, partition creation and deletion) is an operation on one FIFO queue, executed by
one task in a worker thread (`trio.to_thread.run_sync`), one transaction per call, never held
across an `await`. Appends waiting in the queue together are merged into one transaction
(group commit), so one sync covers many produce requests. Because the queue is FIFO, `barrier()`
returns only after every change queued before it is durable: a broker uses it before it turns a
partition from leader into follower, so no append of the old role lands after the new one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import trio

from minikafka.clock import RunSync
from minikafka.common import EpochEntry, TopicPartition
from minikafka.core.log_config import LogConfig
from minikafka.core.log_retention import RetentionPlan
from minikafka.core.producer_state import ProducerStateManager
from minikafka.storage import AppendWrite, LoadedPartition, LogStore, StorageError

MAX_GROUP_BYTES = 64 << 20  # bound one group commit


class WriterStopped(RuntimeError):
    """An op that will never run: the writer stopped (the node is shutting down)."""


@dataclass(slots=True)
class _Op:
    kind: str
    call: Callable[[], object] | None = None  # for non-append ops
    writes: Sequence[AppendWrite] = ()
    size: int = 0
    done: trio.Event = field(default_factory=trio.Event)
    result: object = None
    error: BaseException | None = None
    failed: dict[TopicPartition, Exception] = field(default_factory=dict)  # appends, per partition


class LogWriter:
    def __init__(
        self,
        store: LogStore,
        *,
        queue_len: int = 4096,
        on_committed: Callable[[Sequence[AppendWrite]], None] = lambda _writes: None,
        on_failed: Callable[[Sequence[AppendWrite]], None] = lambda _writes: None,
        run_sync: RunSync = trio.to_thread.run_sync,
        log_config: Callable[[TopicPartition], LogConfig] | None = None,
    ) -> None:
        self.store = store
        # Each partition's segment.bytes and segment.ms, read as its appends commit (a config
        # changed live applies from the next commit, as LogConfig does in Kafka); None: the
        # store's Kafka defaults.
        self.log_config = log_config
        self._send, self._recv = trio.open_memory_channel[_Op](queue_len)
        self.commits = 0
        self.bytes_written = 0
        # Hooks run in the Trio thread right after a commit (or a failed one), before any waiter
        # wakes, so in-memory offsets change in exactly the order the disk did.
        self.on_committed = on_committed
        self.on_failed = on_failed
        # How a store call leaves the event loop: a worker thread, or inline in MockClock tests
        # (testing/memory_node.py `run_sync_inline`), where a thread would let time leap.
        self.run_sync = run_sync

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        group: list[_Op] = []
        try:
            async for op in self._recv:
                group = [op]
                if op.kind == "append":
                    group += self._drain_appends(op.size)
                await self._execute(group)
        finally:
            # Shutting down: nobody may wait forever on an op that will never run.
            stopped = WriterStopped("the log writer stopped")
            while True:
                try:
                    group.append(self._recv.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
            for op in group:
                if not op.done.is_set():
                    op.error = op.error or stopped
                    op.done.set()
            # Later ops fail at once (BrokenResourceError in _submit) instead of waiting forever.
            self._recv.close()

    def _drain_appends(self, size: int) -> list[_Op]:
        more: list[_Op] = []
        while size < MAX_GROUP_BYTES:
            try:
                nxt = self._recv.receive_nowait()
            except trio.WouldBlock:
                break
            if nxt.kind != "append":
                # Keep FIFO order: this op goes after the group; requeue at the front is not
                # possible on a channel, so execute the group and then it.
                more.append(nxt)
                break
            more.append(nxt)
            size += nxt.size
        return more

    async def _execute(self, group: list[_Op]) -> None:
        appends = [op for op in group if op.kind == "append"]
        others = [op for op in group if op.kind != "append"]
        if appends:
            await self._commit(appends)
        for op in others:  # at most one, and it was queued after the appends
            try:
                op.result = await self.run_sync(op.call)
            except Exception as exc:  # noqa: BLE001
                op.error = exc
            op.done.set()

    async def _commit(self, appends: list[_Op]) -> None:
        writes = self._rolling(_merge([w for op in appends for w in op.writes]))
        try:
            await self.run_sync(self.store.append, writes)
        except Exception as exc:  # noqa: BLE001 - handed to the waiter
            if len(appends) > 1:
                # One bad append must not fail the others merged with it: retry one by one
                # (FIFO), so that only the bad one (and what depends on it) fails.
                for op in appends:
                    await self._commit([op])
                return
            if len(writes) > 1:
                # One op of several partitions: a partition whose log cannot be written fails
                # alone (Kafka's ReplicaManager.appendToLocalLog answers per partition).
                await self._commit_each(appends[0], writes)
                return
            appends[0].error = exc
            appends[0].failed = {w.tp: exc for w in writes}
            self.on_failed(writes)
        else:
            self._committed(appends, writes)
        for op in appends:
            op.done.set()

    def _rolling(self, writes: list[AppendWrite]) -> list[AppendWrite]:
        if self.log_config is None:
            return writes
        out = []
        for w in writes:
            c = self.log_config(w.tp)
            out.append(replace(w, segment_bytes=c.segment_bytes, segment_ms=c.segment_ms))
        return out

    async def _commit_each(self, op: _Op, writes: list[AppendWrite]) -> None:
        ok = []
        for w in writes:
            try:
                await self.run_sync(self.store.append, [w])
            except Exception as exc:  # noqa: BLE001 - handed to the waiter
                op.failed[w.tp] = exc
                self.on_failed([w])
            else:
                ok.append(w)
        if ok:
            self._committed([op], ok)
        if not ok:
            op.error = next(iter(op.failed.values()))
        op.done.set()

    def _committed(self, appends: list[_Op], writes: list[AppendWrite]) -> None:
        self.commits += 1
        self.bytes_written += sum(op.size for op in appends)
        self.on_committed(writes)

    async def _submit(self, op: _Op) -> object:
        try:
            await self._send.send(op)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await trio.lowlevel.checkpoint_if_cancelled()
            raise WriterStopped("the log writer stopped") from None
        await _wait_shielded(op.done)
        if op.error is not None:
            if isinstance(op.error, WriterStopped):
                # The node is stopping: a caller cancelled with it ends as cancelled, not with
                # an error its nursery would report as the node's crash.
                await trio.lowlevel.checkpoint_if_cancelled()
            raise op.error
        return op.result

    async def append(self, writes: Sequence[AppendWrite]) -> None:
        """Append; raises if any partition's write failed (the others may be committed)."""
        failed = await self.append_each(writes)
        if failed:
            raise next(iter(failed.values()))

    async def append_each(self, writes: Sequence[AppendWrite]) -> dict[TopicPartition, Exception]:
        """Append as one op (queued at once, so offsets stamped in order are written in order);
        -> the partitions whose write failed, with why (the others are committed)."""
        size = sum(len(b) for w in writes for b in w.batches)
        op = _Op("append", writes=writes, size=size)
        try:
            await self._submit(op)
        except Exception:  # noqa: BLE001 - reported per partition below
            if not op.failed:
                raise
        return dict(op.failed)

    async def call(self, fn: Callable[[], object]) -> object:
        return await self._submit(_Op("call", call=fn))

    async def barrier(self) -> None:
        await self.call(lambda: None)

    async def create(self, tp: TopicPartition) -> LoadedPartition:
        return await self.call(lambda: self.store.create_partition(tp))  # type: ignore[return-value]

    async def create_many(
        self, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, LoadedPartition | StorageError]:
        """Create many partitions in one op and one transaction (LogStore.create_partitions)."""
        wanted = list(tps)
        return await self.call(lambda: self.store.create_partitions(wanted))  # type: ignore[return-value]

    async def delete(self, tp: TopicPartition) -> None:
        await self.call(lambda: self.store.delete_partition(tp))

    async def truncate(self, tp: TopicPartition, offset: int, epochs: list[EpochEntry]) -> int:
        return await self.call(lambda: self.store.truncate(tp, offset, epochs))  # type: ignore[return-value]

    async def truncate_fully(self, tp: TopicPartition, new_start_offset: int) -> None:
        await self.call(lambda: self.store.truncate_fully(tp, new_start_offset))

    async def checkpoint(
        self,
        high_watermarks: Mapping[TopicPartition, int],
        producer_snapshots: Mapping[TopicPartition, tuple[int, list[object]]] | None = None,
    ) -> None:
        hws, snaps = dict(high_watermarks), dict(producer_snapshots or {})

        def both() -> None:
            self.store.checkpoint(hws)
            if snaps:
                self.store.save_producer_snapshots(snaps)

        await self.call(both)

    async def advance_log_start(self, tp: TopicPartition, offset: int) -> int:
        """Move the persisted log start offset forward to `offset` (retention, DeleteRecords,
        the leader's taken by a follower); the batches wholly below it are deleted, a bounded
        number per transaction. -> how many are still left to delete (`purge`)."""
        return await self.call(lambda: self.store.advance_log_start(tp, offset))  # type: ignore[return-value]

    async def run_retention(
        self, tp: TopicPartition, config: LogConfig, *, high_watermark: int
    ) -> tuple[RetentionPlan, int]:
        """One retention run of `tp` (storage/log_store.py `run_retention`), planned and applied
        in one transaction after every op queued before it. -> (the plan, keys left to purge)."""
        return await self.call(  # type: ignore[return-value]
            lambda: self.store.run_retention(
                tp,
                high_watermark=high_watermark,
                retention_ms=config.retention_ms,
                retention_bytes=config.retention_bytes,
                delete_enabled=config.delete_enabled,
            )
        )

    async def purge(self, tp: TopicPartition) -> int:
        """Delete a bounded number of the batches left below the log start; -> how many are
        still left."""
        return await self.call(lambda: self.store.purge(tp))  # type: ignore[return-value]

    async def load_producers(self, tp: TopicPartition) -> ProducerStateManager:
        """The producer state of the log as committed (after every op queued before)."""
        return await self.call(lambda: self.store.load_producers(tp))  # type: ignore[return-value]

    def close(self) -> None:
        self._send.close()


def _merge(writes: list[AppendWrite]) -> list[AppendWrite]:
    """One AppendWrite per partition, batches in queue order, the latest epochs/HW winning."""
    merged: dict[TopicPartition, AppendWrite] = {}
    for w in writes:
        prev = merged.get(w.tp)
        if prev is None:
            merged[w.tp] = w
            continue
        merged[w.tp] = AppendWrite(
            tp=w.tp,
            batches=[*prev.batches, *w.batches],
            epochs=w.epochs if w.epochs is not None else prev.epochs,
            high_watermark=w.high_watermark
            if w.high_watermark is not None
            else prev.high_watermark,
        )
    return list(merged.values())


async def _wait_shielded(event: trio.Event) -> None:
    """Wait for a queued op even if the caller is cancelled: once queued, a write happens, and
    the caller's in-memory state must learn its outcome before it moves on."""
    with trio.CancelScope(shield=True):
        await event.wait()
