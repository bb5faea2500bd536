"""The Prometheus exposition of a metrics snapshot, and the /metrics responder on a real
loopback socket (one short request)."""

from __future__ import annotations

import pytest
import trio

from minikafka.server.prometheus import metric_name, render, serve_metrics

SNAP = {
    "bytes_in": 1200,
    "LeaderReplicationThrottledRate": 1000.5,
    "PartitionBytesInRate": {"t-0": 10.0, "t-1": 0},
    "client_byte_rate": {"produce": {"app": 5.0}},
    # None: no throttle within the quota window (Kafka's NaN): no sample, not a 0.
    "client_throttle_time_ms_avg": {"produce": {"app": 12.5, "idle": None}, "fetch": {}},
    "leader.replication.throttled": True,
    "note": "text is skipped",
}


def test_render_gauges_and_labels():
    text = render(SNAP, node_id=3)
    assert 'minikafka_bytes_in{node="3"} 1200.0' in text
    assert 'minikafka_LeaderReplicationThrottledRate{node="3"} 1000.5' in text
    assert 'minikafka_PartitionBytesInRate{node="3",partition="t-0"} 10.0' in text
    assert 'minikafka_client_byte_rate{node="3",kind="produce",client="app"} 5.0' in text
    avg = 'minikafka_client_throttle_time_ms_avg{node="3",kind="produce",client="app"} 12.5'
    assert avg in text and "idle" not in text
    assert 'minikafka_leader_replication_throttled{node="3"} 1.0' in text
    assert "note" not in text and "# TYPE minikafka_bytes_in gauge" in text


def test_metric_names_are_sanitised():
    assert metric_name("a.b-c d") == "minikafka_a_b_c_d"


@pytest.mark.integration
async def test_serves_metrics_over_http():
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_metrics, "127.0.0.1", 0, lambda: {"x": 1}, 7)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        data = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(4096):
                data += chunk
        assert data.startswith(b"HTTP/1.0 200 OK")
        assert b'minikafka_x{node="7"} 1.0' in data
        nursery.cancel_scope.cancel()
