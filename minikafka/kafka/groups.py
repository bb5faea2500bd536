"""Kafka's classic consumer-group APIs on the Kafka listener, translated both ways. Pure.

Maps kio requests to the keywords of minikafka's GroupCoordinator (core/group) and its results
back to kio responses, as KafkaApis.handleFindCoordinatorRequest, handleJoinGroupRequest,
handleSyncGroupRequest, handleHeartbeatRequest, handleLeaveGroupRequest,
handleOffsetCommitRequest, handleOffsetFetchRequest, handleListGroupsRequest and
handleDescribeGroupsRequest do. Versions (codec.SUPPORTED): FindCoordinator 0-2, JoinGroup 2-5,
SyncGroup 0-3, Heartbeat 0-3, LeaveGroup 0-3, OffsetCommit 2-7, OffsetFetch 1-5, ListGroups 0-2,
DescribeGroups 0-4: Kafka 4.0's oldest (KIP-896) to the last non-flexible version of each.

Passed on, not judged here: JoinGroup's group_instance_id (v5+; core refuses a non-null one with
UNSUPPORTED_VERSION, since static membership, KIP-345, is not served). Ignored: group_instance_id
on SyncGroup v3, Heartbeat v3, LeaveGroup v3 and OffsetCommit v7 (no static member can exist, so
the member id alone identifies the member), OffsetCommit's retention_time (v2-4: offsets expire by
the broker's offsets.retention.minutes, KIP-211, core/group/group_offsets.py) and committed_leader_epoch (v6+: fetches answer -1, so clients
skip epoch validation, KIP-320), DescribeGroups' include_authorized_operations (v3+: always
"not requested", no authorizer). Field sets differ per version; each response is built from the
fields this version's kio class has, so a field is sent exactly where Kafka's schema has it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from datetime import timedelta
from types import ModuleType
from typing import Any

from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i32, i64

from minikafka.core.group import (
    GroupSummary,
    JoinResponse,
    LeaveOutcome,
    ListedGroup,
    OffsetFetch,
    SyncResponse,
)
from minikafka.kafka import codec
from minikafka.kafka.admin import kafka_error

# Kafka's FindCoordinatorRequest.CoordinatorType: GROUP=0, TRANSACTION=1.
COORDINATOR_GROUP = 0
# DescribeGroups v3+ authorized_operations when not requested (KIP-430; Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
NO_OFFSET = -1  # OffsetFetchResponse.INVALID_OFFSET
UNKNOWN_SERVER_ERROR = -1  # Errors.UNKNOWN_SERVER_ERROR
NO_LEADER_EPOCH = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH

TopicPartition = tuple[str, int]


# ---------------------------------------------------------------------------- helpers


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def _make(cls: type, versioned: Mapping[str, Any], /, **fields: Any) -> Any:
    """cls(**fields) plus those of `versioned` that this version's cls has. `fields` must all
    exist (a misspelt name fails loudly); only fields some versions lack go in `versioned`."""
    names = _field_names(cls)
    return cls(**fields, **{k: v for k, v in versioned.items() if k in names})


def _throttle(throttle_ms: int) -> dict[str, Any]:
    return {"throttle_time": timedelta(milliseconds=throttle_ms)}


def _ms(value: timedelta) -> int:
    return int(value.total_seconds() * 1000)


# ---------------------------------------------------------------------------- FindCoordinator


def find_coordinator_request(body: Any) -> tuple[int, str]:
    """(key_type, key); v0 has no key_type: it only finds group coordinators."""
    return int(getattr(body, "key_type", COORDINATOR_GROUP)), str(body.key)


def find_coordinator_response(
    version: int,
    *,
    error: int,
    node_id: int = -1,
    host: str = "",
    port: int = -1,
    message: str | None = None,
) -> Any:
    """On error the node is Node.noNode() (-1, "", -1), as KafkaApis sends it."""
    if error:
        node_id, host, port = -1, "", -1
    cls = codec.response_module(codec.FIND_COORDINATOR, version).FindCoordinatorResponse
    return _make(
        cls,
        {**_throttle(0), "error_message": message},
        error_code=kafka_error(error),
        node_id=BrokerId(node_id),
        host=host,
        port=i32(port),
    )


# ---------------------------------------------------------------------------- JoinGroup


def join_group_request(
    body: Any, *, client_id: str, client_host: str
) -> tuple[str, dict[str, Any]]:
    """(group_id, GroupCoordinator.join's keywords but now_ms)."""
    return str(body.group_id), {
        "member_id": body.member_id,
        "client_id": client_id,
        "client_host": client_host,
        "protocol_type": body.protocol_type,
        "protocols": tuple((p.name, bytes(p.metadata)) for p in body.protocols),
        "session_timeout_ms": _ms(body.session_timeout),
        "rebalance_timeout_ms": _ms(body.rebalance_timeout),
        # KafkaApis.handleJoinGroupRequest: requireKnownMemberId = version >= 4 (KIP-394).
        "require_known_member_id": body.__version__ >= 4,
        "group_instance_id": getattr(body, "group_instance_id", None),
    }


def join_group_response(version: int, resp: JoinResponse, *, throttle_ms: int = 0) -> Any:
    """Before v7 protocol_name is not nullable: None goes out as "" (GroupCoordinator.NoProtocol).
    Only the leader's response carries members (core fills them for the leader only)."""
    mod = codec.response_module(codec.JOIN_GROUP, version)
    members = tuple(
        _make(
            mod.JoinGroupResponseMember,
            {"group_instance_id": None},
            member_id=m.member_id,
            metadata=m.metadata,
        )
        for m in resp.members
    )
    return mod.JoinGroupResponse(
        throttle_time=timedelta(milliseconds=throttle_ms),
        error_code=kafka_error(resp.error),
        generation_id=i32(resp.generation_id),
        protocol_name=resp.protocol_name or "",
        leader=resp.leader_id,
        member_id=resp.member_id,
        members=members,
    )


# ---------------------------------------------------------------------------- SyncGroup


def sync_group_request(body: Any) -> tuple[str, dict[str, Any]]:
    """(group_id, GroupCoordinator.sync's keywords but now_ms); group_instance_id ignored."""
    return str(body.group_id), {
        "member_id": body.member_id,
        "generation_id": int(body.generation_id),
        "assignments": {a.member_id: bytes(a.assignment) for a in body.assignments},
    }


def sync_group_response(version: int, resp: SyncResponse, *, throttle_ms: int = 0) -> Any:
    cls = codec.response_module(codec.SYNC_GROUP, version).SyncGroupResponse
    return _make(
        cls, _throttle(throttle_ms), error_code=kafka_error(resp.error), assignment=resp.assignment
    )


# ---------------------------------------------------------------------------- Heartbeat


def heartbeat_request(body: Any) -> tuple[str, str, int]:
    """(group_id, member_id, generation_id); group_instance_id (v3) ignored."""
    return str(body.group_id), body.member_id, int(body.generation_id)


def heartbeat_response(version: int, error: int, *, throttle_ms: int = 0) -> Any:
    cls = codec.response_module(codec.HEARTBEAT, version).HeartbeatResponse
    return _make(cls, _throttle(throttle_ms), error_code=kafka_error(error))


# ---------------------------------------------------------------------------- LeaveGroup


def leave_group_request(body: Any) -> tuple[str, tuple[str, ...]]:
    """(group_id, member_ids): v0-2 name one member, v3 a batch (KIP-345)."""
    if body.__version__ < 3:
        return str(body.group_id), (body.member_id,)
    return str(body.group_id), tuple(m.member_id for m in body.members)


def leave_group_response(version: int, outcome: LeaveOutcome, *, throttle_ms: int = 0) -> Any:
    """v0-2 carry one error: the group's, else the first member's (LeaveGroupResponse.getError);
    v3 adds one entry per member."""
    mod = codec.response_module(codec.LEAVE_GROUP, version)
    if version < 3:
        code = outcome.error or next((c for c in outcome.members.values() if c), 0)
        return _make(mod.LeaveGroupResponse, _throttle(throttle_ms), error_code=kafka_error(code))
    members = tuple(
        mod.MemberResponse(member_id=mid, group_instance_id=None, error_code=kafka_error(code))
        for mid, code in outcome.members.items()
    )
    return mod.LeaveGroupResponse(
        throttle_time=timedelta(milliseconds=throttle_ms),
        error_code=kafka_error(outcome.error),
        members=members,
    )


# ---------------------------------------------------------------------------- OffsetCommit


def offset_commit_request(
    body: Any,
) -> tuple[str, str, int, dict[TopicPartition, tuple[int, str]]]:
    """(group_id, member_id, generation_id, {(topic, partition): (offset, metadata)}); a null
    committed_metadata is "" (OffsetAndMetadata.NoMetadata)."""
    offsets = {
        (str(t.name), int(p.partition_index)): (int(p.committed_offset), p.committed_metadata or "")
        for t in body.topics
        for p in t.partitions
    }
    return str(body.group_id), body.member_id, int(body.generation_id_or_member_epoch), offsets


def offset_commit_response(
    version: int, body: Any, errors: Mapping[TopicPartition, int], *, throttle_ms: int = 0
) -> Any:
    """One entry per requested partition, in the request's order; a partition missing from
    `errors` gets UNKNOWN_SERVER_ERROR. A request-wide error is the same code for all."""
    mod = codec.response_module(codec.OFFSET_COMMIT, version)
    partition_cls = mod.OffsetCommitResponsePartition

    def partition(topic: str, index: int) -> Any:
        code = errors.get((topic, index), UNKNOWN_SERVER_ERROR)
        return partition_cls(partition_index=i32(index), error_code=kafka_error(code))

    topics = tuple(
        mod.OffsetCommitResponseTopic(
            name=TopicName(str(t.name)),
            partitions=tuple(partition(str(t.name), int(p.partition_index)) for p in t.partitions),
        )
        for t in body.topics
    )
    return _make(mod.OffsetCommitResponse, _throttle(throttle_ms), topics=topics)


# ---------------------------------------------------------------------------- OffsetFetch


def offset_fetch_request(body: Any) -> tuple[str, list[TopicPartition] | None]:
    """(group_id, partitions); null topics (v2+) is every partition the group committed."""
    if body.topics is None:
        return str(body.group_id), None
    return str(body.group_id), [
        (str(t.name), int(p)) for t in body.topics for p in t.partition_indexes
    ]


def offset_fetch_response(
    version: int,
    results: Mapping[TopicPartition, OffsetFetch],
    *,
    error: int = 0,
    throttle_ms: int = 0,
) -> Any:
    """Grouped by topic in `results`' order. A group error goes where
    OffsetFetchRequest.getErrorResponse puts it: v1 has no top-level error, so every
    partition carries it (offset -1, metadata ""); from v2 it is top-level and no partitions go."""
    mod = codec.response_module(codec.OFFSET_FETCH, version)
    if error and version >= 2:
        results = {}
    elif error:
        results = {tp: OffsetFetch(offset=NO_OFFSET, error=error) for tp in results}
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), r in results.items():
        by_topic.setdefault(topic, []).append(
            _make(
                mod.OffsetFetchResponsePartition,
                {"committed_leader_epoch": i32(NO_LEADER_EPOCH)},
                partition_index=i32(partition),
                committed_offset=i64(r.offset),
                metadata=r.metadata,
                error_code=kafka_error(r.error),
            )
        )
    topics = tuple(
        mod.OffsetFetchResponseTopic(name=TopicName(t), partitions=tuple(ps))
        for t, ps in by_topic.items()
    )
    return _make(
        mod.OffsetFetchResponse,
        {**_throttle(throttle_ms), "error_code": kafka_error(error)},
        topics=topics,
    )


# ---------------------------------------------------------------------------- ListGroups


def list_groups_response(
    version: int, groups: Sequence[ListedGroup], *, error: int = 0, throttle_ms: int = 0
) -> Any:
    """Group id and protocol type only: states (and their filter) come in v4 (KIP-518)."""
    mod = codec.response_module(codec.LIST_GROUPS, version)
    listed = tuple(
        mod.ListedGroup(group_id=GroupId(g.group_id), protocol_type=g.protocol_type) for g in groups
    )
    return _make(
        mod.ListGroupsResponse, _throttle(throttle_ms), error_code=kafka_error(error), groups=listed
    )


# ---------------------------------------------------------------------------- DescribeGroups


def describe_groups_request(body: Any) -> list[str]:
    return [str(g) for g in body.groups]


def describe_groups_response(
    version: int,
    summaries: Sequence[GroupSummary],
    *,
    errors: Mapping[str, int] | None = None,
    throttle_ms: int = 0,
) -> Any:
    """One entry per summary, then one per group of `errors` without a summary. A group with an
    error (or no summary) is described empty (DescribeGroupsResponse.groupError)."""
    mod = codec.response_module(codec.DESCRIBE_GROUPS, version)
    errors = errors or {}
    known = {s.group_id: s for s in summaries}
    failed = [g for g in errors if g not in known]  # every asked group gets an answer
    described = tuple(
        _described_group(mod, known.get(g), g, errors.get(g, 0)) for g in [*known, *failed]
    )
    return _make(mod.DescribeGroupsResponse, _throttle(throttle_ms), groups=described)


def _described_group(mod: ModuleType, s: GroupSummary | None, group_id: str, code: int) -> Any:
    if code or s is None:
        s = GroupSummary(group_id=group_id, state="", protocol_type="", protocol="", members=())
    members = tuple(
        _make(
            mod.DescribedGroupMember,
            {"group_instance_id": None},
            member_id=m.member_id,
            client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata,
            member_assignment=m.assignment,
        )
        for m in s.members
    )
    return _make(
        mod.DescribedGroup,
        {"authorized_operations": i32(AUTHORIZED_OPERATIONS_OMITTED)},
        error_code=kafka_error(code),
        group_id=GroupId(group_id),
        group_state=s.state,
        protocol_type=s.protocol_type,
        protocol_data=s.protocol,
        members=members,
    )
