"""Real processes: malformed input closes that connection only and stores nothing; bad CLI
input is one line on stderr with exit code 2."""

from __future__ import annotations

import struct
import subprocess
import sys

import msgpack
import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.client.consumer import Consumer
from minikafka.client.producer import Producer, ProducerConfig
from minikafka.cluster import LocalCluster
from minikafka.common import TopicPartition
from minikafka.testing.clusters import cluster_up

GARBAGE = [
    b"\x00\x00\x00\x05\xc1\xc1\xc1\xc1\xc1",  # not msgpack
    struct.pack(">I", 1 << 31),  # a frame over the size cap
    b"\x00\x00\x00\x00",  # a zero-length frame
]


def _frame(obj: object) -> bytes:
    body = msgpack.packb(obj, use_bin_type=True)
    return struct.pack(">I", len(body)) + body


MALFORMED_REQUESTS = [
    _frame([999, 0, 1, "x", {}]),  # unknown api key
    _frame([0, 0, 1, "x", {"acks": "all", "timeout_ms": 1, "partitions": []}]),  # wrong type
    _frame(
        [
            0,
            0,
            1,
            "x",
            {
                "acks": 1,
                "timeout_ms": 1000,
                "partitions": [{"topic": "t", "partition": 0, "records": "text, not bytes"}],
            },
        ]
    ),
]


@pytest.fixture
def cluster(tmp_path):
    with cluster_up(tmp_path / "c", brokers=1, seed=5) as lc:
        yield lc


async def test_malformed_frames_close_only_that_connection(cluster: LocalCluster):
    host, port = cluster.bootstrap().split(",")[0].rsplit(":", 1)
    async with open_client(cluster.bootstrap(), client_id="good") as client:
        await Admin(client).create_topic("t", partitions=1, replication_factor=1)
        tp = TopicPartition("t", 0)
        producer = Producer(client, ProducerConfig(acks=1))
        first = await producer.send_records(tp, [(0, None, b"before")])
        for bad in GARBAGE + MALFORMED_REQUESTS:
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(bad)
            with trio.fail_after(10):  # the broker closes the connection
                while await stream.receive_some(4096):
                    pass
            await stream.aclose()
        second = await producer.send_records(tp, [(0, None, b"after")])
        assert second.base_offset == first.base_offset + 1  # nothing was stored in between
        records = (await Consumer(client, max_wait_ms=10).fetch_once({tp: 0}))[tp]
        assert [r.value for r in records] == [b"before", b"after"]
    events = cluster.log_path(1, "events").read_text()
    assert events.count('"bad_request"') == len(GARBAGE) + len(MALFORMED_REQUESTS)


@pytest.mark.parametrize(
    "args, needle, code",
    [
        (["cluster", "up", "-n", "0", "--dir", "{tmp}"], "brokers must be", 2),
        (
            ["cluster", "up", "--set", "replica.fetch.max.bytes=lots", "--dir", "{tmp}"],
            "expected an integer",
            2,
        ),
        (["cluster", "up", "--set", "no.such.config=1", "--dir", "{tmp}"], "unknown config", 2),
        (["topics", "list", "--bootstrap", "nonsense"], "expected host:port", 2),
        # Not bad input but a failed operation: still one line, exit 1.
        (["cluster", "status", "--dir", "{tmp}"], "no cluster", 1),
    ],
)
def test_bad_cli_input_is_one_line(tmp_path, args, needle, code):
    argv = [a.replace("{tmp}", str(tmp_path / "none")) for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "minikafka", *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
