"""The phases scale_bench.py runs on each fresh cluster, one function each, every one bounded.

- `create_topic_timed`: CreateTopics, then Metadata polled until every partition has a leader and
  a full ISR; the seconds from the request to the answer that showed it.
- `settle` and `idle_window` (scale_probes.py readings): wait, bounded, until the brokers' CPU
  falls under a threshold, then read CPU, RSS and log growth of every node over a fixed window.
- `single_record_latency`: one record per Produce request, acks=all, paced at a fixed rate,
  partitions drawn from the seed's RNG, through the library's Producer (the load kit's).
- `produce_throughput`: tools/perf.py with 100 kB batches, acks=all, bounded in bytes and time.
- `catch_up_after_wipe`: kill a broker, wait until it is fenced, wipe its logs, restart it,
  time until it is back in the ISR of every partition it hosts.

A phase that fails raises (BenchError with one line, or the client's error); scale_bench.py
turns that into its cell's "failed: ..." and goes on.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from bench_harness import BenchError, Say, metrics_after, wait_for_isr
from scale_probes import NodeReading, cpu_seconds, idle_figures, read_node

from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster
from minikafka.errors import BrokerError, ErrorCode
from minikafka.testing.load import Bounds, Rate, batch_of, load_producer, run_senders
from minikafka.tools.perf import PerfSpec, percentile, run_produce_perf
from minikafka.wire.messages import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse

REPLICATION_FACTOR = 2
RECORD_BYTES = 100
BATCH_BYTES = 100_000  # 1000 records x 100 B: the goals' "100 kB batches"
LATENCY_SENDERS = 32  # concurrent single-record sends: enough to hold the pace up to ~300 ms each


def poll_interval_s(partitions: int) -> float:
    """Metadata polling period: 20 ms, longer for big topics (an answer for 20,000 partitions
    costs the broker and this process tens of ms of CPU; polling must not be the load)."""
    return max(0.02, partitions / 200_000)


async def create_topic_timed(
    bootstrap: str, topic: str, partitions: int, *, timeout_s: float
) -> dict[str, Any]:
    poll_s = poll_interval_s(partitions)
    ready = 0
    async with open_client(bootstrap, client_id="scale-bench") as client:
        with trio.move_on_after(timeout_s):
            start = time.monotonic()
            req = CreateTopicsRequest(
                topics=[
                    CreatableTopic(
                        name=topic,
                        num_partitions=partitions,
                        replication_factor=REPLICATION_FACTOR,
                    )
                ],
                timeout_ms=int(timeout_s * 1000),
            )
            resp = await client.request_any(req, timeout_s=timeout_s)
            answered = time.monotonic() - start
            assert isinstance(resp, CreateTopicsResponse)
            (result,) = resp.topics
            if result.error_code != ErrorCode.NONE:
                raise BrokerError(result.error_code, result.error_message or "CreateTopics")
            while True:
                md = await client.refresh_metadata([topic])
                seen = time.monotonic() - start
                found = [t for t in md.topics if t.name == topic]
                ps = found[0].partitions if found else []
                full = [p for p in ps if p.leader >= 0 and len(p.isr) == len(p.replicas)]
                ready = len(full)
                if ready == partitions:
                    return {
                        "create_s": round(seen, 3),
                        "create_answered_s": round(answered, 3),
                        "poll_s": poll_s,
                    }
                await trio.sleep(poll_s)
    raise BenchError(f"{ready}/{partitions} partitions led with a full ISR after {timeout_s}s")


def settle(pids: Sequence[int], *, threshold_pct: float, max_s: float, say: Say) -> dict[str, Any]:
    """Sample the brokers' CPU each second until every one used under `threshold_pct` of a core
    over the last second (their LeaderAndIsr work for the new topic is done), at most `max_s`."""
    start = time.monotonic()
    last = {pid: cpu_seconds(pid) for pid in pids}
    pcts: list[float] = []
    while time.monotonic() - start < max_s:
        time.sleep(1.0)
        now = {pid: cpu_seconds(pid) for pid in pids}
        pcts = [round(100 * (now[pid] - last[pid]), 1) for pid in pids]
        last = now
        if max(pcts) < threshold_pct:
            return {"settled": True, "settle_s": round(time.monotonic() - start, 1)}
    say(f"brokers still busy after {max_s}s (last second: {pcts} % CPU); measuring anyway")
    return {"settled": False, "settle_s": round(time.monotonic() - start, 1), "last_pct": pcts}


def idle_window(nodes: dict[int, tuple[int, Path]], window_s: float) -> dict[int, dict[str, Any]]:
    """Per node id: `idle_figures` over `window_s` seconds of doing nothing here."""
    before: dict[int, NodeReading] = {}
    for node_id, (pid, data_dir) in nodes.items():
        before[node_id] = read_node(pid, data_dir, time.monotonic())
    time.sleep(window_s)
    out = {}
    for node_id, (pid, data_dir) in nodes.items():
        out[node_id] = idle_figures(before[node_id], read_node(pid, data_dir, time.monotonic()))
    return out


async def single_record_latency(
    bootstrap: str, topic: str, *, count: int, rate: float, rng: random.Random, timeout_s: float
) -> dict[str, Any]:
    """`count` single-record acks=all sends at `rate` records/s (scheduled from the start, the
    load kit's `Rate`: a slow answer does not push the next send back); ms from each send to its
    acknowledgement. One untimed send per leader first (producer id, connections)."""
    value = bytes(RECORD_BYTES)
    latencies: list[float] = []
    async with open_client(bootstrap, client_id="scale-bench-latency") as client:
        await client.refresh_metadata([topic])
        tps = client.partitions_of(topic)
        producer = load_producer(client, acks=-1)
        firsts = {client.leader_of(tp): tp for tp in reversed(tps)}
        with trio.fail_after(timeout_s):
            for tp in firsts.values():
                await producer.send_batches([(tp, *batch_of([value]))])
        picks = [tps[rng.randrange(len(tps))] for _ in range(count)]
        start = trio.current_time()
        pace = Rate(rate, start)
        taken = 0

        async def send(_k: int) -> bool:
            nonlocal taken
            if taken >= count:
                return False
            k, taken = taken, taken + 1
            await pace.wait_for(k)
            item = (picks[k], *batch_of([value]))
            t0 = trio.current_time()
            await producer.send_batches([item])
            latencies.append((trio.current_time() - t0) * 1000)
            return True

        bounds = Bounds(until=start + timeout_s, max_sends=count, cut=True)
        await run_senders(LATENCY_SENDERS, send, bounds)
        elapsed = trio.current_time() - start
    if len(latencies) < count:
        raise BenchError(f"{len(latencies)}/{count} single-record sends done in {timeout_s}s")
    latencies.sort()
    return {
        "records": count,
        "rate_per_s": rate,
        "achieved_per_s": round(count / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.5), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "max_ms": round(latencies[-1], 2),
        "retries": producer.retries,
    }


async def produce_throughput(
    bootstrap: str, topic: str, *, total_mb: float, max_s: float, say: Say
) -> dict[str, Any]:
    """tools/perf.py, acks=all, 100 kB batches, 16 requests of 10 batches in flight (as
    cluster_bench): `total_mb` MB of record values or `max_s` seconds, whichever comes first."""
    spec = PerfSpec(
        topic=topic,
        num_records=max(1, int(total_mb * 1e6) // RECORD_BYTES),
        record_size=RECORD_BYTES,
        batch_bytes=BATCH_BYTES,
        acks=-1,
        in_flight=16,
        batches_per_request=10,
        max_s=max_s,
    )
    with trio.move_on_after(max_s + 30) as scope:
        report = await run_produce_perf(bootstrap, spec, say)
    if scope.cancelled_caught:
        raise BenchError(f"tools/perf.py did not stop within {max_s + 30}s")
    if not report["records"]:
        raise BenchError(f"no batch acknowledged in {max_s}s")
    lat = report["batch_latency_ms"]
    return {
        "mb_per_s": report["mb_per_s"],
        "records": report["records"],
        "elapsed_s": report["elapsed_s"],
        "batch_p50_ms": lat["p50"],
        "batch_p99_ms": lat["p99"],
        "retries": report["retries"],
    }


def catch_up_after_wipe(
    lc: LocalCluster, topic: str, broker: int, *, partitions: int, timeout_s: float, say: Say
) -> dict[str, Any]:
    """Kill `broker`, wait until the controller fenced it (no ISR, no leadership), delete its
    `lmdb/` and `node.json` (the ready file; its JSON-lines logs stay), restart it, and time from
    the restart until Metadata from a survivor shows it in the ISR of every partition it hosts."""
    others = ",".join(n.address for n in lc.spec.brokers if n.node_id != broker)
    poll_s = poll_interval_s(partitions)
    say(f"catch-up: killing broker {broker}; waiting until it is fenced")
    lc.kill(broker)
    trio.run(
        lambda: wait_for_isr(
            others, topic, broker, member=False, timeout_s=60, what="was not fenced", poll_s=poll_s
        )
    )
    node_dir = lc.spec.node(broker).data_dir
    shutil.rmtree(node_dir / "lmdb")
    (node_dir / "node.json").unlink(missing_ok=True)
    metrics_path = lc.log_path(broker, "metrics")
    metrics_offset = metrics_path.stat().st_size if metrics_path.exists() else 0
    say(f"catch-up: wiped and restarting broker {broker}")
    start = time.monotonic()
    lc.restart(broker, ready_timeout_s=min(timeout_s, 120))
    ready = time.monotonic()
    end, mine = trio.run(
        lambda: wait_for_isr(
            others,
            topic,
            broker,
            member=True,
            timeout_s=timeout_s,
            what="did not catch up",
            poll_s=poll_s,
        )
    )
    time.sleep(1.5)  # past one more metrics interval (1 s): the counter's final total is written
    lines = metrics_after(metrics_path, metrics_offset)
    copied = max((ln.get("replication_bytes_in", 0) for ln in lines), default=0)
    return {
        "broker": broker,
        "partitions": len(mine),
        "ready_s": round(ready - start, 2),
        "catchup_s": round(end - start, 2),
        "replication_mb": round(copied / 1e6, 1),
    }
