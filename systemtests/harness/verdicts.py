"""A case's verdicts: the Spark analysis' figures, the acknowledged-writes checker, the ISRs.

The numbers the assertions use come from the analysis report (tools/analysis, reading only the
run folder), never from a calculation in this process: the move's duration, the largest
throttled rate over sliding windows (one starting on every whole second) of the case's span,
starting 2 s or more after the move start and ending by its end (past it, counting nothing
after it, if case.json says `throttle_window_past_end`), per broker and side, the same windows
of the bytes on the wire, the order partitions caught up in, and the produce latency of the
partitions not catching up. The span and the bounds are each case's (case.json
`throttle_window_s`, `throttle_bound_bytes_per_s` and each sensor's own in
`throttle_bounds_bytes_per_s`; by default 5 s and 1.15 x the throttle, `PARAMS`). What the
analysis cannot see (the values read back, the final Metadata) comes from the run itself. All of
it goes to results.json; `failures()` lists what is wrong, each under its verdict (`VERDICTS`),
and `make mutants` proves each verdict by the deliberate bugs it catches
(systemtests/harness/mutation.py).

The thresholds (KIP-73 test plan, "replicas should move at the quota dictated rate", and what
Kafka's design promises beside it):
- duration: the move completes within 0.9-1.2 x the prediction. In Kafka's mode near a step of
  its algorithm the prediction has alternatives, and a move that fits one is accepted
  (harness/quota_modes.py says why nothing narrower holds);
- windows: no window after the first 2 s exceeds its sensor's bound, on any judged broker (the
  follower side of receiving brokers, the leader side of sending ones), and (binding-side) at
  least one such window was judged on a sensor the prediction says binds (a case too short to
  have one proves nothing);
- wire-windows and charge-coverage (idle cases, where every replication byte is of the throttled
  class): no window of the bytes on the wire exceeds the bound, and a sending leader's quota was
  charged for the record bytes it sent (0.98-1.02 of them): a leader that forgets to charge some
  partitions passes its own counters but not the wire;
- header-charge (Kafka's mode): a sending leader was charged Kafka's response headers as well
  as the records (at least 37 B per long poll of 500 ms);
- catch-up-order: partitions catch up in no order of their index (|Spearman rho| <= 0.5),
  KIP-73's random partition order;
- in-sync-latency (cases with load): acks=all p99 of the partitions not catching up stays under
  500 ms (precise) or 1 s (Kafka's mode): KAFKA-4313 exempts their in-sync followers;
- acked-writes: every acknowledged record is read back at its offset;
- final-isr: every replica ended in the ISR, with the target replicas (Metadata after the move).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from minikafka.testing.checker import Verdict
from minikafka.tools.analysis import Params, Report, analyze, spark_session
from minikafka.tools.analysis.summary import accepted_ranges, format_ranges
from systemtests.harness import machine
from systemtests.harness.case import CaseRun
from systemtests.harness.quota_modes import DURATION_RATIO, PREDICTION_UNDER_REVIEW

PARAMS = Params(
    window_s=5,
    window_skip_s=2,
    violation_factor=1.15,
    duration_ratio_min=DURATION_RATIO[0],
    duration_ratio_max=DURATION_RATIO[1],
)
ANALYSIS_TIMEOUT_S = 600.0
BROKER_FIELDS = (
    "node",
    "side",
    "role",
    "bound_bytes_per_s",
    "wire_bytes_during_move",
    "charged_record_bytes_during_move",
    "max_wire_window_bytes_per_s",
    "wire_violated",
    "max_window_throttle_ratio",
    "max_window_bytes_per_s",
    "max_window_start_s",
    "windows",
    "windows_over",
    "throttle_violated",
    "mean_throttled_bytes_per_s_during_move",
    "throttled_bytes_during_move",
    "configured_throttle_bytes_per_s",
)


def run_analysis(
    runs: Sequence[CaseRun], *, master: str, out_dir: Path, timeout_s: float = ANALYSIS_TIMEOUT_S
) -> Report:
    """minikafka.tools.analysis.analyze on these folders, in one Spark job; report in `out_dir`.

    Bounded: after `timeout_s` a watchdog cancels the session's jobs, and analyze raises."""
    spark = spark_session(master)
    # interruptAll, not sparkContext.cancelAllJobs: Spark Connect sessions have no sparkContext
    # (`minikafka analyze --master sc://...`); since Spark 4 it cancels a classic session's jobs
    # too.
    watchdog = threading.Timer(timeout_s, spark.interruptAll)
    watchdog.daemon = True
    watchdog.start()
    try:
        return analyze([r.path for r in runs], spark=spark, params=PARAMS, out_dir=out_dir)
    finally:
        watchdog.cancel()


def judge_runs(
    runs: Sequence[CaseRun], *, master: str, out_dir: Path, label: str, say: Callable[[str], None]
) -> list[dict[str, Any]]:
    """Analyse every run that has a case.json in ONE Spark job (report in `out_dir`), then each
    run's results.json (written into its folder too), in the order given. A failed analysis is
    every run's failure, not an exception."""
    analysable = [r for r in runs if r.info is not None]
    report, analysis_error = None, None
    if analysable:
        t0 = time.monotonic()
        say(f"[{label}] Spark analysis of {len(analysable)} run folder(s) ...")
        try:
            report = run_analysis(analysable, master=master, out_dir=out_dir)
        except Exception as exc:  # noqa: BLE001 - a failure of every case of the batch
            analysis_error = f"{type(exc).__name__}: {exc}"
        say(f"  {analysis_error or 'analysed'} in {time.monotonic() - t0:.1f} s")
    out = []
    for run in runs:
        res = results(
            run,
            None if report is None else case_of(report, run),
            report_path=None if report is None else report.out_dir / "report.json",
            analysis_error=analysis_error,
        )
        out.append(res)
    return out


def case_of(report: Report, run: CaseRun) -> dict[str, Any] | None:
    """The report's case for `run`'s folder."""
    return next((c for c in report.cases if c["run_dir"] == str(run.path)), None)


def checker_json(v: Verdict | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {
        "ok": v.ok,
        "acknowledged": v.acknowledged,
        "read": v.read,
        "lost": len(v.lost),
        "corrupted": len(v.corrupted),
        "duplicated_offsets": len(v.duplicated_offsets),
        "retry_duplicates": v.duplicates,
        "first_lost": [f"{tp}@{o}" for tp, o in v.lost[:10]],
        "summary": v.summary(),
    }


def results(
    run: CaseRun,
    case: dict[str, Any] | None,
    *,
    report_path: Path | None = None,
    analysis_error: str | None = None,
) -> dict:
    """results.json: every figure and verdict of the case (module docstring); `case` is the
    analysis report's case of this run."""
    out: dict[str, Any] = {
        "case": run.spec.name,
        "run_dir": str(run.path),
        "wall_s": round(run.wall_s, 1),
        "error": run.error,
        "analysis_error": analysis_error,
        "thresholds": {
            "duration_ratio": [PARAMS.duration_ratio_min, PARAMS.duration_ratio_max],
            # the case's own (from the report), else the defaults
            "window_s": case["throttle_window_s"] if case else PARAMS.window_s,
            "window_skip_s": PARAMS.window_skip_s,
            "max_window_bytes_per_s": case["throttle_bound_bytes_per_s"] if case else None,
        },
        "analysis": None,
        "checker": checker_json(run.verdict),
        "isr": {"ok": run.final_isr_ok, "problems": run.final_isr_problems[:20]},
        # who used the machine during the move (harness/machine.py)
        "cpu_during_move": None if run.info is None else run.info.extra.get("cpu_during_move"),
    }
    if case is not None:
        out["analysis"] = {
            "report": None if report_path is None else str(report_path),
            "verdict": case["verdict"],
            "failures": case["failures"],
            "predicted_move_s": case["predicted_move_s"],
            "predicted_move_alternatives_s": case["predicted_move_alternatives_s"],
            "move_judged_against_s": case["move_judged_against_s"],
            "move_duration_s": case["move_duration_s"],
            "move_duration_ratio": case["move_duration_ratio"],
            "move_source": case["move_source"],
            "window_s": case["throttle_window_s"],
            "bound_bytes_per_s": case["throttle_bound_bytes_per_s"],
            "max_window_throttle_ratio": case["max_window_throttle_ratio"],
            "max_window_node": case["max_window_node"],
            "max_window_side": case["max_window_side"],
            "moved_bytes": case["moved_bytes"],
            "brokers": [{k: b.get(k) for k in BROKER_FIELDS} for b in case["brokers"]],
            "isr_shrinks_during_move": case["isr"]["shrinks_during_move"],
            "produce_latency_during_move": case["produce_latency"]["during"],
            "produce_latency_in_sync": case["produce_latency"].get("in_sync_during_move"),
            "catch_up": case.get("catch_up"),
        }
    out["not_judged"] = {}
    if run.spec.load:
        out["latency_bound_ms"] = latency_bound_ms(run)
        out["saturated"] = saturated(run)
    if (why := PREDICTION_UNDER_REVIEW.get(run.spec.name)) is not None:
        out["not_judged"]["duration"] = why
    found = failures(out, run)
    out["failures"] = [f"{verdict}: {message}" for verdict, message in found]
    out["failed_verdicts"] = sorted({verdict for verdict, _ in found})
    out["verdict"] = "fail" if found else "pass"
    return out


VERDICTS = {
    "ran": "the case ran to the end and its folder was analysed",
    "duration": "the move took 0.9-1.2 x the prediction it is judged by",
    "windows": "no judged window of a sensor's charged bytes above that sensor's bound",
    "binding-side": "at least one window was judged on a sensor the prediction says binds",
    "wire-windows": "idle: no judged window of the replication bytes on the wire above the bound",
    "charge-coverage": "idle: each sending leader was charged for the record bytes it sent",
    "header-charge": "Kafka's mode: each sending leader was charged Kafka's response headers too",
    "catch-up-order": "partitions caught up in no order of their index (KIP-73's random order)",
    "in-sync-latency": "KAFKA-4313: acks=all batches of partitions not catching up are not held",
    "acked-writes": "every acknowledged record was read back at its offset",
    "final-isr": "every replica ended in the ISR, with the target replicas",
}
# charge-coverage: charged record bytes / wire bytes of a sending leader over the move. Both are
# counted on the same response (fetch_read's charge, fetch_serve's replication_bytes_out), so
# only the metrics lines' edges separate them.
COVERAGE = (0.98, 1.02)
# header-charge: Kafka's leader charges the wire size of a Fetch response of the throttled
# partitions, headers included (core/quota/charge.py): at least one partition's 37 bytes per
# response, and a fetcher gets at least one response per long poll (replica.fetch.wait.max.ms
# 500). Measured on 3n-one-to-two-reassign-lists-idle-kafka: 24,974 B in a 16.6 s move, where
# this floor is 1,221 B; a leader charging record bytes only is charged none.
HEADER_BYTES = 37
LONG_POLL_S = 0.5
# catch-up-order: |Spearman rho| between partition index and catch-up time. Under a random
# order rho has sd ~ 1 / sqrt(n - 1) (0.1 for 100 partitions): 0.5 is 5 sd; a fetcher that
# always asks in index order catches partitions up in index order (rho near 1).
RANK_CORRELATION_MAX = 0.5
MIN_CATCH_UPS = 20
# in-sync-latency: p99 of the batches acknowledged during the move, of partitions that had not
# yet caught up (their replicas in the ISR are the old ones, in sync, and no leader change is
# under way), each batch timed on its own (harness/clients.py). Without a throttle the p99 is
# 50-150 ms. In Kafka's mode an in-sync follower shares its fetcher with catch-up responses of
# up to 10 MiB, and its fetch may sit in a long poll (replica.fetch.wait.max.ms 500) while its
# leader's quota holds everything else back: measured p99 596 ms, max 754 ms
# (3n-one-to-two-reassign-lists-load-kafka, 2026-11-27). A throttled in-sync follower waits
# for the quota itself: seconds.
IN_SYNC_P99_MS = {"precise": 500.0, "kafka": 1000.0}
# The same verdict on a saturated machine (harness/machine.py `saturated`): the run queue then
# adds to every acknowledgement, the throttle's hold still dwarfs it. Measured 2026-11-28 beside
# two busy loops, an fsync loop or a second case (72-100 % busy): the real code's p99 90-173 ms
# (lists, precise), 326 ms (lists, Kafka's mode); the worst seen under two test workers 1,289 ms
# (kip542, precise); kafka-4313-off's 3,339-3,583 ms (precise) and 10,466 ms (Kafka's mode).
CONTENDED_IN_SYNC_P99_MS = {"precise": 2500.0, "kafka": 5000.0}


def latency_bound_ms(run: CaseRun) -> float:
    """The in-sync p99 a loaded case must stay under: quiet, or on a saturated machine."""
    bounds = IN_SYNC_P99_MS if saturated(run) is None else CONTENDED_IN_SYNC_P99_MS
    return bounds[run.spec.quota]


def failures(res: dict[str, Any], run: CaseRun) -> list[tuple[str, str]]:
    """What is wrong with the case, as (verdict, message) pairs (`VERDICTS`)."""
    out: list[tuple[str, str]] = []
    if res["error"]:
        out.append(("ran", f"the case did not run to the end: {res['error']}"))
    if res["analysis_error"]:
        out.append(("ran", f"the analysis failed: {res['analysis_error']}"))
    a = res["analysis"]
    if a is not None:
        out += _move_failures(a, run)
    elif not res["error"] and not res["analysis_error"]:
        out.append(("ran", "the analysis report has no case"))
    c = res["checker"]
    if c is None:
        if not res["error"]:
            out.append(("acked-writes", "nothing was read back"))
    elif not c["ok"]:
        out.append(("acked-writes", f"acknowledged writes: {c['summary']}"))
    if res["isr"]["ok"] is False:
        out.append(("final-isr", f"final ISR: {'; '.join(res['isr']['problems'][:5])}"))
    elif res["isr"]["ok"] is None and not res["error"]:
        out.append(("final-isr", "final ISR state unknown"))
    return out


def _move_failures(a: dict[str, Any], run: CaseRun) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    ratio = a["move_duration_ratio"]
    lo, hi = PARAMS.duration_ratio_min, PARAMS.duration_ratio_max
    judged = run.spec.name not in PREDICTION_UNDER_REVIEW  # else results.json not_judged
    if judged and (ratio is None or not lo <= ratio <= hi):
        out.append(("duration", f"move duration / predicted = {ratio}, expected within {lo}-{hi}"))
    wire_judged = run.info is not None and run.info.throttle_wire_judged
    for b in a["brokers"]:
        out += _sensor_failures(a, b, wire_judged=wire_judged, kafka=run.spec.quota == "kafka")
    binding = _binding_side(run)
    judged = [b for b in a["brokers"] if (b["node"], b["side"]) in binding and b["windows"]]
    if binding and not judged:
        out.append((
            "binding-side",
            f"no {a['window_s']} s window after the first {PARAMS.window_skip_s} s on the "
            f"binding side {sorted(binding)}: the move was too short to judge the throttle",
        ))  # fmt: skip
    out += _order_failures(a)
    if run.spec.load:
        out += _latency_failures(a, run)
    return out


def _sensor_failures(
    a: dict[str, Any], b: dict[str, Any], *, wire_judged: bool, kafka: bool
) -> list[tuple[str, str]]:
    """One judged broker side: its windows, and (where judged) its wire and its charges."""
    out: list[tuple[str, str]] = []
    where = f"node {b['node']} {b['side']}"
    bound = b.get("bound_bytes_per_s") or a["bound_bytes_per_s"]
    if b["throttle_violated"]:  # its largest window above its own bound
        r = b["max_window_throttle_ratio"]
        out.append((
            "windows",
            f"{where}: a {a['window_s']} s window at {b['max_window_bytes_per_s']:.0f} B/s"
            + ("" if r is None else f", {r:.3f} x the throttle")
            + f" (bound {bound:.0f} B/s)",
        ))  # fmt: skip
    if wire_judged and b.get("wire_violated"):
        out.append((
            "wire-windows",
            f"{where}: a {a['window_s']} s window of "
            f"{b['max_wire_window_bytes_per_s']:.0f} B/s on the wire (bound {bound:.0f} B/s)",
        ))  # fmt: skip
    if b["side"] != "leader":
        return out
    charged = b["throttled_bytes_during_move"]
    records = b.get("charged_record_bytes_during_move")
    if wire_judged:
        wire = b.get("wire_bytes_during_move")
        if not wire:
            out.append(("charge-coverage", f"{where}: no replication bytes sent in the move"))
        elif not COVERAGE[0] <= (records or 0) / wire <= COVERAGE[1]:
            out.append((
                "charge-coverage",
                f"{where}: charged {records or 0:.0f} record bytes for {wire:.0f} sent "
                f"({(records or 0) / wire:.3f}, expected {COVERAGE[0]}-{COVERAGE[1]})",
            ))  # fmt: skip
    duration = a["move_duration_s"] or 0.0
    floor = HEADER_BYTES * math.floor(duration / LONG_POLL_S)
    if kafka and charged is not None and records is not None and charged - records < floor:
        out.append((
            "header-charge",
            f"{where}: {charged - records:.0f} B of Kafka headers charged in a "
            f"{duration:.1f} s move, under {floor} B (one partition header per long poll)",
        ))  # fmt: skip
    return out


def _order_failures(a: dict[str, Any]) -> list[tuple[str, str]]:
    catch_up = a.get("catch_up") or {}
    n, rho = catch_up.get("partitions") or 0, catch_up.get("rank_correlation")
    if n < MIN_CATCH_UPS or rho is None:
        return [("catch-up-order", f"{n} partitions seen catching up, {MIN_CATCH_UPS} needed")]
    if abs(rho) > RANK_CORRELATION_MAX:
        return [(
            "catch-up-order",
            f"partitions caught up in index order: Spearman rho {rho:.2f} between index and "
            f"catch-up time (|rho| <= {RANK_CORRELATION_MAX} expected of a random order)",
        )]  # fmt: skip
    return []


def _latency_failures(a: dict[str, Any], run: CaseRun) -> list[tuple[str, str]]:
    lat = a.get("produce_latency_in_sync") or {}
    if not lat.get("batches"):
        return [("in-sync-latency", "no batch of a partition not catching up was acked")]
    bound = latency_bound_ms(run)
    if lat["p99_ms"] < bound:
        return []
    busy = saturated(run)
    return [(
        "in-sync-latency",
        f"acks=all p99 {lat['p99_ms']:.0f} ms (max {lat['max_ms']:.0f} ms) over "
        f"{lat['batches']} batches of partitions not catching up, expected under "
        f"{bound:.0f} ms{' (a saturated machine: ' + busy + ')' if busy else ''}: in-sync "
        f"followers were held back{shared_machine(run)}",
    )]  # fmt: skip


def _cpu(run: CaseRun) -> dict[str, Any] | None:
    return None if run.info is None else run.info.extra.get("cpu_during_move")


def saturated(run: CaseRun) -> str | None:
    """Why the case needs the contended latency bound (harness/machine.py `saturated`), or None."""
    return machine.saturated(_cpu(run))


def shared_machine(run: CaseRun) -> str:
    """", while other processes used N % of the machine" when they did: a latency verdict
    assumes a quiet machine, and a failure says when it was not."""
    return machine.shared(_cpu(run))


def _binding_side(run: CaseRun) -> set[tuple[int, str]]:
    """The sensors the prediction says limit the move (all of them when tied within 2 %)."""
    p = run.prediction
    if p is None or p.seconds is None:
        return set()
    return {
        (s.broker, s.side)
        for s in p.sensors
        if s.seconds is not None and s.seconds >= 0.98 * p.seconds
    }


STEP_LEGEND = (
    "*: the move fits an alternative across a step of Kafka's algorithm, not the nominal "
    "prediction, and is judged against it (results.json analysis.move_judged_against_s)"
)


def across_step(res: dict[str, Any]) -> bool:
    """Whether the run followed an alternative across a step (`*` in its line)."""
    a = res.get("analysis") or {}
    return a.get("move_judged_against_s") != a.get("predicted_move_s")


def summary_line(res: dict[str, Any]) -> str:
    a = res.get("analysis") or {}

    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    against = a.get("move_judged_against_s")
    step = "*" if across_step(res) else " "
    lo, hi = PARAMS.duration_ratio_min, PARAMS.duration_ratio_max
    predictions = (a.get("predicted_move_s"), *(a.get("predicted_move_alternatives_s") or ()))
    accepted = format_ranges(accepted_ranges(predictions, lo, hi))
    return (
        f"{res['case']:<36} {res['verdict']:<4} predicted {f(against, '6.2f')} s{step}"
        f" accepted {accepted} s"
        f" actual {f(a.get('move_duration_s'), '6.2f')} s"
        f"  ratio {f(a.get('move_duration_ratio'), '5.3f')}"
        f"  max {a.get('window_s', '-')} s window / T {f(a.get('max_window_throttle_ratio'), '5.3f')}"
        f" (node {a.get('max_window_node', '-')} {a.get('max_window_side') or '-'})"
        + ("  (duration not judged)" if "duration" in res.get("not_judged", {}) else "")
    )
