"""A case of the KIP-73 matrix (`CaseSpec`, its name and what it varies) and what its run
left (`CaseRun`); run by systemtests/harness/runner.py, listed by matrix.py, judged by
verdicts.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from minikafka.testing.checker import Verdict
from minikafka.testing.run_folder import CaseInfo, RunFolder
from systemtests.harness.layout import Prediction
from systemtests.harness.quota_modes import Judging


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseSpec:
    """One cell of the matrix."""

    layout: str  # systemtests/harness/layout.py
    load: bool
    mode: str  # "lists" (KIP-73 replica lists) | "kip542"
    tool: str  # "configs" | "reassign"
    quota: str = "kafka"  # systemtests/harness/quota_modes.py
    # Who makes the load: minikafka's producer ("native"), or librdkafka through the Kafka
    # listener ("librdkafka", systemtests/harness/kafka_load.py).
    load_client: str = "native"

    @property
    def alone(self) -> bool:
        """Whether the case needs the machine to itself (harness/machine_lock.py): a Kafka
        client's load keeps most of the cores busy, and its latency verdict then measures the
        other worker's cluster, not the throttle."""
        return self.load_client != "native"

    @property
    def name(self) -> str:
        brokers = 2 if self.layout == "wipe" else 3
        load = "load" if self.load else "idle"
        name = f"{brokers}n-{self.layout}-{self.tool}-{self.mode}-{load}-{self.quota}"
        return name if self.load_client == "native" else f"{name}-{self.load_client}"


@dataclass(slots=True, kw_only=True)
class CaseRun:
    """What a run left: its folder, and the in-process facts the analysis cannot see."""

    spec: CaseSpec
    folder: RunFolder
    info: CaseInfo | None = None
    prediction: Prediction | None = None  # the traffic model's (binding sensors, time limit)
    judging: Judging | None = None  # the quota mode's prediction and throttle bound
    verdict: Verdict | None = None
    final_isr_ok: bool | None = None
    final_isr_problems: list[str] = field(default_factory=list)
    error: str | None = None
    wall_s: float = 0.0

    @property
    def path(self) -> Path:
        return self.folder.path
