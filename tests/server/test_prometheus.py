"""The metrics port: prometheus_client's exposition of a node's metrics, parsed back with
prometheus_client's own parsers (text format and OpenMetrics), and the HTTP responder on a memory
stream (on a real loopback socket: tests/integration/test_prometheus.py)."""

from __future__ import annotations

import os
import re

import pytest
import trio
import trio.testing
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families as parse_text

from minikafka.server.config import NodeConfig
from minikafka.server.metrics import Metrics
from minikafka.server.prometheus import answer, respond
from minikafka.server.prometheus_collector import FAMILIES, node_registry
from minikafka.testing.memory_node import MemoryBroker, partition_state

GET = b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n"
# What Prometheus 2.x/3.x sends when scraping
PROMETHEUS_ACCEPT = (
    b"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    b"q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
HAS_PROC = os.path.exists("/proc/self/stat")


def node_metrics() -> Metrics:
    m = Metrics()
    m.inc("bytes_in", 1200)
    m.inc("isr_shrinks", 2)
    m.inc("leader_replication_throttled_bytes", 4096)
    m.inc("brand.new-counter", 3)  # not in the table: generic name and HELP
    m.gauge("leader_partitions", lambda: 4)
    m.gauge("LeaderReplicationThrottledRate", lambda: 1000.5)
    m.gauge("SumReplicaLag", lambda: 17)
    m.gauge("PartitionBytesInRate", lambda: {"my-topic-0": 10.5, "t-1": 2})
    m.gauge("client_byte_rate", lambda: {"produce": {"app": 5.0}, "fetch": {}})
    # None: no throttle within the quota window (Kafka's NaN): no sample, not a 0.
    m.gauge("client_throttle_time_ms_avg", lambda: {"produce": {"app": 12.5, "idle": None}})
    m.gauge("throttle_configs", lambda: {"leader_rate": 1000, "leader_all": True})
    m.gauge("nested", lambda: {"a": {"b": 1}, "note": "text is skipped"})
    return m


def body_of(response: bytes) -> tuple[str, dict[str, str], str]:
    head, _, body = response.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body.decode()


def samples(families) -> dict[tuple[str, tuple], float]:  # noqa: ANN001
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def test_text_scrape_parses_with_prometheus_client():
    status, headers, text = body_of(respond(GET, node_registry(node_metrics(), 3)))
    assert status == "HTTP/1.0 200 OK"
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in parse_text(text)}
    got = samples(families.values())
    node = ("node", "3")
    # Kafka's names (jmx_exporter kafka configs); counters end in _total
    assert got[("kafka_server_brokertopicmetrics_bytesin_total", (node,))] == 1200
    assert got[("kafka_server_replicamanager_isrshrinks_total", (node,))] == 2
    assert got[("kafka_server_replicamanager_leadercount", (node,))] == 4
    assert got[("kafka_server_leaderreplication_byte_rate", (node,))] == 1000.5
    assert got[("minikafka_SumReplicaLag", (node,))] == 17
    assert got[("minikafka_leader_replication_throttled_bytes_total", (node,))] == 4096
    assert got[("minikafka_brand_new_counter_total", (node,))] == 3
    # labels from the mappings
    part = "minikafka_PartitionBytesInRate"
    assert got[(part, (node, ("partition", "0"), ("topic", "my-topic")))] == 10.5
    assert got[(part, (node, ("partition", "1"), ("topic", "t")))] == 2
    quota = (("clientId", "app"), node, ("resource", "Produce"))
    assert got[("kafka_server_quota_byte_rate", quota)] == 5.0
    assert got[("kafka_server_quota_throttle_time", quota)] == 12.5
    assert "idle" not in text and "skipped" not in text
    configs = "minikafka_throttle_configs"
    assert got[(configs, (("config", "leader_all"), node))] == 1
    assert got[(configs, (("config", "leader_rate"), node))] == 1000
    assert got[("minikafka_nested", (("key", "b"), ("kind", "a"), node))] == 1
    # types, and a HELP for every family (the table's, or the generic one)
    assert families["kafka_server_brokertopicmetrics_bytesin"].type == "counter"
    assert families["minikafka_SumReplicaLag"].type == "gauge"
    help_of = {name: f.documentation for name, f in families.items()}
    assert "BytesInPerSec" in help_of["kafka_server_brokertopicmetrics_bytesin"]
    generic = "minikafka counter brand.new-counter (metrics.jsonl)."
    assert help_of["minikafka_brand_new_counter"] == generic
    assert all(help_of.values())
    assert len(re.findall(r"^# HELP ", text, re.M)) == len(re.findall(r"^# TYPE ", text, re.M))


@pytest.mark.skipif(not HAS_PROC, reason="process metrics read /proc")
def test_process_cpu_and_memory_are_in_the_scrape():
    _status, _headers, text = body_of(respond(GET, node_registry(Metrics(), 1)))
    families = {f.name: f for f in parse_text(text)}
    assert families["process_cpu_seconds"].type == "counter"
    assert families["process_cpu_seconds"].samples[0].name == "process_cpu_seconds_total"
    assert families["process_cpu_seconds"].samples[0].value > 0
    assert families["process_resident_memory_bytes"].samples[0].value > 1_000_000


def test_openmetrics_on_request():
    request = b"GET /metrics HTTP/1.0\r\naccept: " + PROMETHEUS_ACCEPT + b"\r\n\r\n"
    status, headers, text = body_of(respond(request, node_registry(node_metrics(), 3)))
    assert status == "HTTP/1.0 200 OK"
    assert headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in parse_openmetrics(text)}  # raises on any format error
    bytes_in = families["kafka_server_brokertopicmetrics_bytesin"]
    assert bytes_in.type == "counter" and "BytesInPerSec" in bytes_in.documentation
    assert [(s.name, s.labels, s.value) for s in bytes_in.samples] == [
        ("kafka_server_brokertopicmetrics_bytesin_total", {"node": "3"}, 1200)
    ]
    rates = families["minikafka_PartitionBytesInRate"].samples
    topics = {(s.labels["topic"], s.labels["partition"]) for s in rates}
    assert topics == {("my-topic", "0"), ("t", "1")}


def test_other_paths_get_404_and_a_broken_gauge_500():
    m = Metrics()
    registry = node_registry(m, 1)
    status, _headers, text = body_of(respond(b"GET /nope HTTP/1.0\r\n\r\n", registry))
    assert status == "HTTP/1.0 404 Not Found" and text == "not found: try /metrics\n"
    assert body_of(respond(b"garbage", registry))[0] == "HTTP/1.0 404 Not Found"
    m.gauge("broken", lambda: 1 / 0)
    status, _headers, text = body_of(respond(GET, registry))
    assert status == "HTTP/1.0 500 Internal Server Error"
    assert text == "metrics collection failed: ZeroDivisionError: division by zero\n"


async def test_answers_one_request_on_a_memory_stream():
    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer, server, node_registry(node_metrics(), 5))
        await client.send_all(GET)
        data = b""
        while chunk := await client.receive_some(4096):  # answer() closes after one response
            data += chunk
    status, headers, text = body_of(data)
    assert status == "HTTP/1.0 200 OK" and int(headers["content-length"]) == len(text)
    assert 'kafka_server_brokertopicmetrics_bytesin_total{node="5"} 1200.0' in text


async def test_a_real_brokers_metrics_all_have_a_table_entry(tmp_path, autojump_clock):
    """Every counter and gauge a broker registers has its name and HELP in the table (none
    falls to the generic HELP), and a partition it leads shows in Kafka's ReplicaManager names."""
    broker = MemoryBroker(NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        names = set(broker.metrics.counters) | set(broker.metrics.gauges)
        assert {"bytes_in", "SumReplicaLag"} <= names and names - set(FAMILIES) == set()
        _status, _headers, text = body_of(respond(GET, node_registry(broker.metrics, 1)))
    got = samples(parse_text(text))
    assert got[("kafka_server_replicamanager_partitioncount", (("node", "1"),))] == 1
    assert got[("kafka_server_replicamanager_leadercount", (("node", "1"),))] == 1
    assert got[("kafka_server_replicamanager_underreplicatedpartitions", (("node", "1"),))] == 0


def test_the_per_class_counters_have_table_entries():
    """The counters named by f-strings (core/quota/charge.py `Charge.counters`, jsonl.py), which the
    in-memory broker above registers only once bytes flow or a log fails."""
    dynamic = [
        f"{s}_{c}_{k}_bytes"
        for s in ("leader", "follower")
        for c in ("replication", "reassignment")
        for k in ("throttled", "exempt")
    ]
    dynamic += [f"leader_{c}_overhead_bytes" for c in ("replication", "reassignment")]
    dynamic += [f"log_write_errors_{log}" for log in ("events", "metrics", "replicas")]
    assert [name for name in dynamic if name not in FAMILIES] == []


def test_table_names_follow_the_conventions():
    for key, family in FAMILIES.items():
        assert re.fullmatch(r"(kafka_server|minikafka)_[a-zA-Z0-9_]+", family.name), key
        assert not family.name.endswith("_total"), key  # CounterMetricFamily adds it
        assert family.help, key
