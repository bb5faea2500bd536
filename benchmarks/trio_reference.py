"""Physical reference: raw Trio loopback frame throughput on this machine.

Plain Trio, no minikafka code: two tasks in one Trio run (so on one core, as each broker process
is), a real TCP connection on 127.0.0.1, frames of a 4-byte big-endian length and a `frame_bytes`
payload, sent one way. The sender writes a prebuilt frame with `send_all`; the receiver reads with
`receive_some` and reassembles each payload into one `bytes` (one copy, as any frame decoder must).
The clock runs from the start of the first send to the last frame received. Other benchmarks print
this figure beside their own so a reader can tell the cost of minikafka from the cost of moving
bytes through Trio and the kernel.

MB are 10**6 bytes. Run: `python benchmarks/trio_reference.py [--total-mb N]`.
"""

from __future__ import annotations

import argparse
import os
import struct
import time

import trio

_LEN = struct.Struct(">I")
RECV_CHUNK = 1 << 20


async def _receive_frames(stream: trio.SocketStream, n_frames: int, frame_bytes: int) -> int:
    """Read `n_frames` length-prefixed frames; return the payload bytes received."""
    buf = bytearray()
    received = 0
    for _ in range(n_frames):
        while len(buf) < _LEN.size:
            chunk = await stream.receive_some(RECV_CHUNK)
            if not chunk:
                raise RuntimeError("sender closed the connection inside a frame header")
            buf += chunk
        (length,) = _LEN.unpack_from(buf, 0)
        if length != frame_bytes:
            raise RuntimeError(f"frame of {length} bytes, expected {frame_bytes}")
        del buf[: _LEN.size]
        parts = [bytes(buf)]
        have = len(buf)
        buf = bytearray()
        while have < length:
            chunk = await stream.receive_some(RECV_CHUNK)
            if not chunk:
                raise RuntimeError("sender closed the connection inside a frame")
            parts.append(chunk)
            have += len(chunk)
        payload = b"".join(parts)
        if have > length:  # the next frame's first bytes
            buf = bytearray(payload[length:])
            payload = payload[:length]
        received += len(payload)
    return received


async def _measure(total_bytes: int, frame_bytes: int, timeout_s: float) -> float:
    n_frames = max(1, total_bytes // frame_bytes)
    frame = _LEN.pack(frame_bytes) + os.urandom(frame_bytes)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    accepted: trio.SocketStream | None = None
    got_conn = trio.Event()

    async def accept(stream: trio.SocketStream) -> None:
        nonlocal accepted
        accepted = stream
        got_conn.set()
        await trio.sleep_forever()

    result: dict[str, float] = {}
    with trio.fail_after(timeout_s):
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, accept, listeners)
            client = await trio.open_tcp_stream("127.0.0.1", port)
            await got_conn.wait()
            assert accepted is not None
            server = accepted

            async def send() -> None:
                for _ in range(n_frames):
                    await client.send_all(frame)

            async def receive() -> None:
                result["bytes"] = await _receive_frames(server, n_frames, frame_bytes)
                result["end"] = time.perf_counter()

            result["start"] = time.perf_counter()
            async with trio.open_nursery() as pair:
                pair.start_soon(receive)
                pair.start_soon(send)
            await client.aclose()
            await server.aclose()
            nursery.cancel_scope.cancel()
    return result["bytes"] / 1e6 / (result["end"] - result["start"])


def measure_trio_loopback_mb_per_s(
    *, total_bytes: int = 512 << 20, frame_bytes: int = 1 << 20, timeout_s: float = 60.0
) -> float:
    """Send `total_bytes` as `frame_bytes` frames over 127.0.0.1 between two Trio tasks; MB/s.

    Runs its own `trio.run`; raises `trio.TooSlowError` after `timeout_s`.
    """
    if total_bytes <= 0 or frame_bytes <= 0:
        raise ValueError("total_bytes and frame_bytes must be positive")
    return trio.run(_measure, total_bytes, frame_bytes, timeout_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mb", type=int, default=512, help="MiB sent per run")
    parser.add_argument("--frame-bytes", type=int, default=1 << 20)
    parser.add_argument("--runs", type=int, default=3, help="print each run and the best")
    args = parser.parse_args()
    rates = []
    for _ in range(args.runs):
        rate = measure_trio_loopback_mb_per_s(
            total_bytes=args.total_mb << 20, frame_bytes=args.frame_bytes
        )
        rates.append(rate)
        print(
            f"trio loopback reference: {rate:8.1f} MB/s  "
            f"({args.total_mb} MiB in {args.frame_bytes} B frames, one way, 127.0.0.1)"
        )
    print(f"best of {len(rates)}: {max(rates):.1f} MB/s")


if __name__ == "__main__":
    main()
