"""`minikafka demo` end to end, smaller than `make demo` (an ~11 s move instead of ~20 s): the
move must have been held by the KIP-73 throttle, and nothing acknowledged lost.

Without the throttle the move below copies its ~20 MB in a second or two, so both checks on the
move fail: the mean rate is far above the limit, and the move is far shorter than the bytes
allow. With it, KIP-73's quota admits at most the limit over time plus the first responses of
the move, which go through whole (checked before a fetch, charged after it:
docs/throttling.md#overshoot): 4 partitions x replica.fetch.max.bytes (1 MiB) at most.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from minikafka.tools.demo_move import MEAN_BOUND, SENSOR, burst_bytes

THROTTLE = 2_000_000
RECORDS = 28_000  # 28 MB, of which the 4 moved partitions hold two thirds: an ~11 s move
FIRST_RESPONSES = burst_bytes(4)  # the moved partitions x replica.fetch.max.bytes (1 MiB)


def test_the_demo_holds_the_throttle_and_loses_nothing(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    argv = [sys.executable, "-m", "minikafka", "demo", "--dir", str(home)]
    argv += ["--records", str(RECORDS), "--throttle", str(THROTTLE), "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)  # stdout is the JSON object alone; the lines went to stderr

    # the throttle was the one the tool set, and gone afterwards
    assert doc["throttle"]["bytes_per_s"] == THROTTLE
    assert doc["throttle"]["sensor"] == SENSOR
    assert f"broker 3: follower.replication.throttled.rate={THROTTLE}" in doc["throttle"]["configs"]
    assert any(
        "follower.replication.throttled.replicas=0:3" in c for c in doc["throttle"]["configs"]
    )
    assert doc["throttle"]["removed"] is True

    # the move was held to the limit: its mean rate, and its length
    move = doc["move"]
    assert move["destination_broker"] == 3 and move["partitions"] == [0, 1, 2, 3]
    assert move["duration_s"] is not None
    assert move["copied_bytes"] >= 0.9 * move["planned_bytes"]
    assert move["mean_bytes_per_s"] <= MEAN_BOUND * THROTTLE, move
    assert move["duration_s"] >= (move["copied_bytes"] - FIRST_RESPONSES) / THROTTLE, move
    assert move["within_limit"] is True

    # nothing acknowledged lost, while a producer wrote through the move
    verify = doc["verify"]
    assert verify["lost"] == 0 and verify["corrupted"] == 0
    assert verify["acknowledged"] == verify["read"] >= RECORDS + doc["produce"]["records"]
    assert doc["produce"]["records"] >= 100 * move["duration_s"]  # ~200 records/s throughout
    assert doc["ok"] is True

    # a line a second against the limit, and the run folder with its figures
    lines = [line for line in done.stderr.splitlines() if " throttled " in line]
    assert len(lines) >= 0.7 * move["duration_s"]
    assert all("of 2.00 MB/s" in line for line in lines)
    run = Path(doc["run_dir"])
    assert run == (home / "run").absolute()
    assert json.loads((run / "demo.json").read_text()) == doc
    assert (run / "rates.csv").read_text().startswith("t_s,broker,")
    assert (run / "case.json").exists() and (run / "nodes" / "node-3" / "metrics.jsonl").exists()
    if doc["plot"] is not None:
        assert Path(doc["plot"]).read_bytes()[:4] == b"\x89PNG"
