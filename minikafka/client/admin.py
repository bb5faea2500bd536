"""The admin client: create and describe topics (requests go to any broker, which forwards
admin requests to the controller)."""

from __future__ import annotations

from collections.abc import Mapping

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.errors import BrokerError, ErrorCode
from minikafka.wire.messages import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    MetadataResponse,
)


class Admin:
    def __init__(self, client: ClusterClient) -> None:
        self.client = client

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        wait_s: float = 30.0,
    ) -> None:
        """Create a topic and wait until every partition has a leader in the metadata."""
        req = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=dict(configs or {}),
                )
            ]
        )
        resp = await self.client.request_any(req)
        assert isinstance(resp, CreateTopicsResponse)
        (result,) = resp.topics
        if result.error_code != ErrorCode.NONE:
            raise BrokerError(
                result.error_code, result.error_message or f"cannot create topic {name!r}"
            )
        with trio.fail_after(wait_s):
            while True:
                md = await self.client.refresh_metadata([name])
                topic = next((t for t in md.topics if t.name == name), None)
                if (
                    topic is not None
                    and len(topic.partitions) == partitions
                    and all(p.leader >= 0 for p in topic.partitions)
                ):
                    return
                await trio.sleep(0.05)

    async def describe(self, topics: list[str] | None = None) -> MetadataResponse:
        return await self.client.refresh_metadata(topics)
