"""The controller service's request dispatch (server/controller_service.py), in process."""

from __future__ import annotations

import random

import pytest
import trio

from minikafka.common import TopicPartition
from minikafka.core.controller import ControllerConfig, ControllerState
from minikafka.core.controller.records import doc_from_records
from minikafka.errors import ErrorCode, MiniKafkaError
from minikafka.server.config import NodeConfig
from minikafka.server.controller_service import ControllerService
from minikafka.server.eventlog import EventLog
from minikafka.storage import StorageError
from minikafka.wire.messages import CreatableTopic, CreateTopicsRequest


class CountingStore:
    def __init__(self) -> None:
        self.saves = 0

    def read(self) -> dict:
        return {}

    def write(self, puts: object, deletes: object = ()) -> None:
        self.saves += 1


def service_with_brokers(store: CountingStore) -> ControllerService:
    service = ControllerService(
        config=NodeConfig(node_id=100, roles=("controller",)),
        store=store,  # type: ignore[arg-type]
        events=EventLog(None, node_id=100),
        rng=random.Random(1),
    )
    state = ControllerState(controller_id=100, config=ControllerConfig(), rng=random.Random(1))
    for broker_id in (1, 2):
        state.register_broker(
            broker_id=broker_id,
            incarnation_id=f"i{broker_id}",
            host="127.0.0.1",
            port=9000 + broker_id,
            now_ms=0,
        )
    service.state = state
    return service


def test_create_topics_validate_only_answers_as_if_created_and_creates_nothing():
    store = CountingStore()
    service = service_with_brokers(store)
    good = CreatableTopic(name="t", num_partitions=2, replication_factor=2)
    bad = CreatableTopic(name="u", num_partitions=1, replication_factor=5)

    async def main() -> None:
        req = CreateTopicsRequest(topics=[good, bad], validate_only=True)
        resp = await service.dispatch(req)
        codes = [r.error_code for r in resp.topics]
        assert codes == [ErrorCode.NONE, ErrorCode.INVALID_REPLICATION_FACTOR]

    trio.run(main)
    assert service.state is not None and service.state.topic_names() == []
    assert store.saves == 0  # nothing to persist, nothing sent


class FailingStore:
    """Holds the saved records; `fail` makes the next saves raise as a full disk would."""

    def __init__(self) -> None:
        self.records: dict = {}
        self.fail = False

    @property
    def doc(self) -> dict | None:
        return doc_from_records(self.records) if self.records else None

    def read(self) -> dict:
        return dict(self.records)

    def write(self, puts: dict, deletes: tuple = ()) -> None:
        if self.fail:
            raise StorageError("LMDB: [Errno 28] No space left on device")
        for key in deletes:
            self.records.pop(key, None)
        self.records.update(puts)


def test_a_failed_controller_save_leaves_memory_and_disk_agreeing():
    store = FailingStore()
    service = service_with_brokers(store)  # type: ignore[arg-type]
    assert service.state is not None
    store.write(service.state.take_changes().puts)  # as `run` does at start
    epoch = service.state.controller_epoch
    store.fail = True
    req = CreateTopicsRequest(
        topics=[CreatableTopic(name="t", num_partitions=2, replication_factor=2)]
    )

    async def main() -> None:
        with pytest.raises(MiniKafkaError) as caught:
            await service.dispatch(req)
        assert getattr(caught.value, "code", None) == ErrorCode.KAFKA_STORAGE_ERROR

    trio.run(main)
    # Nothing was sent (no nursery: executing an effect would have failed) and the topic that
    # was never persisted is not in memory either: memory is the disk's document, reloaded as a
    # restarted controller reloads it, with a new controller epoch.
    state = service.state
    assert state is not None and state.topic_names() == []
    assert state.controller_epoch == epoch + 1
    assert store.doc is not None
    assert state.to_doc()["topics"] == store.doc["topics"] == []
    assert service.events.counts["controller_save_failed"] == 1


def test_the_partition_caps_are_node_settings_the_controller_and_the_store_honour(tmp_path):
    """max.topic.partitions / max.broker.partitions (KIP-578's name) reach the controller's
    placement checks and the broker's store: a config we accept is a config we honour."""
    from minikafka.server.node import Node
    from minikafka.testing.memory_node import with_cluster_identity

    config = NodeConfig(node_id=100, roles=("broker", "controller"), data_dir=tmp_path)
    config = config.with_settings({"max.topic.partitions": "3", "max.broker.partitions": "2"})
    service = ControllerService(
        config=config,
        store=CountingStore(),  # type: ignore[arg-type]
        events=EventLog(None, node_id=100),
        rng=random.Random(1),
    )
    state = ControllerState(
        controller_id=100, config=service._controller_config(), rng=random.Random(1)
    )
    for broker_id in (1, 2):
        state.register_broker(
            broker_id=broker_id, incarnation_id=f"i{broker_id}", host="h", port=1, now_ms=0
        )
    service.state = state

    async def create(name: str, partitions: int) -> int:
        req = CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=2)],
            validate_only=True,
        )
        return (await service.dispatch(req)).topics[0].error_code

    async def main() -> None:
        assert await create("four", 4) == ErrorCode.INVALID_PARTITIONS  # > 3 per topic
        assert await create("two", 2) == ErrorCode.NONE  # 2 replicas on each broker
        assert await create("three", 3) == ErrorCode.POLICY_VIOLATION  # 3 > 2 per broker

    trio.run(main)
    node = Node(with_cluster_identity(config))
    try:
        assert node.store is not None
        for p in range(2):
            node.store.create_partition(TopicPartition("t", p))
        with pytest.raises(StorageError, match="max.broker.partitions"):
            node.store.create_partition(TopicPartition("t", 2))
    finally:
        node.store.close()
        node.dir_lock.close()


def test_an_overflowing_broker_channel_replaces_its_backlog_with_the_full_state():
    """A broker that cannot be reached made the controller queue requests
    until the queue raised and the controller died. Now the backlog is bounded: on overflow it
    is replaced by what the broker's registration would tell it (all partitions, its own)."""
    from minikafka.server.controller_service import BrokerChannel
    from minikafka.wire.messages import LeaderAndIsrRequest, UpdateMetadataRequest

    service = service_with_brokers(CountingStore())
    state = service.state
    assert state is not None
    state.create_topics([CreatableTopic(name="t", num_partitions=4, replication_factor=1)], 0)
    info = state.broker_info(1)
    assert info is not None
    channel = BrokerChannel(service, info, max_queued=5)
    for i in range(12):  # never sent: nothing runs the channel
        channel.send(f"request {i}")
    queued = []
    while True:
        try:
            queued.append(channel._recv.receive_nowait())
        except trio.WouldBlock:
            break
    # Sends 0-4 fill it; 5 overflows (2 left), 6-8 fit; 9 overflows again; 10 and 11 fit.
    assert [type(r).__name__ for r in queued[:2]] == [
        "UpdateMetadataRequest",
        "LeaderAndIsrRequest",
    ]
    assert queued[2:] == ["request 10", "request 11"]
    update, lai = queued[0], queued[1]
    assert isinstance(update, UpdateMetadataRequest) and isinstance(lai, LeaderAndIsrRequest)
    assert len(update.partitions) == 4
    assert {s.partition for s in lai.partitions} == {
        s.partition for s in state.partition_states() if 1 in s.replicas
    }
    assert lai.broker_epoch == state.broker_epoch(1)
    assert service.events.counts["controller_channel_overflow"] == 2


def test_requests_too_big_for_a_frame_are_cut_into_several():
    """A creation of 20,000 partitions makes a 2.4 MB UpdateMetadata; under a lower
    socket.max.frame.bytes the broker would refuse the frame and the controller resend it
    forever. LeaderAndIsr and UpdateMetadata go in runs that fit; the configs ride once."""
    from minikafka.server.config import FRAME_HEADROOM_BYTES
    from minikafka.wire.codec import RequestHeader, encode_request
    from minikafka.wire.messages import API_KEY_OF, LeaderAndIsrRequest, UpdateMetadataRequest

    cap = FRAME_HEADROOM_BYTES + 8192
    service = service_with_brokers(CountingStore())
    service.config = NodeConfig(node_id=100, roles=("controller",), socket_max_frame_bytes=cap)
    state = service.state
    assert state is not None
    topic = CreatableTopic(
        name="big",
        num_partitions=300,
        replication_factor=2,
        configs={"leader.replication.throttled.replicas": "0:1"},
    )
    _, effects = state.create_topics([topic], 0)
    sent: dict[int, list[object]] = {1: [], 2: []}

    class Channel:
        def __init__(self, broker_id: int) -> None:
            self.send = sent[broker_id].append

    service._channel = Channel  # type: ignore[method-assign, assignment]
    for effect in effects:
        service._execute(effect)
    for requests in sent.values():
        lai = [r for r in requests if isinstance(r, LeaderAndIsrRequest)]
        um = [r for r in requests if isinstance(r, UpdateMetadataRequest)]
        assert len(lai) > 1 and len(um) > 1
        assert sum(len(r.partitions) for r in lai) == 300  # both brokers host every partition
        assert [p.partition for r in um for p in r.partitions] == list(range(300))
        assert [r.configs_version for r in um] == [1] + [-1] * (len(um) - 1)  # pushed first
    full = service.full_state_requests(1)  # everything, the configs with the first run only
    um = [r for r in full if isinstance(r, UpdateMetadataRequest)]
    assert [r.configs_version for r in um] == [1] + [-1] * (len(um) - 1) and len(um) > 1
    assert [len(r.configs) > 0 for r in um] == [True] + [False] * (len(um) - 1)
    # A full picture replaces what the broker knew: its first run only, or later runs would
    # forget the earlier ones. Incremental pushes never replace.
    assert [r.replace for r in um] == [True] + [False] * (len(um) - 1)
    assert not any(r.replace for r in sent[1] + sent[2] if isinstance(r, UpdateMetadataRequest))
    for r in [*sent[1], *sent[2], *full]:
        header = RequestHeader(
            api_key=API_KEY_OF[type(r)], api_version=0, correlation_id=1, client_id="c"
        )
        assert len(encode_request(header, r)) <= cap - FRAME_HEADROOM_BYTES


async def test_a_restarted_controller_resumes_from_its_records_on_disk(autojump_clock, tmp_path):
    """Saves as records end to end, on a real store: a store written before records (the whole
    document under `doc`) is read and rewritten as records by the first start, and each start
    restores the same partitions with a new controller epoch."""
    from minikafka.storage import MetadataStore, StoreConfig
    from minikafka.testing.memory_node import run_sync_inline

    store_config = StoreConfig(map_size_bytes=1 << 30, sync=False)
    old = service_with_brokers(CountingStore()).state
    assert old is not None
    old.create_topics([CreatableTopic(name="t", num_partitions=3, replication_factor=2)], 0)
    with MetadataStore(tmp_path, store_config) as store:
        store.write({"doc": old.to_doc()})

    async def hold(*_args: object, **_kwargs: object) -> None:
        await trio.sleep_forever()  # no broker is reached: nothing may need one here

    for start in (1, 2):
        with MetadataStore(tmp_path, store_config) as store:
            service = ControllerService(
                config=NodeConfig(node_id=100, roles=("controller",)),
                store=store,
                events=EventLog(None, node_id=100),
                rng=random.Random(1),
                hold=hold,
                run_sync=run_sync_inline,
            )
            async with trio.open_nursery() as nursery:
                await nursery.start(service.run)
                state = service.state
                assert state is not None
                assert state.partition_states() == old.partition_states()
                assert state.controller_epoch == old.controller_epoch + start
                records = store.read()
                assert "doc" not in records and "partition/t/2" in records
                assert records["header"]["controller_epoch"] == state.controller_epoch
                nursery.cancel_scope.cancel()
