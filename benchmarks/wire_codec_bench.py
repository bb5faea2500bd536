"""Codec throughput: encode + frame + decode a FetchResponse of 100 partitions x 100 KB records.

The physical reference is memcpy: encoding copies each record byte once into the msgpack
buffer (plus once more for `frame()`), decoding copies it once out of the payload, so the
codec should run at a good fraction of memory bandwidth and spend almost nothing per field.

    .venv/bin/python benchmarks/wire_codec_bench.py [--rounds N]

On glibc the encode figure depends on the allocator more than on the codec: each call packs
into a fresh ~10-20 MB buffer, which glibc serves with mmap (or trims back to the OS) and the
kernel then page-faults in on first touch. Measured on the 2-vCPU dev VM: ~15 ms per 10 MB
as run, ~1 ms (about memcpy speed) with

    MALLOC_TRIM_THRESHOLD_=268435456 MALLOC_MMAP_THRESHOLD_=67108864

which keeps freed buffers in the heap. Decoding is unaffected (records are 100 KB objects,
below the mmap threshold). A broker process may want to set those two variables.
"""

from __future__ import annotations

import argparse
import os
import time

from minikafka.wire.codec import decode_response, encode_response
from minikafka.wire.framing import FrameDecoder, frame
from minikafka.wire.messages import FetchPartitionResponse, FetchResponse

PARTITIONS = 100
RECORDS_BYTES = 100 * 1000
CHUNK = 64 * 1024


def make_response() -> FetchResponse:
    records = os.urandom(RECORDS_BYTES)
    return FetchResponse(
        partitions=[
            FetchPartitionResponse(
                topic="bench",
                partition=p,
                error_code=0,
                high_watermark=1_000_000 + p,
                log_start_offset=0,
                records=records,
            )
            for p in range(PARTITIONS)
        ]
    )


def best_of(rounds: int, fn) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()

    response = make_response()
    payload = encode_response(42, response)
    framed = frame(payload)
    mb = len(payload) / 1e6
    chunks = [framed[i : i + CHUNK] for i in range(0, len(framed), CHUNK)]

    def deframe() -> bytes:
        decoder = FrameDecoder()
        for chunk in chunks:
            decoder.receive_data(chunk)
        out = decoder.next_frame()
        assert out is not None
        return out

    assert decode_response(payload, FetchResponse) == (42, response)
    t_enc = best_of(args.rounds, lambda: encode_response(42, response))
    t_frame = best_of(args.rounds, lambda: frame(payload))
    t_deframe = best_of(args.rounds, deframe)
    t_dec = best_of(args.rounds, lambda: decode_response(payload, FetchResponse))
    t_all = t_enc + t_frame + t_deframe + t_dec

    print(f"FetchResponse: {PARTITIONS} partitions x {RECORDS_BYTES} B = {mb:.1f} MB payload")
    for name, t in (
        ("encode_response", t_enc),
        ("frame", t_frame),
        ("FrameDecoder (64 KiB chunks)", t_deframe),
        ("decode_response", t_dec),
        ("round trip (sum)", t_all),
    ):
        print(f"  {name:30s} {t * 1e3:8.2f} ms  {mb / t:8.0f} MB/s")


if __name__ == "__main__":
    main()
