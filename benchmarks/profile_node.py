"""Run one minikafka node under cProfile: a node command for `LocalCluster.up(node_command=...)`.

    python benchmarks/profile_node.py OUT_DIR node --node-id 1 ...   (the `minikafka` argv)

The node runs exactly as `python -m minikafka` would (same process, same argv after OUT_DIR); when
it exits (SIGTERM from `LocalCluster.down` is a clean exit) the profile of its main thread goes
to `OUT_DIR/node-<id>-<pid>.prof` (`python -m pstats` reads it). A SIGKILLed node leaves none.

Why a wrapper and not an env var in the node: profiling is a benchmark's concern, and the node
process stays exactly what production runs. cProfile sees the Trio thread only: LMDB commits
run in worker threads (`trio.to_thread.run_sync`) and show up as time spent waiting, not as
calls; read the profile as "where the event loop's CPU goes".
"""

from __future__ import annotations

import cProfile
import os
import sys
from pathlib import Path


def node_command(out_dir: Path) -> tuple[str, ...]:
    """The node command (NODE_COMMAND's shape: the `node` subcommand last) that profiles every
    node of a cluster into `out_dir`."""
    return (sys.executable, str(Path(__file__).resolve()), str(out_dir), "node")


def _node_id(argv: list[str]) -> str:
    return argv[argv.index("--node-id") + 1] if "--node-id" in argv else "x"


def main() -> None:
    out_dir = Path(sys.argv[1])
    argv = sys.argv[2:]
    out_dir.mkdir(parents=True, exist_ok=True)
    sys.argv = ["minikafka", *argv]
    from minikafka.cli import main as minikafka_main

    profile = cProfile.Profile()
    try:
        profile.runcall(minikafka_main)
    except SystemExit:
        pass
    finally:
        profile.dump_stats(out_dir / f"node-{_node_id(argv)}-{os.getpid()}.prof")


if __name__ == "__main__":
    main()
