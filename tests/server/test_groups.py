"""The group coordinator's shell (server/groups.py GroupService) on in-process brokers.

Brokers are MemoryBrokers (minikafka/testing/memory_node.py) under the autojump MockClock, storage
calls inline; their roles come from `apply()` as a controller's LeaderAndIsr would set them. Each
test builds the MetadataCache the service reads (brokers with a Kafka port, the partitions of
`__consumer_offsets` and of the user topic `t`) and runs `GroupService.run` in a nursery. The
controller is a fake `forward` that records what it is sent.

Timings (simulated): sessions are 6 s (group.min.session.timeout.ms), rebalances 10 s; the
service's timer task wakes at least every second, which bounds how late a lost leadership is
noticed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from minikafka.core.group import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    GroupCoordinator,
    JoinResponse,
    OffsetFetch,
    SyncResponse,
)
from minikafka.core.group.offsets_log import OFFSETS_TOPIC, partition_for, read_commit
from minikafka.core.records import decode_records, iter_batches
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.groups import GroupService
from minikafka.server.metadata_cache import MetadataCache
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    partition_state,
    wait_until,
)
from minikafka.wire.messages import (
    BrokerInfo,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    PartitionState,
)

G = "group-a"
T0 = ("t", 0)
SESSION_MS = 6000  # the smallest session the default group.min.session.timeout.ms accepts
REBALANCE_MS = 10_000
SIMULATED_LIMIT_S = 60  # per test; the longest story here takes about 16 s


def node_config(
    node_id: int, *, partitions: int = 1, delay_ms: int = 0, **extra: int
) -> NodeConfig:
    return NodeConfig(
        node_id=node_id,
        host=f"broker-{node_id}",
        port=9000 + node_id,
        replica_lag_time_max_ms=1000,
        replica_fetch_wait_max_ms=100,
        replica_fetch_backoff_ms=100,
        offsets_topic_num_partitions=partitions,
        offsets_topic_replication_factor=2,
        group_initial_rebalance_delay_ms=delay_ms,
        **extra,  # type: ignore[arg-type]
    )


def kafka_info(node_id: int) -> BrokerInfo:
    """A broker as the cache knows it: with a Kafka listener (FindCoordinator names that)."""
    return BrokerInfo(
        node_id=node_id,
        host=f"broker-{node_id}",
        port=9000 + node_id,
        kafka_host=f"kafka-{node_id}",
        kafka_port=19_000 + node_id,
    )


class Forward:
    """The controller as GroupService reaches it: records every request; CreateTopics is
    answered once `release` is set (a controller taking its time)."""

    def __init__(self) -> None:
        self.requests: list[object] = []
        self.release = trio.Event()

    async def __call__(self, request: object) -> object:
        self.requests.append(request)
        await self.release.wait()
        return CreateTopicsResponse(
            topics=[CreatableTopicResult(name=OFFSETS_TOPIC, error_code=int(ErrorCode.NONE))]
        )


@asynccontextmanager
async def serving(
    broker: MemoryBroker,
    cache: MetadataCache,
    forward: Forward | None = None,
    coordinator: GroupCoordinator | None = None,
) -> AsyncIterator[GroupService]:
    svc = GroupService(
        config=broker.config,
        rm=broker.replica_manager,
        cache=cache,
        events=broker.events,
        forward=forward if forward is not None else Forward(),
    )
    if coordinator is not None:
        svc.coordinator = coordinator
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        yield svc
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def brokers(
    tmp_path: Path, n: int, **config: int
) -> AsyncIterator[tuple[list[MemoryBroker], MetadataCache]]:
    """`n` running brokers on one memory network, and a cache knowing them (no partitions)."""
    network = MemoryNetwork()
    nodes = [
        MemoryBroker(node_config(i, **config), tmp_path / f"b{i}", network=network)
        for i in range(1, n + 1)
    ]
    cache = MetadataCache()
    cache.update(brokers=[kafka_info(i) for i in range(1, n + 1)], partitions=[])
    # A request parked for good would otherwise let autojump run simulated time forever.
    with trio.fail_after(SIMULATED_LIMIT_S):
        async with _running(nodes):
            yield nodes, cache


@asynccontextmanager
async def _running(nodes: list[MemoryBroker]) -> AsyncIterator[None]:
    if not nodes:
        yield
        return
    async with nodes[0].running(), _running(nodes[1:]):
        yield


async def assign(
    nodes: list[MemoryBroker], cache: MetadataCache, states: list[PartitionState]
) -> None:
    """A LeaderAndIsr with `states` to every broker, and the cache told of them."""
    infos = [n.info for n in nodes]
    for node in nodes:
        errors = await node.apply(states, infos)
        assert {e.error_code for e in errors} <= {ErrorCode.NONE}, errors
    cache.update(brokers=None, partitions=states)


@asynccontextmanager
async def lead_alone(
    tmp_path: Path, **config: int
) -> AsyncIterator[tuple[MemoryBroker, MetadataCache]]:
    """One broker leading `__consumer_offsets` 0 (ISR {1}) and `t` 0."""
    async with brokers(tmp_path, 1, **config) as (nodes, cache):
        await assign(
            nodes,
            cache,
            [
                partition_state(OFFSETS_TOPIC, 0, leader=1, isr=[1]),
                partition_state("t", 0, leader=1, isr=[1]),
            ],
        )
        yield nodes[0], cache


async def loaded(svc: GroupService, group_id: str = G, timeout_s: float = 1.0) -> None:
    await wait_until(lambda: svc.check(group_id) == NONE, timeout_s=timeout_s)


def join_args(client_id: str, member_id: str = "") -> dict[str, object]:
    return dict(
        member_id=member_id,
        client_id=client_id,
        client_host="",
        protocol_type="consumer",
        protocols=(("range", b"meta-" + client_id.encode()),),
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        require_known_member_id=False,
    )


def stored_commits(broker: MemoryBroker, partition: int = 0) -> list[tuple[str, tuple, int, str]]:
    """(group, (topic, partition), offset, metadata) of every commit record in the log (offset
    None for a tombstone)."""
    out = []
    for batch in iter_batches(broker.log_bytes(OFFSETS_TOPIC, partition)):
        for r in decode_records(batch):
            read = read_commit(r.key, None if r.null_value else r.value)
            if read is None:
                continue  # a group metadata record
            if read[2] is None:
                out.append((read[0], read[1], None, ""))  # a tombstone
                continue
            out.append((read[0], read[1], read[2].offset, read[2].metadata))
    return out


def groups_on_distinct_partitions(n: int, partitions: int) -> list[str]:
    """`n` group ids whose offsets live in `n` different partitions."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < n:
        found.setdefault(partition_for(f"group-{i}", partitions), f"group-{i}")
        i += 1
    return list(found.values())


# ---------------------------------------------------------------------------------- 1


async def test_find_coordinator_creates_the_offsets_topic_once_then_names_the_leader(
    autojump_clock, tmp_path
):
    async with brokers(tmp_path, 2, partitions=3) as (nodes, cache):
        forward = Forward()
        async with serving(nodes[0], cache, forward) as svc:
            answers: list[tuple[int, BrokerInfo | None]] = []

            async def ask(delay_s: float) -> None:
                await trio.sleep(delay_s)
                answers.append(svc.find_coordinator(G))

            # Five clients ask while the controller has not answered the creation yet.
            async with trio.open_nursery() as nursery:
                for i in range(5):
                    nursery.start_soon(ask, i * 0.1)
            assert answers == [(COORDINATOR_NOT_AVAILABLE, None)] * 5
            assert len(forward.requests) == 1
            (request,) = forward.requests
            assert isinstance(request, CreateTopicsRequest)
            (topic,) = request.topics
            assert (topic.name, topic.num_partitions, topic.replication_factor) == (
                OFFSETS_TOPIC,
                3,
                2,
            )
            forward.release.set()
            await wait_until(lambda: nodes[0].events.counts.get("offsets_topic_create") == 1)

            # The controller's metadata arrives: the group's partition is led by broker 2, the
            # others by broker 1, so only partition_for picks broker 2.
            mine = partition_for(G, 3)
            states = [
                partition_state(OFFSETS_TOPIC, p, leader=2 if p == mine else 1, isr=[1, 2])
                for p in range(3)
            ]
            cache.update(brokers=None, partitions=states)
            assert svc.find_coordinator(G) == (NONE, kafka_info(2))
            other = next(
                g for g in groups_on_distinct_partitions(3, 3) if partition_for(g, 3) != mine
            )
            assert svc.find_coordinator(other) == (NONE, kafka_info(1))
            assert len(forward.requests) == 1  # the topic exists: nothing more created


async def test_find_coordinator_is_not_available_while_the_partition_has_no_leader(
    autojump_clock, tmp_path
):
    async with brokers(tmp_path, 1) as (nodes, cache):
        forward = Forward()
        async with serving(nodes[0], cache, forward) as svc:
            cache.update(
                brokers=None,
                partitions=[partition_state(OFFSETS_TOPIC, 0, leader=-1, isr=[])],
            )
            assert svc.find_coordinator(G) == (COORDINATOR_NOT_AVAILABLE, None)
            assert forward.requests == []  # the topic exists: no creation


# ---------------------------------------------------------------------------------- 2


async def test_only_the_partition_leader_coordinates_after_loading(autojump_clock, tmp_path):
    """Broker 2 leads the group's partition (broker 1 follows it), broker 1 leads the others."""
    g_on_2, g_on_1 = groups_on_distinct_partitions(2, 3)
    p2 = partition_for(g_on_2, 3)
    async with brokers(tmp_path, 2, partitions=3) as (nodes, cache):
        await assign(
            nodes,
            cache,
            [
                partition_state(
                    OFFSETS_TOPIC, p, leader=2 if p == p2 else 1, isr=[1, 2], replicas=[1, 2]
                )
                for p in range(3)
            ],
        )
        async with serving(nodes[0], cache) as svc1, serving(nodes[1], cache) as svc2:
            # Broker 1 is only a follower of g_on_2's partition.
            assert svc1.fetch_offsets(g_on_2, None) == (NOT_COORDINATOR, {})
            assert svc1.heartbeat(g_on_2, "m", 1) == NOT_COORDINATOR
            response = await svc1.join(g_on_2, join_args("c"))
            assert response.error == NOT_COORDINATOR
            # Its leader loads first, then serves.
            start = trio.current_time()
            assert svc2.fetch_offsets(g_on_2, None) == (COORDINATOR_LOAD_IN_PROGRESS, {})
            await loaded(svc2, g_on_2)
            assert trio.current_time() - start < 1.0
            assert svc2.fetch_offsets(g_on_2, None) == (NONE, {})
            # And the other way round for a group of a partition broker 1 leads.
            assert svc2.fetch_offsets(g_on_1, None)[0] == NOT_COORDINATOR
            assert svc1.fetch_offsets(g_on_1, None)[0] == COORDINATOR_LOAD_IN_PROGRESS
            await loaded(svc1, g_on_1)
            assert svc1.fetch_offsets(g_on_1, [T0]) == (NONE, {T0: OffsetFetch(offset=-1)})


# ---------------------------------------------------------------------------------- 3


async def test_two_members_join_sync_heartbeat_and_a_silent_member_is_expelled(
    autojump_clock, tmp_path
):
    async with lead_alone(tmp_path, delay_ms=3000) as (broker, cache):
        async with serving(broker, cache) as svc:
            await loaded(svc)
            t0 = trio.current_time()
            joined: dict[str, tuple[JoinResponse, float]] = {}

            async def join(name: str, at_s: float) -> None:
                await trio.sleep(at_s)
                response = await svc.join(G, join_args(name))
                joined[name] = (response, trio.current_time() - t0)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(join, "a", 0.0)
                nursery.start_soon(join, "b", 1.0)
                await trio.sleep(2.9)
                assert joined == {}  # both parked: the initial delay (3 s) has not passed
            (ja, at_a), (jb, at_b) = joined["a"], joined["b"]
            assert (ja.error, jb.error) == (NONE, NONE)
            # InitialDelayedJoin: b arrived during the first 3 s, so one more delay: 6 s.
            assert at_a == at_b and 3.0 <= at_a <= 6.5
            assert ja.generation_id == jb.generation_id == 1
            assert ja.leader_id == jb.leader_id == ja.member_id  # the first to join leads
            assert {m.member_id for m in ja.members} == {ja.member_id, jb.member_id}
            assert jb.members == ()  # only the leader learns the members
            gen = ja.generation_id

            # The follower's sync waits for the leader's assignment.
            synced: dict[str, SyncResponse] = {}

            async def follower_sync() -> None:
                synced["b"] = await svc.sync(G, dict(member_id=jb.member_id, generation_id=gen))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(follower_sync)
                await trio.sleep(0.5)
                assert synced == {}
                sa = await svc.sync(
                    G,
                    dict(
                        member_id=ja.member_id,
                        generation_id=gen,
                        assignments={ja.member_id: b"for-a", jb.member_id: b"for-b"},
                    ),
                )
            assert (sa.error, sa.assignment) == (NONE, b"for-a")
            assert (synced["b"].error, synced["b"].assignment) == (NONE, b"for-b")

            assert svc.heartbeat(G, ja.member_id, gen) == NONE
            assert svc.heartbeat(G, jb.member_id, gen) == NONE
            b_last = trio.current_time()
            # a keeps beating every second; b falls silent and is expelled after its session.
            while (code := svc.heartbeat(G, ja.member_id, gen)) == NONE:
                assert trio.current_time() - b_last < 8.0, "b was never expelled"
                await trio.sleep(1.0)
            expelled_after = trio.current_time() - b_last
            assert code == REBALANCE_IN_PROGRESS
            assert SESSION_MS / 1000 <= expelled_after <= SESSION_MS / 1000 + 1.0
            assert svc.heartbeat(G, jb.member_id, gen) == UNKNOWN_MEMBER_ID
            _, summary = svc.describe(G)
            assert [m.member_id for m in summary.members] == [ja.member_id]


# ---------------------------------------------------------------------------------- 4


async def test_a_committed_offset_is_in_the_log_and_survives_a_new_coordinator(
    autojump_clock, tmp_path
):
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
        async with serving(b1, cache) as svc1:
            await loaded(svc1)
            # Simple commits (no generation): the second wins on replay.
            assert await svc1.commit(G, "", -1, {T0: (41, "first")}) == {T0: NONE}
            assert await svc1.commit(G, "", -1, {T0: (42, "second")}) == {T0: NONE}
            expected = [(G, T0, 41, "first"), (G, T0, 42, "second")]
            assert stored_commits(b1) == expected
            # acks=all: the follower in the ISR has them too.
            await wait_until(lambda: stored_commits(b2) == expected, timeout_s=1.0)
            assert b1.partition(OFFSETS_TOPIC).high_watermark == 2

            # A fresh coordinator on the same broker knows nothing until it has read the log.
            async with serving(b1, cache) as fresh:
                assert fresh.fetch_offsets(G, [T0])[0] == COORDINATOR_LOAD_IN_PROGRESS
                assert fresh.coordinator.groups == {}
                await loaded(fresh)
                assert fresh.fetch_offsets(G, [T0]) == (
                    NONE,
                    {T0: OffsetFetch(offset=42, metadata="second")},
                )

            # Leadership moves to broker 2, which replicated the partition.
            async with serving(b2, cache) as svc2:
                assert svc2.fetch_offsets(G, [T0])[0] == NOT_COORDINATOR
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
                assert svc1.fetch_offsets(G, [T0])[0] == NOT_COORDINATOR
                assert svc2.fetch_offsets(G, [T0])[0] == COORDINATOR_LOAD_IN_PROGRESS
                await loaded(svc2, timeout_s=2.0)
                assert svc2.fetch_offsets(G, [T0]) == (
                    NONE,
                    {T0: OffsetFetch(offset=42, metadata="second")},
                )


# ---------------------------------------------------------------------------------- 5


async def test_a_commit_whose_append_fails_is_not_served(autojump_clock, tmp_path):
    async with lead_alone(tmp_path) as (broker, cache):
        async with serving(broker, cache) as svc:
            await loaded(svc)
            assert await svc.commit(G, "", -1, {T0: (10, "")}) == {T0: NONE}
            # The ISR ({1}) is now below the topic's min.insync.replicas: acks=all appends fail
            # with NOT_ENOUGH_REPLICAS (storeOffsets maps it to COORDINATOR_NOT_AVAILABLE).
            assert broker.set_configs({("topics", OFFSETS_TOPIC): {"min.insync.replicas": "2"}})
            assert await svc.commit(G, "", -1, {T0: (20, "")}) == {T0: COORDINATOR_NOT_AVAILABLE}
            assert svc.fetch_offsets(G, [T0]) == (NONE, {T0: OffsetFetch(offset=10)})
            assert [c[2] for c in stored_commits(broker)] == [10]


# ---------------------------------------------------------------------------------- 6


async def test_a_lost_leadership_answers_the_parked_join_and_later_requests_not_coordinator(
    autojump_clock, tmp_path
):
    async with lead_alone(tmp_path, delay_ms=3000) as (broker, cache):
        async with serving(broker, cache) as svc:
            await loaded(svc)
            answer: list[tuple[JoinResponse, float]] = []

            async def join() -> None:
                answer.append((await svc.join(G, join_args("a")), trio.current_time()))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(join)
                await trio.sleep(0.5)
                assert answer == []  # parked for the initial delay (3 s)
                moved = trio.current_time()
                await broker.apply(
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
                    [broker.info, kafka_info(2)],
                )
            ((response, at),) = answer
            # Answered by the resignation (the rebalance alone would have said NONE at 3 s).
            assert response.error == NOT_COORDINATOR
            assert at - moved <= 1.05
            assert broker.events.counts.get("group_coordinator_resigned") == 1
            assert svc.heartbeat(G, response.member_id, 1) == NOT_COORDINATOR
            assert (await svc.join(G, join_args("b"))).error == NOT_COORDINATOR
            assert await svc.commit(G, "", -1, {T0: (1, "")}) == {T0: NOT_COORDINATOR}
            assert svc.fetch_offsets(G, [T0])[0] == NOT_COORDINATOR
            assert svc.coordinator.groups == {}  # the group was dropped


# ---------------------------------------------------------------------------------- 7


async def test_a_commit_for_an_unknown_topic_fails_only_that_partition(autojump_clock, tmp_path):
    async with lead_alone(tmp_path) as (broker, cache):
        async with serving(broker, cache) as svc:
            await loaded(svc)
            errors = await svc.commit(G, "", -1, {T0: (5, ""), ("nope", 0): (7, "")})
            assert errors == {T0: NONE, ("nope", 0): int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
            assert svc.fetch_offsets(G, None) == (NONE, {T0: OffsetFetch(offset=5)})
            assert stored_commits(broker) == [(G, T0, 5, "")]


# ----------------------------------------------------------- commits served in log order


async def test_concurrent_commits_of_one_partition_serve_the_last_one_in_the_log(
    autojump_clock, tmp_path
):
    """Two commits of T0 in flight at once, each round a new group. Both are acknowledged in
    one step (the follower's fetch moves the HW past both), and Trio wakes their tasks in either
    order, so a per-round mismatch shows up about 1 time in 3: 40 rounds all agreeing by luck is
    ~0.7**40 < 1e-6."""
    async with brokers(tmp_path, 2) as (nodes, cache):
        leader = nodes[0]
        await assign(
            nodes,
            cache,
            [
                partition_state(OFFSETS_TOPIC, 0, leader=1, isr=[1, 2], replicas=[1, 2]),
                partition_state("t", 0, leader=1, isr=[1]),
            ],
        )
        async with serving(leader, cache) as svc:
            await loaded(svc)
            disagreements = []
            for i in range(40):
                group = f"race-{i}"
                answers: list[dict] = []

                async def commit(offset: int, group: str = group, answers: list = answers) -> None:
                    answers.append(await svc.commit(group, "", -1, {T0: (offset, "")}))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(commit, 100 + i)
                    nursery.start_soon(commit, 200 + i)
                assert answers == [{T0: NONE}, {T0: NONE}]
                in_log = [c[2] for c in stored_commits(leader) if c[0] == group]
                assert sorted(in_log) == [100 + i, 200 + i]
                served = svc.fetch_offsets(group, [T0])[1][T0].offset
                if served != in_log[-1]:
                    disagreements.append((group, in_log, served))
            assert disagreements == []


class _CountingCoordinator(GroupCoordinator):
    """A coordinator that counts the deadline task's rounds."""

    rounds = 0

    def on_deadline(self, now_ms: int):  # noqa: ANN201
        self.rounds += 1
        # A spinning task never lets the autojump clock move: fail rather than hang.
        assert self.rounds < 1000, "the deadline task does not sleep"
        return super().on_deadline(now_ms)


async def test_an_idle_coordinator_sleeps_between_its_timers(autojump_clock, tmp_path):
    """The deadline task wakes when a timer is due or a request moved them, at least every
    second, and otherwise sleeps: once it never did (it woke itself after every round), and
    every broker burnt ~40 % of a core. With no timer due, 30 idle simulated seconds take about
    30 rounds."""
    async with brokers(tmp_path, 1) as (nodes, cache):
        await assign(nodes, cache, [partition_state(OFFSETS_TOPIC, 0, leader=1, isr=[1])])
        counting = _CountingCoordinator()
        async with serving(nodes[0], cache, coordinator=counting) as svc:
            await loaded(svc)
            counting.rounds = 0
            await trio.sleep(30)
            assert 25 <= counting.rounds <= 35
