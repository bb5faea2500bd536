"""The node's metrics port: `GET /metrics` in the Prometheus text format, or OpenMetrics.

The exposition is prometheus_client's, from the node's own registry
(server/prometheus_collector.py: names, HELP, labels, process CPU and memory), so the format is
the one its authors maintain. The HTTP side stays ours, on Trio: a tiny HTTP/1.0 responder,
one request per connection, then close; no prometheus_client server thread in the node.

Content negotiation is prometheus_client's `choose_encoder`, as its own handlers do: an
`Accept` naming `application/openmetrics-text` (what Prometheus sends first) gets OpenMetrics
1.0, anything else the text format. `/` answers as `/metrics`; other paths get 404. A scrape
whose collection fails answers 500 with the error in one line: a broken gauge must not take the
node down.
"""

from __future__ import annotations

import trio
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from minikafka.server.listener import Listen, bound_port, open_listeners
from minikafka.server.metrics import Metrics
from minikafka.server.prometheus_collector import node_registry

MAX_HEAD_BYTES = 8192
READ_TIMEOUT_S = 5


def _header(head: bytes, name: bytes) -> str:
    """The value of the request header `name` (lower case), or ""."""
    for line in head.split(b"\r\n")[1:]:
        key, sep, value = line.partition(b":")
        if sep and key.strip().lower() == name:
            return value.strip().decode("latin-1")
    return ""


def respond(head: bytes, registry: CollectorRegistry) -> bytes:
    """The whole HTTP response to a request head (request line and headers)."""
    parts = head.split(b"\r\n", 1)[0].split(b" ")
    path = parts[1].split(b"?")[0] if len(parts) == 3 else b""
    if path not in (b"/metrics", b"/"):
        return _response(b"404 Not Found", "text/plain", b"not found: try /metrics\n")
    encoder, content_type = choose_encoder(_header(head, b"accept"))
    try:
        body = encoder(registry)
    except Exception as exc:  # noqa: BLE001 - a gauge's bug answers 500, the node goes on
        line = f"metrics collection failed: {type(exc).__name__}: {exc}\n".replace("\r", " ")
        return _response(b"500 Internal Server Error", "text/plain", line.encode())
    return _response(b"200 OK", content_type, body)


def _response(status: bytes, content_type: str, body: bytes) -> bytes:
    return (
        b"HTTP/1.0 "
        + status
        + b"\r\nContent-Type: "
        + content_type.encode()
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


async def answer(stream: trio.abc.Stream, registry: CollectorRegistry) -> None:
    """Read one request head from `stream`, send the response, close the stream."""
    try:
        with trio.move_on_after(READ_TIMEOUT_S):
            head = b""
            while b"\r\n\r\n" not in head and len(head) < MAX_HEAD_BYTES:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                head += chunk
            await stream.send_all(respond(head, registry))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        await stream.aclose()


async def serve_metrics(
    host: str,
    port: int,
    metrics: Metrics,
    node_id: int,
    *,
    listen: Listen = open_listeners,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve GET /metrics on host:port (0: any free port); reports the bound port. `listen`
    binds it (server/edges.py `Edges.listen`; TCP by default)."""
    registry = node_registry(metrics, node_id)
    listeners = await listen(host, port)
    bound = bound_port(listeners)

    async def handle(stream: trio.SocketStream) -> None:
        await answer(stream, registry)

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handle, listeners)
        task_status.started(bound)
