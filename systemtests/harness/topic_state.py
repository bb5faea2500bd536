"""The topic's state as Metadata shows it: creating it with an explicit assignment, polling
until a condition holds (bounded), and the final check that every replica is in the ISR.

`replica_state` maps partition -> (leader, replicas, isr). Every wait polls every `POLL_S` and
gives up with a HarnessError after its time limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.errors import BrokerError, ErrorCode
from minikafka.wire.messages import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from systemtests.harness.clients import HarnessError
from systemtests.harness.layout import Layout

TOPIC = "kip73"
PARTITIONS = 100
POLL_S = 0.1

State = dict[int, tuple[int, list[int], list[int]]]


async def create_topic(client: ClusterClient, layout: Layout) -> None:
    req = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=TOPIC,
                assignments=[list(layout.initial[p]) for p in range(layout.partitions)],
            )
        ]
    )
    resp = await client.request_any(req)
    assert isinstance(resp, CreateTopicsResponse)
    (result,) = resp.topics
    if result.error_code != ErrorCode.NONE:
        raise BrokerError(result.error_code, result.error_message or f"cannot create {TOPIC}")


async def replica_state(client: ClusterClient) -> State:
    """partition -> (leader, replicas, isr), from Metadata."""
    md = await client.refresh_metadata([TOPIC])
    (topic,) = [t for t in md.topics if t.name == TOPIC]
    return {p.partition: (p.leader, list(p.replicas), list(p.isr)) for p in topic.partitions}


async def wait_until(
    client: ClusterClient,
    done: Callable[[State], bool],
    what: str,
    timeout_s: float,
    *,
    clock: Callable[[], float],
) -> float:
    """Poll Metadata until `done(state)`; -> the time (`clock`, the run folder's) of the answer
    that showed it."""
    with trio.move_on_after(timeout_s):
        while True:
            state = await replica_state(client)
            seen = clock()
            if len(state) == PARTITIONS and done(state):
                return seen
            await trio.sleep(POLL_S)
    raise HarnessError(f"{what}: not within {timeout_s:.0f} s")


def all_in_sync(replicas: Mapping[int, tuple[int, ...]]) -> Callable[[State], bool]:
    def done(state: State) -> bool:
        return all(
            list(state[p][1]) == list(replicas[p]) and set(state[p][2]) == set(replicas[p])
            for p in replicas
        )

    return done


def final_problems(state: State, expected: Mapping[int, tuple[int, ...]]) -> list[str]:
    out = []
    for p, want in sorted(expected.items()):
        leader, replicas, isr = state[p]
        if replicas != list(want) or set(isr) != set(want) or leader not in want:
            out.append(f"{TOPIC}-{p}: leader {leader} replicas {replicas} isr {isr}, want {want}")
    return out
