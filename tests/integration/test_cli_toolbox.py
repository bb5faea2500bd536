"""The operator's toolbox from the command line, on one real cluster started and
restarted by `minikafka cluster up`: keyed and partitioned produce, consume by partition and
offset with lossless JSON, topics describe with offsets and Kafka's filters, Kafka's perf lines,
`logs --follow`, `status --json` ports, and `cluster up` on a stopped cluster's directory."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from minikafka.core.partitioner import partition_for_key

FAST = ["--set", "broker.session.timeout.ms=1500", "--set", "broker.heartbeat.interval.ms=200"]


def cli(
    d: Path, *args: str, stdin: bytes | None = None, ok: bool = True
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "minikafka", *args, "--dir", str(d)],
        input=stdin,
        capture_output=True,
        timeout=90,
    )
    if ok:
        assert proc.returncode == 0, proc.stderr.decode()
    return proc


def consumed(d: Path, *args: str) -> list[dict]:
    out = cli(d, "consume", *args, "--json", "--timeout", "2").stdout.decode()
    return [json.loads(line) for line in out.splitlines()]


def wait_for(predicate, what: str, timeout_s: float = 30.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if got := predicate():
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_toolbox_on_a_cluster_that_is_stopped_and_started_again(tmp_path: Path) -> None:
    d = tmp_path / "c"
    up = cli(d, "cluster", "up", "-n", "3", "--seed", "15", *FAST, "--json")
    try:
        status = json.loads(up.stdout)
        for row in status["nodes"]:
            assert isinstance(row["metrics_port"], int) and row["metrics"].endswith(
                f":{row['metrics_port']}"
            )
            assert isinstance(row["kafka_port"], int) == (row["role"] == "broker")
        targets = json.loads((d / "prometheus-targets.json").read_text())
        assert sorted(g["targets"][0] for g in targets) == sorted(
            r["metrics"] for r in status["nodes"]
        )
        _keys_and_partitions(d)
        _group(d, status)
        _describe_and_filters(d)
        _perf_lines(d)
        _follow(d)
        _stopped_and_up_again(d, status)
    finally:
        cli(d, "cluster", "down", "--wipe", ok=False)
    assert not d.exists()  # the wipe left nothing behind, the targets file included


def _keys_and_partitions(d: Path) -> None:
    cli(d, "topics", "create", "t", "-p", "4", "-r", "2")
    lines = b"".join(f"user-{i}:event {i}\n".encode() for i in range(40))
    cli(d, "produce", "t", "--property", "parse.key=true", "--property", "key.separator=:",
        stdin=lines)  # fmt: skip
    refused = cli(d, "produce", "t", "--key-separator", ":", stdin=b"k:v\nno separator\n", ok=False)
    assert refused.returncode == 2
    assert "line 2 has no key separator ':'" in refused.stderr.decode()
    records = consumed(d, "t", "--from-beginning")
    assert len(records) == 40  # the refused input produced nothing
    for r in records:  # Kafka's partition for each key
        assert r["partition"] == partition_for_key(r["key"].encode(), 4)
        assert r["value"] == f"event {r['key'].split('-')[1]}"

    raw = b"\xff\xfe\x00binary"
    cli(d, "produce", "t", "--partition", "3", "--key", "bin", stdin=raw + b"\n")
    end = [r for r in consumed(d, "t", "--partition", "3", "--offset", "earliest")]
    last = end[-1]
    assert last["key"] == "bin" and last["value_encoding"] == "base64"
    assert base64.b64decode(last["value"]) == raw
    from_offset = consumed(d, "t", "--partition", "3", "--offset", str(last["offset"]))
    assert [r["offset"] for r in from_offset] == [last["offset"]]
    bad = cli(d, "consume", "t", "--partition", "3", "--offset", "999", ok=False)
    assert bad.returncode == 2 and "holds offsets 0 to" in bad.stderr.decode()


def _group(d: Path, status: dict) -> None:
    """consume --group resumes after what it printed, and the offsets are the group's own:
    a Kafka client reads the same ones through the Kafka listener."""
    from kafka import KafkaAdminClient, TopicPartition

    def read(n: int) -> list[tuple[int, int]]:
        got = consumed(d, "t", "--group", "g1", "--from-beginning", "--max-messages", str(n))
        return [(r["partition"], r["offset"]) for r in got]

    first, second = read(15), read(100)
    assert len(first) == 15 and len(first) + len(second) == 41  # 40 keyed + 1 binary
    assert not set(first) & set(second)
    assert read(5) == []  # all committed
    ends = {}
    for p, o in first + second:
        ends[p] = max(ends.get(p, 0), o + 1)
    admin = KafkaAdminClient(bootstrap_servers=status["kafka_bootstrap"], request_timeout_ms=30000)
    try:
        committed = admin.list_group_offsets("g1")["g1"]
    finally:
        admin.close()
    assert {tp.partition: m.offset for tp, m in committed.items()} == ends
    assert all(isinstance(tp, TopicPartition) and tp.topic == "t" for tp in committed)


def _describe_and_filters(d: Path) -> None:
    bootstrap = json.loads(cli(d, "cluster", "status", "--json").stdout)["bootstrap"]
    rows = json.loads(
        cli(d, "topics", "describe", "t", "--json", "--bootstrap-server", bootstrap).stdout
    )
    counts = {r["partition"]: 0 for r in rows}
    for r in consumed(d, "t", "--from-beginning"):
        counts[r["partition"]] += 1
    for r in rows:
        assert r["log_start_offset"] == 0
        assert r["high_watermark"] == r["log_end_offset"] == counts[r["partition"]]

    def listed(*flags: str) -> set[str]:
        rows = json.loads(cli(d, "topics", "list", "--json", *flags).stdout)
        return {r["topic"] for r in rows}

    assert listed() == {"t", "__consumer_offsets"}  # the group above created it
    assert listed("--exclude-internal") == {"t"}
    table = cli(d, "topics", "describe", "t").stdout.decode()
    assert re.search(r"LOG_START\s+HW\s+LEO", table)

    cli(d, "topics", "create", "single", "-p", "3", "-r", "1")
    cli(d, "cluster", "kill", "3")

    def filtered(flag: str, topic: str) -> list[dict]:
        return json.loads(cli(d, "topics", "describe", topic, flag, "--json").stdout)

    unavailable = wait_for(
        lambda: filtered("--unavailable-partitions", "single"), "a leaderless partition"
    )
    assert [r["replicas"] for r in unavailable] == [[3]]
    assert unavailable[0]["high_watermark"] is None  # no leader to ask
    under = wait_for(lambda: filtered("--under-replicated-partitions", "t"), "an ISR shrink")
    assert under and all(3 in r["replicas"] and 3 not in r["isr"] for r in under)
    assert filtered("--under-replicated-partitions", "single") == []  # r=1: never under-replicated
    cli(d, "cluster", "start", "3")


def _perf_lines(d: Path) -> None:
    out = cli(d, "produce", "t", "--num-records", "2000", "--record-size", "50").stdout.decode()
    assert re.search(
        r"^2000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$",
        out,
        re.M,
    ), out
    perf = cli(d, "consume", "t", "--from-beginning", "--perf", "--max-messages", "2000",
               "--timeout", "3").stdout.decode().splitlines()  # fmt: skip
    assert perf[0].startswith("start.time, end.time, data.consumed.in.MB, MB.sec")
    cells = [c.strip() for c in perf[1].split(",")]
    assert cells[4] == "2000" and len(cells) == 10


def _follow(d: Path) -> None:
    follower = subprocess.Popen(
        [sys.executable, "-m", "minikafka", "cluster", "logs", "--follow", "--node", "2",
         "--kind", "events", "-n", "0", "--dir", str(d)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(1.0)  # the follower opens the log at its end first
        cli(d, "cluster", "restart", "2")  # writes start-up events to a log it keeps
        line = follower.stdout.readline()
        assert line.startswith("[node 2] {"), line
        json.loads(line.split(" ", 2)[2])
    finally:
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=10) == 0


def _stopped_and_up_again(d: Path, before: dict) -> None:
    records = len(consumed(d, "t", "--from-beginning"))
    cli(d, "cluster", "down")
    shaped = cli(d, "cluster", "up", "-n", "5", ok=False)
    assert shaped.returncode == 2 and "cannot apply" in shaped.stderr.decode()
    again = json.loads(cli(d, "cluster", "up", "--json").stdout)
    ports = lambda doc: {(r["node"], r["kafka_port"], r["metrics_port"]) for r in doc["nodes"]}  # noqa: E731
    assert ports(again) == ports(before) and again["bootstrap"] == before["bootstrap"]
    assert all(r["state"] == "up" and r["pid"] != os.getpid() for r in again["nodes"])
    assert len(consumed(d, "t", "--from-beginning")) == records  # its data came back with it
