"""Node configuration: Kafka's static config names, their defaults, and their validation.

A node is configured with `--set name=value` pairs using Kafka's names
(`replica.fetch.max.bytes=1048576`). Defaults are Kafka's (docs/throttling.md#configs); a
testbed will pass smaller values for fast tests. A bad value raises ConfigError naming the accepted
form, and
nothing is applied.

Routes (`--route DST_HOST:DST_PORT=VIA_HOST:VIA_PORT`, ours) send this node's connections to
another node through a fault-injecting proxy (minikafka/faults): every place a node dials a peer
(controller link, replica fetchers, the controller's broker channels) asks `route()` first.
Clients never get routes, so only inter-node traffic crosses the proxy.

Cluster membership: `cluster.id` names the node's cluster and `cluster.secret.file`
the file holding the secret its nodes share (`minikafka cluster up` makes both; the file must be
readable by its owner only). The secret is read when the setting is applied, kept out of every
repr and log, and proves the node's connections to its peers (core/cluster_auth.py). A node
without both refuses to start (`require_cluster_identity`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from minikafka.core.cluster_auth import MIN_SECRET_BYTES, ClusterCredential
from minikafka.core.compaction import (
    DEFAULT_DELETE_RETENTION_MS,
    DEFAULT_MAX_COMPACTION_LAG_MS,
    DEFAULT_MIN_CLEANABLE_RATIO,
)
from minikafka.core.log_config import (
    DEFAULT_CHECK_INTERVAL_MS,
    DEFAULT_SEGMENT_BYTES,
    LogConfig,
    retention_ms_of,
    roll_ms_of,
)
from minikafka.core.log_topic_configs import MIN_SEGMENT_BYTES, cleanup_policy, dirty_ratio
from minikafka.core.quota.planner import ThrottleSettings
from minikafka.errors import ConfigError

MiB = 1024 * 1024


def _parse_int(lo: int, hi: int) -> Callable[[str, str], int]:
    def parse(name: str, text: str) -> int:
        try:
            value = int(text.strip().replace("_", ""))
        except ValueError:
            raise ConfigError(f"{name}={text!r}: expected an integer from {lo} to {hi}") from None
        if not lo <= value <= hi:
            raise ConfigError(f"{name}={text!r}: expected an integer from {lo} to {hi}")
        return value

    return parse


def _parse_bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ConfigError(f"{name}={text!r}: expected true or false")


def _parse_choice(*choices: str) -> Callable[[str, str], str]:
    def parse(name: str, text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ConfigError(f"{name}={text!r}: expected {' or '.join(choices)}")
        return value

    return parse


_CLUSTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _parse_cluster_id(name: str, text: str) -> str:
    value = text.strip()
    if not _CLUSTER_ID.fullmatch(value):
        raise ConfigError(
            f"{name}={text!r}: expected 1 to 100 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def _parse_kafka_listen(name: str, text: str) -> tuple[str, int] | None:
    """HOST:PORT of the Kafka-protocol listener (port 0: any free port), or empty: none."""
    value = text.strip()
    if not value:
        return None
    return parse_address(value, name)


def _parse_path(name: str, text: str) -> str:
    value = text.strip()
    if not value:
        raise ConfigError(f"{name}={text!r}: expected a file path")
    return str(Path(value).expanduser().absolute())


def read_cluster_secret(path: str) -> bytes:
    """The secret in `path` (surrounding whitespace stripped). ConfigError (one line) if the file
    is missing, readable by group or others, or holds fewer than MIN_SECRET_BYTES bytes."""
    what = f"cluster.secret.file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ConfigError(f"{what}: cannot open it ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(
                f"{what} is open to group or others (mode {stat.S_IMODE(mode):04o}): "
                f"expected mode 0600 (chmod 600 {path})"
            )
        secret = f.read(1 << 16).strip()
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(f"{what}: expected a secret of at least {MIN_SECRET_BYTES} bytes")
    return secret


_BIG = 1 << 62
_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1

# What a frame carries besides record bytes (request or response headers, per-partition fields):
# room for about 3000 partitions' headers in one response.
FRAME_HEADROOM_BYTES = 1 * MiB


@dataclass(frozen=True, slots=True)
class _Option:
    name: str  # Kafka's name
    attr: str  # Python attribute on NodeConfig
    parse: Callable[[str, str], object]


# The static node configs this project understands, by Kafka name.
OPTIONS: dict[str, _Option] = {
    o.name: o
    for o in [
        _Option("replica.fetch.max.bytes", "replica_fetch_max_bytes", _parse_int(1, 1 << 30)),
        _Option(
            "replica.fetch.response.max.bytes",
            "replica_fetch_response_max_bytes",
            _parse_int(1, 1 << 30),
        ),
        _Option("message.max.bytes", "message_max_bytes", _parse_int(0, 1 << 30)),
        _Option("fetch.max.bytes", "fetch_max_bytes", _parse_int(1024, 1 << 30)),
        _Option("replica.fetch.wait.max.ms", "replica_fetch_wait_max_ms", _parse_int(0, 600_000)),
        _Option("replica.fetch.min.bytes", "replica_fetch_min_bytes", _parse_int(1, 1 << 30)),
        _Option("replica.fetch.backoff.ms", "replica_fetch_backoff_ms", _parse_int(0, 600_000)),
        _Option("replica.lag.time.max.ms", "replica_lag_time_max_ms", _parse_int(1, 1 << 31)),
        _Option("num.replica.fetchers", "num_replica_fetchers", _parse_int(1, 64)),
        _Option("min.insync.replicas", "min_insync_replicas", _parse_int(1, 64)),
        _Option("broker.session.timeout.ms", "broker_session_timeout_ms", _parse_int(100, 600_000)),
        _Option(
            "broker.heartbeat.interval.ms", "broker_heartbeat_interval_ms", _parse_int(10, 60_000)
        ),
        _Option("unclean.leader.election.enable", "unclean_leader_election_enable", _parse_bool),
        _Option("default.replication.factor", "default_replication_factor", _parse_int(1, 64)),
        _Option("num.partitions", "num_partitions", _parse_int(1, 100_000)),
        _Option("log.sync", "log_sync", _parse_bool),
        _Option("lmdb.map.size.bytes", "lmdb_map_size_bytes", _parse_int(1 << 20, _BIG)),
        _Option("socket.max.frame.bytes", "socket_max_frame_bytes", _parse_int(1024, 1 << 31)),
        _Option("metrics.interval.ms", "metrics_interval_ms", _parse_int(10, 3_600_000)),
        _Option("request.max.in.flight", "request_max_in_flight", _parse_int(1, 1024)),
        _Option("max.connections", "max_connections", _parse_int(1, 1 << 20)),
        _Option("connections.max.idle.ms", "connections_max_idle_ms", _parse_int(1, 1 << 40)),
        # Connections as Kafka's ConnectionQuotas limits them (core/connection_quotas.py,
        # docs/front-door.md).
        _Option("max.connections.per.ip", "max_connections_per_ip", _parse_int(1, 1 << 20)),
        _Option(
            "listener.name.native.max.connections",
            "native_max_connections",
            _parse_int(1, 1 << 20),
        ),
        _Option(
            "listener.name.kafka.max.connections", "kafka_max_connections", _parse_int(1, 1 << 20)
        ),
        _Option("queued.max.request.bytes", "queued_max_request_bytes", _parse_int(-1, 1 << 40)),
        _Option(
            "replication.quota.window.num", "replication_quota_window_num", _parse_int(1, 1000)
        ),
        _Option(
            "replication.quota.window.size.seconds",
            "replication_quota_window_size_seconds",
            _parse_int(1, 3600),
        ),
        _Option("quota.window.num", "quota_window_num", _parse_int(1, 1000)),
        _Option("quota.window.size.seconds", "quota_window_size_seconds", _parse_int(1, 3600)),
        _Option(
            "replication.throttle.in.sync.exempt",
            "replication_throttle_in_sync_exempt",
            _parse_bool,
        ),
        _Option("replication.quota.precise", "replication_quota_precise", _parse_bool),
        _Option(
            "replica.fetch.partition.order",
            "replica_fetch_partition_order",
            _parse_choice("random", "rotate"),
        ),
        # Beyond Kafka (its followers always use KIP-227 sessions): off keeps the sessionless
        # fetch testable.
        _Option("replica.fetch.session.enable", "replica_fetch_session_enable", _parse_bool),
        _Option(
            "max.incremental.fetch.session.cache.slots",
            "max_incremental_fetch_session_cache_slots",
            _parse_int(0, 1 << 20),
        ),
        _Option("metrics.port", "metrics_port", _parse_int(-1, 65535)),
        # Ours: the broker's second listener, speaking Kafka's binary protocol (minikafka/kafka)
        # for Kafka's own clients; in Kafka a `listeners` entry. Empty (the default): none.
        _Option("kafka.listen", "kafka_listen", _parse_kafka_listen),
        # Group coordination (Kafka's GroupCoordinatorConfig; core/group, server/groups.py).
        _Option(
            "offsets.topic.num.partitions", "offsets_topic_num_partitions", _parse_int(1, 1000)
        ),
        _Option(
            "offsets.topic.replication.factor",
            "offsets_topic_replication_factor",
            _parse_int(1, 64),
        ),
        _Option(
            "offsets.topic.segment.bytes",
            "offsets_topic_segment_bytes",
            _parse_int(MIN_SEGMENT_BYTES, _INT_MAX),
        ),
        _Option("offsets.commit.timeout.ms", "offsets_commit_timeout_ms", _parse_int(1, 600_000)),
        _Option("offset.metadata.max.bytes", "offset_metadata_max_bytes", _parse_int(0, 1 << 20)),
        _Option(
            "group.initial.rebalance.delay.ms",
            "group_initial_rebalance_delay_ms",
            _parse_int(0, 600_000),
        ),
        _Option(
            "group.min.session.timeout.ms", "group_min_session_timeout_ms", _parse_int(1, 1 << 31)
        ),
        _Option(
            "group.max.session.timeout.ms", "group_max_session_timeout_ms", _parse_int(1, 1 << 31)
        ),
        _Option("group.max.size", "group_max_size", _parse_int(1, (1 << 31) - 1)),
        # State that expires (docs/front-door.md): empty groups and their offsets (KIP-211), and idle
        # producer ids (KIP-854), checked every so often as Kafka's schedulers do.
        _Option("offsets.retention.minutes", "offsets_retention_minutes", _parse_int(1, 1 << 31)),
        _Option(
            "offsets.retention.check.interval.ms",
            "offsets_retention_check_interval_ms",
            _parse_int(1, 1 << 40),
        ),
        _Option("producer.id.expiration.ms", "producer_id_expiration_ms", _parse_int(1, 1 << 40)),
        _Option(
            "producer.id.expiration.check.interval.ms",
            "producer_id_expiration_check_interval_ms",
            _parse_int(1, 1 << 31),
        ),
        # KIP-578's proposed name; also the LMDB databases a broker's store may open.
        _Option("max.broker.partitions", "max_broker_partitions", _parse_int(1, 100_000)),
        _Option("max.topic.partitions", "max_topic_partitions", _parse_int(1, 1_000_000)),
        # The log's life (core/log_config.py): retention and rolling, overridable per topic.
        _Option("log.retention.ms", "log_retention_ms", _parse_int(-1, _LONG_MAX)),
        _Option("log.retention.minutes", "log_retention_minutes", _parse_int(-1, _INT_MAX)),
        _Option("log.retention.hours", "log_retention_hours", _parse_int(-1, _INT_MAX)),
        _Option("log.retention.bytes", "log_retention_bytes", _parse_int(-1, _LONG_MAX)),
        _Option("log.segment.bytes", "log_segment_bytes", _parse_int(MIN_SEGMENT_BYTES, _INT_MAX)),
        _Option("log.roll.ms", "log_roll_ms", _parse_int(1, _LONG_MAX)),
        _Option("log.roll.hours", "log_roll_hours", _parse_int(1, _INT_MAX)),
        _Option(
            "log.retention.check.interval.ms",
            "log_retention_check_interval_ms",
            _parse_int(1, _LONG_MAX),
        ),
        _Option("log.cleanup.policy", "log_cleanup_policy", cleanup_policy),
        # Compaction (core/compaction.py): Kafka's LogCleaner settings, overridable per topic.
        _Option("log.cleaner.enable", "log_cleaner_enable", _parse_bool),
        _Option("log.cleaner.backoff.ms", "log_cleaner_backoff_ms", _parse_int(1, _LONG_MAX)),
        _Option(
            "log.cleaner.delete.retention.ms",
            "log_cleaner_delete_retention_ms",
            _parse_int(0, _LONG_MAX),
        ),
        _Option(
            "log.cleaner.min.compaction.lag.ms",
            "log_cleaner_min_compaction_lag_ms",
            _parse_int(0, _LONG_MAX),
        ),
        _Option(
            "log.cleaner.max.compaction.lag.ms",
            "log_cleaner_max_compaction_lag_ms",
            _parse_int(1, _LONG_MAX),
        ),
        _Option(
            "log.cleaner.min.cleanable.ratio",
            "log_cleaner_min_cleanable_ratio",
            lambda name, text: float(dirty_ratio(name, text)),
        ),
        _Option("log.jsonl.max.bytes", "log_jsonl_max_bytes", _parse_int(1024, 1 << 40)),
        _Option("log.jsonl.max.files", "log_jsonl_max_files", _parse_int(1, 100)),
        _Option("cluster.id", "cluster_id", _parse_cluster_id),
        _Option("cluster.secret.file", "cluster_secret_file", _parse_path),
    ]
}


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    node_id: int
    roles: tuple[str, ...] = ("broker",)
    host: str = "127.0.0.1"
    port: int = 0
    controller_host: str = "127.0.0.1"
    controller_port: int = 0
    data_dir: Path = field(default_factory=lambda: Path("."))
    seed: int = 0
    # Kafka's defaults (docs/throttling.md#configs).
    replica_fetch_max_bytes: int = 1 * MiB
    replica_fetch_response_max_bytes: int = 10 * MiB
    message_max_bytes: int = 1_048_588  # the largest record batch a produce may carry
    fetch_max_bytes: int = 55 * MiB  # caps a consumer fetch's max_bytes (not followers')
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_backoff_ms: int = 1000
    replica_lag_time_max_ms: int = 30_000
    num_replica_fetchers: int = 1
    min_insync_replicas: int = 1
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    unclean_leader_election_enable: bool = False
    default_replication_factor: int = 1
    num_partitions: int = 1
    # Ours: storage and transport.
    log_sync: bool = True  # LMDB sync on commit: acknowledged data survives power loss
    lmdb_map_size_bytes: int = 1 << 36
    socket_max_frame_bytes: int = 64 * MiB
    metrics_interval_ms: int = 1000
    request_max_in_flight: int = 64  # per connection, requests handled concurrently
    # Clients' connections over both listeners (core/connection_quotas.py): one beyond it is
    # closed at once (Kafka's is unbounded by default and makes the Acceptor wait instead); the
    # cluster's own nodes are not counted (KIP-402 lets the inter-broker listener past it).
    max_connections: int = 1000
    # One listener's clients (KIP-402's listener.name.<name>.max.connections); None: only
    # max.connections bounds them. `native` is minikafka's protocol, `kafka` Kafka's.
    native_max_connections: int | None = None
    kafka_max_connections: int | None = None
    connections_max_idle_ms: int = 600_000  # Kafka's name and default
    # Per listener and client IP (Kafka's default is unbounded; ours keeps one host from taking
    # every slot of max.connections).
    max_connections_per_ip: int = 200
    # What the requests read from all connections and not yet answered may hold, in bytes;
    # -1: unbounded (Kafka's default). Ours is bounded: see server/listener.py.
    queued_max_request_bytes: int = 512 * MiB
    # Quotas (docs/throttling.md#configs and #measuring-a-rate).
    replication_quota_window_num: int = 11
    replication_quota_window_size_seconds: int = 1
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    # KAFKA-4313's exemption of in-sync replicas; false reproduces ISR thrashing (ours).
    replication_throttle_in_sync_exempt: bool = True
    # Budget each throttled response against the remaining allowance (beyond Kafka: KIP-73's
    # rejected "pessimistic" design), so no response overshoots the bound.
    replication_quota_precise: bool = False
    # The order of partitions in follower fetches (ours; core/fetcher.py): `random`, KIP-73's
    # shuffle, or `rotate`, Kafka's own PartitionStates rotation.
    replica_fetch_partition_order: str = "random"
    replica_fetch_session_enable: bool = True  # KIP-227 sessions for replica fetchers
    max_incremental_fetch_session_cache_slots: int = 1000  # Kafka's name and default (KIP-227)
    # Prometheus text on http://host:metrics.port/metrics; 0 = any free port, -1 = off (ours).
    metrics_port: int = 0
    # The Kafka-protocol listener's (host, port), port 0 = any free one; None: none (ours).
    kafka_listen: tuple[str, int] | None = None
    # Group coordination, Kafka's defaults: __consumer_offsets is made on the first
    # FindCoordinator with this many partitions and replicas (refused, as in Kafka, while fewer
    # brokers are alive: `cluster up` sets the factor to at most its broker count, as Kafka's
    # own config/server.properties sets it to 1).
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 100 << 20  # Kafka's: small, so that the cleaner gets them
    offsets_commit_timeout_ms: int = 5000
    offset_metadata_max_bytes: int = 4096
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = (1 << 31) - 1
    # Kafka's names and defaults (KIP-211: 7 days after a group empties; KIP-854: a day after a
    # producer id's last write).
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000
    # Bounded work per broker: the replicas one broker may host (its store opens that many LMDB
    # databases; more makes every read transaction slower) and the partitions of one topic.
    max_broker_partitions: int = 8192
    max_topic_partitions: int = 50_000
    # The log's life, Kafka's names and defaults (core/log_config.py); None: the next name.
    log_retention_ms: int | None = None
    log_retention_minutes: int | None = None
    log_retention_hours: int = 168
    log_retention_bytes: int = -1
    log_segment_bytes: int = DEFAULT_SEGMENT_BYTES
    log_roll_ms: int | None = None
    log_roll_hours: int = 168
    log_retention_check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS
    log_cleanup_policy: str = "delete"
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000  # Kafka's default
    log_cleaner_delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    log_cleaner_min_compaction_lag_ms: int = 0
    log_cleaner_max_compaction_lag_ms: int = DEFAULT_MAX_COMPACTION_LAG_MS
    log_cleaner_min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO
    # The node's own JSON-lines logs (events, metrics, replicas; server/jsonl.py) roll over at
    # this size and keep this many files each, the live one included (log4j's MaxFileSize and
    # MaxBackupIndex + 1 in Kafka's log4j.properties; ours): at most 3 x 500 MiB by default.
    log_jsonl_max_bytes: int = 100 * MiB
    log_jsonl_max_files: int = 5
    # Inter-node routes, {(dst host, dst port): (via host, via port)} (ours, see module docstring).
    routes: Mapping[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    # The cluster's identity (its membership, see the module docstring); the secret is never shown.
    cluster_id: str = ""
    cluster_secret_file: str = ""
    cluster_secret: bytes = field(default=b"", repr=False)

    @property
    def credential(self) -> ClusterCredential | None:
        """What this node's connections to its peers prove membership with (None: no secret)."""
        if not self.cluster_id or not self.cluster_secret:
            return None
        return ClusterCredential(
            cluster_id=self.cluster_id, node_id=self.node_id, secret=self.cluster_secret
        )

    def require_cluster_identity(self) -> None:
        """ConfigError (one line) unless the node knows its cluster's id and secret."""
        missing = "cluster.id" if not self.cluster_id else None
        if missing is None and not self.cluster_secret:
            missing = "cluster.secret.file"
        if missing is not None:
            raise ConfigError(
                f"{missing} is not set: a node needs its cluster's id and secret file "
                "(`minikafka cluster up` makes both and passes them to every node)"
            )

    def route(self, host: str, port: int) -> tuple[str, int]:
        """Where to dial to reach the peer at (host, port): its route, or the address itself."""
        return self.routes.get((host, port), (host, port))

    @property
    def throttle_settings(self) -> ThrottleSettings:
        """What the replication throttle plans follow (core/quota/planner.py)."""
        return ThrottleSettings(
            precise=self.replication_quota_precise,
            exempt_in_sync=self.replication_throttle_in_sync_exempt,
        )

    @property
    def log_config(self) -> LogConfig:
        """The broker's defaults for every log (a topic's configs override them)."""
        return LogConfig(
            retention_ms=retention_ms_of(
                self.log_retention_ms, self.log_retention_minutes, self.log_retention_hours
            ),
            retention_bytes=self.log_retention_bytes,
            segment_bytes=self.log_segment_bytes,
            segment_ms=roll_ms_of(self.log_roll_ms, self.log_roll_hours),
            cleanup_policy=self.log_cleanup_policy,
            delete_retention_ms=self.log_cleaner_delete_retention_ms,
            min_compaction_lag_ms=self.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms=self.log_cleaner_max_compaction_lag_ms,
            min_cleanable_ratio=self.log_cleaner_min_cleanable_ratio,
        )

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    def with_settings(self, settings: Mapping[str, str]) -> NodeConfig:
        """A copy with Kafka-named settings applied; ConfigError (and nothing applied) if any is bad."""
        changes: dict[str, object] = {}
        for name, text in settings.items():
            option = OPTIONS.get(name)
            if option is None:
                known = ", ".join(sorted(OPTIONS))
                raise ConfigError(f"unknown config {name!r}; known configs: {known}")
            changes[option.attr] = option.parse(name, text)
        if "cluster_secret_file" in changes:
            changes["cluster_secret"] = read_cluster_secret(str(changes["cluster_secret_file"]))
        result = replace(self, **changes)
        result.check_caps()
        return result

    def check_caps(self) -> None:
        """ConfigError unless every accepted batch can be carried both ways: a produce of
        `message.max.bytes` and a fetch response as large as the largest of the batch (KIP-74
        returns one whole batch above any cap), `fetch.max.bytes` and
        `replica.fetch.response.max.bytes` must each fit in a frame with room for headers."""
        room = self.socket_max_frame_bytes - FRAME_HEADROOM_BYTES
        for name in ("message.max.bytes", "fetch.max.bytes", "replica.fetch.response.max.bytes"):
            value = getattr(self, OPTIONS[name].attr)
            if value > room:
                raise ConfigError(
                    f"{name}={value} does not fit in a frame: expected at most "
                    f"socket.max.frame.bytes ({self.socket_max_frame_bytes}) minus "
                    f"{FRAME_HEADROOM_BYTES} bytes of headers = {room}"
                )

    def settings(self) -> dict[str, object]:
        """Every Kafka-named setting with its value (for `describe` and the event log)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {name: values[o.attr] for name, o in OPTIONS.items()}


def parse_settings(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`["a.b=1", ...]` -> {"a.b": "1"}; ConfigError for an item without '='."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ConfigError(
                f"{pair!r}: expected name=value, e.g. replica.fetch.max.bytes=1048576"
            )
        out[name.strip()] = value.strip()
    return out


ROUTE_FORM = "DST_HOST:DST_PORT=VIA_HOST:VIA_PORT, e.g. 127.0.0.1:9092=127.0.0.1:19092"


def parse_routes(items: list[str] | tuple[str, ...]) -> dict[tuple[str, int], tuple[str, int]]:
    """Repeated `--route` values -> {(dst host, dst port): (via host, via port)}.

    ConfigError (one line, naming the accepted form) for a malformed item, a port outside
    1..65535, or a destination routed twice.
    """
    routes: dict[tuple[str, int], tuple[str, int]] = {}
    for item in items:
        dst_text, sep, via_text = item.partition("=")
        try:
            if not sep:
                raise ConfigError("no '='")
            dst = parse_address(dst_text.strip(), "destination")
            via = parse_address(via_text.strip(), "via")
        except ConfigError:
            raise ConfigError(f"--route {item!r}: expected {ROUTE_FORM}") from None
        if dst[1] == 0 or via[1] == 0:
            raise ConfigError(f"--route {item!r}: ports must be 1..65535; expected {ROUTE_FORM}")
        if dst in routes:
            raise ConfigError(f"--route {item!r}: {dst[0]}:{dst[1]} is routed twice")
        routes[dst] = via
    return routes


ROLES = ("broker", "controller")


def parse_roles(text: str) -> tuple[str, ...]:
    roles = tuple(r.strip() for r in text.split(",") if r.strip())
    if not roles or any(r not in ROLES for r in roles) or len(set(roles)) != len(roles):
        raise ConfigError(f"--roles {text!r}: expected broker, controller or broker,controller")
    return roles


def parse_address(text: str, what: str = "address") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    try:
        port_number = int(port)
    except ValueError:
        port_number = -1
    if not sep or not host or not 0 <= port_number <= 65535:
        raise ConfigError(f"{what} {text!r}: expected host:port, e.g. 127.0.0.1:9092")
    return host, port_number
