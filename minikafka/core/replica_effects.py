"""What the broker's replica machine (core/replica.py) asks its shell to do.

Each call of the machine returns a list of these, in the order the shell carries them out
(server/replica_manager.py, server/isr_updates.py). They are plain frozen values: tests read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minikafka.common import EpochEntry
from minikafka.wire.messages import PartitionState

__all__ = [
    "Effect",
    "PersistEpochs",
    "ProposeIsr",
    "ReplicaEvent",
    "StartFetching",
    "StopFetching",
    "WakeWaiters",
    "adoption_events",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class WakeWaiters:
    """The log end offset, the HW or the role changed: delayed produces and fetches of this
    partition re-check their condition (Kafka's DelayedOperationPurgatory.checkAndComplete)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StopFetching:
    """Take the partition out of its replica fetcher (ReplicaFetcherManager.removeFetcher)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StartFetching:
    """Fetch the partition from `leader` at `fetch_offset` (ReplicaFetcherManager.addFetcher):
    the leader reports a divergence, if any, from `last_fetched_epoch` (KIP-320)."""

    leader: int
    leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistEpochs:
    """Write this leader-epoch cache (LeaderEpochFileCache's checkpoint); the machine adopts it
    when the write is committed (`on_append_committed`), so a failed write is retried."""

    epochs: tuple[EpochEntry, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProposeIsr:
    """Send this ISR to the controller in an AlterPartition (KIP-497); it is in flight (the
    machine's `pending_isr`) until `on_alter_partition_result`."""

    isr: tuple[int, ...]
    why: str  # "shrink" or "expand"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaEvent:
    """A line for the node's events.jsonl."""

    name: str
    fields: dict[str, Any] = field(default_factory=dict)


Effect = WakeWaiters | StopFetching | StartFetching | PersistEpochs | ProposeIsr | ReplicaEvent


def adoption_events(
    st: PartitionState,
    *,
    old_replicas: list[int],
    replicas: list[int],
    old_isr: list[int],
    isr: list[int],
) -> list[Effect]:
    """The events of a leader adopting the controller's state `st` within its epoch: what of
    the replica set and of the ISR changed (nothing: no event)."""
    events: list[Effect] = []
    if replicas != old_replicas:
        fields = {
            "old_replicas": old_replicas,
            "replicas": list(st.replicas),
            "adding_replicas": list(st.adding_replicas),
            "removing_replicas": list(st.removing_replicas),
            "partition_epoch": st.partition_epoch,
        }
        events.append(ReplicaEvent(name="replicas_updated_by_controller", fields=fields))
    if isr != old_isr:
        fields = {"old_isr": old_isr, "isr": sorted(st.isr), "partition_epoch": st.partition_epoch}
        events.append(ReplicaEvent(name="isr_updated_by_controller", fields=fields))
    return events
