"""What one experiment runs: the cluster, the topic, the clients, the faults, the expectations.

`ExperimentSpec` is plain data (the catalog builds them, the CLI overrides their fields); it is
written whole into the run folder's experiment.json (and case.json's `experiment`), and read back
from it by `ExperimentSpec.from_json` when `minikafka experiment check` judges a stored run.
Checked when built: bad values raise ConfigError with one line naming the accepted form.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from minikafka.errors import ConfigError
from minikafka.experiment.schedule import SIM_KINDS, Fault, parse_target
from minikafka.experiment.workload import WorkloadSpec

TOPIC = "exp"

# Node configs of every experiment cluster, and why:
BASE_NODE_CONFIGS = {
    # Fence a dead or cut-off broker in 2 s (Kafka: 9 s) and drop a silent follower from the ISR
    # after 3 s (Kafka: 30 s), so a 30-40 s experiment sees several faults play out.
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "3000",
    # acks=all means two copies: with r=3 one broker may fail without refusing writes.
    "min.insync.replicas": "2",
    # The replicas.jsonl samples the HW invariant is checked on, and the throttle's rate lines.
    "metrics.interval.ms": "500",
    # A follower with nothing to fetch, or throttled, retries after 100 ms (Kafka: 1 s).
    "replica.fetch.backoff.ms": "100",
    "replica.fetch.wait.max.ms": "200",
}

_COMPARE = {
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "<=": operator.le,
    "<": operator.lt,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Expectation:
    """A hypothesis about the run; the experiment is invalid when it does not hold. Either about
    a `counter` summed over the brokers (server/metrics.py names), e.g. `isr_shrinks > 0`, or
    about a `figure` of results.json named by its dotted path, e.g. `move.copy_steps == 1`
    (the move's figures: minikafka/experiment/move.py). A figure that is missing or null (the
    gap between copies of a move that copied once) does not hold."""

    counter: str = ""
    figure: str = ""
    op: str
    value: float
    why: str = ""

    def __post_init__(self) -> None:
        if self.op not in _COMPARE:
            raise ConfigError(f"expectation op {self.op!r}: expected one of {', '.join(_COMPARE)}")
        if bool(self.counter) == bool(self.figure):
            raise ConfigError(
                f"expectation {self.counter or self.figure or '?'} {self.op} {self.value}: "
                "expected exactly one of counter (a metrics counter) or figure (a results path)"
            )

    @property
    def name(self) -> str:
        return self.counter or self.figure

    @classmethod
    def parse(cls, text: str, why: str = "") -> Expectation:
        """`str(e)` read back: `isr_shrinks >= 1` (a counter) or `move.copy_steps == 1` (a
        figure: a dotted path)."""
        parts = str(text).split()
        if len(parts) != 3 or parts[1] not in _COMPARE:
            raise ConfigError(f"expectation {text!r}: expected NAME OP VALUE, OP one of "
                              f"{', '.join(_COMPARE)}")  # fmt: skip
        name, op, value = parts
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"expectation {text!r}: {value!r} is not a number") from None
        where = {"figure": name} if "." in name else {"counter": name}
        return cls(op=op, value=number, why=why, **where)

    def holds(self, observed: float | None) -> bool:
        return observed is not None and _COMPARE[self.op](observed, self.value)

    def __str__(self) -> str:
        v = self.value
        return f"{self.name} {self.op} {int(v) if float(v).is_integer() else v}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Reassign:
    """`minikafka reassign --execute` at `at_s`: partition -> new replicas, throttled at
    `throttle` B/s with KIP-73 replica lists (`lists`) or KIP-542 (`kip542`), both sides, as
    the tool (and Kafka's) sets it. `throttle=None` runs it without `--throttle`: the throttle
    is then the experiment's own `broker_configs` (one side only, say)."""

    at_s: float
    moves: Mapping[int, tuple[int, ...]]
    throttle: int | None
    mode: str = "lists"

    def __post_init__(self) -> None:
        if self.mode not in ("lists", "kip542"):
            raise ConfigError(f"reassign mode {self.mode!r}: expected lists or kip542")
        t = self.throttle
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
            raise ConfigError(
                f"reassign throttle {t!r}: expected bytes/s (an integer >= 1) or None"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentSpec:
    name: str
    description: str = ""
    topic: str = TOPIC
    brokers: int = 3
    partitions: int = 6
    replication_factor: int = 3
    assignment: tuple[tuple[int, ...], ...] | None = None  # explicit replicas per partition
    duration_s: float = 30.0
    producers: int = 4
    consumers: int = 2
    records_per_s: float = 2000.0
    # The producers stop this long after the start (None: at duration_s); the run goes on to
    # duration_s all the same, so a move started after it runs on a quiet cluster.
    produce_s: float | None = None
    batch_records: int = 10
    record_bytes: int = 100
    # > 0: every record has one of this many keys, derived from its value (experiment/
    # workload.py), as a compacted topic needs; the checker then judges the topic as compacted
    # if its cleanup.policy says so (experiment/verdict.py). 0: no keys.
    keys: int = 0
    acks: int = -1
    request_timeout_s: float = 5.0
    # Sends retry through the library's Producer until acknowledged (experiment/workload.py),
    # as applications do: retries of batches whose first attempt was written are the source
    # of duplicates that the idempotent producer (KIP-98, Kafka's enable.idempotence, on by
    # default; it needs acks=all) removes. Off: every send is one attempt.
    producer_retries: bool = False
    idempotence: bool = True
    delivery_timeout_s: float = 30.0
    faults: tuple[Fault, ...] = ()
    node_configs: Mapping[str, str] = field(default_factory=dict)
    broker_configs: Mapping[str, str] = field(default_factory=dict)  # dynamic, all brokers
    # Delete `broker_configs` again when the load ends (duration_s), with the faults healed:
    # a throttle that stalls a move is then lifted like a fault, so the move completes, the
    # cluster settles and everything is read back and checked.
    lift_broker_configs: bool = False
    reassign: Reassign | None = None
    throttle_bytes_per_s: int | None = None  # checked as a windowed bound when set
    # The span (whole seconds) the quota itself averages over
    # (docs/throttling.md#measuring-a-rate): Kafka's SimpleRate keeps N + 1 samples of W
    # (replication.quota.window.num = 11,
    # window.size.seconds = 1), so after a stretch of underuse (a leader failed, a follower was
    # down) it rightly lets a burst catch up; shorter windows then exceed T without the quota
    # being broken (measured: 1.32x over 5 s and 1.13x over 11 s after a failover, in a run
    # whose quota gauge never passed 1.003x). Judged by the PySpark analysis (verdict.py).
    throttle_window_s: int = 12
    throttle_tolerance: float = 1.15  # the bound: tolerance x throttle_bytes_per_s
    expect: tuple[Expectation, ...] = ()
    # Report this broker's per-partition catch-up (results.json `catch_up`, experiment/
    # verdict.py): for each partition, how long after the last fault on it ended (it came back)
    # it rejoined the partition's ISR, with the min, median, max and spread.
    catch_up_broker: int | None = None
    fault_proxy: bool = False
    seed: int = 1
    settle_timeout_s: float = 90.0

    def __post_init__(self) -> None:
        def positive(name: str) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
                raise ConfigError(f"{name} {v!r}: expected a number > 0")

        for name in ("brokers", "partitions", "replication_factor", "duration_s", "producers",
                     "records_per_s", "batch_records", "record_bytes", "request_timeout_s",
                     "settle_timeout_s", "throttle_tolerance", "delivery_timeout_s"):  # fmt: skip
            positive(name)
        w = self.throttle_window_s
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise ConfigError(f"throttle_window_s {w!r}: expected whole seconds (an integer >= 1)")
        if self.produce_s is not None:
            positive("produce_s")
            if self.produce_s > self.duration_s:
                raise ConfigError(
                    f"produce_s {self.produce_s!r}: expected at most duration_s ({self.duration_s})"
                )
        if self.lift_broker_configs and not self.broker_configs:
            raise ConfigError("lift_broker_configs: expected broker_configs to lift")
        if isinstance(self.keys, bool) or not isinstance(self.keys, int) or self.keys < 0:
            raise ConfigError(f"keys {self.keys!r}: expected an integer >= 0 (0: no keys)")
        if self.consumers < 0:
            raise ConfigError(f"consumers {self.consumers!r}: expected an integer >= 0")
        if self.replication_factor > self.brokers:
            raise ConfigError(
                f"replication factor {self.replication_factor} needs at least that many brokers,"
                f" got {self.brokers}"
            )
        if self.acks not in (-1, 0, 1):
            raise ConfigError(f"acks {self.acks!r}: expected all (-1), 0 or 1")
        if self.producer_retries and self.idempotence and self.acks != -1:
            raise ConfigError(
                f"idempotence with acks {self.acks}: the idempotent producer needs acks all (-1);"
                " turn idempotence off to retry with other acks"
            )
        if self.assignment is not None and len(self.assignment) != self.partitions:
            raise ConfigError(f"assignment: expected {self.partitions} replica lists")
        for f in self.faults:
            if (
                f.target.role in ("leader", "follower")
                and not 0 <= f.target.number < self.partitions
            ):
                raise ConfigError(
                    f"fault target {f.target}: the topic has partitions 0-{self.partitions - 1}"
                )
        if self.catch_up_broker is not None and not 1 <= self.catch_up_broker <= self.brokers:
            raise ConfigError(
                f"catch_up_broker {self.catch_up_broker!r}: expected a broker id from 1 to "
                f"{self.brokers}"
            )
        if any(f.kind == "power-loss" for f in self.faults) and "log.sync" not in self.node_configs:
            raise ConfigError(
                "power-loss faults: expected node_configs to set log.sync (true: every commit "
                "is durable and a power loss is a kill; false: Kafka's flush policy, the writes "
                "since the last writeback are lost)"
            )
        if any(f.needs_proxy for f in self.faults) and not self.fault_proxy:
            object.__setattr__(self, "fault_proxy", True)  # network faults need the proxy

    def workload(self) -> WorkloadSpec:
        return WorkloadSpec(
            topic=self.topic,
            partitions=self.partitions,
            producers=self.producers,
            consumers=self.consumers,
            records_per_s=self.records_per_s,
            batch_records=self.batch_records,
            record_bytes=self.record_bytes,
            acks=self.acks,
            request_timeout_s=self.request_timeout_s,
            retries=self.producer_retries,
            idempotence=self.idempotence,
            delivery_timeout_s=self.delivery_timeout_s,
            keys=self.keys,
        )

    def all_node_configs(self) -> dict[str, str]:
        return {**BASE_NODE_CONFIGS, **self.node_configs}

    @property
    def simulation_only(self) -> bool:
        """Faults no real run can inflict (schedule.py SIM_KINDS): `minikafka sim run` only."""
        return any(f.kind in SIM_KINDS for f in self.faults)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["faults"] = [f.to_json() for f in self.faults]
        doc["expect"] = [str(e) for e in self.expect]
        doc["node_configs"] = self.all_node_configs()
        doc["broker_configs"] = dict(self.broker_configs)
        if not self.keys:
            del doc["keys"]  # the documents of runs without keys stay as they were
        if self.reassign is not None:
            doc["reassign"]["moves"] = {str(p): list(r) for p, r in self.reassign.moves.items()}
        return doc

    @classmethod
    def from_json(
        cls, doc: Mapping[str, Any], why: Mapping[str, str] | None = None
    ) -> ExperimentSpec:
        """`to_json` read back (experiment.json); `why`: each expectation's reason by its text
        (to_json keeps the text only). Fields the document lacks take their defaults, fields this
        version does not know are ignored; a bad value raises ConfigError."""
        if not isinstance(doc, Mapping):
            raise ConfigError(f"experiment spec: expected a JSON object, got {type(doc).__name__}")
        known = {f for f in cls.__dataclass_fields__}  # type: ignore[attr-defined]
        fields = {k: v for k, v in doc.items() if k in known}
        try:
            fields["faults"] = tuple(_fault(f) for f in fields.get("faults", ()))
            fields["expect"] = tuple(
                Expectation.parse(e, (why or {}).get(e, "")) for e in fields.get("expect", ())
            )
            if fields.get("assignment") is not None:
                fields["assignment"] = tuple(tuple(r) for r in fields["assignment"])
            if fields.get("reassign") is not None:
                r = dict(fields["reassign"])
                r["moves"] = {int(p): tuple(rs) for p, rs in r["moves"].items()}
                fields["reassign"] = Reassign(**r)
            return cls(**fields)
        except ConfigError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise ConfigError(f"experiment spec: {type(exc).__name__}: {exc}") from None


def _fault(doc: Mapping[str, Any]) -> Fault:
    rest = {k: v for k, v in doc.items() if k not in ("kind", "target", "start_s", "end_s")}
    return Fault(kind=doc["kind"], target=parse_target(doc["target"]), start_s=doc["start_s"],
                 end_s=doc["end_s"], params=rest)  # fmt: skip
