"""What the cluster benchmarks share (cluster_bench, throttle_bench, client_quota_bench,
proxy_bench): the machine a run is measured on, the failure and progress conventions, the run
wrapper every `main` ends in, and the waits on a local cluster.

Rules: a phase that fails or times out raises `BenchError` with one line saying which and why,
and `run_main` prints it as `bench: FAILED: ...` (exit 1); progress goes to stderr (`Say`), the
table or the `--json` object to stdout; every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import trio

from minikafka.client.cluster_client import open_client
from minikafka.client.consumer import Consumer
from minikafka.errors import ConfigError, MiniKafkaError
from minikafka.testing.seeds import resolve_seed, seed_line

POLL_S = 0.02  # Metadata polling while waiting for an ISR change

Say = Callable[[str], None]
SEED_HELP = "default: $MINIKAFKA_SEED, else random (printed)"


class BenchError(Exception):
    """A phase failed or timed out; the message says which and why."""


# ---------------------------------------------------------------------------------- machine


def machine_info() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "commit": source_commit(),
        "nproc": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def source_commit() -> str:
    """The git commit of this checkout (read-only `git rev-parse`), or "unknown"."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            env=os.environ | {"GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


# ---------------------------------------------------------------------------------- cluster waits


async def wait_for_isr(
    bootstrap: str,
    topic: str,
    broker: int,
    *,
    member: bool,
    timeout_s: float,
    what: str,
    poll_s: float = POLL_S,
) -> tuple[float, list[int]]:
    """Poll Metadata every `poll_s` until `broker` is (member=True) or is not (member=False) in
    the ISR of every partition of `topic` it replicates, and leads none of them when not a
    member. (A topic of many thousand partitions wants a longer `poll_s`: each answer then costs
    the broker and this process milliseconds of CPU.)

    Returns the monotonic time of the answer that showed it, and those partitions.
    """
    async with open_client(bootstrap, client_id="cluster-bench") as client:
        with trio.move_on_after(timeout_s):
            while True:
                md = await client.refresh_metadata([topic])
                seen = time.monotonic()
                (t,) = [t for t in md.topics if t.name == topic]
                mine = [p for p in t.partitions if broker in p.replicas]
                if member:
                    done = all(broker in p.isr for p in mine)
                else:
                    done = all(broker not in p.isr and p.leader != broker for p in mine)
                if mine and done:
                    return seen, sorted(p.partition for p in mine)
                await trio.sleep(poll_s)
    raise BenchError(
        f"broker {broker} {what} within {timeout_s}s (Metadata polled from {bootstrap})"
    )


async def log_end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    async with open_client(bootstrap, client_id="cluster-bench") as client:
        await client.refresh_metadata([topic])
        ends = await Consumer(client).list_offsets(client.partitions_of(topic), earliest=False)
    return {tp.partition: offset for tp, offset in ends.items()}


def metrics_after(path: Path, offset: int) -> list[dict[str, Any]]:
    """The metrics.jsonl lines written after byte `offset` (by the restarted incarnation)."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            lines = f.read().decode().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line being written as we read, or cut short by the kill
    return out


# ---------------------------------------------------------------------------------- main


def add_run_options(p: argparse.ArgumentParser, *, set_help: str) -> None:
    """The options every cluster benchmark shares: seed, keep, dir, json and node configs."""
    p.add_argument("--seed", type=int, default=None, help=SEED_HELP)
    p.add_argument("--keep", action="store_true", help="keep the cluster dir and print where")
    p.add_argument("--dir", default=None, help="parent of the temporary cluster dir")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help=set_help)


def resolve_args_seed(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--seed, else $MINIKAFKA_SEED, else a fresh seed (minikafka/testing/seeds.py); `run_main`
    prints it. A bad one ends the parse with one line."""
    try:
        args.seed = resolve_seed(args.seed)
    except ConfigError as exc:
        p.error(str(exc))


def run_main(
    args: argparse.Namespace, cfg: Any, run: Callable, render_: Callable, *, prefix: str
) -> int:
    """The shared end of every benchmark's main: a temp working dir (kept with --keep), one
    run, a one-line FAILED on error (exit 1), the table or --json on stdout."""
    say = lambda msg: print(f"bench: {msg}", file=sys.stderr, flush=True)  # noqa: E731
    base = Path(tempfile.mkdtemp(prefix=prefix, dir=args.dir))
    say(f"{seed_line(cfg.seed)}; working dir {base}")
    try:
        result = run(cfg, base, say=say)
    except (BenchError, MiniKafkaError, trio.TooSlowError) as exc:
        say(f"FAILED: {exc}")
        return 1
    finally:
        if args.keep:
            say(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result) if args.json else render_(result))
    return 0
