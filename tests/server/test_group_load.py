"""The group coordinator's shell (server/groups.py, group_load.py) with whatever
`__consumer_offsets` holds: junk it cannot read is reported and skipped, the group metadata
record carries a Stable group across a coordinator move, expired groups leave tombstones that a
reload honours, and an error inside the service never ends it. In-process brokers under the
autojump MockClock, as in tests/server/test_groups.py, whose helpers these are."""

from __future__ import annotations

import struct

import crc32c
import trio

from minikafka.core import record_batch_v2 as v2
from minikafka.core.group import NONE, OffsetFetch
from minikafka.core.group.offsets_log import OFFSETS_TOPIC
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import partition_state
from minikafka.wire.messages import ProducePartition, ProduceRequest
from tests.server import test_groups
from tests.server.test_groups import (
    SESSION_MS,
    T0,
    G,
    _CountingCoordinator,
    assign,
    brokers,
    join_args,
    lead_alone,
    loaded,
    serving,
    stored_commits,
)


def v2_batch_with_body(body: bytes, count: int = 1) -> bytes:
    """A RecordBatch v2 whose records section is `body`, header and CRC right."""
    after_crc = struct.pack(">hiqqqhii", 0, count - 1, 0, 0, -1, -1, -1, count) + body
    length = v2.HEADER_SIZE - v2.LENGTH_START + len(body)
    return struct.pack(">qiibI", 0, length, -1, v2.MAGIC, crc32c.crc32c(after_crc)) + after_crc


async def produce(broker, cache, batch: bytes, expect: int = 0) -> None:
    """A client's Produce to __consumer_offsets 0 (what the Kafka listener once let through;
    clients are refused now, so it is written as the broker's own append, `internal=True`)."""
    request = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        partitions=[ProducePartition(topic=OFFSETS_TOPIC, partition=0, records=batch)],
    )
    reply = await handle_produce(broker.replica_manager, request, cache.topics, internal=True)
    assert reply.response.partitions[0].error_code == expect, reply.response


async def test_records_the_load_cannot_read_are_reported_and_the_rest_is_served(
    autojump_clock, tmp_path
):
    """Records that pass produce but that the loader cannot read (a key of one junk byte, a
    key of an unknown version) are reported and skipped: once, such a load raised out of the
    group service and ended the broker, and every later leader's too. A record whose fields
    do not add up (a key that runs past it) no longer gets that far: produce refuses it."""
    async with lead_alone(tmp_path) as (broker, cache):
        async with serving(broker, cache) as svc:
            await loaded(svc)
            assert await svc.commit(G, "", -1, {T0: (41, "")}) == {T0: NONE}
        # attributes, timestamp delta, offset delta, then a key length of -1 and nothing more
        junk = v2_batch_with_body(bytes([8, 0, 0, 0, 0x01]))
        await produce(broker, cache, junk, expect=ErrorCode.CORRUPT_MESSAGE)
        await produce(broker, cache, make_batch([(0, b"\x00", b"\x00")]))  # junk key bytes
        await produce(broker, cache, make_batch([(0, b"\x00\x09\x00\x01g", b"")]))  # version 9
        async with serving(broker, cache) as fresh:
            await loaded(fresh)
            assert fresh.fetch_offsets(G, [T0]) == (NONE, {T0: OffsetFetch(offset=41)})
            assert broker.events.counts.get("group_record_unreadable") == 2
            # ... and it keeps serving: a new commit and a group.
            assert await fresh.commit(G, "", -1, {T0: (42, "")}) == {T0: NONE}
            assert fresh.fetch_offsets(G, [T0])[1][T0].offset == 42
        async with serving(broker, cache) as again:  # and the next leader loads it too
            await loaded(again)
            assert again.fetch_offsets(G, [T0])[1][T0].offset == 42


async def test_a_stable_group_keeps_its_members_across_a_coordinator_move(autojump_clock, tmp_path):
    async with brokers(tmp_path, 2) as (nodes, cache):
        b1, b2 = nodes
        await assign(
            nodes,
            cache,
            [
                partition_state(OFFSETS_TOPIC, 0, leader=1, isr=[1, 2], replicas=[1, 2]),
                partition_state("t", 0, leader=1, isr=[1]),
            ],
        )
        async with serving(b1, cache) as svc1, serving(b2, cache) as svc2:
            await loaded(svc1)
            joined = await svc1.join(G, join_args("a"))
            mid, gen = joined.member_id, joined.generation_id
            synced = await svc1.sync(
                G, dict(member_id=mid, generation_id=gen, assignments={mid: b"mine"})
            )
            assert (synced.error, synced.assignment) == (NONE, b"mine")
            await assign(
                nodes,
                cache,
                [
                    partition_state(
                        OFFSETS_TOPIC,
                        0,
                        leader=2,
                        isr=[1, 2],
                        replicas=[1, 2],
                        leader_epoch=2,
                        partition_epoch=2,
                    )
                ],
            )
            await loaded(svc2, timeout_s=2.0)
            # The member heartbeats at the new coordinator for longer than a session: no
            # UNKNOWN_MEMBER_ID, no rebalance.
            for _ in range(3 * SESSION_MS // 1000):
                assert svc2.heartbeat(G, mid, gen) == NONE
                await trio.sleep(1)
            _, summary = svc2.describe(G)
            assert summary.state == "Stable"
            assert [(m.member_id, m.assignment) for m in summary.members] == [(mid, b"mine")]


async def test_expired_groups_leave_tombstones_a_reload_honours(
    autojump_clock, tmp_path, monkeypatch
):
    """offsets.retention.minutes = 1, checked every 10 s: a standalone group's offset and an
    Empty consumer group go, with tombstones, and a fresh coordinator brings neither back."""
    monkeypatch.setattr(test_groups, "SIMULATED_LIMIT_S", 300)  # a minute must pass
    config = dict(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    async with lead_alone(tmp_path, **config) as (broker, cache):
        async with serving(broker, cache) as svc:
            await loaded(svc)
            assert await svc.commit("standalone", "", -1, {T0: (5, "")}) == {T0: NONE}
            joined = await svc.join(G, join_args("a"))
            mid = joined.member_id
            await svc.sync(G, dict(member_id=mid, generation_id=1, assignments={mid: b""}))
            assert await svc.commit(G, mid, 1, {T0: (7, "")}) == {T0: NONE}
            assert svc.leave(G, [mid]) == (NONE, {mid: NONE})
            await trio.sleep(50)
            assert {g.group_id for g in svc.list_groups()[1]} == {"standalone", G}
            await trio.sleep(30)  # past a minute, and the next check
            assert svc.list_groups() == (NONE, ())
            assert broker.events.counts.get("group_expired") == 2
        tombstones = {("standalone", T0, None, ""), (G, T0, None, "")}
        assert set(stored_commits(broker)[-2:]) == tombstones
        async with serving(broker, cache) as fresh:  # the tombstones follow them in the log
            await loaded(fresh)
            assert fresh.list_groups() == (NONE, ())
            assert fresh.fetch_offsets("standalone", [T0])[1][T0].offset == -1
            assert fresh.describe(G)[1].state == "Dead"


class _FailingOnce(_CountingCoordinator):
    failed = False

    def on_deadline(self, now_ms: int):  # noqa: ANN201
        if not self.failed:
            self.failed = True
            raise RuntimeError("a bug in a group's timers")
        return super().on_deadline(now_ms)


async def test_an_error_in_the_timer_task_is_reported_and_the_service_goes_on(
    autojump_clock, tmp_path
):
    async with lead_alone(tmp_path) as (broker, cache):
        failing = _FailingOnce()
        async with serving(broker, cache, coordinator=failing) as svc:
            await loaded(svc)
            await trio.sleep(2)
            assert failing.failed and broker.events.counts.get("group_service_error") == 1
            joined = await svc.join(G, join_args("a"))  # the timers still run the join
            assert joined.error == NONE and failing.rounds > 0
