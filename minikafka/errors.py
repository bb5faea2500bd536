"""Every error minikafka raises, and the wire error codes.

One root exception (`MiniKafkaError`). Protocol errors split into our bug (`LocalProtocolError`)
and the peer's fault (`RemoteProtocolError`): a peer's malformed frame closes that connection
only. Broker errors carry a wire code and a `retriable` flag; clients retry from the flag.
Codes are Kafka's numbers where Kafka has the error (org.apache.kafka.common.protocol.Errors).
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    COORDINATOR_LOAD_IN_PROGRESS = 14  # the group coordinator is still reading its offsets
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16  # this broker does not lead the group's __consumer_offsets partition
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    NETWORK_EXCEPTION = 13
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    # Kafka's ClusterAuthorizationException: a control-plane request from a connection that has
    # not proven membership of this cluster (server/cluster_gate.py). Not retriable.
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59  # KIP-98/KIP-360: no state for this producer id here
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45  # KIP-98: a gap in a producer's sequence numbers
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47  # KIP-98/KIP-588: an epoch older than the producer's current
    # KIP-227 incremental fetch sessions (core/fetch_session.py): the follower starts a new
    # session with a full fetch (FetchSessionHandler.handleResponse).
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    # KIP-207: a new leader whose high watermark has not reached the start of its epoch cannot
    # say where a consumer's end is (Partition.fetchOffsetForTimestamp); retriable.
    OFFSET_NOT_AVAILABLE = 78
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53  # transactions are not served
    UNSUPPORTED_COMPRESSION_TYPE = 76  # a RecordBatch v2 codec the broker lacks
    INVALID_RECORD = 87
    REASSIGNMENT_IN_PROGRESS = 60  # a topic being reassigned (DeleteTopics refuses it here)
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INELIGIBLE_REPLICA = 107
    INVALID_UPDATE_VERSION = 95
    BROKER_ID_NOT_REGISTERED = 102


# Kafka's RetriableException subclasses: a client may retry these after refreshing metadata.
RETRIABLE: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        # KafkaStorageException is an InvalidMetadataException: the client refreshes metadata
        # and retries, by then against a leader whose log dir is healthy.
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


def is_retriable(code: int) -> bool:
    try:
        return ErrorCode(code) in RETRIABLE
    except ValueError:
        return False


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


class MiniKafkaError(Exception):
    """Root of every exception minikafka raises on purpose."""


class ProtocolError(MiniKafkaError):
    """The byte stream or a message broke the protocol."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something malformed: close that connection, keep serving the others."""


class LocalProtocolError(ProtocolError):
    """We were asked to send something the protocol forbids: a bug on our side."""


class CorruptRecordError(RemoteProtocolError):
    """A record batch failed its header or CRC check."""


class BrokerError(MiniKafkaError):
    """A broker answered with an error code."""

    def __init__(self, code: int, message: str = "") -> None:
        self.code = int(code)
        self.retriable = is_retriable(code)
        super().__init__(f"{error_name(code)}{': ' + message if message else ''}")


class ConfigError(MiniKafkaError, ValueError):
    """A user-supplied config, flag or file is invalid; the message names the accepted form."""


class ClusterError(MiniKafkaError):
    """Launching or controlling a local cluster failed."""


# An error message a response carries echoes the peer's own input (an unknown config name,
# shown with repr): Kafka's legacy strings hold 32,767 bytes, and a message past them could not
# be encoded, so the request went unanswered (found by fuzzing). Long messages are cut.
MAX_MESSAGE_CHARS = 1000


def bounded_message(message: str | None) -> str | None:
    """`message` cut to MAX_MESSAGE_CHARS characters, with a mark saying how much was cut."""
    if message is None or len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[: MAX_MESSAGE_CHARS - 40]}... ({len(message):,} characters in all)"


def describe(exc: BaseException) -> str:
    """One line for an exception: `Type: message`, of the first leaf of a (Trio) exception
    group, for reports that must say why something stopped."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
