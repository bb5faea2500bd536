"""Shared pieces of the `minikafka reassign` tests without a cluster
(tests/cli/test_reassign_*.py): partitions and a moves file, the CLI invoked through click's
CliRunner and its one-line refusals, a cluster view, and a FakeAdmin that records requests and
answers as scripted.

It stays in tests/: it drives the command line and the reassignment tool, floors above
minikafka/testing (tests/repo/test_layering.py FLOORS).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from minikafka.cli.main import main
from minikafka.common import TopicPartition
from minikafka.errors import BrokerError, ErrorCode
from minikafka.tools.reassign import runner
from minikafka.tools.reassign.moves import OngoingReassignment
from minikafka.wire.messages import (
    AlterConfigsResourceResponse,
    DescribeConfigsEntry,
    DescribeConfigsResult,
    ReassignablePartitionResponse,
)

T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))
MOVES = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3]}]}


def tp_file(tmp_path: Path, doc: object, name: str = "moves.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def invoke(*args: str):  # noqa: ANN201
    # --bootstrap to a closed port: a test that reached the network would fail loudly.
    return CliRunner().invoke(main, ["reassign", *args, "--bootstrap", "127.0.0.1:1"])


def refused(result, *words: str, exit_code: int = 2) -> str:  # noqa: ANN001
    """One line on stderr naming `words`, the given exit code (2: bad input), nothing on stdout."""
    assert result.exit_code == exit_code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert result.stdout == ""
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def view(
    assignment: dict[TopicPartition, tuple[int, ...]],
    ongoing: dict[TopicPartition, OngoingReassignment] | None = None,
    live: tuple[int, ...] = (1, 2, 3),
) -> runner.ClusterView:
    return runner.ClusterView(
        assignment=assignment,
        leaders={tp: r[0] for tp, r in assignment.items()},
        live_brokers=live,
        ongoing=ongoing or {},
    )


class FakeAdmin:
    """Records requests; configs live in `configs`; answers as scripted."""

    def __init__(self, *, own=None, refuse_start=False, refuse_config=None, by_type=None):
        self.calls: list[tuple] = []
        self.own = own or {}
        self.refuse_start = refuse_start
        self.refuse_config = refuse_config
        self.by_type = by_type or {}

    async def describe_configs(self, entity_type, entity_name=None):
        self.calls.append(("describe", entity_type, entity_name))
        if entity_name is None:
            return self.by_type.get(entity_type, [])
        entries = [
            DescribeConfigsEntry(name=k, value=v, source="dynamic_entity")
            for k, v in self.own.get((entity_type, entity_name), {}).items()
        ]
        return [described(entity_type, entity_name, entries)]

    async def alter_configs_many(self, resources, *, validate_only=False):
        ops = {
            (r.resource_type, r.resource_name): {c.name: c.value for c in r.configs}
            for r in resources
        }
        self.calls.append(("validate" if validate_only else "alter", ops))
        code = self.refuse_config if validate_only and self.refuse_config else 0
        return [
            AlterConfigsResourceResponse(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                error_code=code,
                error_message="no",
            )
            for r in resources
        ]

    async def alter_partition_reassignments(self, moves, *, throttle_configs=()):
        self.calls.append(("reassign", dict(moves), list(throttle_configs)))
        if self.refuse_start:
            raise BrokerError(ErrorCode.INVALID_REQUEST, "refused as a whole")
        return {
            tp: ReassignablePartitionResponse(
                topic=tp.topic,
                partition=tp.partition,
                error_code=39 if r == [9] else 0,
                error_message="bad" if r == [9] else None,
            )
            for tp, r in moves.items()
        }


def described(entity_type: str, name: str, entries: list) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        resource_type=entity_type, resource_name=name, error_code=0, entries=entries
    )
