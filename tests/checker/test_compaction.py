"""The checker of a compacted topic (minikafka/checker/compaction.py, hooked into anomalies.py).

One clean run of a compacted partition t/0 with K = 3 keys (key of value v: v % 3) must pass;
each test then plants one bug of a log cleaner and checks that it is caught. The clean run:

  p0  send [0, 1, 2] -> ok 0;  send [3, 4, 5] -> ok 3          keys 0 1 2 at 0-2, again at 3-5
  c0  poll t/0 @0 -> 0..5 (nothing cleaned yet)
      node 1 (the leader, epoch 0) cleans up to 6 at time 0.6: below 6, only 3, 4, 5 remain
  p0  send [6, 7] -> ok 6;  send [9, 10] -> ok 8                 keys 0 1 at 6-7, 0 1 at 8-9
  c0  poll t/0 @0 -> (3,3) (4,4) (5,5) (6,6) (7,7)               starts past 0: cleaned away
  final read t/0: (3,3) (4,4) (5,5) (6,6) (7,7) (8,9) (9,10), end 10; its clean point: 6
  dumps (after the stop) node 1 cleaned to 8 since: (5,5) (6,6) (7,7) (8,9) (9,10)
                         node 2 cleaned to 6:       as the final read

Values 0, 1 and 2 were removed by the cleaner: `compacted`, not `lost`. Values 6 and 7 are
superseded too but above the clean point: they may stay.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from minikafka.checker.anomalies import ANOMALIES, check
from minikafka.checker.compaction import Compaction, parse_cleanings
from minikafka.checker.history import HistoryError, parse_dumps, parse_history
from minikafka.checker.invariants import parse_claims
from tests.checker.test_anomalies import Run, dump, has

T0 = ("t", 0)
K = 3
FINAL = [[3, 3], [4, 4], [5, 5], [6, 6], [7, 7], [8, 9], [9, 10]]
NODE1 = [[5, 5], [6, 6], [7, 7], [8, 9], [9, 10]]
CLAIMS = [{"node": 1, "time": 0.0, "topic": "t", "partition": 0, "leader_epoch": 0}]


def cleaned(node: int, time: float, first_dirty: int) -> dict:
    return {"node": node, "time": time, "topic": "t", "partition": 0,
            "first_dirty_offset": first_dirty}  # fmt: skip


# times: the ops are 0.1 s apart (test_anomalies.Run), the final read's invoke at 1.4
CLEANINGS = [cleaned(1, 0.6, 6), cleaned(2, 0.65, 6), cleaned(1, 9.0, 8)]  # the last: after


def history(final=FINAL, *, polls=((0, [[3, 3], [4, 4], [5, 5], [6, 6], [7, 7]]),), end=10):
    run = Run()
    run.send("p0", [0, 1, 2], 0)
    run.send("p0", [3, 4, 5], 3)
    run.poll(0, [[0, 0], [1, 1], [2, 2], [3, 3], [4, 4], [5, 5]])
    run.seek(0)
    run.send("p0", [6, 7], 6)
    run.send("p0", [9, 10], 8)
    for asked, records in polls:
        run.poll(asked, records)
        run.seek(0)
    run.final(final, end=end)
    return run


def verdict(run: Run, *, dumps=None, cleanings=CLEANINGS, claims=CLAIMS, keys=K):
    compaction = Compaction(keys=keys, cleanings=parse_cleanings(cleanings),
                            claims=parse_claims(claims)) if keys else None  # fmt: skip
    return check(
        parse_history(run.docs),
        dumps=parse_dumps(dumps) if dumps is not None else None,
        claims=parse_claims(claims),
        compaction=compaction,
    )


def flagged(v) -> dict[str, int]:
    return {name: a.count for name, a in v.anomalies.items() if a.invalid and a.count}


def dumps(node1=NODE1, node2=FINAL):
    return [dump(1, node1, 10, end=10), dump(2, node2, 10, end=10)]


# ---------------------------------------------------------------------------- the clean run


def test_a_correctly_compacted_run_is_valid_and_its_removed_values_are_compacted() -> None:
    v = verdict(history(), dumps=dumps())
    assert v.valid is True, v.summary()
    compacted = v.anomalies["compacted"]
    assert not compacted.invalid and compacted.count == 3
    assert [e["value"] for e in compacted.examples] == [0, 1, 2]
    assert has(compacted.examples[0], offset=0, source="ack", key=0, superseded_at=3)
    assert list(v.anomalies) == [*ANOMALIES[:-1], "compacted", "compaction_lost_latest",
                                 "compaction_kept_stale", "replicas_diverge"]  # fmt: skip
    assert v.not_checked == ("hw_past_isr_leo",)


def test_without_compaction_the_same_run_is_lost_and_skipped() -> None:
    """The exemptions are compaction's: the plain checker calls the cleaner's work loss."""
    v = verdict(history(), keys=0)
    assert flagged(v) == {"lost": 3, "skipped_reads": 1}, v.summary()
    assert "compacted" not in v.anomalies and "compacted" not in v.not_checked


def test_without_dumps_replicas_are_not_compared() -> None:
    v = verdict(history())
    assert v.valid is True and "replicas_diverge" in v.not_checked


# ----------------------------------------------------------------- compaction_lost_latest


def test_a_final_read_without_the_latest_value_of_a_key_is_caught() -> None:
    """The cleaner dropped value 10, the latest of key 1 (offset 9), keeping 7 before it."""
    v = verdict(history(FINAL[:-1], end=9))
    (e,) = v.anomalies["compaction_lost_latest"].examples
    assert has(e, offset=9, value=10, key=1, final_latest=7, source="ack")


def test_a_cleaner_keeping_the_first_record_of_a_key_instead_of_the_last_is_caught() -> None:
    """Below 6 it kept (2, 2) and removed (5, 5), the latest of key 2: both halves flagged."""
    final = [[2, 2], [3, 3], [4, 4], [6, 6], [7, 7], [8, 9], [9, 10]]
    v = verdict(history(final))
    (lost,) = v.anomalies["compaction_lost_latest"].examples
    assert has(lost, offset=5, value=5, key=2, final_latest=2)
    (stale,) = v.anomalies["compaction_kept_stale"].examples
    assert has(stale, offset=2, value=2, key=2, clean_point=6, later_offset=5)
    assert v.anomalies["lost"].count == 1 and v.valid is False


def test_the_latest_value_may_be_superseded_by_a_write_that_landed_unacknowledged() -> None:
    """Value 13 (key 1), sent with no answer, landed at 10, and node 1 cleaned up to 11 while
    the final read (1.6 to 1.7) went on: 10, the latest acknowledged write of key 1, may go."""
    run = Run()
    run.docs = history().docs[:-2]  # all but the final read
    run.send("p9", [13], result="info")
    run.final([*FINAL[:-1], [10, 13]], end=11)
    v = verdict(run, cleanings=[*CLEANINGS, cleaned(1, 1.65, 11)])
    assert v.valid is True, v.summary()
    assert v.anomalies["compacted"].count == 4  # 10 too, superseded by the landed 13


# ----------------------------------------------------------------- compaction_kept_stale


def test_a_key_twice_below_the_clean_point_is_caught() -> None:
    """(0, 0) kept beside (3, 3), both of key 0, below the clean point 6."""
    v = verdict(history([[0, 0], *FINAL]))
    (e,) = v.anomalies["compaction_kept_stale"].examples
    assert has(e, offset=0, value=0, key=0, clean_point=6, later_offset=3, source="final-read")
    assert flagged(v) == {"compaction_kept_stale": 1}


def test_a_stale_record_whose_successor_is_gone_is_caught_from_the_history() -> None:
    """(0, 0) kept and (3, 3) removed: key 0 is once below 6 in the read, but the history saw
    a later record of it at 3, which was in the log when it was cleaned."""
    final = [[0, 0], *FINAL[1:]]
    v = verdict(history(final))
    (e,) = v.anomalies["compaction_kept_stale"].examples
    assert has(e, offset=0, value=0, later_offset=3)
    # and 3, the last of key 0 below 6, had to stay: its later records (6, 8) were never cleaned
    (lost,) = v.anomalies["lost"].examples
    assert has(lost, offset=3, value=3)


def test_records_above_the_clean_point_may_repeat_a_key() -> None:
    """The same read, but the leader reported no pass before the final read: nothing below any
    clean point, so nothing is stale (the pass at 9.0 came after the read began)."""
    v = verdict(history([[0, 0], *FINAL]), cleanings=[cleaned(1, 9.0, 8), cleaned(2, 0.6, 6)])
    assert v.anomalies["compaction_kept_stale"].count == 0, v.summary()


def test_the_clean_point_is_the_final_reads_leaders() -> None:
    """Node 2 took over at epoch 1 before the final read and reported no pass: node 1's passes
    say nothing about node 2's log."""
    claims = [*CLAIMS, {"node": 2, "time": 1.0, "topic": "t", "partition": 0, "leader_epoch": 1}]
    stale = history([[0, 0], *FINAL])
    assert verdict(stale, claims=claims, cleanings=CLEANINGS[:1]).valid is True
    assert verdict(stale, claims=claims).anomalies["compaction_kept_stale"].count == 1


def test_a_replica_keeping_a_stale_record_below_its_own_clean_point_is_caught() -> None:
    v = verdict(history(), dumps=dumps(node2=[[0, 0], *FINAL]))
    (e,) = v.anomalies["compaction_kept_stale"].examples
    assert has(e, source="dump", node=2, offset=0, value=0, clean_point=6)


def test_a_value_read_at_another_offset_than_acknowledged_stays_inconsistent_offsets() -> None:
    """9 and 10 were acknowledged at 8 and 9; the final read has them the other way round."""
    v = verdict(history([*FINAL[:-2], [8, 10], [9, 9]]))
    examples = v.anomalies["inconsistent_offsets"].examples
    assert any(has(e, offset=8, values=[10, 9]) for e in examples), v.summary()


# ------------------------------------------------------------------------ skipped reads


@pytest.mark.parametrize(
    ("records", "skipped"),
    [
        ([[0, 0], [3, 3]], False),  # skips 1, 2: superseded by 4, 5, below the clean point 6
        ([[3, 3], [5, 5], [6, 6]], True),  # skips 4: its key's later records (7, 9) were never
        # cleaned, so no pass could remove it
        ([[3, 3], [6, 6]], True),  # skips 5: the last of key 2, no pass could remove it
    ],
)
def test_a_poll_gap_is_skipped_only_over_a_record_no_pass_could_remove(records, skipped) -> None:
    v = verdict(history(polls=[(records[0][0], records)]))
    assert (v.anomalies["skipped_reads"].count == 1) is skipped, v.summary()


def test_a_record_removed_above_every_clean_point_is_lost() -> None:
    """(6, 6) is superseded by (8, 9), but no node had cleaned past 6 when the final read ended:
    no pass could have removed it, so it is lost, not compacted."""
    v = verdict(history([r for r in FINAL if r[0] != 6]))
    (e,) = v.anomalies["lost"].examples
    assert has(e, offset=6, value=6, source="ack") and v.anomalies["compacted"].count == 3


def test_a_poll_starting_past_a_record_that_survives_is_skipped() -> None:
    v = verdict(history(polls=[(4, [[6, 6], [7, 7]])]))
    (e,) = v.anomalies["skipped_reads"].examples
    assert has(e, kind="start", asked=4, offset=6)


# ------------------------------------------------------------------ the replicas' own logs


def test_replicas_cleaned_to_different_points_agree() -> None:
    v = verdict(history(), dumps=dumps())
    assert v.anomalies["replicas_diverge"].count == 0
    assert v.anomalies["missing_replica_data"].count == 0  # node 1 lacks 3, 4: superseded


def test_a_replica_that_removed_a_record_above_its_clean_point_diverges() -> None:
    """Node 2 (clean to 6) dropped (6, 6), superseded by (8, 9) but in its dirty section: no
    other check sees it (superseded, so not missing); brought to node 1's point 8 the two logs
    differ at 3, which node 2 should have removed in favour of 6."""
    v = verdict(history(), dumps=dumps(node2=[r for r in FINAL if r[0] != 6]))
    (e,) = v.anomalies["replicas_diverge"].examples
    assert has(e, nodes=[1, 2], offset=3, values=[None, 3], clean_points=[8, 6], compared_at=8)
    assert flagged(v) == {"replicas_diverge": 1}


def test_a_replica_missing_the_last_record_of_a_key_is_missing_data() -> None:
    v = verdict(history(), dumps=dumps(node2=[r for r in FINAL if r[0] != 5]))
    (e,) = v.anomalies["missing_replica_data"].examples
    assert has(e, node=2, missing=1, first_missing=5)
    assert v.anomalies["replicas_diverge"].count == 1


def test_replicas_at_the_same_clean_point_hold_the_same_records() -> None:
    same = [cleaned(1, 0.6, 6), cleaned(2, 0.65, 6)]
    assert verdict(history(), dumps=dumps(node1=FINAL), cleanings=same).valid is True
    v = verdict(history(), dumps=dumps(node1=NODE1), cleanings=same)
    assert v.anomalies["replicas_diverge"].count == 1


# ------------------------------------------------------------------------------- inputs


def test_bad_inputs_are_one_line() -> None:
    with pytest.raises(HistoryError, match="line 1: field 'first_dirty_offset' must be an int"):
        parse_cleanings([{**cleaned(1, 2.0, 6), "first_dirty_offset": "x"}])
    with pytest.raises(HistoryError, match="compaction keys 0: expected an int >= 1"):
        Compaction(keys=0)
    c = Compaction(keys=K, cleanings=parse_cleanings(CLEANINGS), claims=parse_claims(CLAIMS))
    assert c.key(10) == 1 and c.final_read_leader(T0, 5.0) == 1
    assert c.clean_point(1, T0, before=5.0) == 6 and c.clean_point(1, T0) == 8
    assert replace(c, slack_s=4.5).clean_point(1, T0, before=5.0) == 0


def test_a_nodes_passes_before_it_lost_its_disk_do_not_make_its_log_clean() -> None:
    """Node 1 was wiped at 0.7, after its pass to 6: its log started again, so the stale
    (0, 0) is not held against it; its passes still bound what any log may lack."""
    c = Compaction(keys=K, cleanings=parse_cleanings(CLEANINGS), claims=parse_claims(CLAIMS),
                   disk_losses=((1, 0.7),))  # fmt: skip
    assert c.clean_point(1, T0, before=5.0) == 0 and c.clean_point(1, T0) == 8
    assert c.clean_point(2, T0, before=5.0) == 6 and c.cleaned_at_most(T0, until=1.5) == 6
    v = check(parse_history(history([[0, 0], *FINAL]).docs), compaction=c)
    assert v.valid is True, v.summary()
