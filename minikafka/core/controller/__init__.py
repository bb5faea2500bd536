"""The controller: a sans-IO state machine over brokers, topics, partitions and configs.

`ControllerState` (state.py) is the whole of it; the values it takes and the effects it returns
are model.py's. Re-exports only.
"""

from minikafka.core.controller.model import (
    BrokerRecord,
    ControllerConfig,
    Effect,
    Event,
    PartitionRecord,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
)
from minikafka.core.controller.state import ControllerState

__all__ = [
    "BrokerRecord",
    "ControllerConfig",
    "ControllerState",
    "Effect",
    "Event",
    "PartitionRecord",
    "SendLeaderAndIsr",
    "SendStopReplica",
    "SendUpdateMetadata",
]
