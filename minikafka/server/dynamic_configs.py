"""A broker's live dynamic configs: the controller's last pushed snapshot and its views.

The controller sends the whole config snapshot in UpdateMetadata whenever it changes and to a
broker that (re)joins; the Broker's UpdateMetadata handler hands it to `DynamicConfigs.apply`,
which keeps it if its version is newer than the one held (an older or repeated push is ignored)
and then calls every subscriber. Nothing else changes it, so a config takes effect as soon as the
push arrives, without a restart.

The views are the pure functions of core/dynamic_config.py, memoised per snapshot because the
fetch and produce paths ask on every request. Subscribers (the quota managers) are plain
callables run synchronously after a change with the new snapshot; they must not raise or block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from minikafka.core.dynamic_config import (
    BrokerThrottleConfig,
    ConfigSnapshot,
    ThrottledReplicas,
    TopicOverrides,
    client_quota,
    effective_broker_config,
    topic_overrides,
    topic_throttled_replicas,
)
from minikafka.wire.messages import ConfigEntity

Subscriber = Callable[[ConfigSnapshot], None]
MAX_MEMO_CLIENTS = 10_000


class DynamicConfigs:
    def __init__(self) -> None:
        self._snapshot = ConfigSnapshot()  # version 0, empty: what the controller starts with
        self._subscribers: list[Subscriber] = []
        self._brokers: dict[int, BrokerThrottleConfig] = {}
        self._topics: dict[str, tuple[ThrottledReplicas, ThrottledReplicas]] = {}
        self._clients: dict[str, tuple[int | None, int | None]] = {}
        self._overrides: dict[str, TopicOverrides] = {}

    @property
    def snapshot(self) -> ConfigSnapshot:
        return self._snapshot

    @property
    def version(self) -> int:
        return self._snapshot.version

    def apply(self, snapshot_entities: Iterable[ConfigEntity], version: int) -> bool:
        """Take a pushed snapshot if `version` is newer than ours; True if it was taken."""
        if version <= self._snapshot.version:
            return False
        self._snapshot = ConfigSnapshot.from_wire(snapshot_entities, version)
        self._brokers.clear()
        self._topics.clear()
        self._clients.clear()
        self._overrides.clear()
        for callback in list(self._subscribers):
            callback(self._snapshot)
        return True

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(snapshot)` after each change; returns a function that unsubscribes."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def broker_config(self, broker_id: int) -> BrokerThrottleConfig:
        """The broker's effective throttle settings (its own values over the cluster default)."""
        config = self._brokers.get(broker_id)
        if config is None:
            config = self._brokers[broker_id] = effective_broker_config(self._snapshot, broker_id)
        return config

    def topic_throttled_replicas(self, topic: str) -> tuple[ThrottledReplicas, ThrottledReplicas]:
        """(leader, follower) throttled replica lists of a topic."""
        lists = self._topics.get(topic)
        if lists is None:
            lists = self._topics[topic] = topic_throttled_replicas(self._snapshot, topic)
        return lists

    def topic_overrides(self, topic: str) -> TopicOverrides:
        """The topic's own min.insync.replicas, max.message.bytes, ... (None = the broker's)."""
        overrides = self._overrides.get(topic)
        if overrides is None:
            overrides = self._overrides[topic] = topic_overrides(self._snapshot, topic)
        return overrides

    def client_quota(self, client_id: str) -> tuple[int | None, int | None]:
        """(producer_byte_rate, consumer_byte_rate) in B/s, None = unlimited (KIP-13)."""
        quota = self._clients.get(client_id)
        if quota is None:
            if len(self._clients) >= MAX_MEMO_CLIENTS:  # client ids come from peers: bound it
                self._clients.clear()
            quota = self._clients[client_id] = client_quota(self._snapshot, client_id)
        return quota
