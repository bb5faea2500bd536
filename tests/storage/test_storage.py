"""LogStore and MetadataStore on real LMDB environments in tmp_path.

Batches here are built with `make_batch`; `batch(base, count)` holds `count` records of 100-byte
values (so a 1-record batch is 38 header bytes + a small msgpack payload).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minikafka.common import TopicPartition
from minikafka.core.fetch_limits import take_batches
from minikafka.core.records import iter_batches, make_batch
from minikafka.storage import (
    AppendWrite,
    EnvLease,
    LogStore,
    MetadataStore,
    ReadSpec,
    StorageError,
    StoreConfig,
)

TP = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
SMALL = StoreConfig(map_size_bytes=1 << 30)
BIG = 1 << 30


def batch(base: int, count: int, value_bytes: int = 100, epoch: int = 0) -> bytes:
    records = [(base + i, None, bytes([65 + (base + i) % 26]) * value_bytes) for i in range(count)]
    return make_batch(records, base_offset=base, leader_epoch=epoch)


def chain(counts: list[int], start: int = 0, value_bytes: int = 100) -> list[bytes]:
    """Contiguous batches with the given record counts, from offset `start`."""
    out = []
    for count in counts:
        out.append(batch(start, count, value_bytes))
        start += count
    return out


def spec(tp=TP, fetch=0, max_offset=10**9, cap=BIG) -> ReadSpec:
    return ReadSpec(tp=tp, fetch_offset=fetch, max_offset=max_offset, partition_max_bytes=cap)


def read_one(store: LogStore, **kwargs) -> bytes:
    return store.read([spec(**kwargs)], BIG)[0]


@pytest.fixture
def store(tmp_path: Path):
    with LogStore(tmp_path / "node", SMALL) as s:
        s.create_partition(TP)
        yield s


# -- append / read --------------------------------------------------------------------------------


def test_new_partition_is_empty_and_create_is_idempotent(store: LogStore) -> None:
    store.append([AppendWrite(tp=TP, batches=chain([3]), high_watermark=2, epochs=[(0, 0)])])
    again = store.create_partition(TP)  # loads, does not reset
    assert (again.log_start_offset, again.log_end_offset, again.high_watermark) == (0, 3, 2)
    assert again.epochs == [(0, 0)]
    fresh = store.create_partition(TP1)
    assert (fresh.log_start_offset, fresh.log_end_offset, fresh.high_watermark) == (0, 0, 0)
    assert store.list_partitions() == [TP, TP1]


def test_create_partitions_creates_many_in_one_call_up_to_the_cap(tmp_path: Path) -> None:
    """A LeaderAndIsr's new partitions are created in one transaction; those over the
    store's cap get their StorageError and the others are created (and survive a reopen)."""
    tps = [TopicPartition("big", p) for p in range(5)]
    config = StoreConfig(map_size_bytes=1 << 30, max_partitions=4)
    with LogStore(tmp_path / "node", config) as s:
        s.create_partition(tps[0])
        s.append([AppendWrite(tp=tps[0], batches=chain([3]))])
        out = s.create_partitions([*tps, tps[1]])  # a repeat is created once
        assert list(out) == tps
        assert out[tps[0]].log_end_offset == 3  # loaded unchanged, not reset
        assert [out[tp].log_end_offset for tp in tps[1:4]] == [0, 0, 0]
        fields = ("log_start_offset", "log_end_offset", "high_watermark", "epochs")
        for tp in tps[1:4]:  # a new log is not read back: it is what reading it would give
            loaded = s.load_partition(tp)
            assert [getattr(out[tp], f) for f in fields] == [getattr(loaded, f) for f in fields]
        assert isinstance(out[tps[4]], StorageError)
        assert "max.broker.partitions" in str(out[tps[4]])
    with LogStore(tmp_path / "node", config) as s:
        assert s.list_partitions() == tps[:4]


def test_append_read_round_trip(store: LogStore) -> None:
    batches = chain([3, 1, 5])
    store.append([AppendWrite(tp=TP, batches=batches[:2]), AppendWrite(tp=TP, batches=batches[2:])])
    assert store.load_partition(TP).log_end_offset == 9
    blob = read_one(store, fetch=0)
    assert blob == b"".join(batches)
    assert [b.base_offset for b in iter_batches(blob)] == [0, 3, 4]  # CRCs intact


def test_a_gap_is_a_compacted_leaders_and_is_kept(store: LogStore) -> None:
    """A follower copies a compacted leader's batches with the offsets between them gone
    (Kafka's UnifiedLog.append refuses only a batch below the log end); a read from inside the
    gap gets the next batch, as LogSegment.read serves it."""
    store.append([AppendWrite(tp=TP, batches=[batch(0, 3), batch(7, 2)])])
    assert store.load_partition(TP).log_end_offset == 9
    assert [b.base_offset for b in iter_batches(read_one(store, fetch=4))] == [7]
    assert [s.base_offset for s in store.segments(TP)] == [0]


def test_one_append_spans_partitions(store: LogStore) -> None:
    store.create_partition(TP1)
    store.append([AppendWrite(tp=TP, batches=chain([2])), AppendWrite(tp=TP1, batches=chain([4]))])
    loaded = store.load_all()
    assert loaded[TP].log_end_offset == 2 and loaded[TP1].log_end_offset == 4


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda: [AppendWrite(tp=TP1, batches=chain([2], start=1))], id="overlap"),
        pytest.param(
            lambda: [AppendWrite(tp=TP1, batches=[batch(3, 2), batch(4, 1)])], id="behind"
        ),
        pytest.param(lambda: [AppendWrite(tp=TopicPartition("nope", 0), batches=[])], id="unknown"),
        pytest.param(lambda: [AppendWrite(tp=TP1, batches=[batch(3, 2)[:-1]])], id="short"),
        pytest.param(lambda: [AppendWrite(tp=TP1, batches=[b"\x00" * 10])], id="no-header"),
    ],
)
def test_invalid_append_writes_nothing(store: LogStore, bad) -> None:
    store.create_partition(TP1)
    store.append([AppendWrite(tp=TP1, batches=chain([3]), high_watermark=1, epochs=[(0, 0)])])
    before = read_one(store, tp=TP1)
    # The valid write to TP comes first in the same call; it must be rolled back too.
    good = AppendWrite(tp=TP, batches=chain([2]), high_watermark=2, epochs=[(7, 0)])
    with pytest.raises(StorageError):
        store.append([good, *bad()])
    # Reads do not consult the in-memory LEO cache: nothing of either write is on disk.
    assert read_one(store, tp=TP) == b""
    assert read_one(store, tp=TP1) == before
    # The LEO cache was not advanced by the failed transaction (load_partition would rebuild
    # it, so it is not called before this): the same valid appends fit now.
    store.append([good])
    store.append([AppendWrite(tp=TP1, batches=chain([1], start=3))])
    loaded, loaded1 = store.load_partition(TP), store.load_partition(TP1)
    assert (loaded.log_end_offset, loaded.high_watermark, loaded.epochs) == (2, 2, [(7, 0)])
    assert (loaded1.log_end_offset, loaded1.high_watermark, loaded1.epochs) == (4, 1, [(0, 0)])


def test_read_from_the_middle_of_a_batch(store: LogStore) -> None:
    batches = chain([3, 3, 3])  # offsets 0-2, 3-5, 6-8
    store.append([AppendWrite(tp=TP, batches=batches)])
    assert read_one(store, fetch=4) == b"".join(batches[1:])  # the batch containing 4, whole
    assert read_one(store, fetch=5) == b"".join(batches[1:])
    assert read_one(store, fetch=6) == batches[2]
    assert read_one(store, fetch=8) == batches[2]
    assert read_one(store, fetch=9) == b""  # at the LEO
    assert read_one(store, fetch=50) == b""


def test_max_offset_bounds_whole_batches(store: LogStore) -> None:
    batches = chain([3, 3, 3])
    store.append([AppendWrite(tp=TP, batches=batches)])
    assert read_one(store, fetch=0, max_offset=6) == b"".join(batches[:2])
    assert read_one(store, fetch=0, max_offset=5) == batches[0]  # batch 3-5 ends past 5
    assert read_one(store, fetch=4, max_offset=5) == b""  # its own batch is not below the bound
    assert read_one(store, fetch=0, max_offset=0) == b""


def test_kip74_caps_across_partitions(store: LogStore) -> None:
    tp2 = TopicPartition("orders", 2)
    for tp in (TP1, tp2):
        store.create_partition(tp)
    small, big = chain([1, 1, 1]), chain([20])  # big: one batch of 20 x 100-byte values
    store.append(
        [
            AppendWrite(tp=TP, batches=small),
            AppendWrite(tp=TP1, batches=big),
            AppendWrite(tp=tp2, batches=big),
        ]
    )
    s = len(small[0])
    assert len(big[0]) > 1000 and s < 200
    # Empty/unknown partitions first do not spend KIP-74's exception; TP1's oversized batch
    # comes back alone; tp2's does not (its cap is hard now); TP then fits 2 small batches in
    # a cap of 2.5 of them.
    specs = [
        spec(tp=TopicPartition("unknown", 0)),
        spec(tp=TP, fetch=3),  # at the LEO: empty
        spec(tp=TP1, cap=1000),
        spec(tp=tp2, cap=1000),
        spec(tp=TP, cap=int(2.5 * s)),
    ]
    assert store.read(specs, BIG) == [b"", b"", big[0], b"", b"".join(small[:2])]
    # The response cap: after TP1's big batch the response (len(big) + s) has room for one small.
    specs = [spec(tp=TP1, cap=1000), spec(tp=TP, cap=BIG)]
    assert store.read(specs, len(big[0]) + s) == [big[0], small[0]]
    # With the small partition first, the big one gets only what is left: nothing.
    specs = [spec(tp=TP, cap=BIG), spec(tp=TP1, cap=BIG)]
    assert store.read(specs, 3 * s + 10) == [b"".join(small), b""]


# -- truncation -----------------------------------------------------------------------------------


def test_truncate_mid_batch_removes_the_whole_batch(store: LogStore) -> None:
    batches = chain([3, 3, 3])
    store.append([AppendWrite(tp=TP, batches=batches, high_watermark=9, epochs=[(0, 0), (1, 6)])])
    assert store.truncate(TP, 4, [(0, 0)]) == 3  # batch 3-5 contains 4: it goes whole
    loaded = store.load_partition(TP)
    assert (loaded.log_end_offset, loaded.high_watermark, loaded.epochs) == (3, 3, [(0, 0)])
    assert read_one(store, fetch=0) == batches[0]
    store.append([AppendWrite(tp=TP, batches=[batch(3, 2, epoch=2)])])  # the log goes on at 3
    assert store.load_partition(TP).log_end_offset == 5


def test_truncate_at_boundary_and_beyond(store: LogStore) -> None:
    batches = chain([3, 3, 3])
    store.append([AppendWrite(tp=TP, batches=batches, high_watermark=4)])
    assert store.truncate(TP, 9, [(0, 0)]) == 9  # at the LEO: nothing to remove
    assert store.truncate(TP, 50, [(0, 0)]) == 9
    assert store.truncate(TP, 6, [(0, 0)]) == 6
    assert read_one(store) == b"".join(batches[:2])
    assert store.load_partition(TP).high_watermark == 4  # below the new LEO: unchanged
    assert store.truncate(TP, 0, []) == 0
    loaded = store.load_partition(TP)
    assert (loaded.log_end_offset, loaded.high_watermark, loaded.epochs) == (0, 0, [])
    assert read_one(store) == b""


def test_truncate_fully_moves_the_log_start(store: LogStore) -> None:
    store.append([AppendWrite(tp=TP, batches=chain([5]), high_watermark=5, epochs=[(3, 0)])])
    store.truncate_fully(TP, 100)
    loaded = store.load_partition(TP)
    assert (loaded.log_start_offset, loaded.log_end_offset) == (100, 100)
    assert (loaded.high_watermark, loaded.epochs) == (100, [])
    assert read_one(store, fetch=0) == b""
    with pytest.raises(StorageError, match="starts below the log end 100"):
        store.append([AppendWrite(tp=TP, batches=chain([1]))])
    store.append([AppendWrite(tp=TP, batches=chain([2], start=100))])
    assert read_one(store, fetch=0) == b""  # below the log start: nothing contains offset 0
    assert read_one(store, fetch=101) == batch(100, 2)


# -- persistence ----------------------------------------------------------------------------------


def test_reopen_restores_leo_hw_and_epochs(tmp_path: Path) -> None:
    path = tmp_path / "node"
    batches = chain([2, 2])
    with LogStore(path, SMALL) as store:
        store.create_partition(TP)
        store.create_partition(TP1)
        store.append([AppendWrite(tp=TP, batches=batches, epochs=[(0, 0), (2, 2)])])
        store.checkpoint({TP: 3})
        store.truncate_fully(TP1, 42)
    with LogStore(path, SMALL) as store:
        loaded = store.load_all()
        assert loaded[TP].log_end_offset == 4 and loaded[TP].high_watermark == 3
        assert loaded[TP].epochs == [(0, 0), (2, 2)]
        assert (loaded[TP1].log_start_offset, loaded[TP1].log_end_offset) == (42, 42)
        assert read_one(store) == b"".join(batches)
        store.append([AppendWrite(tp=TP, batches=chain([1], start=4))])  # LEO cache rebuilt
        assert store.load_partition(TP).log_end_offset == 5


def test_high_watermark_is_clamped_to_leo(store: LogStore) -> None:
    store.append([AppendWrite(tp=TP, batches=chain([3]), high_watermark=99)])
    assert store.load_partition(TP).high_watermark == 3
    store.checkpoint({TP: 50, TopicPartition("deleted", 0): 7})  # unknown partition: skipped
    assert store.load_partition(TP).high_watermark == 3
    store.checkpoint({TP: 2})
    assert store.load_partition(TP).high_watermark == 2


def test_many_partitions_in_one_environment(tmp_path: Path) -> None:
    tps = [TopicPartition(f"topic.{i % 20}", i // 20) for i in range(200)]
    with LogStore(tmp_path / "node", SMALL) as store:
        for tp in tps:
            store.create_partition(tp)
        store.append(
            [
                AppendWrite(tp=tp, batches=chain([1 + i % 4]), high_watermark=1)
                for i, tp in enumerate(tps)
            ]
        )
        store.delete_partition(tps[0])
    with LogStore(tmp_path / "node", SMALL) as store:
        loaded = store.load_all()
        assert sorted(loaded) == sorted(tps[1:])
        assert all(loaded[tp].log_end_offset == 1 + i % 4 for i, tp in enumerate(tps) if i)
        reads = store.read([spec(tp=tp) for tp in tps], BIG)
        assert reads[0] == b"" and reads[7] == chain([1 + 7 % 4])[0]


def test_delete_partition(store: LogStore) -> None:
    store.append([AppendWrite(tp=TP, batches=chain([3]))])
    store.delete_partition(TP)
    store.delete_partition(TP)  # absent: no error
    assert store.list_partitions() == []
    with pytest.raises(KeyError):
        store.load_partition(TP)
    assert read_one(store) == b""
    with pytest.raises(StorageError, match="no such partition"):
        store.append([AppendWrite(tp=TP, batches=chain([1]))])
    assert store.create_partition(TP).log_end_offset == 0  # recreated empty
    assert read_one(store) == b""


def test_closed_store_refuses_work(tmp_path: Path) -> None:
    store = LogStore(tmp_path / "node", SMALL)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StorageError, match="closed"):
        store.list_partitions()
    with pytest.raises(StorageError, match="closed"):
        store.disk_bytes()


def test_disk_bytes_grows_with_appends(store: LogStore) -> None:
    before = store.disk_bytes()
    store.append([AppendWrite(tp=TP, batches=chain([10] * 100, value_bytes=1000))])
    assert store.disk_bytes() >= before + 1_000_000


def test_concurrent_readers_writers_and_delete(store: LogStore) -> None:
    """Threads as trio.to_thread would run them: appends, reads and a delete interleave safely."""
    store.create_partition(TP1)
    errors: list[BaseException] = []

    def appender(tp: TopicPartition) -> None:
        try:
            for i in range(200):
                store.append([AppendWrite(tp=tp, batches=[batch(i, 1)], high_watermark=i)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(300):
                for blob in store.read([spec(tp=TP), spec(tp=TP1)], BIG):
                    offsets = [b.base_offset for b in iter_batches(blob)]
                    assert offsets == list(range(len(offsets)))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=f, args=a) for f, a in ((appender, (TP,)), (reader, ()))]
    threads += [threading.Thread(target=appender, args=(TP1,)), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    threads[0].join()
    store.delete_partition(TP)  # while the readers may still be running
    for t in threads:
        t.join()
    assert errors == []
    assert store.list_partitions() == [TP1]
    assert store.load_partition(TP1).log_end_offset == 200


# -- model-based: random appends, truncations and reads against a list of batches -----------------

ops_st = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.integers(1, 4), min_size=1, max_size=3)),
        st.tuples(st.just("truncate"), st.integers(0, 30)),
        st.tuples(st.just("read"), st.integers(0, 30), st.integers(0, 30), st.integers(0, 900)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops_st)
def test_store_matches_a_list_model(ops) -> None:
    model: list[bytes] = []  # the batches, in order

    def model_leo() -> int:
        return sum(next(iter_batches(b)).count for b in model)

    with tempfile.TemporaryDirectory() as tmp, LogStore(tmp, SMALL) as store:
        store.create_partition(TP)
        for op in ops:
            leo = model_leo()
            if op[0] == "append":
                batches = chain(op[1], start=leo, value_bytes=50)
                store.append([AppendWrite(tp=TP, batches=batches)])
                model.extend(batches)
            elif op[0] == "truncate":
                views = [next(iter_batches(b)) for b in model]
                model = [b for b, v in zip(model, views, strict=True) if v.last_offset < op[1]]
                assert store.truncate(TP, op[1], []) == model_leo()
            else:
                _, fetch, max_offset, cap = op
                views = [next(iter_batches(b)) for b in model]
                tail = [v for v in views if v.last_offset >= fetch]
                expected = b""
                if tail and tail[0].base_offset <= fetch:
                    eligible = [v.size for v in tail if v.next_offset <= max_offset]
                    n, _ = take_batches(eligible, cap, min_one=True)
                    expected = b"".join(v.raw for v in tail[:n])
                got = store.read([spec(fetch=fetch, max_offset=max_offset, cap=cap)], BIG)[0]
                assert got == expected
            assert store.load_partition(TP).log_end_offset == model_leo()


# -- durability -----------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import sys
    from minikafka.core.records import make_batch
    from minikafka.common import TopicPartition
    from minikafka.storage import AppendWrite, LogStore, StoreConfig

    store = LogStore(sys.argv[1], StoreConfig(sync=sys.argv[2] == "1", map_size_bytes=1 << 30))
    tp = TopicPartition("durable", 0)
    store.create_partition(tp)
    i = 0
    while True:
        b = make_batch([(i, None, (b"%d." % i) * 300)], base_offset=i)
        store.append([AppendWrite(tp=tp, batches=[b], high_watermark=i + 1)])
        print("committed", i, flush=True)
        i += 1
    """
)


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "nosync"])
def test_committed_appends_survive_sigkill(tmp_path: Path, sync: bool) -> None:
    path = tmp_path / "node"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), "1" if sync else "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    last = -1
    try:
        while last < 40:
            line = proc.stdout.readline()
            assert line, f"child died early: {proc.stderr.read().decode()}"
            assert line.startswith(b"committed ")
            last = int(line.split()[1])
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    tp = TopicPartition("durable", 0)
    with LogStore(path, StoreConfig(sync=sync, map_size_bytes=1 << 30)) as store:
        loaded = store.load_partition(tp)
        assert loaded.log_end_offset >= last + 1  # every acknowledged batch, maybe a few more
        assert loaded.high_watermark >= last + 1
        blob = store.read([spec(tp=tp, max_offset=last + 1)], BIG)[0]
    expected = [make_batch([(i, None, (b"%d." % i) * 300)], base_offset=i) for i in range(last + 1)]
    assert [b.raw for b in iter_batches(blob)] == expected


# The SIGKILL test above passes with sync off too: a killed process loses nothing LMDB already
# handed to the page cache, only power loss does, and no test can cut the power. So the sync
# setting is tested where it takes effect: the flags of the LMDB environment the store opens.


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "nosync"])
def test_the_store_opens_lmdb_with_the_sync_setting(tmp_path: Path, sync: bool) -> None:
    config = StoreConfig(sync=sync, map_size_bytes=1 << 30)
    with LogStore(tmp_path, config):
        lease = EnvLease(tmp_path, config)  # the same process-wide environment
        try:
            flags = lease.env.flags()
        finally:
            lease.close()
    assert (flags["sync"], flags["metasync"]) == (sync, sync)


@pytest.mark.parametrize("value", ["true", "false"])
def test_the_log_sync_node_setting_reaches_lmdb(tmp_path: Path, value: str) -> None:
    from minikafka.server.config import NodeConfig
    from minikafka.server.node import Node
    from minikafka.testing.memory_node import with_cluster_identity

    config = NodeConfig(node_id=1, roles=("broker", "controller"), data_dir=tmp_path)
    config = with_cluster_identity(config.with_settings({"log.sync": value}))
    node = Node(config)
    try:
        sync = value == "true"
        expected = StoreConfig(sync=sync, map_size_bytes=config.lmdb_map_size_bytes)
        # A lease with another config than the node's store is refused (StorageError).
        lease = EnvLease(tmp_path / "lmdb", expected)
        try:
            flags = lease.env.flags()
        finally:
            lease.close()
    finally:
        for closable in (node.store, node.meta_store, node.events):
            closable.close()
    assert (flags["sync"], flags["metasync"]) == (sync, sync)


# -- metadata store -------------------------------------------------------------------------------


def test_metadata_store_round_trip_and_shared_env(tmp_path: Path) -> None:
    path = tmp_path / "node"
    doc = {"controller_epoch": 3, "brokers": {1: {"host": "127.0.0.1", "port": 9092}}, "b": b"\x00"}
    with LogStore(path, SMALL) as logs, MetadataStore(path, SMALL) as meta:
        assert meta.read() == {}
        meta.write({"header": doc, "partition/t/0": {"leader": 1}})
        logs.create_partition(TP)  # the same environment serves both
        assert meta.read() == {"header": doc, "partition/t/0": {"leader": 1}}
        with pytest.raises(StorageError, match="already open"):
            MetadataStore(path, StoreConfig(map_size_bytes=1 << 30, sync=False))
        with pytest.raises(StorageError, match="not serialisable"):
            meta.write({"x": object()}, deletes=["header"])
        assert set(meta.read()) == {"header", "partition/t/0"}  # nothing of it was written
    with MetadataStore(path, SMALL) as meta:
        assert meta.read()["header"] == doc  # an int key survives (strict_map_key=False)
        meta.write({"header": {"controller_epoch": 4}}, deletes=["partition/t/0", "absent"])
        assert meta.read() == {"header": {"controller_epoch": 4}}
    with LogStore(path, SMALL) as logs:
        assert logs.list_partitions() == [TP]  # the metadata db is not mistaken for a log
