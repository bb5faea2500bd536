"""Kafka's consumer-group APIs translated (minikafka/kafka/groups.py), at every supported version.

Each request is written with kio as a client writes it and read by codec.decode_request; each
response goes through codec.encode_response and is read back with kio, as a client reads it. So
a field sent at a version whose schema lacks it (or missing where it has it) fails here.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import io
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as K
from kio.schema.types import GroupId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

from minikafka.core.group import (
    GroupCoordinator,
    GroupSummary,
    JoinedMember,
    JoinResponse,
    LeaveOutcome,
    ListedGroup,
    MemberSummary,
    OffsetFetch,
    SyncResponse,
)
from minikafka.core.group.group import Group
from minikafka.kafka import codec, groups
from minikafka.kafka.codec import SUPPORTED, decode_request, encode_response

NOT_REQUESTED = -2147483648


def _versions(api_key: int) -> list[int]:
    lo, hi = SUPPORTED[api_key]
    return list(range(lo, hi + 1))


def _mod(api: str, version: int, kind: str = "request") -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def _new(cls: type, versioned: dict[str, Any], /, **fields: Any) -> Any:
    """A kio request entity: `fields` always, `versioned` where this version has them."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**fields, **{k: v for k, v in versioned.items() if k in names})


def _through_codec(body: Any) -> Any:
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


def _round_trip(response: Any, api_key: int, version: int) -> Any:
    assert (response.__api_key__, response.__version__) == (api_key, version)
    payload = encode_response(7, response)
    cls = type(response)
    header, used = entity_reader(cls.__header_schema__)(payload, 0)
    body, body_used = entity_reader(cls)(payload, used)
    assert header.correlation_id == 7 and used + body_used == len(payload)
    return body


def _throttle(decoded: Any) -> int | None:
    t = getattr(decoded, "throttle_time", None)
    return None if t is None else int(t.total_seconds() * 1000)


# ---------------------------------------------------------------------------- FindCoordinator


@pytest.mark.parametrize("version", _versions(codec.FIND_COORDINATOR))
def test_find_coordinator(version: int) -> None:
    cls = _mod("find_coordinator", version).FindCoordinatorRequest
    body = _through_codec(_new(cls, {"key_type": i8(1)}, key="g1"))
    assert groups.find_coordinator_request(body) == ((1 if version else 0), "g1")

    ok = _round_trip(
        groups.find_coordinator_response(version, error=0, node_id=3, host="h", port=9092),
        codec.FIND_COORDINATOR,
        version,
    )
    assert (ok.error_code, int(ok.node_id), ok.host, int(ok.port)) == (K.none, 3, "h", 9092)
    assert _throttle(ok) == (None if version == 0 else 0)

    bad = _round_trip(
        groups.find_coordinator_response(
            version, error=15, node_id=3, host="h", port=9092, message="loading"
        ),
        codec.FIND_COORDINATOR,
        version,
    )
    assert (bad.error_code, int(bad.node_id), bad.host, int(bad.port)) == (
        K.coordinator_not_available,
        -1,
        "",
        -1,
    )
    assert getattr(bad, "error_message", "absent") == ("absent" if version == 0 else "loading")


# ---------------------------------------------------------------------------- JoinGroup


def _join_body(version: int, instance: str | None = None) -> Any:
    mod = _mod("join_group", version)
    return _through_codec(
        _new(
            mod.JoinGroupRequest,
            {"group_instance_id": instance},
            group_id=GroupId("g"),
            session_timeout=timedelta(milliseconds=10_000),
            rebalance_timeout=timedelta(milliseconds=30_000),
            member_id="m-1",
            protocol_type="consumer",
            protocols=tuple(
                mod.JoinGroupRequestProtocol(name=n, metadata=md)
                for n, md in (("range", b"\x01"), ("roundrobin", b"\x02"))
            ),
        )
    )


@pytest.mark.parametrize("version", _versions(codec.JOIN_GROUP))
def test_join_group_request(version: int) -> None:
    gid, kwargs = groups.join_group_request(
        _join_body(version, "inst-1"), client_id="cli", client_host="/10.0.0.1"
    )
    assert gid == "g"
    assert kwargs == {
        "member_id": "m-1",
        "client_id": "cli",
        "client_host": "/10.0.0.1",
        "protocol_type": "consumer",
        "protocols": (("range", b"\x01"), ("roundrobin", b"\x02")),
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 30_000,
        "require_known_member_id": version >= 4,  # KIP-394
        "group_instance_id": "inst-1" if version >= 5 else None,
    }
    # Exactly Group.join's keywords but now_ms: a drift in core fails here.
    assert set(kwargs) == set(inspect.signature(Group.join).parameters) - {"self", "now_ms"}


@pytest.mark.parametrize(("version", "code"), [(3, 0), (4, 79)])
def test_join_group_kwargs_drive_the_coordinator(version: int, code: int) -> None:
    """A new member (empty id) joining: v4 gets MEMBER_ID_REQUIRED (KIP-394), v3 is admitted."""
    body = dataclasses.replace(_join_body(version), member_id="")
    gid, kwargs = groups.join_group_request(body, client_id="c", client_host="h")
    outcome = GroupCoordinator().join(gid, **kwargs, now_ms=0)
    assert (outcome.response.error if outcome.response else 0) == code


@pytest.mark.parametrize("version", _versions(codec.JOIN_GROUP))
def test_join_group_response(version: int) -> None:
    leader = JoinResponse(
        group_id="g",
        member_id="m-1",
        error=0,
        generation_id=4,
        protocol_type="consumer",
        protocol_name="range",
        leader_id="m-1",
        members=(
            JoinedMember(member_id="m-1", metadata=b"a"),
            JoinedMember(member_id="m-2", metadata=b"b"),
        ),
    )
    got = _round_trip(
        groups.join_group_response(version, leader, throttle_ms=25), codec.JOIN_GROUP, version
    )
    assert (got.error_code, int(got.generation_id), got.protocol_name) == (K.none, 4, "range")
    assert (got.leader, got.member_id, _throttle(got)) == ("m-1", "m-1", 25)
    assert [(m.member_id, m.metadata) for m in got.members] == [("m-1", b"a"), ("m-2", b"b")]
    if version >= 5:
        assert [m.group_instance_id for m in got.members] == [None, None]

    error = JoinResponse(group_id="g", member_id="", error=79)  # protocol_name None
    got = _round_trip(groups.join_group_response(version, error), codec.JOIN_GROUP, version)
    assert (got.error_code, int(got.generation_id), got.protocol_name, got.members) == (
        K.member_id_required,
        -1,
        "",
        (),
    )


# ---------------------------------------------------------------------------- SyncGroup


@pytest.mark.parametrize("version", _versions(codec.SYNC_GROUP))
def test_sync_group(version: int) -> None:
    mod = _mod("sync_group", version)
    body = _through_codec(
        _new(
            mod.SyncGroupRequest,
            {"group_instance_id": "inst-1"},
            group_id=GroupId("g"),
            generation_id=i32(4),
            member_id="m-1",
            assignments=tuple(
                mod.SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in (("m-1", b"A"), ("m-2", b"B"))
            ),
        )
    )
    gid, kwargs = groups.sync_group_request(body)
    assert (gid, kwargs) == (
        "g",
        {"member_id": "m-1", "generation_id": 4, "assignments": {"m-1": b"A", "m-2": b"B"}},
    )
    assert set(kwargs) == set(inspect.signature(Group.sync).parameters) - {"self", "now_ms"}

    resp = SyncResponse(group_id="g", member_id="m-1", error=0, assignment=b"A")
    got = _round_trip(groups.sync_group_response(version, resp, throttle_ms=5), 14, version)
    assert (got.error_code, got.assignment, _throttle(got)) == (
        K.none,
        b"A",
        None if version == 0 else 5,
    )
    resp = SyncResponse(group_id="g", member_id="m-1", error=27)
    got = _round_trip(groups.sync_group_response(version, resp), 14, version)
    assert (got.error_code, got.assignment) == (K.rebalance_in_progress, b"")


# ---------------------------------------------------------------------------- Heartbeat


@pytest.mark.parametrize("version", _versions(codec.HEARTBEAT))
def test_heartbeat(version: int) -> None:
    cls = _mod("heartbeat", version).HeartbeatRequest
    body = _through_codec(
        _new(
            cls,
            {"group_instance_id": None},
            group_id=GroupId("g"),
            generation_id=i32(4),
            member_id="m-1",
        )
    )
    assert groups.heartbeat_request(body) == ("g", "m-1", 4)
    got = _round_trip(groups.heartbeat_response(version, 22, throttle_ms=9), 12, version)
    assert (got.error_code, _throttle(got)) == (K.illegal_generation, None if version == 0 else 9)


# ---------------------------------------------------------------------------- LeaveGroup


@pytest.mark.parametrize("version", _versions(codec.LEAVE_GROUP))
def test_leave_group_request(version: int) -> None:
    mod = _mod("leave_group", version)
    if version < 3:
        body = mod.LeaveGroupRequest(group_id=GroupId("g"), member_id="m-1")
        expected: tuple[str, ...] = ("m-1",)
    else:
        body = mod.LeaveGroupRequest(
            group_id=GroupId("g"),
            members=tuple(
                mod.MemberIdentity(member_id=m, group_instance_id=None) for m in ("m-1", "m-2")
            ),
        )
        expected = ("m-1", "m-2")
    assert groups.leave_group_request(_through_codec(body)) == ("g", expected)


@pytest.mark.parametrize("version", _versions(codec.LEAVE_GROUP))
@pytest.mark.parametrize(
    ("outcome", "single"),
    [
        (LeaveOutcome(error=0, members={"m-1": 0}), K.none),
        (LeaveOutcome(error=0, members={"m-1": 25}), K.unknown_member_id),
        (LeaveOutcome(error=15, members={}), K.coordinator_not_available),
        (LeaveOutcome(error=15, members={"m-1": 25}), K.coordinator_not_available),
    ],
)
def test_leave_group_response(version: int, outcome: LeaveOutcome, single: K) -> None:
    """v0-2: the group's error first, else the member's (LeaveGroupResponse.getError)."""
    got = _round_trip(groups.leave_group_response(version, outcome, throttle_ms=3), 13, version)
    assert _throttle(got) == (None if version == 0 else 3)
    if version < 3:
        assert got.error_code == single
        return
    assert got.error_code == K(outcome.error)
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in got.members] == [
        (mid, None, K(code)) for mid, code in outcome.members.items()
    ]


# ---------------------------------------------------------------------------- OffsetCommit


# Not sorted, on purpose: the response keeps this order.
COMMITS = [("t-b", [(2, 20, "x"), (0, 5, None)]), ("t-a", [(1, 7, "")])]


def _commit_body(version: int) -> Any:
    mod = _mod("offset_commit", version)
    topics = tuple(
        mod.OffsetCommitRequestTopic(
            name=TopicName(t),
            partitions=tuple(
                _new(
                    mod.OffsetCommitRequestPartition,
                    {"committed_leader_epoch": i32(3)},
                    partition_index=i32(p),
                    committed_offset=i64(o),
                    committed_metadata=md,
                )
                for p, o, md in parts
            ),
        )
        for t, parts in COMMITS
    )
    return _through_codec(
        _new(
            mod.OffsetCommitRequest,
            {"retention_time": timedelta(milliseconds=-1), "group_instance_id": None},
            group_id=GroupId("g"),
            generation_id_or_member_epoch=i32(4),
            member_id="m-1",
            topics=topics,
        )
    )


@pytest.mark.parametrize("version", _versions(codec.OFFSET_COMMIT))
def test_offset_commit(version: int) -> None:
    body = _commit_body(version)
    gid, member, generation, offsets = groups.offset_commit_request(body)
    assert (gid, member, generation) == ("g", "m-1", 4)
    assert offsets == {("t-b", 2): (20, "x"), ("t-b", 0): (5, ""), ("t-a", 1): (7, "")}

    errors = {("t-a", 1): 0, ("t-b", 0): 12, ("t-b", 2): 0}  # dict order differs on purpose
    got = _round_trip(
        groups.offset_commit_response(version, body, errors, throttle_ms=4), 8, version
    )
    assert [
        (str(t.name), int(p.partition_index), p.error_code)
        for t in got.topics
        for p in t.partitions
    ] == [("t-b", 2, K.none), ("t-b", 0, K.offset_metadata_too_large), ("t-a", 1, K.none)]
    assert _throttle(got) == (None if version < 3 else 4)

    # A partition the coordinator did not answer is an UNKNOWN_SERVER_ERROR, not a success.
    got = _round_trip(groups.offset_commit_response(version, body, {}), 8, version)
    assert {p.error_code for t in got.topics for p in t.partitions} == {K.unknown_server_error}


def test_offset_commit_kwargs_drive_the_coordinator() -> None:
    gid, member, _generation, offsets = groups.offset_commit_request(_commit_body(7))
    coordinator = GroupCoordinator()
    outcome = coordinator.commit(gid, member_id=member, generation_id=-1, offsets=offsets, now_ms=0)
    assert set(outcome.errors.values()) == {0}
    assert coordinator.fetch_offsets(gid, [("t-b", 0)])[("t-b", 0)].metadata == ""


# ---------------------------------------------------------------------------- OffsetFetch


@pytest.mark.parametrize("version", _versions(codec.OFFSET_FETCH))
def test_offset_fetch_request(version: int) -> None:
    mod = _mod("offset_fetch", version)
    topics = tuple(
        mod.OffsetFetchRequestTopic(name=TopicName(t), partition_indexes=tuple(map(i32, ps)))
        for t, ps in (("t-b", (1, 0)), ("t-a", (3,)))
    )
    body = _through_codec(mod.OffsetFetchRequest(group_id=GroupId("g"), topics=topics))
    assert groups.offset_fetch_request(body) == ("g", [("t-b", 1), ("t-b", 0), ("t-a", 3)])
    if version >= 2:  # null topics: all the group's partitions
        body = _through_codec(mod.OffsetFetchRequest(group_id=GroupId("g"), topics=None))
        assert groups.offset_fetch_request(body) == ("g", None)


def _fetched(got: Any) -> list[tuple[Any, ...]]:
    return [
        (str(t.name), int(p.partition_index), int(p.committed_offset), p.metadata, p.error_code)
        for t in got.topics
        for p in t.partitions
    ]


@pytest.mark.parametrize("version", _versions(codec.OFFSET_FETCH))
def test_offset_fetch_response(version: int) -> None:
    results = {
        ("t-b", 1): OffsetFetch(offset=42, metadata="md"),
        ("t-a", 3): OffsetFetch(offset=-1),
        ("t-b", 0): OffsetFetch(offset=7),
    }
    got = _round_trip(groups.offset_fetch_response(version, results, throttle_ms=2), 9, version)
    assert _fetched(got) == [
        ("t-b", 1, 42, "md", K.none),
        ("t-b", 0, 7, "", K.none),
        ("t-a", 3, -1, "", K.none),
    ]
    assert getattr(got, "error_code", "absent") == ("absent" if version < 2 else K.none)
    assert _throttle(got) == (None if version < 3 else 2)
    if version >= 5:
        assert {int(p.committed_leader_epoch) for t in got.topics for p in t.partitions} == {-1}


@pytest.mark.parametrize("version", _versions(codec.OFFSET_FETCH))
def test_offset_fetch_group_error(version: int) -> None:
    """OffsetFetchRequest.getErrorResponse: v1 in every partition, v2+ top-level only."""
    results = {("t", 0): OffsetFetch(offset=42, metadata="md")}
    got = _round_trip(groups.offset_fetch_response(version, results, error=14), 9, version)
    if version < 2:
        assert _fetched(got) == [("t", 0, -1, "", K.coordinator_load_in_progress)]
    else:
        assert (got.error_code, got.topics) == (K.coordinator_load_in_progress, ())


# ---------------------------------------------------------------------------- ListGroups


@pytest.mark.parametrize("version", _versions(codec.LIST_GROUPS))
def test_list_groups(version: int) -> None:
    body = _through_codec(_mod("list_groups", version).ListGroupsRequest())
    assert body.__version__ == version
    listed = [
        ListedGroup(group_id="g1", protocol_type="consumer", state="Stable"),
        ListedGroup(group_id="g2", protocol_type="", state="Empty"),
    ]
    got = _round_trip(groups.list_groups_response(version, listed, throttle_ms=1), 16, version)
    assert got.error_code == K.none and _throttle(got) == (None if version == 0 else 1)
    assert [(str(g.group_id), g.protocol_type) for g in got.groups] == [
        ("g1", "consumer"),
        ("g2", ""),
    ]
    got = _round_trip(groups.list_groups_response(version, [], error=15), 16, version)
    assert (got.error_code, got.groups) == (K.coordinator_not_available, ())


# ---------------------------------------------------------------------------- DescribeGroups


@pytest.mark.parametrize("version", _versions(codec.DESCRIBE_GROUPS))
def test_describe_groups(version: int) -> None:
    cls = _mod("describe_groups", version).DescribeGroupsRequest
    body = _through_codec(
        _new(
            cls,
            {"include_authorized_operations": True},
            groups=(GroupId("g1"), GroupId("g2"), GroupId("g3")),
        )
    )
    assert groups.describe_groups_request(body) == ["g1", "g2", "g3"]

    member = MemberSummary(
        member_id="m-1", client_id="c", client_host="/h", metadata=b"M", assignment=b"A"
    )
    summaries = [
        GroupSummary(
            group_id="g1",
            state="Stable",
            protocol_type="consumer",
            protocol="range",
            members=(member,),
        ),
        GroupSummary(group_id="g2", state="Dead", protocol_type="", protocol="", members=()),
    ]
    response = groups.describe_groups_response(
        version, summaries, errors={"g2": 0, "g3": 16}, throttle_ms=6
    )
    got = _round_trip(response, 15, version)
    assert _throttle(got) == (None if version == 0 else 6)
    assert [
        (g.error_code, str(g.group_id), g.group_state, g.protocol_type, g.protocol_data)
        for g in got.groups
    ] == [
        (K.none, "g1", "Stable", "consumer", "range"),
        (K.none, "g2", "Dead", "", ""),
        (K.not_coordinator, "g3", "", "", ""),
    ]
    (m,) = got.groups[0].members
    assert (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) == (
        "m-1",
        "c",
        "/h",
        b"M",
        b"A",
    )
    assert getattr(m, "group_instance_id", "absent") == ("absent" if version < 4 else None)
    ops = {getattr(g, "authorized_operations", "absent") for g in got.groups}
    assert ops == ({"absent"} if version < 3 else {NOT_REQUESTED})
