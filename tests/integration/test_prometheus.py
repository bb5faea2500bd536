"""The metrics port on a real loopback socket: a scrape over HTTP (the exposition and the
responder on memory streams: tests/server/test_prometheus.py)."""

from __future__ import annotations

import trio

from minikafka.server.metrics import Metrics
from minikafka.server.prometheus import serve_metrics

GET = b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n"


async def test_serves_metrics_over_http():
    m = Metrics()
    m.inc("bytes_out", 7)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_metrics, "127.0.0.1", 0, m, 7)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(GET)
        data = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(4096):
                data += chunk
        assert data.startswith(b"HTTP/1.0 200 OK")
        assert b'kafka_server_brokertopicmetrics_bytesout_total{node="7"} 7.0' in data
        nursery.cancel_scope.cancel()
