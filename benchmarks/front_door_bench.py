"""Bombs at a broker's doors beside an acks=all client; the broker's memory and the
client's latency.

A fresh local cluster (a controller and 2 brokers, `LocalCluster.up`), a topic `steady` (1
partition, r=2) and a topic `target` (1 partition, r=2) led by the same broker. A librdkafka
producer (confluent-kafka, acks=all, linger.ms=0, one record every 10 ms) writes to `steady`
for the whole run; each delivery report's latency is measured from its produce call. Beside it,
from other threads, every bomb below is sent `--rounds` times at the leader, each on a
connection of its own:

- `gzip`, `zstd`, `lz4`, `snappy`: a Produce v8 whose one RecordBatch v2 (under the default
  message.max.bytes) decompresses to `--bomb-mib` MiB of zeros (1 GiB by default; the codecs
  the installed libraries can write; a codec left out is named);
- `array`: the 20-byte ListPartitionReassignments whose array length asks for 256 GiB;
- `metadata-int32`: a Metadata v1 naming 2^31 - 1 topics in 14 bytes;
- `fetch-100k`: a legal Fetch v11 naming 99,999 partitions of one topic, the most a request
  may hold (kafka/bounds.py MAX_REQUEST_ELEMENTS);
- `fetch-1m`: one naming 1,000,000 (refused, before kio decodes it);
- `internal`: a Produce of one junk record to `__consumer_offsets`;
- `flood`: 300 connections from 127.0.0.1 held open at once (max.connections.per.ip is 200);
- `trickle`: 20 connections sending one byte of a frame every 100 ms.

Printed: each bomb's outcome (answered with an error, connection closed, refused), the leader's
peak RSS (VmHWM from /proc) and its RSS at the end, the client's records, their latency p50,
p99 and max, and whether the broker is still up. The targets: RSS under 300 MB, no
record waiting longer than 500 ms (before: 2,107 MB and an 8.0 s stall). `--json` prints one
JSON object. Every loop is bounded in count and time.

    .venv/bin/python benchmarks/front_door_bench.py [--rounds 3] [--bomb-mib 1024] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gzip
import io
import json
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import crc32c
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_writer
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from minikafka.cluster import LocalCluster, plan_cluster

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def frame(body: object, correlation_id: int = 1) -> bytes:
    schema = type(body)
    header = schema.__header_schema__(
        request_api_key=i16(schema.__api_key__),
        request_api_version=i16(schema.__version__),
        correlation_id=i32(correlation_id),
        client_id="bomber",
    )
    out = io.BytesIO()
    entity_writer(type(header))(out, header)
    entity_writer(schema)(out, body)
    payload = out.getvalue()
    return struct.pack(">i", len(payload)) + payload


def record_batch(records_body: bytes, *, codec: int, count: int) -> bytes:
    """A RecordBatch v2 around `records_body` (already compressed with `codec`)."""
    after_crc = struct.pack(">hiqqqhii", codec, count - 1, 0, 0, -1, -1, -1, count)
    after_crc += records_body
    crc = crc32c.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    return struct.pack(">qiibI", 0, batch_length, -1, 2, crc) + after_crc


def compressors() -> dict[str, tuple[int, Callable[[bytes], bytes]]]:
    """The codecs this interpreter can write a bomb in: gzip always, the others if a library
    for them is installed (cramjam, or lz4 / zstandard)."""
    out: dict[str, tuple[int, Callable[[bytes], bytes]]] = {
        "gzip": (GZIP, lambda data: gzip.compress(data, compresslevel=9))
    }
    with contextlib.suppress(ImportError):
        import cramjam

        out["zstd"] = (ZSTD, lambda data: bytes(cramjam.zstd.compress(data, level=19)))
        out["lz4"] = (LZ4, lambda data: bytes(cramjam.lz4.compress(data)))
        out["snappy"] = (SNAPPY, lambda data: xerial_snappy(cramjam, data))
    return out


def xerial_snappy(cramjam, data: bytes) -> bytes:
    """snappy-java's framing, as Kafka's producers write it: a magic header, then blocks of
    [int32 length][raw snappy] of 32 KiB of input each."""
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for at in range(0, len(data), 32 * 1024):
        block = bytes(cramjam.snappy.compress_raw(data[at : at + 32 * 1024]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


MESSAGE_MAX_BYTES = 1_048_588  # the broker's default: a bomb must get past this check


def compressed_zeros(compress: Callable[[bytes], bytes], mib: int) -> tuple[bytes, int]:
    """(compressed, MiB) for `mib` MiB of zeros, or as many as still compress to under
    message.max.bytes (snappy's blocks and lz4 cap the ratio; gzip and zstd do not)."""
    sample = len(compress(bytes(16 << 20)))
    fits = int(16 * (MESSAGE_MAX_BYTES - 4096) / sample)
    mib = max(1, min(mib, fits))
    return compress(bytes(mib << 20)), mib


def produce_frame(topic: str, batch: bytes, acks: int = -1) -> bytes:
    data = PartitionProduceData(index=i32(0), records=Records(batch))
    topic_data = TopicProduceData(name=topic, partition_data=(data,))
    body = ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(topic_data,),
    )
    return frame(body)


def fetch_frame(partitions: int) -> bytes:
    parts = tuple(
        FetchPartition(
            partition=i32(p),
            current_leader_epoch=i32(-1),
            fetch_offset=i64(0),
            log_start_offset=i64(-1),
            partition_max_bytes=i32(1 << 20),
        )
        for p in range(partitions)
    )
    body = FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        topics=(FetchTopic(topic="target", partitions=parts),),
        forgotten_topics_data=(),
    )
    return frame(body)


ARRAY_BOMB = struct.pack(">ihhih", 20, 46, 0, 1, -1) + b"\x00" + struct.pack(">i", 1000)
ARRAY_BOMB += b"\xff\xff\xff\xff\x7f"
METADATA_BOMB = struct.pack(">ihhihi", 14, 3, 1, 1, -1, 0x7FFFFFFF)


def send_one(address: tuple[str, int], data: bytes, timeout_s: float = 30.0) -> str:
    """Send `data` on a new connection; what came back: 'answered N bytes', 'closed', ..."""
    try:
        with socket.create_connection(address, timeout=timeout_s) as sock:
            sock.sendall(data)
            head = _exact(sock, 4)
            if head is None:
                return "closed"
            body = _exact(sock, struct.unpack(">i", head)[0])
            return "closed" if body is None else f"answered {len(body)} bytes"
    except TimeoutError:
        return "no answer in time"
    except OSError as exc:
        return f"closed ({exc.__class__.__name__})"


def _exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def flood(address: tuple[str, int], count: int) -> str:
    socks, refused = [], 0
    for _ in range(count):
        try:
            sock = socket.create_connection(address, timeout=5)
            socks.append(sock)
        except OSError:
            refused += 1
    time.sleep(0.5)
    closed = 0
    for sock in socks:
        sock.setblocking(False)
        try:
            if sock.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        sock.close()
    return f"{count} opened, {closed} closed by the broker at once, {refused} refused"


def trickle(address: tuple[str, int], count: int, seconds: float) -> str:
    socks = [socket.create_connection(address, timeout=5) for _ in range(count)]
    payload = frame(FetchRequest(  # any request: its frame is never finished
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        topics=(),
        forgotten_topics_data=(),
    ))
    deadline = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < deadline and sent < len(payload) - 1:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.send(payload[sent : sent + 1])
        sent += 1
        time.sleep(0.1)
    for sock in socks:
        sock.close()
    return f"{count} connections trickled {sent} bytes each"


def rss_kib(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) of a process, in KiB; None once it is gone."""
    fields = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return None
    if "\nState:\tZ" in text:  # a zombie: dead, not yet reaped
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


class SteadyClient:
    """librdkafka, acks=all, one record every 10 ms; latencies of the delivery reports."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retries": 0}
        )
        self.latencies_s: list[float] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.phase = "quiet"  # what the bombers are sending now (set by them)
        self.worst_by_phase: dict[str, float] = {}

    def run(self, max_records: int) -> None:
        for i in range(max_records):
            if self.stop.is_set():
                break
            sent = time.perf_counter()

            def done(err, _msg, sent=sent, phase=self.phase) -> None:
                if err is not None:
                    self.errors.append(str(err))
                    return
                latency = time.perf_counter() - sent
                self.latencies_s.append(latency)
                worst = self.worst_by_phase.get(phase, 0.0)
                self.worst_by_phase[phase] = max(worst, latency)

            self.producer.produce("steady", value=f"r{i}".encode(), on_delivery=done)
            self.producer.poll(0.01)
        self.producer.flush(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bomb-mib", type=int, default=1024)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    say = (lambda *a: None) if args.json else print
    say(f"building the bombs ({args.bomb_mib} MiB of zeros each)...")
    bombs: dict[str, bytes] = {}
    for name, (codec, compress) in compressors().items():
        body, mib = compressed_zeros(compress, args.bomb_mib)
        bombs[name] = produce_frame("target", record_batch(body, codec=codec, count=1))
        say(f"  {name}: {mib} MiB of zeros in {len(body):,} bytes")
    bombs["array"] = ARRAY_BOMB
    bombs["metadata-int32"] = METADATA_BOMB
    bombs["fetch-100k"] = fetch_frame(99_999)
    bombs["fetch-1m"] = fetch_frame(1_000_000)
    junk = record_batch(b"\x02\x00\x00\x00\x01\x01\x00", codec=0, count=1)
    bombs["internal"] = produce_frame("__consumer_offsets", junk)

    base = Path(tempfile.mkdtemp(prefix="front-door-")) / "c"
    spec = plan_cluster(base_dir=base, brokers=2, seed=25)
    with LocalCluster.up(spec, ready_timeout_s=60) as lc:
        from confluent_kafka.admin import AdminClient, NewTopic

        kafka = {s.node_id: s.kafka_address for s in lc.status() if s.kafka_address}
        admin = AdminClient({"bootstrap.servers": ",".join(kafka.values())})
        topics = [NewTopic(t, 1, replica_assignment=[[1, 2]]) for t in ("steady", "target")]
        for future in admin.create_topics(topics).values():
            future.result(30)
        time.sleep(2)
        leader = next(s for s in lc.status() if s.node_id == 1)
        host, port = kafka[1].rsplit(":", 1)
        address = (host, int(port))
        client = SteadyClient(kafka[1])
        runner = threading.Thread(target=client.run, args=(20_000,))
        runner.start()
        time.sleep(2)  # the client's latency with no bombs first
        outcomes: dict[str, list[str]] = {}
        hwm = rss = 0
        died_after = None
        for _round in range(args.rounds):
            for name, data in [*bombs.items(), ("flood", None), ("trickle", None)]:
                client.phase = name
                if name == "flood":
                    outcome = flood(address, 300)
                elif name == "trickle":
                    outcome = trickle(address, 20, 3.0)
                else:
                    outcome = send_one(address, data)
                outcomes.setdefault(name, []).append(outcome)
                time.sleep(0.5)
                client.phase = "quiet"
                sample = rss_kib(leader.pid)
                if sample is None:
                    died_after = name
                    break
                rss, hwm = sample[0], max(hwm, sample[1])
            if died_after is not None:
                break
        time.sleep(2)
        client.stop.set()
        runner.join(60)
        up = died_after is None and all(s.alive for s in lc.status())
    lat = sorted(client.latencies_s)
    result = {
        "bombs": {name: sorted(set(o)) for name, o in outcomes.items()},
        "leader_rss_peak_mb": round(hwm * 1024 / 1e6, 1),
        "leader_rss_end_mb": round(rss * 1024 / 1e6, 1),
        "client_records": len(lat),
        "client_errors": len(client.errors),
        "latency_p50_ms": round(lat[len(lat) // 2] * 1000, 1) if lat else None,
        "latency_p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 1) if lat else None,
        "latency_max_ms": round(lat[-1] * 1000, 1) if lat else None,
        "latency_max_ms_by_bomb": {
            k: round(v * 1000, 1) for k, v in sorted(client.worst_by_phase.items())
        },
        "all_nodes_up": up,
        "leader_died_after": died_after,
        "codecs": sorted(compressors()),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for name, seen in result["bombs"].items():
            print(f"{name:>15}: {'; '.join(seen)}")
        print(
            f"leader RSS: peak {result['leader_rss_peak_mb']} MB, end "
            f"{result['leader_rss_end_mb']} MB (target < 300 MB)"
        )
        print(
            f"client: {len(lat)} records acks=all, {len(client.errors)} errors, latency p50 "
            f"{result['latency_p50_ms']} ms, p99 {result['latency_p99_ms']} ms, max "
            f"{result['latency_max_ms']} ms (target < 500 ms)"
        )
        worst = ", ".join(f"{k} {v}" for k, v in result["latency_max_ms_by_bomb"].items())
        print(f"client's worst latency (ms) by what was being sent: {worst}")
        print(f"all nodes up: {up}" + (f" (the leader died after {died_after})" if died_after else ""))
    return 0 if up else 1


if __name__ == "__main__":
    sys.exit(main())
