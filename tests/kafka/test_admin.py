"""Kafka's admin APIs translated to minikafka's native admin messages and back
(minikafka/kafka/admin.py), and the shell's routing of them (server/kafka_apis.py).

Each request is encoded as a client writes it and decoded by codec.decode_request; each response
is encoded by codec.encode_response and decoded back with kio, as a client reads it.
"""

from __future__ import annotations

import importlib
import io
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as K
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32

from minikafka.errors import BrokerError, ErrorCode
from minikafka.kafka import admin, reassignments
from minikafka.kafka.codec import SUPPORTED, decode_request, encode_response
from minikafka.server.kafka_apis import KafkaApis
from minikafka.server.metadata_cache import MetadataCache
from minikafka.wire import admin_messages as am
from minikafka.wire import messages


def _mod(api: str, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def _through_codec(body: Any) -> Any:
    """The request as the listener sees it: written as a client writes it, then decoded."""
    header_cls = type(body).__header_schema__
    out = io.BytesIO()
    header = header_cls(
        request_api_key=i16(body.__api_key__),
        request_api_version=i16(body.__version__),
        correlation_id=i32(7),
        client_id="cli",
    )
    entity_writer(header_cls)(out, header)
    entity_writer(type(body))(out, body)
    decoded = decode_request(out.getvalue())
    assert (decoded.api_key, decoded.api_version) == (body.__api_key__, body.__version__)
    return decoded.body


def _round_trip(response: Any) -> Any:
    """The response as a client reads it."""
    payload = encode_response(7, response)
    cls = type(response)
    header, used = entity_reader(cls.__header_schema__)(payload, 0)
    body, body_used = entity_reader(cls)(payload, used)
    assert header.correlation_id == 7 and used + body_used == len(payload)
    return body


def test_the_admin_apis_are_served_at_the_planned_versions() -> None:
    assert {k: SUPPORTED[k] for k in (19, 32, 44, 45, 46)} == {
        19: (2, 4),
        32: (1, 3),
        44: (0, 1),
        45: (0, 0),
        46: (0, 0),
    }


# ---------------------------------------------------------------------------- CreateTopics


def _create(version: int, *topics: Any, validate_only: bool = False) -> Any:
    mod = _mod("create_topics", version, "request")
    return _through_codec(
        mod.CreateTopicsRequest(
            topics=tuple(topics), timeout=timedelta(milliseconds=2500), validate_only=validate_only
        )
    )


def _topic(version: int, name: str, n: int = -1, r: int = -1, assignments=None, configs=None):
    mod = _mod("create_topics", version, "request")
    return mod.CreatableTopic(
        name=TopicName(name),
        num_partitions=i32(n),
        replication_factor=i16(r),
        assignments=tuple(
            mod.CreatableReplicaAssignment(
                partition_index=i32(p), broker_ids=tuple(BrokerId(b) for b in bs)
            )
            for p, bs in (assignments or {}).items()
        ),
        configs=tuple(
            mod.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
        ),
    )


@pytest.mark.parametrize("version", [2, 3, 4])
def test_create_topics_request(version: int) -> None:
    body = _create(
        version,
        _topic(version, "a", 4, 2, configs={"retention.ms": "1000"}),
        _topic(version, "b"),  # -1/-1: the broker defaults, passed through
        _topic(version, "c", assignments={1: [2, 3], 0: [1, 2]}),
        validate_only=True,
    )
    t = admin.create_topics_request(body)
    assert t.refused == {}
    assert t.native == messages.CreateTopicsRequest(
        topics=[
            messages.CreatableTopic(
                name="a", num_partitions=4, replication_factor=2, configs={"retention.ms": "1000"}
            ),
            messages.CreatableTopic(name="b", num_partitions=-1, replication_factor=-1),
            messages.CreatableTopic(
                name="c", num_partitions=-1, replication_factor=-1, assignments=[[1, 2], [2, 3]]
            ),
        ],
        timeout_ms=2500,
        validate_only=True,
    )


def test_create_topics_with_assignments_and_num_partitions_goes_to_the_controller() -> None:
    """Both set is the controller's to refuse (INVALID_REQUEST with Kafka's message,
    core/controller/topics.py): the translation keeps both so it can."""
    body = _create(4, _topic(4, "x", 3, -1, assignments={0: [1]}))
    t = admin.create_topics_request(body)
    (topic,) = t.native.topics
    assert (topic.num_partitions, topic.assignments) == (3, [[1]])
    from minikafka.core.controller.model import ControllerConfig
    from minikafka.core.controller.topics import _manual

    got = _manual(topic, registered={1}, live={1}, config=ControllerConfig())
    assert got[0] == ErrorCode.INVALID_REQUEST and "numPartitions" in got[1]


def test_create_topics_non_consecutive_assignment_is_refused_here() -> None:
    body = _create(4, _topic(4, "gap", assignments={0: [1], 2: [2]}), _topic(4, "ok", 1, 1))
    t = admin.create_topics_request(body)
    assert [x.name for x in t.native.topics] == ["ok"]
    assert t.refused[0][0] is K.invalid_replica_assignment
    native = messages.CreateTopicsResponse(
        topics=[messages.CreatableTopicResult(name="ok", error_code=ErrorCode.NONE)]
    )
    back = _round_trip(admin.create_topics_response(4, body, t, native))
    assert [(r.name, r.error_code) for r in back.topics] == [
        ("gap", K.invalid_replica_assignment),
        ("ok", K.none),
    ]
    assert "consecutive" in back.topics[0].error_message


@pytest.mark.parametrize("version", [2, 3, 4])
def test_create_topics_response_in_request_order(version: int) -> None:
    body = _create(version, _topic(version, "a", 1, 1), _topic(version, "b", 1, 9))
    t = admin.create_topics_request(body)
    native = messages.CreateTopicsResponse(
        topics=[
            messages.CreatableTopicResult(
                name="b", error_code=ErrorCode.INVALID_REPLICATION_FACTOR, error_message="9 > 3"
            ),
            messages.CreatableTopicResult(name="a", error_code=ErrorCode.TOPIC_ALREADY_EXISTS),
        ]
    )
    back = _round_trip(admin.create_topics_response(version, body, t, native))
    assert [(r.name, r.error_code, r.error_message) for r in back.topics] == [
        ("a", K.topic_already_exists, None),
        ("b", K.invalid_replication_factor, "9 > 3"),
    ]


def test_create_topics_failed_forward_is_every_topics_error() -> None:
    body = _create(4, _topic(4, "a", 1, 1), _topic(4, "b", 1, 1))
    t = admin.create_topics_request(body)
    native = admin.create_topics_failed(t.native, ErrorCode.NETWORK_EXCEPTION, "down")
    back = _round_trip(admin.create_topics_response(4, body, t, native))
    assert [(r.error_code, r.error_message) for r in back.topics] == [
        (K.network_exception, "down")
    ] * 2


# ---------------------------------------------------------------------------- DescribeConfigs


def _describe(version: int, *resources: tuple[int, str, tuple[str, ...] | None]) -> Any:
    mod = _mod("describe_configs", version, "request")
    kwargs: dict[str, Any] = {
        "resources": tuple(
            mod.DescribeConfigsResource(
                resource_type=i8(rt), resource_name=name, configuration_keys=keys
            )
            for rt, name, keys in resources
        ),
        "include_synonyms": True,
    }
    if version >= 3:
        kwargs["include_documentation"] = True
    return _through_codec(mod.DescribeConfigsRequest(**kwargs))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_describe_configs_round_trip(version: int) -> None:
    body = _describe(
        version,
        (2, "t", None),
        (4, "1", ("leader.replication.throttled.rate",)),
        (1, "unknown-type", None),
        (4, "", ()),
    )
    t = admin.describe_configs_request(body)
    assert t.native == am.DescribeConfigsRequest(
        resources=[
            am.DescribeConfigsResource(resource_type="topics", resource_name="t"),
            am.DescribeConfigsResource(resource_type="brokers", resource_name="1"),
            am.DescribeConfigsResource(resource_type="brokers", resource_name=""),
        ]
    )
    assert t.refused[2][0] is K.invalid_request
    rate = "leader.replication.throttled.rate"
    native = am.DescribeConfigsResponse(
        results=[
            am.DescribeConfigsResult(
                resource_type="topics",
                resource_name="t",
                error_code=0,
                entries=[
                    am.DescribeConfigsEntry(name="retention.ms", value="9", source="dynamic_entity")
                ],
            ),
            am.DescribeConfigsResult(
                resource_type="brokers",
                resource_name="1",
                error_code=0,
                entries=[
                    am.DescribeConfigsEntry(name=rate, value="100", source="dynamic_entity"),
                    am.DescribeConfigsEntry(name="x", value="1", source="dynamic_default"),
                ],
            ),
            am.DescribeConfigsResult(
                resource_type="brokers",
                resource_name="",
                error_code=0,
                entries=[am.DescribeConfigsEntry(name="x", value="1", source="dynamic_default")],
            ),
        ]
    )
    back = _round_trip(admin.describe_configs_response(version, body, t, native))
    got = [
        (
            r.resource_type,
            r.resource_name,
            r.error_code,
            [(c.name, c.value, c.config_source) for c in r.configs],
        )
        for r in back.results
    ]
    assert got == [
        (2, "t", K.none, [("retention.ms", "9", admin.TOPIC_CONFIG)]),
        (4, "1", K.none, [(rate, "100", admin.DYNAMIC_BROKER_CONFIG)]),  # filtered by key
        (1, "unknown-type", K.invalid_request, []),
        (4, "", K.none, [("x", "1", admin.DYNAMIC_DEFAULT_BROKER_CONFIG)]),  # () means all
    ]
    assert "only TOPIC (2) and BROKER (4)" in back.results[2].error_message
    entry = back.results[0].configs[0]
    assert (entry.read_only, entry.is_sensitive, entry.synonyms) == (False, False, ())


def test_a_topic_lists_the_configs_it_does_not_set_with_the_brokers_defaults() -> None:
    # Kafka's ConfigHelper.describeConfigs lists every topic config, its own ones as
    # DYNAMIC_TOPIC_CONFIG and the rest with the value the broker applies.
    body = _describe(2, (2, "t", None), (2, "m", ("min.insync.replicas",)), (2, "gone", None),
                     (4, "1", None))  # fmt: skip
    t = admin.describe_configs_request(body)
    own = am.DescribeConfigsEntry(
        name="leader.replication.throttled.replicas", value="*", source="dynamic_entity"
    )
    result = partial(am.DescribeConfigsResult, resource_type="topics", error_code=0)
    native = am.DescribeConfigsResponse(
        results=[
            result(resource_name="t", entries=[own]),
            result(resource_name="m", entries=[]),
            am.DescribeConfigsResult(resource_type="topics", resource_name="gone", error_code=3),
            am.DescribeConfigsResult(resource_type="brokers", resource_name="1", error_code=0),
        ]
    )
    defaults = {
        "leader.replication.throttled.replicas": ("", admin.DEFAULT_CONFIG),
        "min.insync.replicas": ("2", admin.STATIC_BROKER_CONFIG),
        "max.message.bytes": ("1048588", admin.DEFAULT_CONFIG),
    }
    back = _round_trip(admin.describe_configs_response(2, body, t, native, defaults))
    got = [[(c.name, c.value, c.config_source) for c in r.configs] for r in back.results]
    assert got == [
        [
            ("leader.replication.throttled.replicas", "*", admin.TOPIC_CONFIG),  # its own wins
            ("max.message.bytes", "1048588", admin.DEFAULT_CONFIG),
            ("min.insync.replicas", "2", admin.STATIC_BROKER_CONFIG),
        ],
        [("min.insync.replicas", "2", admin.STATIC_BROKER_CONFIG)],  # configuration_keys
        [],  # an unknown topic: its error, nothing listed
        [],  # a broker: its dynamic configs only
    ]


def test_describe_configs_top_level_error_is_every_resources_error() -> None:
    body = _describe(2, (2, "t", None), (4, "1", None))
    t = admin.describe_configs_request(body)
    native = am.DescribeConfigsResponse(error_code=ErrorCode.NETWORK_EXCEPTION)
    back = _round_trip(admin.describe_configs_response(2, body, t, native))
    assert [r.error_code for r in back.results] == [K.network_exception] * 2


def test_describe_configs_of_only_unknown_types_forwards_nothing() -> None:
    body = _describe(1, (8, "x", None))
    t = admin.describe_configs_request(body)
    assert t.native is None
    back = _round_trip(admin.describe_configs_response(1, body, t, None))
    assert [r.error_code for r in back.results] == [K.invalid_request]


# ---------------------------------------------------------------------------- IncrementalAlter


def _alter(version: int, *resources: tuple[int, str, list[tuple[str, int, str | None]]]) -> Any:
    mod = _mod("incremental_alter_configs", version, "request")
    return _through_codec(
        mod.IncrementalAlterConfigsRequest(
            resources=tuple(
                mod.AlterConfigsResource(
                    resource_type=i8(rt),
                    resource_name=name,
                    configs=tuple(
                        mod.AlterableConfig(name=k, config_operation=i8(op), value=v)
                        for k, op, v in ops
                    ),
                )
                for rt, name, ops in resources
            ),
            validate_only=False,
        )
    )


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs_round_trip(version: int) -> None:
    body = _alter(
        version,
        (4, "1", [("leader.replication.throttled.rate", 0, "100"), ("x", 1, None)]),
        (2, "t", [("cleanup.policy", 2, "compact")]),  # APPEND: refused here
        (3, "c", [("a", 0, "1")]),  # unknown type: refused here
        (2, "t", [("leader.replication.throttled.replicas", 0, "0:1")]),
    )
    t = admin.incremental_alter_configs_request(body)
    assert t.native == am.IncrementalAlterConfigsRequest(
        resources=[
            am.AlterConfigsResource(
                resource_type="brokers",
                resource_name="1",
                configs=[
                    am.AlterableConfig(
                        name="leader.replication.throttled.rate", op="set", value="100"
                    ),
                    am.AlterableConfig(name="x", op="delete"),
                ],
            ),
            am.AlterConfigsResource(
                resource_type="topics",
                resource_name="t",
                configs=[
                    am.AlterableConfig(
                        name="leader.replication.throttled.replicas", op="set", value="0:1"
                    )
                ],
            ),
        ]
    )
    assert "not APPEND (2) or SUBTRACT (3)" in t.refused[1][1]
    native = am.IncrementalAlterConfigsResponse(
        responses=[
            am.AlterConfigsResourceResponse(
                resource_type="brokers", resource_name="1", error_code=0
            ),
            am.AlterConfigsResourceResponse(
                resource_type="topics",
                resource_name="t",
                error_code=ErrorCode.INVALID_CONFIG,
                error_message="bad",
            ),
        ]
    )
    back = _round_trip(admin.incremental_alter_configs_response(version, body, t, native))
    assert [(r.resource_type, r.resource_name, r.error_code) for r in back.responses] == [
        (4, "1", K.none),
        (2, "t", K.invalid_request),
        (3, "c", K.invalid_request),
        (2, "t", K.invalid_config),
    ]


def test_incremental_alter_configs_top_level_error_is_every_resources_error() -> None:
    body = _alter(1, (4, "1", [("a", 0, "1")]), (2, "t", [("b", 3, "x")]))
    t = admin.incremental_alter_configs_request(body)
    native = am.IncrementalAlterConfigsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    back = _round_trip(admin.incremental_alter_configs_response(1, body, t, native))
    assert [r.error_code for r in back.responses] == [K.not_controller, K.invalid_request]


# ---------------------------------------------------------------------------- reassignments


def _reassign(moves: dict[tuple[str, int], list[int] | None]) -> Any:
    mod = _mod("alter_partition_reassignments", 0, "request")
    topics: dict[str, list] = {}
    for (topic, p), replicas in moves.items():
        topics.setdefault(topic, []).append(
            mod.ReassignablePartition(
                partition_index=i32(p),
                replicas=None if replicas is None else tuple(BrokerId(b) for b in replicas),
            )
        )
    return _through_codec(
        mod.AlterPartitionReassignmentsRequest(
            timeout=timedelta(seconds=5),
            topics=tuple(
                mod.ReassignableTopic(name=TopicName(t), partitions=tuple(ps))
                for t, ps in topics.items()
            ),
        )
    )


def test_alter_partition_reassignments_round_trip() -> None:
    body = _reassign({("t", 0): [2, 3], ("t", 1): None, ("u", 0): [1]})
    t = reassignments.alter_partition_reassignments_request(body)
    assert t.native == am.AlterPartitionReassignmentsRequest(
        partitions=[
            am.ReassignablePartition(topic="t", partition=0, replicas=[2, 3]),
            am.ReassignablePartition(topic="t", partition=1, replicas=None),
            am.ReassignablePartition(topic="u", partition=0, replicas=[1]),
        ],
        timeout_ms=5000,
    )
    native = am.AlterPartitionReassignmentsResponse(
        responses=[
            am.ReassignablePartitionResponse(topic="u", partition=0, error_code=0),
            am.ReassignablePartitionResponse(topic="t", partition=0, error_code=0),
            am.ReassignablePartitionResponse(
                topic="t", partition=1, error_code=ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            ),
        ]
    )
    back = _round_trip(reassignments.alter_partition_reassignments_response(0, body, native))
    assert back.error_code is K.none
    got = [(r.name, p.partition_index, p.error_code) for r in back.responses for p in r.partitions]
    assert got == [("t", 0, K.none), ("t", 1, K.no_reassignment_in_progress), ("u", 0, K.none)]


def test_alter_partition_reassignments_top_level_error() -> None:
    body = _reassign({("t", 0): [2, 3]})
    native = am.AlterPartitionReassignmentsResponse(
        error_code=ErrorCode.NETWORK_EXCEPTION, error_message="controller unreachable"
    )
    back = _round_trip(reassignments.alter_partition_reassignments_response(0, body, native))
    assert (back.error_code, back.error_message) == (K.network_exception, "controller unreachable")
    assert back.responses[0].partitions[0].error_code is K.network_exception


def _list(topics: dict[str, list[int]] | None) -> Any:
    mod = _mod("list_partition_reassignments", 0, "request")
    return _through_codec(
        mod.ListPartitionReassignmentsRequest(
            timeout=timedelta(seconds=3),
            topics=None
            if topics is None
            else tuple(
                mod.ListPartitionReassignmentsTopics(
                    name=TopicName(t), partition_indexes=tuple(i32(p) for p in ps)
                )
                for t, ps in topics.items()
            ),
        )
    )


ONGOING = am.ListPartitionReassignmentsResponse(
    reassignments=[
        am.OngoingPartitionReassignment(
            topic="t", partition=0, replicas=[3, 1, 2], adding_replicas=[3], removing_replicas=[2]
        ),
        am.OngoingPartitionReassignment(topic="t", partition=1, replicas=[1]),
        am.OngoingPartitionReassignment(topic="u", partition=0, replicas=[2]),
    ]
)


def test_list_partition_reassignments_all() -> None:
    body = _list(None)
    t = reassignments.list_partition_reassignments_request(body)
    assert t.native == am.ListPartitionReassignmentsRequest(topics=None, timeout_ms=3000)
    back = _round_trip(reassignments.list_partition_reassignments_response(0, body, ONGOING))
    got = {
        (r.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for r in back.topics
        for p in r.partitions
    }
    assert got == {
        ("t", 0): ((3, 1, 2), (3,), (2,)),
        ("t", 1): ((1,), (), ()),
        ("u", 0): ((2,), (), ()),
    }


def test_list_partition_reassignments_keeps_only_the_requested_partitions() -> None:
    body = _list({"t": [0]})
    t = reassignments.list_partition_reassignments_request(body)
    assert t.native.topics == ["t"]
    back = _round_trip(reassignments.list_partition_reassignments_response(0, body, ONGOING))
    assert [(r.name, [p.partition_index for p in r.partitions]) for r in back.topics] == [
        ("t", [0])
    ]


def test_list_partition_reassignments_top_level_error() -> None:
    body = _list(None)
    native = am.ListPartitionReassignmentsResponse(error_code=ErrorCode.NETWORK_EXCEPTION)
    back = _round_trip(reassignments.list_partition_reassignments_response(0, body, native))
    assert (back.error_code, back.topics) == (K.network_exception, ())


# ---------------------------------------------------------------------------- the shell


def test_unknown_native_codes_become_unknown_server_error() -> None:
    assert admin.kafka_error(9999) is K.unknown_server_error
    assert admin.kafka_error(ErrorCode.INVALID_CONFIG) is K.invalid_config


def _header(body: Any) -> Any:
    from minikafka.kafka.codec import KafkaRequest

    return KafkaRequest(
        api_key=int(body.__api_key__),
        api_version=int(body.__version__),
        correlation_id=1,
        client_id="cli",
        body=body,
    )


async def test_the_shell_forwards_to_the_native_dispatch() -> None:
    seen: list[object] = []

    async def native(request: object, *, client_id: str = "", order: object = None) -> object:
        seen.append(request)
        return am.DescribeConfigsResponse(
            results=[
                am.DescribeConfigsResult(resource_type="brokers", resource_name="1", error_code=0)
            ]
        )

    apis = KafkaApis(cache=MetadataCache(), cluster_id="c", broker=native)
    body = _describe(3, (4, "1", None))
    out = await apis.dispatch(_header(body), body)
    assert seen == [
        am.DescribeConfigsRequest(
            resources=[am.DescribeConfigsResource(resource_type="brokers", resource_name="1")]
        )
    ]
    assert out.results[0].error_code is K.none


async def test_the_shell_answers_a_failed_forward() -> None:
    async def down(request: object, *, client_id: str = "", order: object = None) -> object:
        raise BrokerError(ErrorCode.NETWORK_EXCEPTION, "controller unreachable")

    apis = KafkaApis(cache=MetadataCache(), cluster_id="c", broker=down)
    body = _create(4, _topic(4, "a", 1, 1))
    out = _round_trip(await apis.dispatch(_header(body), body))
    assert out.topics[0].error_code is K.network_exception
    assert "controller unreachable" in out.topics[0].error_message
    body = _alter(1, (4, "1", [("a", 0, "1")]))
    out = _round_trip(await apis.dispatch(_header(body), body))
    assert out.responses[0].error_code is K.network_exception
    body = _list(None)
    out = _round_trip(await apis.dispatch(_header(body), body))
    assert out.error_code is K.network_exception


async def test_the_shell_without_a_broker_dispatch_answers_network_exception() -> None:
    apis = KafkaApis(cache=MetadataCache(), cluster_id="c")
    body = _reassign({("t", 0): [1]})
    out = _round_trip(await apis.dispatch(_header(body), body))
    assert out.error_code is K.network_exception


# ---------------------------------------------------------------------------- CreatePartitions


@pytest.mark.parametrize("version", [0, 1])
def test_create_partitions_translates_both_ways(version: int) -> None:
    mod = _mod("create_partitions", version, "request")
    body = _through_codec(
        mod.CreatePartitionsRequest(
            topics=(
                mod.CreatePartitionsTopic(name=TopicName("a"), count=i32(6), assignments=None),
                mod.CreatePartitionsTopic(
                    name=TopicName("b"),
                    count=i32(3),
                    assignments=(
                        mod.CreatePartitionsAssignment(broker_ids=(BrokerId(2), BrokerId(3))),
                    ),
                ),
            ),
            timeout=timedelta(milliseconds=2500),
            validate_only=True,
        )
    )
    native = admin.create_partitions_request(body)
    assert native == messages.CreatePartitionsRequest(
        topics=[
            messages.CreatePartitionsTopic(name="a", count=6, assignments=None),
            messages.CreatePartitionsTopic(name="b", count=3, assignments=[[2, 3]]),
        ],
        timeout_ms=2500,
        validate_only=True,
    )
    answer = messages.CreatePartitionsResponse(
        results=[
            messages.CreatableTopicResult(name="a", error_code=0),
            messages.CreatableTopicResult(name="b", error_code=37, error_message="no increase"),
        ]
    )
    back = _round_trip(admin.create_partitions_response(version, answer))
    assert [(str(r.name), int(r.error_code), r.error_message) for r in back.results] == [
        ("a", 0, None),
        ("b", 37, "no increase"),
    ]
    failed = admin.create_partitions_failed(native, 13, "no controller")
    assert [(r.name, r.error_code) for r in failed.results] == [("a", 13), ("b", 13)]


# ---------------------------------------------------------------------------- DeleteTopics


@pytest.mark.parametrize("version", [1, 2, 3])
def test_delete_topics_translates_both_ways(version: int) -> None:
    mod = _mod("delete_topics", version, "request")
    body = _through_codec(
        mod.DeleteTopicsRequest(
            topic_names=(TopicName("a"), TopicName("b")), timeout=timedelta(milliseconds=1500)
        )
    )
    native = admin.delete_topics_request(body)
    assert native == messages.DeleteTopicsRequest(topics=["a", "b"], timeout_ms=1500)
    answer = messages.DeleteTopicsResponse(
        results=[
            messages.CreatableTopicResult(name="a", error_code=0),
            messages.CreatableTopicResult(name="b", error_code=3, error_message="no such topic"),
        ]
    )
    back = _round_trip(admin.delete_topics_response(version, answer))
    assert [(str(r.name), int(r.error_code)) for r in back.responses] == [("a", 0), ("b", 3)]
    failed = admin.delete_topics_failed(native, 13, "no controller")
    assert [(r.name, r.error_code) for r in failed.results] == [("a", 13), ("b", 13)]
