"""Broker requests to the controller: registration, heartbeats, session expiry, producer ids.

Mirrors KRaft's ClusterControlManager (registrations and broker epochs) and
BrokerHeartbeatManager (session timeouts); the liveness rules are in core/controller/state.py's
docstring. A broker is fenced (`_fence`, core/controller/base.py) when its session expires or a
new incarnation of it registers, and unfenced by registering or by heartbeating with its epoch.
"""

from collections.abc import Iterable

from minikafka.common import TopicPartition
from minikafka.core.controller.base import ControllerBase
from minikafka.core.controller.changes import offline_changes
from minikafka.core.controller.hosts import registration_refused
from minikafka.core.controller.model import BrokerRecord, Effect, Event
from minikafka.core.producer_ids import ProducerIdBlock, allocate_block
from minikafka.errors import ErrorCode


class BrokerRequests(ControllerBase):
    # ------------------------------------------------------------------------ brokers

    def register_broker(
        self,
        *,
        broker_id: int,
        incarnation_id: str,
        host: str,
        port: int,
        now_ms: int,
        kafka_host: str = "",
        kafka_port: int = -1,
    ) -> tuple[int, int, list[Effect]]:
        """-> (error_code, broker_epoch, effects). BrokerRegistration (ClusterControlManager)."""
        self._observe(now_ms)
        if broker_id < 0:
            return ErrorCode.INVALID_REQUEST, -1, []
        refused = registration_refused(broker_id, host, port)  # core/controller/hosts.py
        if refused is None and kafka_port != -1:  # its Kafka listener is advertised the same way
            refused = registration_refused(broker_id, kafka_host, kafka_port)
        if refused is not None:
            return ErrorCode.INVALID_REQUEST, -1, [refused]
        events: list[Event] = []
        changed: set[TopicPartition] = set()
        known = self._brokers.get(broker_id)
        if known is not None and known.incarnation_id == incarnation_id:
            # A retry of a registration whose answer was lost: same epoch.
            known.last_contact_ms = now_ms
            if not known.fenced:
                return ErrorCode.NONE, known.epoch, []
            changed |= self._unfence(known, events)
            return ErrorCode.NONE, known.epoch, self._effects(events, changed, joined=broker_id)
        if known is not None and (not known.fenced or known.cleanup_pending):
            changed |= self._fence(known, "restart", events)  # a new incarnation: a restart
        broker = BrokerRecord(
            broker_id=broker_id,
            incarnation_id=incarnation_id,
            host=host,
            port=port,
            kafka_host=kafka_host,
            kafka_port=kafka_port,
            epoch=self._next_broker_epoch,
            fenced=True,
            last_contact_ms=now_ms,
        )
        self._next_broker_epoch += 1
        self._brokers[broker_id] = broker
        events.append(
            broker.event(
                "broker_registered",
                incarnation_id=incarnation_id,
                host=host,
                port=port,
                kafka_port=kafka_port,
                restart=known is not None,
            )
        )
        changed |= self._unfence(broker, events)
        return ErrorCode.NONE, broker.epoch, self._effects(events, changed, joined=broker_id)

    def allocate_producer_ids(
        self, *, broker_id: int, broker_epoch: int
    ) -> tuple[int, ProducerIdBlock | None, list[Effect]]:
        """-> (error_code, block, effects). AllocateProducerIds (KIP-730): the event effect makes
        the shell persist the advanced counter before the block is answered."""
        code, block = allocate_block(
            self._next_producer_id,
            broker_epoch=broker_epoch,
            registered_epoch=self.broker_epoch(broker_id),
        )
        if block is None:
            return code, None, []
        self._next_producer_id = block.next_block_first_id
        event = Event(
            name="producer_ids_allocated",
            fields={"broker_id": broker_id, "first_id": block.first_id, "size": block.size},
        )
        return code, block, [event]

    def heartbeat(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        now_ms: int,
        offline: Iterable[TopicPartition] = (),
    ) -> tuple[int, bool, list[Effect]]:
        """-> (error_code, is_fenced, effects). BrokerHeartbeat: keeps the broker live.
        `offline`: the replicas the broker cannot write (it repeats the whole list each time);
        newly reported ones leave their ISRs and their leaderships (`offline_changes`)."""
        self._observe(now_ms)
        broker = self._brokers.get(broker_id)
        if broker is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED, True, []
        if broker_epoch != broker.epoch:
            return ErrorCode.STALE_BROKER_EPOCH, True, []
        broker.last_contact_ms = now_ms
        events: list[Event] = []
        changed: set[TopicPartition] = set()
        new_offline = frozenset(offline) - broker.offline
        if new_offline:
            broker.offline |= new_offline
            events.append(
                broker.event("replicas_offline", partitions=[str(tp) for tp in sorted(new_offline)])
            )
            changes = offline_changes(
                self._partitions,
                broker_id,
                new_offline,
                live=set(self._live_ids()),
                unclean_allowed=self._unclean_allowed,
            )
            changed |= self._apply(changes, events)
        joined = None
        if broker.fenced:
            changed |= self._unfence(broker, events)
            joined = broker_id
        if not events:
            return ErrorCode.NONE, False, []
        return ErrorCode.NONE, False, self._effects(events, changed, joined=joined)

    def next_deadline_ms(self) -> int | None:
        """The first now_ms at which `on_deadline` fences someone (last + timeout + 1)."""
        deadlines = [
            b.last_contact_ms + self.config.session_timeout_ms + 1
            for b in self._brokers.values()
            if (not b.fenced or b.cleanup_pending) and b.last_contact_ms is not None
        ]
        return min(deadlines) if deadlines else None

    def on_deadline(self, now_ms: int) -> list[Effect]:
        """Fence every broker whose last contact + session timeout < now_ms."""
        self._observe(now_ms)
        expired = [
            b
            for _, b in sorted(self._brokers.items())
            if (not b.fenced or b.cleanup_pending)
            and b.last_contact_ms is not None
            and b.last_contact_ms + self.config.session_timeout_ms < now_ms
        ]
        if not expired:
            return []
        reasons = {
            b.broker_id: "controller_restart_timeout" if b.cleanup_pending else "session_timeout"
            for b in expired
        }
        for broker in expired:
            broker.fenced = True  # first, so that none of them is elected in the meantime
        events: list[Event] = []
        changed: set[TopicPartition] = set()
        for broker in expired:
            changed |= self._fence(broker, reasons[broker.broker_id], events)
        return self._effects(events, changed)
