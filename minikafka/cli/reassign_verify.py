"""`minikafka reassign --verify [--watch]` and `--cancel` (see minikafka/cli/reassign.py).

`--verify` prints each partition's status in Kafka's words; once nothing moves anywhere in the
cluster it removes the throttles (runner.clear_throttles) unless `--preserve-throttles`. With
`--watch` it first shows the progress per destination broker (tools/reassign/progress.py) on
stderr every `--interval` seconds until no partition of the file moves, at most `--timeout`
seconds (exit 1 if it runs out, or if a partition ends elsewhere than its target). `--cancel`
cancels the file's moves in progress, then clears throttles the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from minikafka.cli.common import resolve_bootstrap, table
from minikafka.cli.in_process import cli_client, echo, finish
from minikafka.cli.reassign_inputs import (
    CLIENT_ID,
    DEFAULT_INTERVAL_S,
    DEFAULT_TIMEOUT_S,
    local_files,
    parse_positive,
    print_json,
    read_reassignment,
    tp_list,
)
from minikafka.client.admin import Admin
from minikafka.tools.reassign import progress as prog
from minikafka.tools.reassign import runner
from minikafka.tools.reassign.units import human_bytes, human_rate, human_seconds

# ---------------------------------------------------------------------------- --verify


def verify(o: Mapping[str, Any]) -> object:
    """--verify [--watch]: per-partition status; throttles cleared once nothing moves."""
    proposed = read_reassignment(o["reassignment_json_file"])
    preserve, watch, as_json = o["preserve_throttles"], o["watch"], o["as_json"]
    timeout_s, interval_s = DEFAULT_TIMEOUT_S, DEFAULT_INTERVAL_S
    if o["timeout"] is not None:
        timeout_s = parse_positive(o["timeout"], "--timeout", example="60")
    if o["interval"] is not None:
        interval_s = parse_positive(o["interval"], "--interval", example="1")
    address = resolve_bootstrap(o["bootstrap"], o["cluster_dir"])
    files = local_files(o["bootstrap"], o["cluster_dir"]) if watch else None
    show = WatchDisplay(len(proposed), files is not None) if watch and not as_json else None

    async def go() -> tuple[runner.ClusterView, prog.WatchResult | None, list | None]:
        async with cli_client(address, CLIENT_ID) as client:
            admin = Admin(client)
            watched = None
            if watch:
                if show is not None:
                    show.intro(timeout_s, interval_s)
                watched = await prog.watch(
                    admin,
                    client,
                    proposed,
                    files=files,
                    timeout_s=timeout_s,
                    interval_s=interval_s,
                    show=show or (lambda frame: None),
                )
                view = watched.view
            else:
                view = await runner.read_cluster(admin)
                runner.statuses(view, proposed)  # unknown partitions: refused, nothing cleared
            cleared = None
            if not view.ongoing and not preserve:
                cleared = await runner.clear_throttles(admin, {tp.topic for tp in proposed})
            return view, watched, cleared

    def render(got: tuple[runner.ClusterView, prog.WatchResult | None, list | None]) -> None:
        view, watched, cleared = got
        states = runner.statuses(view, proposed)
        if as_json:
            doc: dict[str, Any] = _status_json(states, view, cleared, preserve)
            if watched is not None:
                doc.update(
                    watch_elapsed_s=watched.elapsed_s,
                    move_s=watched.move_s,
                    timed_out=not watched.done,
                )
            print_json(doc)
        else:
            echo("Status of partition reassignment:")
            for s in states:
                echo(s.line())
            if watched is not None and watched.move_s is not None:
                echo(
                    f"The move took {watched.move_s:.1f} s (controller events: first start to last "
                    "completion)."
                )
            _print_cleared(view, cleared, preserve)
        if watched is not None and not watched.done:
            left = sum(s.status == runner.IN_PROGRESS for s in states)
            echo(f"error: {left} partitions still moving after --timeout {timeout_s:g} s", err=True)
            sys.exit(1)
        if watched is not None and any(s.status == runner.MISMATCH for s in states):
            echo("error: some partitions are not at their target replicas", err=True)
            sys.exit(1)

    return finish(go, render, bad_input=runner.BAD_INPUT_CODES)


def _status_json(
    states: Sequence[runner.PartitionStatus],
    view: runner.ClusterView,
    cleared: list | None,
    preserve: bool,
) -> dict[str, Any]:
    return {
        "partitions": [s.to_json() for s in states],
        "in_progress_anywhere": len(view.ongoing),
        "throttles_removed": None if cleared is None else [c.to_json() for c in cleared],
        "preserve_throttles": preserve,
    }


def _print_cleared(view: runner.ClusterView, cleared: list | None, preserve: bool) -> None:
    if view.ongoing:
        echo(
            f"Throttles stay: {len(view.ongoing)} partitions are moving in the cluster (the "
            "controller removes the ones recorded with a reassignment when it ends)."
        )
    elif preserve:
        echo("Throttles preserved (--preserve-throttles).")
    elif not cleared:
        echo("No throttle left to remove.")
    else:
        grouped: dict[tuple[str, str], list[str]] = {}
        for c in cleared:
            grouped.setdefault((c.entity_type, c.entity_name), []).append(f"{c.name}={c.value}")
        echo("Removed throttles:")
        for (etype, name), names in grouped.items():
            echo(f"  {etype} {name}: {', '.join(names)}")


class WatchDisplay:
    """--watch's progress on stderr: a table redrawn in place on a terminal, one line per
    refresh otherwise (logs, pipes)."""

    COLUMNS = ["broker", "moving", "est_size", "copied", "left", "rate", "eta"]

    def __init__(self, partitions: int, local: bool) -> None:
        self.partitions = partitions
        self.local = local
        self.stream = sys.stderr
        self.tty = self.stream.isatty()
        self.drawn = 0

    def intro(self, timeout_s: float, interval_s: float) -> None:
        how = (
            "left = estimated log sizes - bytes each broker fetched as a throttled follower "
            "since its copy started"
            if self.local
            else "no local metrics for this cluster: partitions and sizes only"
        )
        echo(
            f"Watching {self.partitions} partitions every {interval_s:g} s, for at most "
            f"{timeout_s:g} s ({how})",
            err=True,
        )

    def __call__(self, frame: prog.WatchFrame) -> None:
        head = (
            f"[{frame.elapsed_s:6.1f} s] {frame.moving} of {len(frame.statuses)} partitions moving"
        )
        if not self.tty:
            parts = [
                f"broker {r.broker}: {human_bytes(r.left_bytes)} left at {human_rate(r.rate)}, "
                f"ETA {human_seconds(r.eta_s)}"
                if r.moving
                else f"broker {r.broker}: done"
                for r in frame.rows
            ]
            echo("; ".join([head, *parts]), err=True)
            return
        rows = [
            {
                "broker": r.broker,
                "moving": r.moving,
                "est_size": human_bytes(r.planned_bytes),
                "copied": "?" if r.copied_bytes is None else human_bytes(r.copied_bytes),
                "left": human_bytes(r.left_bytes),
                "rate": human_rate(r.rate),
                "eta": human_seconds(r.eta_s) if r.moving else "done",
            }
            for r in frame.rows
        ]
        lines = [head, *table(rows, self.COLUMNS).splitlines()]
        if self.drawn:
            self.stream.write(f"\x1b[{self.drawn}F\x1b[J")  # back to the first line, clear
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()
        self.drawn = len(lines)


# ---------------------------------------------------------------------------- --cancel


def cancel(o: Mapping[str, Any]) -> object:
    """--cancel: cancel the file's moves in progress; throttles cleared once nothing moves."""
    proposed = read_reassignment(o["reassignment_json_file"])
    preserve, as_json = o["preserve_throttles"], o["as_json"]
    address = resolve_bootstrap(o["bootstrap"], o["cluster_dir"])

    async def go() -> tuple[runner.CancelResult, runner.ClusterView, list | None]:
        async with cli_client(address, CLIENT_ID) as client:
            admin = Admin(client)
            before = await runner.read_cluster(admin)
            runner.statuses(before, proposed)  # unknown partitions: refused, nothing cancelled
            result = await runner.cancel(admin, before, proposed)
            view = await runner.read_cluster(admin)
            cleared = None
            if not view.ongoing and not preserve:
                cleared = await runner.clear_throttles(admin, {tp.topic for tp in proposed})
            return result, view, cleared

    def render(got: tuple[runner.CancelResult, runner.ClusterView, list | None]) -> None:
        result, view, cleared = got
        if as_json:
            print_json(
                {
                    "cancelled": [str(tp) for tp in result.cancelled],
                    "not_active": [str(tp) for tp in result.not_active],
                    "errors": {str(tp): m for tp, m in result.errors.items()},
                    "throttles_removed": None
                    if cleared is None
                    else [c.to_json() for c in cleared],
                },
            )
        else:
            if result.cancelled:
                echo(
                    f"Successfully cancelled partition reassignments for: {tp_list(result.cancelled)}"
                )
            if not result.cancelled and not result.errors:
                echo("None of the specified partition reassignments are active.")
            _print_cleared(view, cleared, preserve)
        for tp, message in result.errors.items():
            echo(f"error: cancelling the reassignment of {tp} refused: {message}", err=True)
        if result.errors:
            sys.exit(1)

    return finish(go, render, bad_input=runner.BAD_INPUT_CODES)
