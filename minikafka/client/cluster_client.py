"""A client's view of the cluster: bootstrap, metadata, and one connection per node.

`open_client("127.0.0.1:9092,...")` yields a ClusterClient whose connections live in its own
nursery. Metadata is fetched from any reachable bootstrap node and refreshed on demand (after a
retriable error such as NOT_LEADER_OR_FOLLOWER). Connections that break are reopened on next use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial

import trio

from minikafka.client.connection import Connection, hold_connection, sole_exception
from minikafka.common import TopicPartition
from minikafka.errors import BrokerError, ConfigError, ErrorCode, MiniKafkaError
from minikafka.wire.messages import BrokerInfo, MetadataRequest, MetadataResponse, PartitionMetadata
from minikafka.wire.request import R, Request


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(
                f"bootstrap {text!r}: expected host:port[,host:port...], e.g. 127.0.0.1:9092"
            )
        out.append((host, int(port)))
    return out


class ClusterClient:
    def __init__(
        self,
        nursery: trio.Nursery,
        bootstrap: Sequence[tuple[str, int]],
        client_id: str,
        *,
        connect: Callable[..., AbstractAsyncContextManager[Connection]] | None = None,
    ) -> None:
        self._nursery = nursery
        self._connect = connect  # open_connection's signature; None: open_connection itself
        self.bootstrap = list(bootstrap)
        self.client_id = client_id
        self._conns: dict[tuple[str, int], tuple[Connection, trio.CancelScope]] = {}
        self._opening: dict[tuple[str, int], trio.Lock] = {}
        self.brokers: dict[int, BrokerInfo] = {}
        self.partitions: dict[TopicPartition, PartitionMetadata] = {}
        self.controller_id = -1

    async def connection(self, address: tuple[str, int]) -> Connection:
        """The connection to `address`, opened by one caller while the others wait for it: one
        connection per node keeps a producer's requests to it in order."""
        entry = self._conns.get(address)
        if entry is not None and not entry[0].broken:
            return entry[0]
        async with self._opening.setdefault(address, trio.Lock()):
            entry = self._conns.get(address)
            if entry is not None and not entry[0].broken:
                return entry[0]
            if entry is not None:
                entry[1].cancel()
            conn, scope = await self._open(address)
            self._conns[address] = (conn, scope)
            return conn

    async def _open(self, address: tuple[str, int]) -> tuple[Connection, trio.CancelScope]:
        return await self._nursery.start(
            partial(hold_connection, address, self.client_id, connect=self._connect)
        )

    async def node_connection(self, node_id: int) -> Connection:
        info = self.brokers.get(node_id)
        if info is None:
            await self.refresh_metadata()
            info = self.brokers.get(node_id)
        if info is None:
            # Its leader left the broker list between `leader_of` and here (a broker killed
            # meanwhile): as Kafka's client, the leader is unknown, retriable after fresh
            # metadata, not BROKER_NOT_AVAILABLE, which stopped an experiment's producer.
            raise BrokerError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"broker {node_id} is not in the metadata"
            )
        return await self.connection((info.host, info.port))

    async def request_any(self, body: Request[R], *, timeout_s: float = 30.0) -> R:
        """Send to the first bootstrap node that answers."""
        last: MiniKafkaError | None = None
        for address in self.bootstrap:
            try:
                conn = await self.connection(address)
                return await conn.request(body, timeout_s=timeout_s)
            except BrokerError as exc:
                if not exc.retriable:
                    raise
                last = exc
        assert last is not None
        raise last

    async def refresh_metadata(self, topics: Sequence[str] | None = None) -> MetadataResponse:
        resp = await self.request_any(
            MetadataRequest(topics=list(topics) if topics is not None else None)
        )
        self.brokers = {b.node_id: b for b in resp.brokers}
        self.controller_id = resp.controller_id
        for t in resp.topics:
            for pm in t.partitions:
                self.partitions[TopicPartition(t.name, pm.partition)] = pm
        return resp

    def leader_of(self, tp: TopicPartition) -> int:
        """The partition's leader, or -1 when unknown. A leader the metadata's brokers do not
        list (fenced, or restarting after a wipe) is unknown too, as in Kafka's client
        (MetadataResponse.toPartitionInfo: the leader is looked up among the response's nodes),
        so callers wait for fresh metadata instead of failing with BROKER_NOT_AVAILABLE."""
        pm = self.partitions.get(tp)
        if pm is None or pm.leader not in self.brokers:
            return -1
        return pm.leader

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.partitions if tp.topic == topic)

    async def aclose(self) -> None:
        for _conn, scope in self._conns.values():
            scope.cancel()
        self._conns.clear()


@asynccontextmanager
async def open_client(
    bootstrap: str | Sequence[tuple[str, int]],
    *,
    client_id: str = "minikafka-client",
    connect: Callable[..., AbstractAsyncContextManager[Connection]] | None = None,
) -> AsyncIterator[ClusterClient]:
    """A ClusterClient for the block (connecting with `connect`, open_connection's signature,
    if given). What the block raises comes out as itself, not wrapped in the pool's nursery's
    ExceptionGroup, so callers' `except ConfigError` work (as with `open_connection`)."""
    addresses = parse_bootstrap(bootstrap) if isinstance(bootstrap, str) else list(bootstrap)
    try:
        async with trio.open_nursery() as nursery:
            client = ClusterClient(nursery, addresses, client_id, connect=connect)
            try:
                yield client
            finally:
                await client.aclose()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise sole_exception(group) from None
