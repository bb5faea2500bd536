"""Cluster invariants (minikafka/checker/invariants.py); the throttle bound is the analysis'
(tests/tools/test_analysis.py, tests/experiment/test_throttle.py).

Each check is shown a synthetic input with exactly the anomaly it names (it must flag it) and a
near miss that is legal (it must not).
"""

from __future__ import annotations

import json

import pytest

from minikafka.checker.history import HistoryError
from minikafka.checker.invariants import (
    Found,
    find_hw_past_isr_leo,
    find_multiple_leaders,
    parse_claims,
    parse_samples,
)

# -------------------------------------------------------------------------- leadership claims


def claim(node, epoch, *, time=1.0, partition=0):
    return {"node": node, "time": time, "topic": "t", "partition": partition, "leader_epoch": epoch}


def test_one_leader_per_epoch_passes_even_if_it_claims_twice():
    # a leader that restarts and is handed the same epoch again claims it again: still one node
    claims = parse_claims(
        [claim(1, 1), claim(2, 2), claim(2, 2, time=3.0), claim(3, 2, partition=1)]
    )
    a = find_multiple_leaders(claims)
    assert a.count == 0 and a.invalid and a.examples == ()


def test_two_nodes_leading_one_epoch_are_flagged():
    claims = parse_claims([claim(1, 1), claim(2, 2, time=2.0), claim(3, 2, time=2.5)])
    a = find_multiple_leaders(claims)
    assert a.count == 1
    (ex,) = a.examples
    assert ex == {
        "topic": "t",
        "partition": 0,
        "leader_epoch": 2,
        "nodes": [2, 3],
        "times": [2.0, 2.5],
    }
    json.dumps(ex)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({**claim(1, 1), "leader_epoch": "1"}, "leader_epoch"),
        ({**claim(1, 1), "time": None}, "time"),
        ({k: v for k, v in claim(1, 1).items() if k != "node"}, "node"),
    ],
)
def test_a_malformed_claim_names_its_line_and_field(doc, field):
    with pytest.raises(HistoryError) as e:
        parse_claims([claim(1, 1), doc])
    assert "line 2" in str(e.value) and field in str(e.value)


# ----------------------------------------------------------------------------- replica samples


def sample(node, epoch, time, *, leo, hw=0, leader=False, isr=None, partition=0):
    return {
        "node": node, "time": time, "topic": "t", "partition": partition, "leader_epoch": epoch,
        "is_leader": leader, "log_end_offset": leo, "high_watermark": hw, "isr": isr,
    }  # fmt: skip


LEADER = sample(1, 5, 10.0, leo=12, hw=10, leader=True, isr=[1, 2, 3])


def test_followers_holding_the_committed_offsets_pass():
    samples = parse_samples([
        LEADER,
        sample(2, 5, 10.0, leo=10),  # same instant: holds exactly the HW
        sample(3, 5, 11.0, leo=12),
        sample(1, 5, 11.0, leo=12, hw=12, leader=True, isr=[1, 2]),  # 3 left the ISR ...
        sample(3, 5, 11.5, leo=11),  # ... so only the HW of t=10 binds it: 11 >= 10
    ])  # fmt: skip
    assert find_hw_past_isr_leo(samples).count == 0


def test_an_in_sync_follower_below_the_leaders_hw_later_in_the_epoch_is_flagged():
    # Leader 1 committed 10 with ISR {1,2,3} at t=10; at t=12, still epoch 5, follower 2 holds
    # only 8: it truncated committed offsets (a follower's LEO only shrinks by truncation).
    samples = parse_samples([sample(2, 5, 9.0, leo=10), LEADER, sample(2, 5, 12.0, leo=8)])
    a = find_hw_past_isr_leo(samples)
    assert a.count == 1
    assert a.examples[0] == {
        "topic": "t", "partition": 0, "leader_epoch": 5, "leader": 1, "leader_time": 10.0,
        "high_watermark": 10, "node": 2, "time": 12.0, "log_end_offset": 8,
    }  # fmt: skip


def test_the_highest_earlier_hw_is_the_bound():
    samples = parse_samples([
        LEADER,
        sample(1, 5, 11.0, leo=15, hw=14, leader=True, isr=[1, 2]),
        sample(1, 5, 11.5, leo=15, hw=12, leader=True, isr=[1, 2]),  # lower (never in Kafka)
        sample(2, 5, 12.0, leo=13),  # 13 < 14
    ])  # fmt: skip
    (ex,) = find_hw_past_isr_leo(samples).examples
    assert ex["high_watermark"] == 14 and ex["leader_time"] == 11.0


def test_a_follower_sample_taken_before_the_leaders_is_not_compared():
    # before t=10 the follower may not have fetched up to 10 yet: nothing says it must hold it
    samples = parse_samples([sample(2, 5, 9.5, leo=3), LEADER])
    assert find_hw_past_isr_leo(samples).count == 0


def test_an_epoch_boundary_is_not_compared_across():
    # epoch 6 began: the follower legitimately truncated its uncommitted tail in epoch 6 (and the
    # new leader's own HW may lag). Only samples of the same epoch are compared.
    samples = parse_samples([LEADER, sample(2, 6, 12.0, leo=4), sample(3, 4, 12.0, leo=4)])
    assert find_hw_past_isr_leo(samples).count == 0


def test_a_replica_outside_the_isr_or_the_leader_itself_is_not_compared():
    samples = parse_samples([
        sample(1, 5, 10.0, leo=12, hw=10, leader=True, isr=[1, 3]),
        sample(2, 5, 12.0, leo=1),  # not in the ISR
        sample(1, 5, 12.0, leo=10, hw=10, leader=True, isr=[1]),  # the leader: trivially fine
    ])  # fmt: skip
    assert find_hw_past_isr_leo(samples).count == 0


def test_a_follower_that_left_the_isr_is_no_longer_bound_by_earlier_hws():
    # Wiped while in sync (a lost disk): once a leader sample shows it out of the ISR, its
    # empty log risks nothing; until then it is a real violation.
    samples = [
        sample(1, 0, 1.0, leo=100, hw=100, leader=True, isr=[1, 2]),
        sample(1, 0, 2.0, leo=110, hw=110, leader=True, isr=[1]),
        sample(2, 0, 3.0, leo=0),
        sample(1, 0, 4.0, leo=120, hw=120, leader=True, isr=[1, 2]),
        sample(2, 0, 5.0, leo=130),
    ]
    assert find_hw_past_isr_leo(parse_samples(samples)).count == 0
    samples.insert(2, sample(2, 0, 1.5, leo=0))
    (ex,) = find_hw_past_isr_leo(parse_samples(samples)).examples
    assert (ex["time"], ex["high_watermark"]) == (1.5, 100)


def test_other_partitions_are_kept_apart():
    samples = parse_samples([LEADER, sample(2, 5, 12.0, leo=1, partition=1)])
    assert find_hw_past_isr_leo(samples).count == 0


def test_slack_skips_samples_within_it():
    samples = parse_samples([LEADER, sample(2, 5, 10.004, leo=8)])
    assert find_hw_past_isr_leo(samples).count == 1
    assert find_hw_past_isr_leo(samples, slack_s=0.01).count == 0


def test_a_member_state_that_held_past_the_bound_is_flagged():
    # replicas.jsonl writes a follower's row once and then only when it changes: LEO 8 written
    # at 9.0 and unchanged through 12.0 stands below the HW 10 bound in force from 10.0 on. As a
    # point sample (no `until`) at 9.0 it precedes the bound and passes.
    held = {**sample(2, 5, 9.0, leo=8), "until": 12.0}
    a = find_hw_past_isr_leo(parse_samples([held, LEADER]))
    assert a.count == 1 and a.examples[0]["time"] == 10.0
    assert find_hw_past_isr_leo(parse_samples([sample(2, 5, 9.0, leo=8), LEADER])).count == 0


def test_a_member_state_that_ended_before_the_bound_passes():
    # the row changed at 10.5 (LEO 11): its LEO 8 held until the line before, 9.5 < 10.0
    samples = [{**sample(2, 5, 9.0, leo=8), "until": 9.5}, LEADER, sample(2, 5, 10.5, leo=11)]
    assert find_hw_past_isr_leo(parse_samples(samples)).count == 0


def test_a_bound_that_ended_before_the_state_began_does_not_apply():
    # the member left the ISR at 11.0 (a leader sample without it); its LEO 8 from 11.5 risks
    # nothing, however long it holds
    out = sample(1, 5, 11.0, leo=12, hw=10, leader=True, isr=[1, 3])
    held = {**sample(2, 5, 11.5, leo=8), "until": 30.0}
    assert find_hw_past_isr_leo(parse_samples([LEADER, out, held])).count == 0


def test_until_before_time_is_refused():
    with pytest.raises(HistoryError, match="until"):
        parse_samples([{**sample(2, 5, 9.0, leo=8), "until": 8.0}])


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({**LEADER, "isr": None}, "isr"),  # a leader's sample must carry its ISR
        ({**LEADER, "isr": [1, "2"]}, "isr"),
        ({**LEADER, "is_leader": 1}, "is_leader"),
        ({**LEADER, "high_watermark": -1}, "high_watermark"),
    ],
)
def test_a_malformed_sample_names_its_line_and_field(doc, field):
    with pytest.raises(HistoryError) as e:
        parse_samples([LEADER, doc])
    assert "line 2" in str(e.value) and field in str(e.value)


def test_a_follower_sample_may_carry_a_null_or_missing_isr():
    doc = sample(2, 5, 1.0, leo=1)
    del doc["isr"]
    (s,) = parse_samples([doc])
    assert s.isr is None


# -------------------------------------------------------------------------------- the collector


def test_found_counts_everything_but_keeps_twenty_examples():
    f = Found("lost")
    for i in range(30):
        f.add(value=i)
    a = f.anomaly()
    assert a.count == 30 and len(a.examples) == 20 and a.examples[0] == {"value": 0}
    assert a.to_doc() == {
        "count": 30,
        "invalid": True,
        "examples": [{"value": i} for i in range(20)],
    }
