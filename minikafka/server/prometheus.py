"""The node's metrics in the Prometheus text exposition format, on its metrics port.

`GET /metrics` answers the current snapshot (server/metrics.py): every number becomes a gauge
`minikafka_<name>{node="<id>"}`; a mapping one level deep becomes one sample per key with a
label named after the metric's kind (`partition`, `client`); two levels (`{"produce": {client:
rate}}`) add a `kind` label. Names are sanitised to Prometheus' `[a-zA-Z_:][a-zA-Z0-9_:]*`.
A tiny HTTP/1.0 responder is enough: one request per connection, then close.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import trio

_NAME = re.compile(r"[^a-zA-Z0-9_:]")
LABEL_OF = {
    "PartitionBytesInRate": "partition",
    "client_byte_rate": "client",
    "client_throttle_time_ms_avg": "client",
    "client_throttle_time_ms_max": "client",
}


def metric_name(name: str) -> str:
    return "minikafka_" + _NAME.sub("_", name)


def _label_value(text: object) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(snapshot: Mapping[str, object], node_id: int) -> str:
    """The exposition text for one snapshot (numbers and nested mappings of numbers)."""
    lines: list[str] = []
    for name, value in sorted(snapshot.items()):
        metric = metric_name(name)
        samples = list(_samples(value, LABEL_OF.get(name, "key"), {"node": str(node_id)}))
        if not samples:
            continue
        lines.append(f"# TYPE {metric} gauge")
        for labels, number in samples:
            text = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
            lines.append(f"{metric}{{{text}}} {float(number)!r}")
    return "\n".join(lines) + "\n"


def _samples(value: object, label: str, labels: dict[str, str]):  # noqa: ANN202 - generator
    if isinstance(value, bool):
        yield labels, int(value)
    elif isinstance(value, int | float):
        yield labels, value
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            if isinstance(inner, Mapping):
                yield from _samples(inner, label, {**labels, "kind": str(key)})
            else:
                yield from _samples(inner, label, {**labels, label: str(key)})


async def serve_metrics(
    host: str,
    port: int,
    snapshot: Callable[[], Mapping[str, object]],
    node_id: int,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve GET /metrics on host:port (0: any free port); reports the bound port."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]

    async def handle(stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(5):
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 8192:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    head += chunk
                path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
                if path.split(b"?")[0] in (b"/metrics", b"/"):
                    body = render(snapshot(), node_id).encode()
                    status = b"200 OK"
                else:
                    body, status = b"not found: try /metrics\n", b"404 Not Found"
                await stream.send_all(
                    b"HTTP/1.0 "
                    + status
                    + b"\r\nContent-Type: text/plain; version=0.0.4\r\n"
                    + b"Content-Length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handle, listeners)
        task_status.started(bound)
