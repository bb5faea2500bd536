"""Dynamic config rules (core/dynamic_config.py): names, values, entities, KIP-542, views.

Every refusal is a ConfigError whose one-line message names the accepted form; the tests check
the message, not just the exception.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minikafka.core.dynamic_config import (
    BROKERS,
    CLIENTS,
    DEFAULT,
    KNOWN_CONFIGS,
    LONG_MAX,
    REPLICAS_FORM,
    SOURCE_DEFAULT,
    SOURCE_ENTITY,
    TOPICS,
    BrokerThrottleConfig,
    ConfigSnapshot,
    ThrottledReplicas,
    client_quota,
    describe_entries,
    effective_broker_config,
    normalize_entity_name,
    parse_throttled_replicas,
    topic_throttled_replicas,
    validate_alter,
)
from minikafka.errors import ConfigError

LR = "leader.replication.throttled.rate"
FR = "follower.replication.throttled.rate"
LRR = "leader.reassignment.throttled.rate"
FRR = "follower.reassignment.throttled.rate"
LREP = "leader.replication.throttled.replicas"
FREP = "follower.replication.throttled.replicas"
EMPTY = ConfigSnapshot()


def snap(**entities: dict[str, str]) -> ConfigSnapshot:
    """snap(brokers_default={...}, brokers_1={...}, topics_t={...}, clients_default={...})."""
    out = {}
    for key, configs in entities.items():
        entity_type, _, name = key.partition("_")
        out[(entity_type, DEFAULT if name == "default" else name)] = configs
    return ConfigSnapshot(version=7, entities=out)


def alter(entity_type, name, set_configs=None, delete=(), current=EMPTY):
    return validate_alter(entity_type, name, set_configs or {}, list(delete), current)


# ---------------------------------------------------------------------------- entities


@pytest.mark.parametrize("entity_type", ["users", "broker", "", "BROKERS"])
def test_unknown_entity_type_names_the_accepted_types(entity_type):
    with pytest.raises(ConfigError, match="expected one of brokers, topics, clients"):
        alter(entity_type, "1")


@pytest.mark.parametrize("name, normal", [("0", "0"), ("1", "1"), ("01", "1"), ("", DEFAULT)])
def test_broker_names_are_ids_or_the_default(name, normal):
    assert normalize_entity_name(BROKERS, name) == normal


@pytest.mark.parametrize("name", ["-1", "x", "1.5", "1e3", "+2", "b1", "-0"])
def test_bad_broker_names_are_refused(name):
    with pytest.raises(
        ConfigError, match=r"expected a broker id \(an integer >= 0\) or the cluster"
    ):
        alter(BROKERS, name, {LR: "1"})


def test_topics_have_no_default():
    with pytest.raises(ConfigError, match="topics have no default entity: expected a topic name"):
        alter(TOPICS, "", {LREP: "*"})


def test_client_ids_up_to_255_characters_or_the_default():
    assert normalize_entity_name(CLIENTS, "") == DEFAULT
    assert normalize_entity_name(CLIENTS, "x" * 255) == "x" * 255
    assert normalize_entity_name(CLIENTS, "app with spaces/äö") == "app with spaces/äö"
    with pytest.raises(ConfigError, match="expected a client id of 1 to 255 characters"):
        alter(CLIENTS, "x" * 256, {"producer_byte_rate": "1"})


# ---------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "entity_type, name, config",
    [
        (BROKERS, "1", "no.such.config"),
        (BROKERS, "1", LREP),  # a topic config on a broker
        (TOPICS, "t", LR),  # a broker config on a topic
        (CLIENTS, "c", "producer.byte.rate"),  # Kafka spells it with underscores
    ],
)
def test_unknown_config_names_list_the_known_ones(entity_type, name, config):
    known = ", ".join(KNOWN_CONFIGS[entity_type])
    with pytest.raises(ConfigError, match=f"unknown {entity_type[:-1]} config") as err:
        alter(entity_type, name, {config: "1"})
    assert str(err.value).endswith(f"expected one of {known}")
    with pytest.raises(ConfigError, match="expected one of"):
        alter(entity_type, name, delete=[config])  # a typo in a delete is refused too


def test_a_config_both_set_and_deleted_is_refused():
    with pytest.raises(ConfigError, match=f"'{LR}' is both set and deleted: expected one or"):
        alter(BROKERS, "1", {LR: "5"}, delete=[LR])


# ---------------------------------------------------------------------------- values


@pytest.mark.parametrize("config", [LR, FR])
@pytest.mark.parametrize(
    "text, stored",
    [("1000000", "1000000"), (" 42 ", "42"), ("1", "1"), ("0", "0"), (str(LONG_MAX),) * 2],
)
def test_replication_rates_are_integers_of_at_least_zero(config, text, stored):
    # Kafka's DynamicConfig.Broker: LONG, atLeast(0).
    assert alter(BROKERS, "1", {config: text}) == {config: stored}


@pytest.mark.parametrize("config", [LR, FR])
@pytest.mark.parametrize("text", ["-1", "-5", "1.5", "1e6", "abc", "", "1_000", str(2**63)])
def test_bad_replication_rates_name_the_accepted_form(config, text):
    with pytest.raises(ConfigError, match=r"expected a rate in bytes per second, an integer >= 0"):
        alter(BROKERS, "1", {config: text})


@pytest.mark.parametrize("config", ["producer_byte_rate", "consumer_byte_rate"])
@pytest.mark.parametrize("text", ["0", "-1", "-5", "1.5", "1e6", "abc", "", "1_000", str(2**63)])
def test_bad_client_quotas_name_the_accepted_form(config, text):
    # Kafka's controller refuses a client quota <= 0 (ClientQuotaControlManager, KAFKA-14943).
    with pytest.raises(ConfigError, match=r"a rate in bytes per second, an integer >= 1 \(up to"):
        alter(CLIENTS, "1", {config: text})
    assert alter(CLIENTS, "1", {config: "1"}) == {config: "1"}


@pytest.mark.parametrize("config", [LRR, FRR])
def test_reassignment_rates_are_minus_one_or_at_least_zero(config):
    assert alter(BROKERS, "1", {config: "-1"}) == {config: "-1"}
    assert alter(BROKERS, "1", {config: " 500 "}) == {config: "500"}
    assert alter(BROKERS, "1", {config: "0"}) == {config: "0"}
    for text in ["-2", "x", "2.5", ""]:
        with pytest.raises(ConfigError, match=r"expected -1 \(no reassignment throttle\) or a"):
            alter(BROKERS, "1", {config: text})


def test_a_zero_rate_is_a_bound_and_minus_one_is_none():
    snapshot = ConfigSnapshot(
        version=1,
        entities={(BROKERS, "1"): {LR: "0", FR: "0", LRR: "0", FRR: "-1"}},
    )
    got = effective_broker_config(snapshot, 1)
    assert (got.leader_rate, got.follower_rate) == (0, 0)
    assert (got.leader_reassignment_rate, got.follower_reassignment_rate) == (0, None)
    # KIP-542's rule with a zero replication rate: only a zero reassignment rate fits under it.
    with pytest.raises(ConfigError, match=f"{LRR}=1 exceeds {LR}=0 in the effective config"):
        validate_alter(BROKERS, "1", {LRR: "1"}, (), snapshot)


@pytest.mark.parametrize(
    "config", ["leader.replication.throttled", "follower.replication.throttled"]
)
def test_kip_1009_booleans(config):
    assert alter(BROKERS, "", {config: "TRUE"}) == {config: "true"}
    assert alter(BROKERS, "", {config: " false "}) == {config: "false"}
    for text in ["yes", "1", "", "t"]:
        with pytest.raises(ConfigError, match="expected true or false"):
            alter(BROKERS, "", {config: text})


@pytest.mark.parametrize(
    "text, stored",
    [
        ("*", "*"),
        (" * ", "*"),
        ("", ""),
        ("   ", ""),
        ("0:1,1:2", "0:1,1:2"),
        (" 1:2 , 0:1 ", "0:1,1:2"),  # whitespace around items ignored, stored sorted
        ("0:1,0:1", "0:1"),
        ("10:3,2:3", "2:3,10:3"),  # sorted numerically
    ],
)
def test_throttled_replica_lists_are_normalised(text, stored):
    assert alter(TOPICS, "t", {LREP: text, FREP: text}) == {LREP: stored, FREP: stored}


@pytest.mark.parametrize(
    "text", ["0-1", "0:1,", ",0:1", "*,0:1", "**", "a:b", "0:-1", "-1:0", "0:1:2", ":1", "0:", "0"]
)
def test_bad_throttled_replica_lists_name_the_format(text):
    with pytest.raises(ConfigError) as err:
        alter(TOPICS, "t", {FREP: text})
    assert str(err.value) == f"{FREP}={text!r}: {REPLICAS_FORM}"
    assert "partition:broker, e.g. 0:1,1:2, or *" in REPLICAS_FORM


def test_throttled_replicas_contains():
    some = parse_throttled_replicas("0:1, 1:2")
    assert some == ThrottledReplicas(pairs=frozenset({(0, 1), (1, 2)}))
    assert some.contains(0, 1) and some.contains(1, 2)
    assert not some.contains(0, 2) and not some.contains(1, 1)
    everything = parse_throttled_replicas("*")
    assert everything.contains(0, 1) and everything.contains(99, 7) and everything.all
    nothing = parse_throttled_replicas("")
    assert not nothing.contains(0, 1) and not nothing


pairs = st.frozensets(st.tuples(st.integers(0, 10_000), st.integers(0, 100)), max_size=8)


@given(pairs=pairs, data=st.data())
def test_throttled_replicas_round_trip_through_any_spacing(pairs, data):
    value = ThrottledReplicas(pairs=pairs)
    spaced = ",".join(
        data.draw(st.sampled_from(["", " ", "  "]))
        + f"{p}:{b}"
        + data.draw(st.sampled_from(["", " "]))
        for p, b in data.draw(st.permutations(sorted(pairs)))
    )
    assert parse_throttled_replicas(spaced) == value
    assert parse_throttled_replicas(str(value)) == value


# ---------------------------------------------------------------------------- alter semantics


def test_alter_merges_sets_and_deletes_into_the_current_configs():
    current = snap(brokers_1={LR: "100", FR: "200", "leader.replication.throttled": "true"})
    result = alter(BROKERS, "01", {FR: "300"}, delete=[LR, FRR], current=current)
    # LR deleted, FR replaced, the boolean kept; deleting an unset known config is a no-op
    assert result == {FR: "300", "leader.replication.throttled": "true"}
    assert current.configs(BROKERS, "1")[LR] == "100"  # the snapshot itself is untouched


def test_one_bad_value_refuses_the_whole_alter():
    current = snap(brokers_1={LR: "100"})
    with pytest.raises(ConfigError, match="expected true or false"):
        alter(BROKERS, "1", {FR: "5", "follower.replication.throttled": "maybe"}, current=current)
    assert current.configs(BROKERS, "1") == {LR: "100"}


# ---------------------------------------------------------------------------- KIP-542


@pytest.mark.parametrize("reassignment, replication", [(LRR, LR), (FRR, FR)])
def test_reassignment_rate_may_not_exceed_the_replication_rate_on_one_entity(
    reassignment, replication
):
    assert alter(BROKERS, "1", {replication: "1000", reassignment: "1000"})  # equal is fine
    assert alter(BROKERS, "1", {reassignment: "5000"})  # no replication rate: no bound
    assert alter(BROKERS, "1", {replication: "1000", reassignment: "-1"})
    with pytest.raises(ConfigError) as err:
        alter(BROKERS, "1", {replication: "1000", reassignment: "1001"})
    assert str(err.value) == (
        f"{reassignment}=1001 exceeds {replication}=1000 in the effective config of broker 1: "
        "expected a reassignment rate at most the replication rate (KIP-542)"
    )
    with pytest.raises(ConfigError, match="effective config of the cluster default"):
        alter(BROKERS, "", {replication: "10", reassignment: "11"})


def test_kip_542_checks_the_effective_config_default_then_broker():
    # default replication 1000; broker 1 asks for reassignment 2000: its effective bound is 1000
    current = snap(brokers_default={LR: "1000"})
    with pytest.raises(ConfigError, match=f"{LRR}=2000 exceeds {LR}=1000 .* of broker 1"):
        alter(BROKERS, "1", {LRR: "2000"}, current=current)
    # ... unless broker 1 overrides the replication rate too: the per-broker value wins
    assert alter(BROKERS, "1", {LR: "3000", LRR: "2000"}, current=current)
    # a follower reassignment rate is bounded by the follower rate only
    assert alter(BROKERS, "1", {FRR: "2000"}, current=current)


def test_kip_542_lowering_the_default_is_checked_against_every_broker():
    current = snap(brokers_1={LRR: "500"}, brokers_2={LR: "800", LRR: "600"})
    assert alter(BROKERS, "", {LR: "500"}, current=current)  # broker 1: 500 <= 500
    with pytest.raises(ConfigError, match="of broker 1: expected"):
        alter(BROKERS, "", {LR: "499"}, current=current)  # broker 2 keeps its own 800


def test_kip_542_deleting_an_override_exposes_the_default():
    current = snap(brokers_default={FR: "100"}, brokers_3={FR: "1000", FRR: "900"})
    with pytest.raises(ConfigError, match=f"{FRR}=900 exceeds {FR}=100 .* of broker 3"):
        alter(BROKERS, "3", delete=[FR], current=current)
    assert alter(BROKERS, "3", delete=[FR, FRR], current=current) == {}


def test_kip_542_a_per_broker_minus_one_lifts_the_default_reassignment_rate():
    current = snap(brokers_default={LR: "100", LRR: "100"})
    with pytest.raises(ConfigError, match="of broker 4"):
        alter(BROKERS, "4", {LR: "50"}, current=current)  # default 100 > own 50
    assert alter(BROKERS, "4", {LR: "50", LRR: "-1"}, current=current)


# ---------------------------------------------------------------------------- views


def test_effective_broker_config_per_broker_wins_over_the_default():
    s = snap(
        brokers_default={LR: "100", FR: "200", LRR: "50", "follower.replication.throttled": "true"},
        brokers_1={LR: "1000", LRR: "-1", "leader.replication.throttled": "true"},
    )
    assert effective_broker_config(s, 1) == BrokerThrottleConfig(
        leader_rate=1000,
        follower_rate=200,
        leader_reassignment_rate=None,  # -1 means no reassignment throttle
        follower_reassignment_rate=None,
        leader_all=True,
        follower_all=True,
    )
    assert effective_broker_config(s, 2) == BrokerThrottleConfig(
        leader_rate=100, follower_rate=200, leader_reassignment_rate=50, follower_all=True
    )
    assert effective_broker_config(EMPTY, 1) == BrokerThrottleConfig()


def test_topic_throttled_replicas_view():
    s = snap(topics_t={LREP: "0:1,1:2", FREP: "*"}, topics_u={LREP: ""})
    leader, follower = topic_throttled_replicas(s, "t")
    assert leader.contains(1, 2) and not leader.contains(1, 1)
    assert follower.all
    assert topic_throttled_replicas(s, "u") == (ThrottledReplicas(), ThrottledReplicas())
    assert topic_throttled_replicas(s, "none") == (ThrottledReplicas(), ThrottledReplicas())


def test_client_quota_client_id_wins_over_the_default_client_per_quota():
    s = snap(
        clients_default={"producer_byte_rate": "1000", "consumer_byte_rate": "2000"},
        clients_app={"consumer_byte_rate": "50"},
    )
    assert client_quota(s, "app") == (1000, 50)
    assert client_quota(s, "other") == (1000, 2000)
    assert client_quota(s, "") == (1000, 2000)  # no client id: the default client (KIP-13)
    assert client_quota(EMPTY, "app") == (None, None)


def test_describe_entries_show_where_a_value_comes_from():
    s = snap(brokers_default={LR: "100", FR: "200"}, brokers_1={LR: "1000"})
    assert describe_entries(s, BROKERS, "1", effective=True) == [
        (FR, "200", SOURCE_DEFAULT),
        (LR, "1000", SOURCE_ENTITY),
    ]
    assert describe_entries(s, BROKERS, "1", effective=False) == [(LR, "1000", SOURCE_ENTITY)]
    assert describe_entries(s, BROKERS, "", effective=True) == [
        (FR, "200", SOURCE_DEFAULT),
        (LR, "100", SOURCE_DEFAULT),
    ]
    assert describe_entries(s, BROKERS, "9", effective=True) == [
        (FR, "200", SOURCE_DEFAULT),
        (LR, "100", SOURCE_DEFAULT),
    ]


# ---------------------------------------------------------------------------- the snapshot


def test_snapshot_is_immutable_and_drops_empty_entities():
    s = ConfigSnapshot(version=3, entities={(BROKERS, "1"): {LR: "5"}, (TOPICS, "t"): {}})
    assert list(s.entities) == [(BROKERS, "1")]
    with pytest.raises(TypeError):
        s.entities[(BROKERS, "2")] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        s.entities[(BROKERS, "1")][LR] = "6"  # type: ignore[index]
    copy = s.configs(BROKERS, "1")
    copy[LR] = "7"
    assert s.configs(BROKERS, "1") == {LR: "5"}
    t = s.with_entity(BROKERS, "1", {}, version=4)
    assert t.entities == {} and t.version == 4 and s.configs(BROKERS, "1") == {LR: "5"}


def test_snapshot_round_trips_through_doc_and_wire():
    s = snap(
        brokers_default={LR: "1"}, topics_t={LREP: "*"}, clients_app={"producer_byte_rate": "9"}
    )
    assert ConfigSnapshot.from_doc(s.to_doc()) == s
    assert ConfigSnapshot.from_wire(s.to_wire(), s.version) == s
    assert s.names(BROKERS) == [DEFAULT] and s.names(CLIENTS) == ["app"]
