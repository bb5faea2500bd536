"""The DataFrame transformations of the analysis (spark_job reads the logs and runs them).

Each function takes and returns DataFrames keyed by `run_key` (the run folder); none of them
collects. The rules:

- **Per broker and second.** Counters (`*_throttled_bytes`, `*_exempt_bytes`,
  `replication_bytes_in/out`, `bytes_in/out`) are made monotonic (a restart's drop to 0 counts
  from 0), interpolated linearly onto whole wall-clock seconds between consecutive metrics lines,
  and differenced: `bytes(k) = C(k+1) - C(k)` is the traffic of second `[k, k+1)`, so lines a
  little more or less than a second apart neither double a second nor leave one empty, and a
  node's seconds are dense from its first line to its last (a gap in its lines, a pause or a
  restart, is spread evenly over the gap). The configured throttle of second k is the
  `throttle_configs` of the last line at or before k.
- **Throttled class.** `throttle_mode` "lists" reads the replication counters and rates
  (`leader.replication.throttled.rate`), "kip542" the reassignment ones; no mode, both summed.
- **Move interval.** The first `move_start` and last `move_end` of timeline.jsonl; a bound not
  there is inferred from the receiving brokers: the first and one past the last second with
  follower throttled bytes, or, where there are none, replication bytes in (exact to one
  metrics interval, since interpolation spreads an edge over the interval around it); a case
  judged over the whole "run" has no inferred move (summary.case_move).
- **Largest windowed rate** (the one definition the system tests and the experiments read; each
  case's `ThrottleCheck`, tools/analysis/runs.py, gives its span n, bound and interval). Per
  broker and side (follower on receiving brokers, leader on sending ones), the bytes of second k
  are the throttled class's, less its `*_exempt_bytes` and `*_overhead_bytes` (the headers
  Kafka's leader is charged) unless the case counts them. A window is
  the n whole seconds `[k, k+n)`, one starting on every whole second k (a 1 s slide), and it is
  judged when k is at least `window_skip_s` after the judged start (the move start; for "run"
  the timeline's first `throttle_set`, else the node's first second), every second of it inside
  the judged interval has a row, and it ends by `ceil(end)` of the move (for "run", by the
  node's last second). With `past_end` a window need only start before `ceil(end)`, the seconds
  from `ceil(end)` on counting zero bytes. Its rate is its bytes / n; the figures are the
  largest rate, where it starts, how many windows were judged and how many exceeded the bound:
  the side's own (case.json `throttle_bounds_bytes_per_s` "<node> <side>"), else the case's.
  A move of D s (start s) with skip 2 s thus gets `ceil(s + D) - ceil(s + 2) - n + 1` windows:
  2 or 3 of 5 s for the quick profile's ~8.2 s idle moves.
- **Wire and charged bytes.** Per judged side and second, the record bytes on the wire (leader
  side `replication_bytes_out`, follower side `replication_bytes_in`; in-sync replicas' share
  inside, which cannot be told apart there) and those the quota charged (the throttled class
  less its `*_overhead_bytes`), summed over the move's seconds `[floor(start), ceil(end))`; the
  wire bytes' largest window by the same windows and rules as the counted bytes'.
- **Catch-up order.** A partition catches up at the first `isr_expand` during the move (start
  <= ts, ts <= end if it ended) whose new ISR adds a receiving broker (`isr` less `old_isr`).
  Per case: how many did, the first and last after the move start, and Spearman's rho between
  partition index and catch-up time: Pearson's r of their ranks, ties sharing their mean rank
  (null for fewer than two). KIP-73's random partition order gives rho near 0 (sd about
  1/sqrt(n-1)); a fetcher asking in partition order, near +1.
- **Produce latency.** Exact percentiles (linear between closest ranks, numpy's default) of
  `latency_ms` per phase: before (ack < start), during (start <= ack <= end), after, and all;
  batches acknowledged before the timeline's `load_start`, when logged (a fill), are left out.
  `in_sync_during_move`: the batches during the move of partitions not caught up yet (ack
  before the catch-up, or none in the move), whose ISR is their old replicas, all in sync, with
  no leader change under way: acks=all waits for no throttled replica (KAFKA-4313).
- **ISR.** `isr_shrink`/`isr_expand` events per broker, in all and during the move; the last ISR
  logged per partition (become_leader, isr_shrink/expand, isr_updated_by_controller).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce

from minikafka.tools.analysis.environment import ANALYSIS_EXTRA_HINT, MissingAnalysisExtra

try:
    from pyspark.sql import Column, DataFrame, Window
    from pyspark.sql import functions as F
except ImportError as exc:  # DataFrame rules through and through: without pyspark, the pip line
    raise MissingAnalysisExtra(
        f"the analysis needs pyspark: {ANALYSIS_EXTRA_HINT}", name="pyspark"
    ) from exc

COUNTERS = (
    "bytes_in",
    "bytes_out",
    "replication_bytes_in",
    "replication_bytes_out",
    "leader_replication_throttled_bytes",
    "follower_replication_throttled_bytes",
    "leader_reassignment_throttled_bytes",
    "follower_reassignment_throttled_bytes",
    "leader_replication_exempt_bytes",
    "follower_replication_exempt_bytes",
    "leader_reassignment_exempt_bytes",
    "follower_reassignment_exempt_bytes",
    "leader_replication_overhead_bytes",
    "follower_replication_overhead_bytes",
    "leader_reassignment_overhead_bytes",
    "follower_reassignment_overhead_bytes",
)
RATES = ("leader_rate", "follower_rate", "leader_reassignment_rate", "follower_reassignment_rate")
IN_SYNC = "in_sync_during_move"  # the latency phase of partitions not caught up yet
ISR_STATE_EVENTS = ("become_leader", "isr_shrink", "isr_expand", "isr_updated_by_controller")


def per_second(metrics: DataFrame, cases: DataFrame) -> DataFrame:
    """One row per (run, node, whole second k): the bytes of second [k, k+1) per counter, the
    mode's throttled bytes per side, the configured throttle per side and SumReplicaLag."""
    w = Window.partitionBy("run_key", "node").orderBy("ts")
    steps = []
    for c in COUNTERS:
        raw = F.coalesce(F.col(c), F.lit(0))
        prev = F.lag(raw).over(w)
        step = F.when(prev.isNull(), 0).when(raw >= prev, raw - prev).otherwise(raw)
        steps.append(step.alias(f"_step_{c}"))
    # Two lines with one ts (never seen) would make a zero-length segment, dropped below.
    lines = metrics.where(F.col("node").isNotNull()).select("*", *steps)
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    lines = lines.select(
        "run_key",
        "node",
        "ts",
        F.col("SumReplicaLag").alias("lag"),
        *(F.col(f"throttle_configs.{r}").alias(f"cfg_{r}") for r in RATES),
        *(F.sum(f"_step_{c}").over(upto).alias(c) for c in COUNTERS),
    )
    kept = ["lag", *(f"cfg_{r}" for r in RATES)]
    segs = lines.select(
        "run_key",
        "node",
        "ts",
        F.lag("ts").over(w).alias("prev_ts"),
        *COUNTERS,
        *(F.lag(c).over(w).alias(f"prev_{c}") for c in COUNTERS),
        *(F.lag(k).over(w).alias(k) for k in kept),  # in force from the line at or before k
    ).where(F.col("prev_ts").isNotNull() & (F.col("ts") > F.col("prev_ts")))
    secs = segs.withColumn(
        "sec", F.explode(F.sequence(F.floor("prev_ts") + 1, F.floor("ts")))
    ).where((F.col("sec") > F.col("prev_ts")) & (F.col("sec") <= F.col("ts")))
    frac = (F.col("sec") - F.col("prev_ts")) / (F.col("ts") - F.col("prev_ts"))
    at = secs.select(
        "run_key",
        "node",
        "sec",
        *kept,
        *((F.col(f"prev_{c}") + (F.col(c) - F.col(f"prev_{c}")) * frac).alias(c) for c in COUNTERS),
    )
    w2 = Window.partitionBy("run_key", "node").orderBy("sec")
    diffs = at.select(
        "run_key",
        "node",
        "sec",
        *kept,
        F.lead("sec").over(w2).alias("next_sec"),
        *((F.lead(c).over(w2) - F.col(c)).alias(c) for c in COUNTERS),
    ).where(F.col("next_sec") == F.col("sec") + 1)
    # left: lines of a folder spelled unlike any RunCase.key surface (and are refused) in collect
    return _by_mode(diffs.join(F.broadcast(cases), "run_key", "left")).drop("next_sec")


def _by_mode(df: DataFrame) -> DataFrame:
    mode = F.col("mode")
    out = df
    for side in ("leader", "follower"):
        for kind in ("throttled", "exempt", "overhead"):
            repl = F.col(f"{side}_replication_{kind}_bytes")
            reas = F.col(f"{side}_reassignment_{kind}_bytes")
            out = out.withColumn(
                f"{side}_{kind}_bytes",
                F.when(mode == "kip542", reas).when(mode == "lists", repl).otherwise(repl + reas),
            )
        crepl, creas = F.col(f"cfg_{side}_rate"), F.col(f"cfg_{side}_reassignment_rate")
        out = out.withColumn(
            f"{side}_throttle",
            F.when(mode == "kip542", creas)
            .when(mode == "lists", crepl)
            .otherwise(F.coalesce(crepl, creas)),
        )
    return out


# -------------------------------------------------------------------------------- per case


def moves(timeline: DataFrame, secs: DataFrame, roles: DataFrame, keys: DataFrame) -> DataFrame:
    """(run_key, tl_start, tl_end, inf_start, inf_end, load_start, throttle_set): the move's
    bounds from the timeline and as inferred from the receiving brokers' bytes; when the produce
    load started and the throttle was first set (timeline)."""
    tl = timeline.groupBy("run_key").agg(
        F.min(F.when(F.col("event") == "throttle_set", F.col("ts"))).alias("throttle_set"),
        F.min(F.when(F.col("event") == "move_start", F.col("ts"))).alias("tl_start"),
        F.max(F.when(F.col("event") == "move_end", F.col("ts"))).alias("tl_end"),
        F.min(F.when(F.col("event") == "load_start", F.col("ts"))).alias("load_start"),
    )
    recv = secs.join(F.broadcast(roles.where(F.col("side") == "follower")), ["run_key", "node"])

    def first_last(col: str) -> list[Column]:
        moving = F.when(F.col(col) > 0.5, F.col("sec"))
        return [F.min(moving).alias(f"{col}_first"), (F.max(moving) + 1).alias(f"{col}_last")]

    inf = recv.groupBy("run_key").agg(
        *first_last("follower_throttled_bytes"), *first_last("replication_bytes_in")
    )
    inf = inf.select(
        "run_key",
        F.coalesce("follower_throttled_bytes_first", "replication_bytes_in_first")
        .cast("double")
        .alias("inf_start"),
        F.coalesce("follower_throttled_bytes_last", "replication_bytes_in_last")
        .cast("double")
        .alias("inf_end"),
    )
    return keys.select("run_key").join(tl, "run_key", "left").join(inf, "run_key", "left")


def judged_windows(
    secs: DataFrame, roles: DataFrame, checks: DataFrame, spans: Iterable[int], skip_s: int
) -> DataFrame:
    """One row per (run, node, side, second k) of the judged brokers: the window `[k, k+n)`'s
    mean rate `win_rate` and wire rate `wire_rate`, whether it is judged (`ok`) and above the
    side's bound (`over`), and the second's own throttled, charged and wire bytes and throttle
    (module docstring). `roles`: (run, node, side, role, sensor_bound), the sensor's own bound
    or null; `checks`: one row per case with `start` and `end` of the move, `jstart` and `jend`
    of the judged interval (jend null for "run"), `window_s`, `bound`, `past_end`, `judged`,
    `exempt_counted`; `spans`: its distinct window_s (a window frame's size is a constant, so
    each span gets its own)."""
    df = secs.join(F.broadcast(roles), ["run_key", "node"]).join(F.broadcast(checks), "run_key")
    leader = F.col("side") == "leader"

    def side(what: str) -> Column:
        return F.when(leader, F.col(f"leader_{what}")).otherwise(F.col(f"follower_{what}"))

    # The record bytes that crossed the wire (fetch_serve/fetcher count them): in-sync
    # replicas' share included, it cannot be told apart there.
    wire = F.when(leader, F.col("replication_bytes_out")).otherwise(F.col("replication_bytes_in"))

    sec, n = F.col("sec"), F.col("window_s")
    open_end = F.col("judged") == "run"  # to the end of the node's logs
    end = F.ceil("jend")
    inside = open_end | (sec < end)  # null (never judged) for a move without an end
    # Neither in-sync replicas' records nor the Kafka headers a leader is charged for every
    # response (core/quota/charge.py) can be held back by the throttle.
    held = side("throttled_bytes") - side("exempt_bytes") - side("overhead_bytes")
    node = Window.partitionBy("run_key", "node", "side")
    first = F.when(open_end, F.coalesce("jstart", F.min("sec").over(node))).otherwise(
        F.col("jstart")
    )
    df = df.select(
        "run_key", "node", "side", "role", "sec", "start", "end", "window_s",
        F.coalesce("sensor_bound", "bound").alias("bound"),
        "past_end", open_end.alias("open_end"), end.alias("jend_sec"), first.alias("first"),
        side("throttled_bytes").alias("bytes"), side("throttle").alias("cfg"),
        (side("throttled_bytes") - side("overhead_bytes")).alias("charged"), wire.alias("wire"),
        F.when(inside, F.when(F.col("exempt_counted"), side("throttled_bytes")).otherwise(held))
        .otherwise(0).alias("counted"),
        F.when(inside, wire).otherwise(0).alias("wire_counted"),
        F.when(inside, 1).alias("inside"),
    )  # fmt: skip
    parts = []
    for span in sorted(set(spans)):
        w = node.orderBy("sec").rangeBetween(0, span - 1)
        parts.append(
            df.where(n == span).select(
                "*",
                F.sum("counted").over(w).alias("win_sum"),
                F.sum("wire_counted").over(w).alias("win_wire_sum"),
                F.count("inside").over(w).alias("win_n"),
            )
        )
    df = reduce(DataFrame.unionByName, parts)
    end, open_end, past = F.col("jend_sec"), F.col("open_end"), F.col("past_end")
    need = F.when(open_end | ~past, n).otherwise(F.least(n, end - sec))
    fits = open_end | F.when(past, sec < end).otherwise(sec + n <= end)
    ok = (F.col("win_n") == need) & fits & (sec >= F.col("first") + skip_s)
    rate = F.col("win_sum") / n
    return df.select(
        "run_key", "node", "side", "role", "sec", "start", "end", "first", "bytes", "cfg",
        "bound", "charged", "wire",
        ((sec >= F.floor("first")) & (open_end | (sec < end))).alias("judged_sec"),
        F.coalesce(ok, F.lit(False)).alias("ok"),
        rate.alias("win_rate"),
        (F.col("win_wire_sum") / n).alias("wire_rate"),
        F.coalesce(ok & (rate > F.col("bound")), F.lit(False)).alias("over"),
    )  # fmt: skip


def broker_windows(windows: DataFrame) -> DataFrame:
    """Per (run, node, side) of `judged_windows`: throttled, charged and wire bytes during the
    move, the largest judged window's rate and start (of the counted bytes and of the wire
    bytes), how many windows were judged and how many exceeded the side's bound (which is
    given), where the judged interval starts, and the configured throttle while judged."""
    ok, in_move = F.col("ok"), (F.col("sec") >= F.floor("start")) & (F.col("sec") < F.ceil("end"))
    wire_rate = F.when(ok, F.col("wire_rate"))
    return windows.groupBy("run_key", "node", "side", "role").agg(
        F.sum(F.when(in_move, F.col("bytes"))).alias("bytes_during_move"),
        F.sum(F.when(in_move, F.col("charged"))).alias("charged_during_move"),
        F.sum(F.when(in_move, F.col("wire"))).alias("wire_during_move"),
        F.max(wire_rate).alias("max_wire_window"),
        F.max_by(F.when(ok, F.col("sec")), wire_rate).alias("max_wire_window_sec"),
        F.count(F.when(wire_rate > F.col("bound"), 1)).alias("wire_windows_over"),
        F.max("bound").alias("bound"),
        F.count(F.when(in_move, 1)).alias("seconds_during_move"),
        F.max(F.when(ok, F.col("win_rate"))).alias("max_window"),
        F.max_by(F.when(ok, F.col("sec")), F.when(ok, F.col("win_rate"))).alias("max_window_sec"),
        F.count(F.when(ok, 1)).alias("windows"),
        F.count(F.when(F.col("over"), 1)).alias("windows_over"),
        F.min("first").alias("judged_from"),
        F.max(F.when(F.col("judged_sec"), F.col("cfg"))).alias("cfg"),
    )


def window_series(windows: DataFrame) -> DataFrame:
    """(run, node, side, sec, rate): every judged window, keyed by its first second."""
    return windows.where("ok").select(
        "run_key", "node", "side", "sec", F.col("win_rate").alias("rate")
    )


def with_phase(produced: DataFrame, moves_df: DataFrame) -> DataFrame:
    start, end, ts = F.col("start"), F.col("end"), F.col("ts")
    phase = (
        F.when(start.isNull(), F.lit(None))
        .when(ts < start, "before")
        .when(end.isNull() | (ts <= end), "during")
        .otherwise("after")
    )
    df = produced.where(F.col("latency_ms").isNotNull()).join(
        F.broadcast(moves_df), "run_key", "left"
    )
    loading = F.col("load_start").isNull() | (ts >= F.col("load_start"))
    return df.where(loading).withColumn("phase", phase)


def _latency_aggs() -> list[Column]:
    pct = F.percentile(F.col("latency_ms"), F.array(F.lit(0.5), F.lit(0.99)))
    return [
        F.count(F.lit(1)).alias("batches"),
        F.sum(F.coalesce(F.col("count"), F.lit(1))).alias("records"),
        pct.alias("pct"),
        F.max("latency_ms").alias("max"),
    ]


def latency_phases(phased: DataFrame, caught: DataFrame) -> DataFrame:
    """Per run and phase (all, before, during, after, in_sync_during_move): batches, records,
    p50 and p99 and the largest latency. `caught`: `catch_ups`' rows; a batch acknowledged
    during the move is in sync when its partition had not caught up yet (ack before its catch-up,
    or none in the move): its ISR then is its old replicas, all in sync, and no leader changes,
    so acks=all waits for no moving replica (KAFKA-4313: in-sync replicas are never throttled)."""
    keys = ["run_key", "topic", "partition"]
    df = phased.join(F.broadcast(caught.select(*keys, "caught")), keys, "left")
    in_sync = (
        (F.col("phase") == "during")
        & F.col("topic").isNotNull()
        & F.col("partition").isNotNull()
        & (F.col("caught").isNull() | (F.col("ts") < F.col("caught")))
    )
    # Each batch counts in "all", its phase and maybe in_sync_during_move: one pass over the
    # acknowledged batches for every phase (a union of one aggregate per phase reads them each).
    each = F.explode(F.array(F.lit("all"), F.col("phase"), F.when(in_sync, F.lit(IN_SYNC))))
    rows = df.select("run_key", "count", "latency_ms", each.alias("phase"))
    return rows.where(F.col("phase").isNotNull()).groupBy("run_key", "phase").agg(*_latency_aggs())


def latency_per_second(phased: DataFrame) -> DataFrame:
    return phased.groupBy("run_key", F.floor("ts").alias("sec")).agg(*_latency_aggs())


def catch_ups(events: DataFrame, moves_df: DataFrame, roles: DataFrame) -> DataFrame:
    """(run, topic, partition, caught): the first time, during the move (start <= ts, and ts <=
    end when it ended: `with_phase`'s "during"), that an `isr_expand` added one of the run's
    receiving brokers to the partition's ISR: its new replica caught up (Kafka's
    Partition.maybeExpandIsr)."""
    receiving = (
        roles.where(F.col("side") == "follower")
        .groupBy("run_key")
        .agg(F.collect_set("node").alias("receiving"))
    )
    df = (
        events.where((F.col("event") == "isr_expand") & F.col("partition").isNotNull())
        .join(F.broadcast(moves_df), "run_key")
        .join(F.broadcast(receiving), "run_key")
    )
    ts, end = F.col("ts"), F.col("end")
    during = (ts >= F.col("start")) & (end.isNull() | (ts <= end))
    added = F.arrays_overlap(F.array_except("isr", "old_isr"), F.col("receiving"))
    return (
        df.where(during & added)
        .groupBy("run_key", "topic", "partition")
        .agg(F.min("ts").alias("caught"))
    )


def catch_up_order(caught: DataFrame, moves_df: DataFrame) -> DataFrame:
    """Per run: how many partitions caught up in the move (`catch_ups`), Spearman's rho between
    partition index and catch-up time (Pearson's r of their ranks, tied values sharing their mean
    rank), and the first and last catch-up in seconds after the move start."""
    run = Window.partitionBy("run_key")

    def mean_rank(col: str) -> Column:
        ties = Window.partitionBy("run_key", col)
        return F.rank().over(run.orderBy(col)) + (F.count(F.lit(1)).over(ties) - 1) / 2

    ranked = caught.select(
        "run_key", "caught", mean_rank("partition").alias("p"), mean_rank("caught").alias("t")
    )
    start = F.col("start")
    return (
        ranked.groupBy("run_key")
        .agg(
            F.count(F.lit(1)).alias("partitions"),
            F.corr("p", "t").alias("rho"),
            F.min("caught").alias("first"),
            F.max("caught").alias("last"),
        )
        .join(F.broadcast(moves_df.select("run_key", "start")), "run_key", "left")
        .select(
            "run_key", "partitions", "rho",
            (F.col("first") - start).alias("first_s"), (F.col("last") - start).alias("last_s"),
        )  # fmt: skip
    )


def isr_counts(events: DataFrame, moves_df: DataFrame) -> DataFrame:
    df = events.where(F.col("event").isin("isr_shrink", "isr_expand")).join(
        F.broadcast(moves_df), "run_key", "left"
    )
    during = (F.col("ts") >= F.col("start")) & (F.col("ts") <= F.col("end"))
    shrink, expand = F.col("event") == "isr_shrink", F.col("event") == "isr_expand"
    return df.groupBy("run_key", "node").agg(
        F.count(F.when(shrink, 1)).alias("shrinks"),
        F.count(F.when(expand, 1)).alias("expands"),
        F.count(F.when(shrink & during, 1)).alias("shrinks_during_move"),
        F.count(F.when(expand & during, 1)).alias("expands_during_move"),
    )


def last_isr(events: DataFrame) -> DataFrame:
    df = events.where(
        F.col("event").isin(*ISR_STATE_EVENTS)
        & F.col("isr").isNotNull()
        & F.col("topic").isNotNull()
        & F.col("partition").isNotNull()
    )
    return df.groupBy("run_key", "topic", "partition").agg(F.max_by("isr", "ts").alias("isr"))
