"""What an experiment hands the PySpark analysis (tools/analysis) and takes back from it:
case.json (`case_info`: the run's shape, and how to judge its throttle) and the report's summary
beside the verdict (`spark_report`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from minikafka.experiment.spec import ExperimentSpec
from minikafka.testing.run_folder import CaseInfo


def case_info(
    spec: ExperimentSpec, nodes: list[int], brokers: list[int], *, simulated: bool = False
) -> CaseInfo:
    """case.json of an experiment. With a throttle (`spec.throttle_bytes_per_s`) it tells the
    analysis how to judge it (verdict.py): the follower and leader side of every broker (faults
    move leadership; KIP-1009 throttles every replica), over the whole run from the timeline's
    throttle_set on ("run"), windows of the quota's span, only the bytes the throttle could hold
    back, against tolerance x T."""
    t = spec.throttle_bytes_per_s
    judged = brokers if t is not None else []
    return CaseInfo(
        case=spec.name,
        seed=spec.seed,
        nodes=nodes,
        partitions=spec.partitions,
        replication_factor=spec.replication_factor,
        throttle_bytes_per_s=t,
        throttle_mode=spec.reassign.mode if spec.reassign is not None and t else None,
        receiving_brokers=judged,
        sending_brokers=judged,
        bytes_to_move=0,
        produce_bytes_per_s=spec.records_per_s * spec.record_bytes,
        predicted_move_s=None,
        throttle_window_s=spec.throttle_window_s,
        throttle_bound_bytes_per_s=spec.throttle_tolerance * t if t is not None else None,
        throttle_judged="run",
        throttle_exempt_counted=False,
        extra={"experiment": spec.to_json(), "simulated": simulated},
    )


def spark_report(
    run_dir: Path, progress: Callable[[str], None]
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The PySpark analysis of the run folder (tools/analysis): (its case, for the throttle
    bound; a summary kept beside the verdict). report/report.html holds its plots."""
    progress("PySpark report")
    try:
        from minikafka.tools.analysis import analyze

        report = analyze([run_dir], out_dir=run_dir / "report")
        (case,) = report.cases
    except Exception as exc:  # noqa: BLE001 - recorded; the throttle is then not judged
        return None, {"error": f"{type(exc).__name__}: {exc}"}
    return case, {
        "path": str(run_dir / "report" / "report.html"),
        "verdict": case["verdict"],
        "produce_latency": case["produce_latency"]["all"],
        "isr": {k: case["isr"][k] for k in ("shrinks", "expands", "last_isr")},
        "max_window_throttle_ratio": case["max_window_throttle_ratio"],
        "move_duration_s": case["move_duration_s"],
        "error": None,
    }
