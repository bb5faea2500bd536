"""The fault proxy's pure parts: link fault state, token bucket, control-request validation, the
spec file format. No Trio, no sockets (minikafka/faults/links.py, requests.py, config.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from minikafka.errors import ConfigError
from minikafka.faults.config import ProxyConfig, ProxyLink, load_proxy_config
from minikafka.faults.links import Faults, FaultTable, TokenBucket, burst_bytes
from minikafka.faults.requests import (
    Heal,
    Partition,
    Reset,
    SetFaults,
    Show,
    decode_line,
    parse_request,
)

ROOT = Path(__file__).resolve().parents[2]
# Controller 0 and brokers 1..3: every ordered pair of distinct nodes talks.
LINKS = [(a, b) for a in range(4) for b in range(4) if a != b]


def test_pure_modules_import_no_io():
    """links.py, requests.py and config.py are the sans-IO core of the proxy (DESIGN rule 1)."""
    banned = {"trio", "socket", "time", "threading", "asyncio", "minikafka.server"}
    for name in ("links", "requests", "config"):
        tree = ast.parse((ROOT / "minikafka/faults" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                assert module.split(".")[0] not in banned and not module.startswith(
                    "minikafka.server"
                ), f"faults/{name}.py imports {module}"


# ---------------------------------------------------------------------------- token bucket


def test_burst_is_50_ms_worth_capped_at_64_kib():
    assert burst_bytes(10_000) == 500  # 10 kB/s * 50 ms
    assert burst_bytes(100 * 1024 * 1024) == 64 * 1024
    assert burst_bytes(1) == 1


def test_bucket_paces_to_the_rate_after_the_burst():
    bucket = TokenBucket(10_000, now_ms=0)
    assert bucket.delay_ms(500, 0) == 0  # the full bucket: 500 bytes go at once
    assert bucket.delay_ms(500, 0) == 50  # then 500 bytes per 50 ms
    # Sending each slice when allowed: 100 more slices of 500 bytes take 5 s.
    t = 50
    for _ in range(100):
        t += bucket.delay_ms(500, t)
    assert t == 50 + 100 * 50


def test_bucket_rounds_up_and_never_drifts():
    bucket = TokenBucket(3_000, now_ms=0)  # 3 bytes per ms; burst 150
    bucket.delay_ms(150, 0)
    assert bucket.delay_ms(1, 0) == 1  # 1/3 ms rounds up to 1
    t = 1
    for _ in range(2999):
        t += bucket.delay_ms(1, t)
    # 3000 bytes at 3000 B/s after the burst: 1 s; rounding each hold up did not add up.
    assert t <= 1000


def test_idle_bucket_refills_only_up_to_its_burst():
    bucket = TokenBucket(10_000, now_ms=0)
    bucket.delay_ms(500, 0)
    assert bucket.delay_ms(500, 60_000) == 0  # a minute idle buys one burst, not 600 kB
    assert bucket.delay_ms(500, 60_000) == 50


# ---------------------------------------------------------------------------- fault table


def test_set_changes_only_the_named_fields_and_none_restores_the_default():
    table = FaultTable(LINKS)
    table.set([(1, 2)], {"latency_ms": 100, "bandwidth_bps": 5000})
    table.set([(1, 2)], {"blocked": True})
    assert table.state((1, 2)).faults == Faults(blocked=True, latency_ms=100, bandwidth_bps=5000)
    table.set([(1, 2)], {"bandwidth_bps": None, "blocked": False})
    assert table.state((1, 2)).faults == Faults(latency_ms=100)
    assert table.state((2, 1)).faults.healthy


def test_partition_blocks_cross_group_links_both_ways_only():
    table = FaultTable(LINKS)
    blocked = table.partition([[1], [2, 3]])
    assert sorted(blocked) == [(1, 2), (1, 3), (2, 1), (3, 1)]
    assert all(table.state(link).faults.blocked for link in blocked)
    # Within a group, and to node 0 (in no group), links are untouched.
    for link in [(2, 3), (3, 2), (0, 1), (1, 0), (0, 2)]:
        assert not table.state(link).faults.blocked
    # Partitions add up until healed.
    table.partition([[0], [2]])
    assert table.state((0, 2)).faults.blocked and table.state((1, 2)).faults.blocked


def test_heal_clears_every_fault_and_names_the_links_it_healed():
    table = FaultTable(LINKS)
    table.partition([[1], [2]])
    table.set([(3, 0)], {"latency_ms": 5})
    assert sorted(table.heal()) == [(1, 2), (2, 1), (3, 0)]
    assert all(st.faults.healthy for st in table.links.values())
    assert table.heal() == []


def test_a_new_rate_starts_a_new_bucket_and_no_rate_means_no_bucket():
    table = FaultTable(LINKS)
    st = table.state((1, 2))
    assert st.bucket("to_dst", 0) is None
    table.set([(1, 2)], {"bandwidth_bps": 10_000})
    first = st.bucket("to_dst", 0)
    assert first is not None and st.bucket("to_dst", 5) is first
    assert st.bucket("to_src", 0) is not first  # each direction has its own
    table.set([(1, 2)], {"bandwidth_bps": 20_000})
    assert st.bucket("to_dst", 0).rate_bps == 20_000


def test_snapshot_has_faults_and_counters():
    table = FaultTable([(1, 2)])
    table.state((1, 2)).bytes_delivered["to_dst"] += 7
    [row] = table.snapshot()
    assert row == {
        "src": 1,
        "dst": 2,
        "blocked": False,
        "latency_ms": 0,
        "bandwidth_bps": None,
        "bytes_to_dst": 7,
        "bytes_to_src": 0,
        "connections_open": 0,
        "connections_total": 0,
        "resets": 0,
    }


# ---------------------------------------------------------------------------- requests


def test_good_requests_parse():
    assert parse_request({"op": "show"}, LINKS) == Show()
    assert parse_request({"op": "heal"}, LINKS) == Heal()
    req = parse_request({"op": "set", "links": [[1, 2], [1, 2], [2, 1]], "latency_ms": 5}, LINKS)
    assert req == SetFaults(links=((1, 2), (2, 1)), changes={"latency_ms": 5})
    req = parse_request({"op": "set", "links": [[1, 2]], "blocked": None}, LINKS)
    assert req == SetFaults(links=((1, 2),), changes={"blocked": None})
    assert parse_request({"op": "partition", "groups": [[1], [2, 3]]}, LINKS) == Partition(
        groups=((1,), (2, 3))
    )
    assert parse_request({"op": "reset", "links": [[0, 3]]}, LINKS) == Reset(links=((0, 3),))


@pytest.mark.parametrize(
    ("request_obj", "message"),
    [
        ({}, "op must be one of show, set, partition, heal, reset"),
        ({"op": "explode"}, "op must be one of"),
        ({"op": "show", "links": []}, "op show does not take links"),
        ({"op": "set", "links": [[1, 2]]}, "op set needs at least one of"),
        ({"op": "set", "links": [[1, 2]], "latncy_ms": 1}, "does not take latncy_ms"),
        ({"op": "set", "links": [], "blocked": True}, "links must be a non-empty list"),
        ({"op": "set", "links": [[1, 1]], "blocked": True}, "no link 1->1; links: 0->1"),
        ({"op": "set", "links": [[1, 9]], "blocked": True}, "no link 1->9"),
        ({"op": "set", "links": [[1, 2, 3]], "blocked": True}, "a link is a [src, dst] pair"),
        ({"op": "set", "links": [[True, 2]], "blocked": True}, "a link is a [src, dst] pair"),
        ({"op": "set", "links": [[1, 2]], "blocked": "yes"}, "blocked must be true, false"),
        ({"op": "set", "links": [[1, 2]], "latency_ms": -1}, "latency_ms must be an integer"),
        ({"op": "set", "links": [[1, 2]], "latency_ms": 1.5}, "latency_ms must be an integer"),
        ({"op": "set", "links": [[1, 2]], "bandwidth_bps": 0}, "bandwidth_bps must be a positive"),
        ({"op": "partition", "groups": [[1, 2]]}, "at least two non-empty lists"),
        ({"op": "partition", "groups": [[1], []]}, "at least two non-empty lists"),
        ({"op": "partition", "groups": [[1], [1, 2]]}, "node 1 is in two groups"),
        ({"op": "partition", "groups": [[1], [7]]}, "no node 7; nodes: 0, 1, 2, 3"),
        ({"op": "reset"}, "links must be a non-empty list"),
    ],
)
def test_bad_requests_are_refused_with_one_line(request_obj, message):
    with pytest.raises(ConfigError) as err:
        parse_request(request_obj, LINKS)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"{not json", "one JSON object per line"),
        (b"\xff\xfe", "one JSON object per line"),
        (b"[1, 2]", "must be a JSON object, got list"),
    ],
)
def test_undecodable_lines_are_refused(line, message):
    with pytest.raises(ConfigError, match=message):
        decode_line(line)


# ---------------------------------------------------------------------------- spec file


def _config() -> ProxyConfig:
    return ProxyConfig(
        host="127.0.0.1",
        control_port=4000,
        links=(
            ProxyLink(src=1, dst=2, port=4001, target_host="127.0.0.1", target_port=9002),
            ProxyLink(src=2, dst=1, port=4002, target_host="127.0.0.1", target_port=9001),
        ),
    )


def test_spec_file_round_trip(tmp_path):
    path = tmp_path / "links.json"
    path.write_text(json.dumps(_config().to_json()))
    assert load_proxy_config(path) == _config()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("links"), "needs host, control_port and links"),
        (lambda d: d.update(control_port=0), "control_port must be a port"),
        (lambda d: d["links"][1].update(port=4001), "port 4001 is used twice"),
        (lambda d: d["links"][1].update(src=1, dst=2), "link 1->2 is listed twice"),
        (lambda d: d["links"][0].update(dst=1), "from a node to itself"),
        (lambda d: d["links"][0].update(target="nowhere"), "target must be host:port"),
    ],
)
def test_bad_spec_files_are_refused(tmp_path, mutate, message):
    data = _config().to_json()
    mutate(data)
    path = tmp_path / "links.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=message):
        load_proxy_config(path)


def test_missing_or_broken_spec_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_proxy_config(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_proxy_config(tmp_path / "bad.json")
