"""The nemesis: runs a fault schedule against a cluster, and heals it all at the end.

Every fault runs in its own task: it waits for its start, resolves its target from the metadata
at that moment (the leader of partition P, a follower of P, the controller, a broker), applies
the fault, waits for its end and undoes it. Start and end go to nemesis.jsonl and, as `info`
ops of process `nemesis`, to the history. Process faults go through the experiment's `Target`
(experiment/target.py: a local cluster's processes, or a simulation's nodes); network faults
through the cluster's fault-injecting proxy (minikafka/faults). `heal` undoes whatever is still
in force, whatever happened to the tasks: it resumes paused nodes, restarts dead ones and clears
every link.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.errors import MiniKafkaError
from minikafka.experiment import target as targets
from minikafka.experiment.schedule import Fault, Target
from minikafka.experiment.workload import History
from minikafka.testing.run_folder import JsonLines
from minikafka.testing.seeds import derive_rng


class NemesisError(MiniKafkaError):
    """A fault could not be applied or undone (the experiment's verdict is then unknown)."""


class Nemesis:
    def __init__(
        self,
        *,
        cluster: targets.Target,
        client: ClusterClient,
        topic: str,
        history: History,
        log: JsonLines,
        proxy: Any | None,
        seed: int,
        progress: Callable[[str], None] = lambda _msg: None,
    ) -> None:
        self.cluster = cluster
        self.client = client
        self.topic = topic
        self.history = history
        self.log = log
        self.proxy = proxy
        self.rng = derive_rng(seed, "nemesis-targets")
        self.progress = progress
        self.errors: list[str] = []
        self._paused: set[int] = set()
        self._down: set[int] = set()
        self._full: set[int] = set()  # disks filled, not yet freed
        self._links_touched = False

    # -- the schedule -----------------------------------------------------------------------

    async def run(self, faults: Sequence[Fault], t0: float) -> None:
        """Run every fault of `faults` (times relative to `t0`, a `trio.current_time()`)."""
        async with trio.open_nursery() as nursery:
            for i, fault in enumerate(faults):
                nursery.start_soon(self._one, i, fault, t0)

    async def _one(self, i: int, fault: Fault, t0: float) -> None:
        await trio.sleep_until(t0 + fault.start_s)
        try:
            node = await self.resolve(fault.target)
            self._note("start", i, fault, node)
            await self._apply(fault, node)
            await trio.sleep_until(t0 + fault.end_s)
            await self._undo(fault, node)
            self._note("end", i, fault, node)
        except (MiniKafkaError, OSError) as exc:
            self.errors.append(f"fault {i} {fault.kind} {fault.target}: {exc}")
            self._note("error", i, fault, None, error=str(exc))

    def _note(self, what: str, i: int, fault: Fault, node: int | None, **extra: Any) -> None:
        fields = {"fault": i, **fault.to_json(), "node": node, **extra}
        self.log.write({"time": round(self.history.elapsed(), 3), "event": what, **fields})
        self.history.op("nemesis", "info", f"{what}-fault", **fields)
        self.progress(f"nemesis: {what} {fault.kind} on {fault.target} (node {node})")

    async def resolve(self, target: Target) -> int:
        if target.role == "broker":
            assert target.number is not None
            self.cluster.spec.node(target.number)  # a one-line error for an unknown id
            return target.number
        if target.role == "controller":
            return self.cluster.spec.controller.node_id
        assert target.number is not None
        md = await self.client.refresh_metadata([self.topic])
        parts = {p.partition: p for t in md.topics if t.name == self.topic for p in t.partitions}
        p = parts.get(target.number)
        if p is None:
            raise NemesisError(f"{self.topic} has no partition {target.number}")
        if target.role == "leader":
            if p.leader < 0:
                raise NemesisError(f"{self.topic}-{target.number} has no leader now")
            return p.leader
        followers = [r for r in p.replicas if r != p.leader]
        if not followers:
            raise NemesisError(f"{self.topic}-{target.number} has no follower")
        return self.rng.choice(followers)

    # -- faults -----------------------------------------------------------------------------

    def _others(self, node: int) -> list[int]:
        return [n.node_id for n in self.cluster.spec.nodes if n.node_id != node]

    def _links(self, node: int) -> list[tuple[int, int]]:
        return [link for o in self._others(node) for link in ((node, o), (o, node))]

    def _need_proxy(self, fault: Fault) -> Any:
        if self.proxy is None:
            raise NemesisError(f"a {fault.kind} fault needs the cluster's fault proxy")
        self._links_touched = True
        return self.proxy

    async def _apply(self, fault: Fault, node: int) -> None:
        lc = self.cluster
        if fault.kind in ("kill", "wipe"):
            self._down.add(node)
            await lc.kill(node)
            if fault.kind == "wipe":
                await lc.wipe(node)
        elif fault.kind == "power-loss":
            self._down.add(node)
            await lc.power_loss(node)
        elif fault.kind == "disk-full":
            self._full.add(node)
            await lc.disk_full(node, True)
        elif fault.kind == "failed-write":
            self._down.add(node)  # restarted at the end: its offline replica comes back
            await lc.fail_write(node)
        elif fault.kind == "pause":
            self._paused.add(node)
            await lc.pause(node)
        elif fault.kind == "restart":
            self._down.add(node)  # until it is ready again: heal() retries a failed restart
            await self._restart(node)
        elif fault.kind == "partition":
            others = self._others(node)
            await self._need_proxy(fault).partition([[node], others])
        elif fault.kind == "latency":
            await self._need_proxy(fault).set_links(
                self._links(node), latency_ms=fault.params["latency_ms"]
            )
        elif fault.kind == "bandwidth":
            await self._need_proxy(fault).set_links(
                self._links(node), bandwidth_bps=fault.params["bandwidth_bps"]
            )

    async def _undo(self, fault: Fault, node: int) -> None:
        if fault.kind in ("kill", "wipe", "power-loss", "failed-write"):
            await self._restart(node)
        elif fault.kind == "pause":
            await self.cluster.resume(node)
            self._paused.discard(node)
        elif fault.kind == "disk-full":
            await self._free_disk(node)
        elif fault.kind == "partition":
            await self.proxy.set_links(self._links(node), blocked=False)
        elif fault.kind == "latency":
            await self.proxy.set_links(self._links(node), latency_ms=None)
        elif fault.kind == "bandwidth":
            await self.proxy.set_links(self._links(node), bandwidth_bps=None)

    async def _restart(self, node: int) -> None:
        await self.cluster.restart(node)
        self._down.discard(node)

    async def _free_disk(self, node: int) -> None:
        """Space again, and a restart: a failed log store comes back only when reopened."""
        await self.cluster.disk_full(node, False)
        self._full.discard(node)
        self._down.add(node)
        await self._restart(node)

    async def heal(self) -> None:
        """Undo everything still in force: resume, restart, clear every link. A step that fails
        is recorded in `errors` (the verdict is then unknown) and the other steps still run."""
        steps: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            (f"resume node {n}", partial(self.cluster.resume, n)) for n in sorted(self._paused)
        ]
        steps += [
            (f"free node {n}'s disk", partial(self._free_disk, n)) for n in sorted(self._full)
        ]
        steps += [(f"restart node {n}", partial(self._restart, n)) for n in sorted(self._down)]
        if self._links_touched and self.proxy is not None:
            steps.append(("clear the proxy's links", self.proxy.heal))
        for what, step in steps:
            try:
                await step()
            except (MiniKafkaError, OSError) as exc:
                self.errors.append(f"heal: {what}: {exc}")
        self._paused.clear()
        self.log.write({"time": round(self.history.elapsed(), 3), "event": "healed"})
        self.history.op("nemesis", "info", "heal")
