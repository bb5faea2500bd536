"""The controller state machine: replicas a live broker reports offline (Kafka's log-dir
failure) leave their ISRs and leadership, and turning unclean election on for a topic
elects its leaderless partitions.

Seeded and deterministic; the factories are in minikafka/testing/controller_state.py. Times
are ms; the session timeout is the default 9000 ms, so a broker last heard from at t is still
live at t + 9000 and fenced at t + 9001.
"""

from __future__ import annotations

from minikafka.errors import ErrorCode
from minikafka.testing.controller_state import (
    TIMEOUT,
    alter,
    create,
    events,
    item,
    keep_alive,
    lai,
    make,
    register,
    states,
)

# ---------------------------------------------------------------------------- offline replicas


def heartbeat_offline(c, epochs, broker, tps, now=1):
    from minikafka.common import TopicPartition

    return c.heartbeat(
        broker_id=broker,
        broker_epoch=epochs[broker],
        now_ms=now,
        offline=[TopicPartition("t", p) for p in tps],
    )


def test_an_offline_replica_leaves_its_isr_and_its_leadership_moves():
    """Kafka's log-dir failure (KafkaController.onReplicasBecomeOffline, KIP-858 in KRaft): the
    broker stays live for its other partitions; only the replicas it reported move."""
    c = make()
    epochs = register(c)
    create(c, num_partitions=6, replication_factor=2)
    before = states(c)
    led = next(p for p, s in before.items() if s.leader == 1)
    followed = next(p for p, s in before.items() if 1 in s.replicas and s.leader != 1)
    code, fenced, effects = heartbeat_offline(c, epochs, 1, [led, followed])
    assert (code, fenced) == (ErrorCode.NONE, False)
    after = states(c)
    other = next(r for r in before[led].replicas if r != 1)
    assert (after[led].leader, after[led].isr) == (other, [other])
    assert after[led].leader_epoch == before[led].leader_epoch + 1
    assert after[followed].leader == before[followed].leader
    assert after[followed].isr == [before[followed].leader]
    for p, s in before.items():
        if p not in (led, followed):
            assert after[p] == s  # the broker's other replicas are untouched
    [ev] = events(effects, "replicas_offline")
    assert ev.fields["partitions"] == sorted([f"t-{led}", f"t-{followed}"])
    assert {s.partition for s in lai(effects)[other].partitions} >= {led}
    assert not c.is_fenced(1)
    # The list is repeated by every heartbeat: nothing new, nothing happens.
    assert heartbeat_offline(c, epochs, 1, [led, followed]) == (ErrorCode.NONE, False, [])


def test_an_offline_sole_isr_member_leaves_the_partition_leaderless_unless_unclean():
    c = make()
    epochs = register(c, ids=(1, 2))
    create(c, num_partitions=1, replication_factor=2)
    s = states(c)[0]
    leader, follower = s.leader, next(r for r in s.replicas if r != s.leader)
    # The follower falls out of the ISR first (the leader's AlterPartition).
    code, _, _ = alter(c, leader, epochs[leader], item(s, [leader]))
    assert code == ErrorCode.NONE
    heartbeat_offline(c, epochs, leader, [0])
    after = states(c)[0]
    assert (after.leader, after.isr) == (-1, [leader])  # no clean candidate: offline partition
    assert follower in after.replicas


def test_a_new_incarnation_starts_with_no_offline_replicas():
    c = make()
    epochs = register(c, ids=(1, 2))
    create(c, num_partitions=1, replication_factor=2)
    heartbeat_offline(c, epochs, 1, [0])
    code, epoch, _ = c.register_broker(
        broker_id=1, incarnation_id="restarted", host="127.0.0.1", port=9001, now_ms=2
    )
    assert code == ErrorCode.NONE
    epochs[1] = epoch
    # Reported again after the restart: it is news again, and acted on again.
    _, _, effects = heartbeat_offline(c, epochs, 1, [0], now=3)
    assert events(effects, "replicas_offline")


def test_turning_unclean_election_on_for_a_topic_elects_its_leaderless_partitions_at_once():
    """Kafka's controller runs the election when the topic config changes
    (KafkaController.processTopicUncleanLeaderElectionEnable), not at the next fence/unfence."""
    from minikafka.wire.admin_messages import AlterableConfig, AlterConfigsResource

    c = make(unclean_leader_election=False)
    epochs = register(c)
    create(c, name="m", assignments=[[1, 2]])
    create(c, name="u", assignments=[[1, 2]])
    keep_alive(c, epochs, [1, 3], 3000)
    c.on_deadline(TIMEOUT + 1)  # fences 2: both ISRs are [1]
    keep_alive(c, epochs, [2, 3], 3000 + TIMEOUT)  # 2 is back (unfenced), out of sync
    keep_alive(c, epochs, [2, 3], 3000 + 2 * TIMEOUT)
    c.on_deadline(3000 + TIMEOUT + 1)  # fences 1, the last ISR member: both offline
    assert {s.topic: s.leader for s in c.partition_states()} == {"m": -1, "u": -1}
    enable = AlterConfigsResource(
        resource_type="topics",
        resource_name="u",
        configs=[AlterableConfig(name="unclean.leader.election.enable", op="set", value="true")],
    )
    _, effects = c.alter_configs([enable], validate_only=True)
    assert effects == [] and {s.topic: s.leader for s in c.partition_states()}["u"] == -1
    responses, effects = c.alter_configs([enable])
    assert [r.error_code for r in responses] == [ErrorCode.NONE]
    leaders = {s.topic: (s.leader, s.isr) for s in c.partition_states()}
    assert leaders == {"m": (-1, [1]), "u": (2, [2])}
    [elected] = events(effects, "leader_elected")
    assert elected.fields["unclean"] and elected.fields["reason"] == "unclean_enabled"
    assert {s.topic for s in lai(effects)[2].partitions} == {"u"}
