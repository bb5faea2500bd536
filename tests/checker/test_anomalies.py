"""The experiment checker (minikafka/checker/anomalies.py).

One clean run must pass; each test then changes it so that it holds exactly one anomaly, which
must be flagged (and nothing else flagged as invalid). The clean run, partitions t/0 and t/1:

  p0  send [1, 2] -> ok 0;  send [3] -> ok 2          p1  send [10, 11] to t/1 -> ok 0
  p2  send [4] -> fail (not written)                  p3  send [5] -> info, landed at t/0 3
  p4  send [6] -> never completes, not written
  c0  poll t/0 @0 -> (0,1) (1,2);  poll t/0 @2 -> (2,3) (3,5);  poll t/1 @0 -> (0,10) (1,11)
  final reads  t/0: (0,1) (1,2) (2,3) (3,5), end 4    t/1: (0,10) (1,11), end 2
  dumps  t/0: nodes 1, 2 in sync (hw 4); node 3 hw 3 with an uncommitted tail (4, 99) -- legal
         t/1: node 1 (hw 2)
"""

from __future__ import annotations

import json

import pytest

from minikafka.checker.anomalies import ANOMALIES, check
from minikafka.checker.history import parse_dumps, parse_history
from minikafka.checker.invariants import parse_claims, parse_samples

T0, T1 = ("t", 0), ("t", 1)
F0 = [[0, 1], [1, 2], [2, 3], [3, 5]]
F1 = [[0, 10], [1, 11]]


class Run:
    """Builds a history: each op gets the next index, and time = index / 10."""

    def __init__(self) -> None:
        self.docs: list[dict] = []

    def op(self, process, type_, f, tp=None, **kw):
        if tp is not None:
            kw.update(topic=tp[0], partition=tp[1])
        doc = {"index": len(self.docs), "time": len(self.docs) / 10, "process": process,
               "type": type_, "f": f, **kw}  # fmt: skip
        self.docs.append(doc)

    def send(self, process, values, offset=None, *, tp=T0, result="ok", error="timed out"):
        self.op(process, "invoke", "send", tp, values=list(values))
        if result == "ok":
            self.op(process, "ok", "send", tp, offset=offset)
        elif result is not None:  # None: never completes
            self.op(process, result, "send", tp, error=error)

    def poll(self, asked, records, *, tp=T0, process="c0"):
        self.op(process, "invoke", "poll", tp, offset=asked)
        self.op(process, "ok", "poll", tp, records=records)

    def seek(self, offset, *, tp=T0, process="c0"):
        self.op(process, "info", "seek", tp, offset=offset)

    def final(self, records, *, tp=T0, end=None, result="ok", start=None):
        process = f"final-{tp[1]}"
        self.op(process, "invoke", "final-read", tp)
        if result == "ok":
            end = records[-1][0] + 1 if end is None and records else (end or 0)
            more = {} if start is None else {"log_start_offset": start}
            self.op(process, "ok", "final-read", tp, records=records, log_end_offset=end, **more)
        else:
            self.op(process, result, "final-read", tp, error="leader not available")


def workload(run: Run | None = None) -> Run:
    run = run or Run()
    run.send("p0", [1, 2], 0)
    run.send("p1", [10, 11], 0, tp=T1)
    run.send("p2", [4], result="fail", error="NOT_ENOUGH_REPLICAS")
    run.poll(0, [[0, 1], [1, 2]])
    run.send("p0", [3], 2)
    run.send("p3", [5], result="info")
    run.send("p4", [6], result=None)
    run.poll(2, [[2, 3], [3, 5]])
    run.poll(0, [[0, 10], [1, 11]], tp=T1)
    return run


def finals(run: Run, f0=F0, f1=F1, **kw) -> Run:
    run.final(f0, tp=T0, **kw.get("t0", {}))
    run.final(f1, tp=T1)
    return run


def dump(node, records, hw, end=None, tp=T0):
    return {"node": node, "topic": tp[0], "partition": tp[1], "high_watermark": hw,
            "log_end_offset": end if end is not None else len(records), "records": records}  # fmt: skip


DUMPS = [dump(1, F0, 4), dump(2, F0, 4), dump(3, [*F0, [4, 99]], 3), dump(1, F1, 2, tp=T1)]
CLAIMS = [
    {"node": 1, "time": 0.0, "topic": "t", "partition": 0, "leader_epoch": 1},
    {"node": 2, "time": 1.0, "topic": "t", "partition": 0, "leader_epoch": 2},
    {"node": 1, "time": 0.0, "topic": "t", "partition": 1, "leader_epoch": 1},
]


def sample(node, epoch, time, leo, hw=0, isr=None):
    return {"node": node, "time": time, "topic": "t", "partition": 0, "leader_epoch": epoch,
            "is_leader": isr is not None, "log_end_offset": leo, "high_watermark": hw, "isr": isr}  # fmt: skip


SAMPLES = [sample(1, 1, 1.0, 4, 3, [1, 2]), sample(2, 1, 1.5, 4), sample(2, 2, 2.0, 3)]


def verdict(run: Run, *, dumps=DUMPS, claims=CLAIMS, samples=SAMPLES):
    return check(
        parse_history(run.docs),
        dumps=parse_dumps(dumps) if dumps is not None else None,
        claims=parse_claims(claims) if claims is not None else None,
        samples=parse_samples(samples) if samples is not None else None,
    )


def has(example: dict, **fields) -> bool:
    return all(example.get(k) == v for k, v in fields.items())


def flagged(v) -> set[str]:
    return {name for name, a in v.anomalies.items() if a.invalid and a.count}


def only(v, name: str):
    assert v.valid is False and v.exit_code == 1
    assert flagged(v) == {name}, v.summary()
    return v.anomalies[name]


# ---------------------------------------------------------------------------------- clean run


def test_a_clean_run_is_valid():
    v = verdict(finals(workload()))
    assert v.valid is True and v.exit_code == 0, v.summary()
    assert set(v.anomalies) == set(ANOMALIES) and v.not_checked == ()
    assert all(a.count == 0 for a in v.anomalies.values())
    c = v.counts
    assert (c["sends_ok"], c["sends_fail"], c["sends_info"], c["sends_unfinished"]) == (3, 1, 2, 1)
    assert (c["values_acknowledged"], c["values_failed"], c["values_indeterminate"]) == (5, 1, 2)
    # value 5 (info) landed, value 6 (never completed) did not
    assert (c["indeterminate_present"], c["indeterminate_absent"], c["indeterminate_unknown"]) == (
        1,
        1,
        0,
    )
    assert (c["polls_ok"], c["poll_records"], c["final_reads_ok"], c["final_records"]) == (
        3,
        6,
        2,
        6,
    )
    assert "VALID" in v.summary().splitlines()[0]


def test_the_verdict_is_json():
    v = verdict(finals(workload()))
    doc = json.loads(v.to_json())
    assert doc["valid"] is True and doc["exit_code"] == 0 and doc["counts"]["sends_ok"] == 3
    assert doc["anomalies"]["lost"] == {"count": 0, "invalid": True, "examples": []}


def test_inputs_not_given_are_named_not_checked():
    v = verdict(finals(workload()), dumps=None, claims=None, samples=None)
    assert v.valid is True
    assert set(v.not_checked) == {"missing_replica_data", "multiple_leaders_per_epoch",
                                  "hw_past_isr_leo"}  # fmt: skip
    assert not set(v.not_checked) & set(v.anomalies)
    assert "not checked" in v.summary()


# ------------------------------------------------------------------------ each anomaly, alone


def test_an_acknowledged_value_missing_from_the_final_read_is_lost():
    run = workload()
    run.send("p0", [7], 4)  # acknowledged at t/0 offset 4; the final read ends at 4
    invoked = run.docs[-2]["index"]
    a = only(verdict(finals(run)), "lost")
    assert a.count == 1
    ex = a.examples[0]
    assert (ex["topic"], ex["partition"], ex["offset"], ex["value"], ex["process"]) == (
        "t",
        0,
        4,
        7,
        "p0",
    )
    assert ex["index"] == invoked


def test_a_polled_value_missing_from_the_final_read_is_lost_too():
    # a consumer read value 5 at offset 3: it was committed (consumers read below the HW)
    run = finals(workload(), f0=F0[:3], t0={"end": 3})
    a = only(verdict(run, dumps=None), "lost")
    assert a.count == 1 and a.examples[0]["value"] == 5 and a.examples[0]["source"] == "poll"


def test_values_below_the_final_reads_log_start_are_deleted_not_lost():
    """Retention (or DeleteRecords) moved t/0's log start to 2 before the final read: the
    values acknowledged and polled at offsets 0 and 1 cannot be checked, and are not lost; a
    value missing at or above the log start still is."""
    run = finals(workload(), f0=F0[2:], t0={"start": 2})
    v = verdict(run, dumps=None)
    assert v.valid is True, v.summary()
    deleted = v.anomalies["deleted"]
    assert not deleted.invalid and deleted.count == 2
    assert [(e["offset"], e["value"], e["log_start_offset"]) for e in deleted.examples] == [
        (0, 1, 2),
        (1, 2, 2),
    ]
    run = finals(workload(), f0=F0[2:3], t0={"start": 2, "end": 3})  # polled 5 at 3 is gone
    a = only(verdict(run, dumps=None), "lost")
    assert [e["value"] for e in a.examples] == [5]


def test_a_value_written_twice_in_the_final_read_is_duplicated():
    a = only(verdict(finals(workload(), f0=[*F0, [4, 1]])), "duplicated")
    ex = a.examples[0]
    assert a.count == 1 and has(ex, topic="t", partition=0, value=1, source="final-read")
    assert sorted(ex["offsets"]) == [0, 4]


def test_a_value_at_two_offsets_across_sources_is_duplicated():
    run = workload()
    run.poll(4, [[4, 1]])  # a poll reads value 1 again at offset 4, past the final read's end
    a = only(verdict(finals(run)), "duplicated")
    assert (
        a.count == 1 and a.examples[0]["value"] == 1 and sorted(a.examples[0]["offsets"]) == [0, 4]
    )


def test_an_ack_at_another_offset_than_the_final_read_is_inconsistent():
    run = Run()
    run.send("p0", [1, 2], 0)
    run.send("p1", [10, 11], 0, tp=T1)
    run.send("p0", [3], 4)  # the ack says offset 4; the final read has value 3 at 2
    run.send("p0", [5], 3)
    a = only(verdict(finals(run), samples=None), "inconsistent_offsets")
    assert a.count == 1
    assert has(a.examples[0], offset=4, value=3, final_offset=2)


def test_a_committed_dump_disagreeing_with_the_final_read_is_inconsistent():
    dumps = [*DUMPS[:1], dump(2, [*F0[:3], [3, 6]], 4), *DUMPS[2:]]
    a = only(verdict(finals(workload()), dumps=dumps), "inconsistent_offsets")
    assert a.count == 1
    ex = a.examples[0]
    assert (ex["offset"], sorted(ex["values"])) == (3, [5, 6])
    assert {"source": "dump", "node": 2} in ex["sources"]


def test_a_poll_disagreeing_with_the_final_read_is_inconsistent():
    run = workload()
    run.seek(3)
    run.poll(3, [[3, 6]])  # value 6 (never completed, not in the log) read at offset 3
    v = verdict(finals(run))
    # 6 was polled, so it was committed, and the final read lost it: also `lost`
    assert flagged(v) == {"inconsistent_offsets", "lost"}
    assert v.anomalies["inconsistent_offsets"].examples[0]["offset"] == 3


def test_an_uncommitted_divergent_tail_in_a_dump_is_legal():
    # node 3's (4, 99) of the clean run is above every HW: nothing checks it
    assert verdict(finals(workload())).valid is True
    dumps = [*DUMPS[:2], dump(3, [*F0, [4, 99]], 3, end=5), DUMPS[3]]
    assert verdict(finals(workload()), dumps=dumps).valid is True


def test_a_poll_going_back_is_a_nonmonotonic_read():
    run = workload()
    run.poll(2, [[2, 3]])  # already returned up to offset 3, no seek in between
    a = only(verdict(finals(run)), "nonmonotonic_reads")
    assert a.count == 1 and has(a.examples[0], process="c0", offset=2, previous=3)


def test_a_seek_restarts_the_order_checks():
    run = workload()
    run.seek(2)
    run.poll(2, [[2, 3]])
    assert verdict(finals(run)).valid is True


def test_records_going_back_inside_one_poll_are_nonmonotonic():
    run = workload()
    run.poll(4, [])
    run.seek(1)
    run.poll(1, [[1, 2], [2, 3], [1, 2]])
    a = only(verdict(finals(run)), "nonmonotonic_reads")
    assert a.count == 1


@pytest.mark.parametrize(
    ("polls", "kind"),
    [
        ([(0, [[0, 1]]), (2, [[2, 3], [3, 5]])], "gap"),  # offset 1 never returned
        ([(0, [[0, 1], [2, 3], [3, 5]])], "gap"),  # a hole inside one poll
        ([(0, [[0, 1]]), ("seek", 1), (1, [[2, 3], [3, 5]])], "start"),  # asked 1, got 2
    ],
)
def test_a_gap_in_a_consumers_reads_is_a_skipped_read(polls, kind):
    run = Run()
    run.send("p0", [1, 2], 0)
    run.send("p1", [10, 11], 0, tp=T1)
    run.send("p0", [3], 2)
    run.send("p3", [5], result="info")
    for asked, records in polls:
        if asked == "seek":
            run.seek(records)
        else:
            run.poll(asked, records)
    v = verdict(finals(run), samples=None)
    a = only(v, "skipped_reads")
    assert a.count == 1 and a.examples[0]["kind"] == kind
    # value 2 (offset 1) was never polled: reported as unseen, which does not invalidate
    assert v.anomalies["unseen"].count == 1 and not v.anomalies["unseen"].invalid


def test_a_final_read_short_of_its_end_offset_is_a_skipped_read():
    a = only(verdict(finals(workload(), t0={"end": 5})), "skipped_reads")
    assert a.examples[0]["kind"] == "final_read_short"


def test_a_hole_in_the_final_read_is_a_skipped_read():
    run = Run()
    run.send("p3", [5], result="info")
    run.send("p0", [1, 2], 0)
    run = finals(run, f0=[[0, 1], [1, 2], [3, 5]], f1=[])
    a = only(verdict(run, dumps=None, samples=None), "skipped_reads")
    assert a.examples[0]["kind"] == "final_read_gap"


def test_an_acknowledged_value_never_polled_is_unseen_but_valid():
    run = workload()
    run.send("p1", [12], 2, tp=T1)
    v = verdict(
        finals(run, f1=[*F1, [2, 12]]), dumps=[*DUMPS[:3], dump(1, [*F1, [2, 12]], 3, tp=T1)]
    )
    assert v.valid is True and v.anomalies["unseen"].count == 1
    assert v.anomalies["unseen"].examples[0]["value"] == 12


def test_a_failed_send_whose_value_is_in_the_log_is_flagged():
    a = only(verdict(finals(workload(), f0=[*F0, [4, 4]])), "failed_but_present")
    assert (
        a.count == 1
        and a.examples[0]["value"] == 4
        and a.examples[0]["error"] == "NOT_ENOUGH_REPLICAS"
    )


@pytest.mark.parametrize(("record", "sent_to"), [([2, 999], None), ([2, 6], ["t", 0])])
def test_a_value_nobody_sent_to_that_partition_is_unexpected(record, sent_to):
    a = only(verdict(finals(workload(), f1=[*F1, record])), "unexpected")
    assert (
        a.count == 1 and a.examples[0]["value"] == record[1] and a.examples[0]["sent_to"] == sent_to
    )


def test_a_replica_claiming_committed_offsets_it_lacks_is_missing_data():
    dumps = [DUMPS[0], dump(2, [F0[0], F0[2], F0[3]], 4, end=4), *DUMPS[2:]]
    a = only(verdict(finals(workload()), dumps=dumps), "missing_replica_data")
    assert a.count == 1 and has(a.examples[0], node=2, missing=1, first_missing=1)


def test_a_lagging_replica_may_lack_what_it_does_not_claim():
    dumps = [*DUMPS[:2], dump(3, F0[:2], 2, end=2), DUMPS[3]]
    assert verdict(finals(workload()), dumps=dumps).valid is True


def test_the_invariants_are_part_of_the_verdict():
    v = verdict(finals(workload()), claims=[*CLAIMS, {**CLAIMS[1], "node": 3}])
    only(v, "multiple_leaders_per_epoch")
    v = verdict(finals(workload()), samples=[*SAMPLES, sample(2, 1, 1.8, 2)])
    only(v, "hw_past_isr_leo")


# ------------------------------------------------------------------------------------- unknown


def test_a_failed_final_read_makes_its_values_unknown_not_lost():
    run = workload()
    run.send("p0", [7], 4)  # would be lost, but nobody could read t/0 at the end
    run.final([], tp=T0, result="info")
    run.final(F1, tp=T1)
    v = verdict(run, dumps=None)
    assert v.valid == "unknown" and v.exit_code == 2, v.summary()
    assert v.anomalies["lost"].count == 0 and v.anomalies["unknown"].count == 4
    assert v.counts["final_reads_failed"] == 1 and v.counts["indeterminate_unknown"] == 2
    assert any("final read" in r for r in v.unknown_reasons)


def test_a_partition_never_read_at_the_end_is_unknown():
    run = workload()
    run.final(F1, tp=T1)
    v = verdict(run, dumps=None)
    assert v.valid == "unknown" and v.anomalies["unknown"].count == 3


def test_a_retried_final_read_that_succeeds_counts():
    run = workload()
    run.final([], tp=T0, result="fail")
    v = verdict(finals(run))
    assert v.valid is True and v.counts["final_reads_failed"] == 1


def test_a_history_with_no_acknowledged_sends_is_unknown():
    run = Run()
    run.send("p0", [1], result="fail", error="NOT_ENOUGH_REPLICAS")
    run.final([], tp=T0)
    v = verdict(run, dumps=None, claims=None, samples=None)
    assert v.valid == "unknown" and v.exit_code == 2
    assert v.unknown_reasons == ("no acknowledged sends",)


def test_invalid_wins_over_unknown():
    run = workload()
    run.send("p1", [12], 2, tp=T1)  # lost in t/1
    run.final([], tp=T0, result="info")
    run.final(F1, tp=T1)
    v = verdict(run, dumps=None)
    assert v.valid is False and v.exit_code == 1 and v.anomalies["lost"].count == 1


# --------------------------------------------------------------------------------- the report


def test_examples_are_capped_but_counts_are_not():
    run = workload()
    for k in range(30):
        run.send("p0", [100 + k], 4 + k)
    v = verdict(finals(run))
    assert v.anomalies["lost"].count == 30 and len(v.anomalies["lost"].examples) == 20
    lines = v.summary().splitlines()
    assert lines[0].startswith("INVALID") and any("lost: 30" in line for line in lines)
    assert len(lines) < 15
