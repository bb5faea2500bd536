"""How big a system-test run is: `--profile quick` (CI, the whole matrix in a few minutes) or
`--profile full` (more data per partition, longer moves, finer statistics).

Sizes are chosen so that every move lasts at least ~8 s at its throttle: the throttle check
looks at 5 s windows that start 2 s after the move began (the first seconds hold the start-up
transient: the quota windows are empty, fetchers are being created), so a shorter move would
have no window to judge. Rates and sizes are in bytes (MB = 10**6 B).
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    name: str
    throttle_bytes_per_s: int
    data_bytes: int  # record values written before the move (the bytes to move, + headers)
    record_size: int = 1000
    # ~4 KB batches. The precise quota gives each throttled partition its share of the
    # remaining allowance (remaining / partitions) and never more, not even one whole batch: with
    # 100 partitions and 16 KB batches nothing moved until 1.6 MB of allowance had built up
    # (0.8 s at 2 MB/s), and that saved allowance then ran ahead of the throttle (largest 5 s
    # window 1.14 x T, measured); with 4 KB batches, 1.03 x T.
    records_per_batch: int = 4
    # Produce load = this x T, well below the throttle (KIP-73: IN < T). Not 0.3: when broker
    # 1 is decommissioned under load with replica lists, its leader throttle carries catch-up
    # plus twice the inbound rate, and it serves its two destination brokers unequally (one
    # half of the partitions finished 15-25 % before the other, measured), after which the
    # other half runs at T - IN, not T - 2 IN. At 0.3 x T that made the move 0.91-0.99 of the
    # prediction (which assumes they finish together), too close to the 0.9 bound to be a
    # stable test; at 0.2 x T, 0.97-1.00.
    load_fraction: float = 0.2
    timeout_factor: float = 3.0  # a move may take this x its prediction before we give up
    timeout_slack_s: float = 30.0

    @property
    def batches_per_partition_hint(self) -> float:
        return self.data_bytes / (self.record_size * self.records_per_batch)

    @property
    def load_bytes_per_s(self) -> float:
        return self.load_fraction * self.throttle_bytes_per_s

    def move_timeout_s(self, predicted_s: float) -> float:
        return self.timeout_factor * predicted_s + self.timeout_slack_s


PROFILES = {
    # 16 MB at 2 MB/s: 8 s unloaded, 10-14 s under load; 10 cases in about 4-5 minutes.
    "quick": Profile(name="quick", throttle_bytes_per_s=2_000_000, data_bytes=16_000_000),
    # 96 MB (~1 MB per partition) at 4 MB/s: 24 s unloaded, 30-40 s under load.
    "full": Profile(name="full", throttle_bytes_per_s=4_000_000, data_bytes=96_000_000),
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(f"--profile {name!r}: expected one of {', '.join(PROFILES)}") from None
