"""`minikafka reassign plan`: KIP-73's operator arithmetic
(docs/throttling.md#the-operators-arithmetic) for a reassignment file, from the live cluster, beside
the move model the system tests use (tools/reassign/model.py, through tools/reassign/plan_input.py
and plan_model.py). Stores nothing.

    minikafka reassign plan --reassignment-json-file moves.json --throttle 2000000 \\
        [--network-bytes-per-s 125000000] [--throttle-mode replication|reassignment]
    minikafka reassign plan --reassignment-json-file moves.json --deadline-s 600 \\
        --network-bytes-per-s 125000000 --max-fraction 0.3

Inputs, each printed with where it came from: the bytes each broker copies in and sends out
(estimated log sizes x the move map, move_size.traffic_per_broker; moves already in progress are
counted whole, since they share the throttle); BytesInPerSec per broker (the median of
`bytes_in_per_s` over the last 10 s of each broker's metrics.jsonl, 0 when the cluster's files
are not at hand); the replication factor (the largest in the file); and the node configs
`replica.fetch.response.max.bytes`, `replication.quota.window.num`,
`replication.quota.window.size.seconds`, `replication.quota.precise`, `replica.fetch.max.bytes`,
`replica.fetch.wait.max.ms` and `replica.fetch.backoff.ms` (cluster.json's node configs, else
the defaults). The move model also takes each moving partition's leader (the metadata's), its
replicas during the move (target, then the sources leaving), its size, and its inbound rate:
KIP-73's per-partition `PartitionBytesInRate` as its leader wrote it (the median over the same
last 10 s of the leader's metrics.jsonl: on a follower the metric counts replication, not
produce), else, without the cluster's files or without an entry for the partition, its
leader's BytesInPerSec split evenly over every partition that broker leads, moving or not
(plan_input.INBOUND_RULE). KIP-73's own MoveTime keeps BytesInPerSec per broker: that is its
definition. The printed inputs and --json say which source each partition took.

At a throttle the plan prints KIP-73's MoveTime (tools/reassign/plan.py) and its checks, then
the traffic model in the `--throttle-mode` given (the `--execute` option's names and default):
each throttled sensor's catch-up bytes, keep-up rate and time, the one that binds, and why its
figure differs from KIP-73's when it does by more than 2 %; and, on a cluster that runs Kafka's
quota algorithm (`replication.quota.precise` false, the default), the simulation of that
algorithm. For a deadline it adds the model's time at KIP-73's throttle and the throttle the
model needs. A plan whose checks fail still exits 0: it is a report (`ok` in --json says
whether KIP-73's checks passed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from minikafka.cli.common import table
from minikafka.cli.in_process import echo
from minikafka.cli.reassign_inputs import (
    parse_mode,
    parse_positive,
    parse_throttle,
    read_reassignment,
)
from minikafka.cli.reassign_plan_inputs import Inputs, gather
from minikafka.errors import ConfigError
from minikafka.tools.reassign import moves, plan, plan_model
from minikafka.tools.reassign.units import human_bytes, human_rate, human_seconds

FORM = (
    "expected --throttle B/s [--network-bytes-per-s N], or --deadline-s Y "
    "--network-bytes-per-s N --max-fraction X"
)
HUGE_NETWORK = 1e30  # "no network given": the N rules cannot fail, and are reported unchecked


def check_plan_options(
    path: str | None,
    throttle: str | None,
    deadline: str | None,
    network: str | None,
    fraction: str | None,
) -> None:
    if path is None:
        raise ConfigError("plan needs --reassignment-json-file FILE")
    if (throttle is None) == (deadline is None):
        raise ConfigError(
            f"give --throttle or --deadline-s, not {'both' if throttle else 'neither'}: {FORM}"
        )
    if throttle is not None and fraction is not None:
        raise ConfigError(f"--max-fraction goes with --deadline-s: {FORM}")
    if deadline is not None and (network is None or fraction is None):
        raise ConfigError(f"--deadline-s needs --network-bytes-per-s and --max-fraction: {FORM}")


def run_plan(
    path: str | None,
    throttle_text: str | None,
    deadline_text: str | None,
    network_text: str | None,
    fraction_text: str | None,
    *,
    throttle_mode_text: str | None = None,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> object:
    check_plan_options(path, throttle_text, deadline_text, network_text, fraction_text)
    assert path is not None
    proposed = read_reassignment(path)
    throttle = None if throttle_text is None else parse_throttle(throttle_text)
    mode = parse_mode(throttle_mode_text)
    deadline = (
        None
        if deadline_text is None
        else parse_positive(deadline_text, "--deadline-s", example="600")
    )
    network = (
        None
        if network_text is None
        else parse_positive(network_text, "--network-bytes-per-s", example="125000000")
    )
    fraction = None
    if fraction_text is not None:
        fraction = parse_positive(fraction_text, "--max-fraction", example="0.3")
        if fraction > 1:
            raise ConfigError(
                f"--max-fraction {fraction_text!r}: expected a fraction in (0, 1], e.g. 0.3"
            )

    def render(inputs: Inputs) -> None:
        if throttle is not None:
            doc, lines = at_throttle(inputs, throttle, network, throttle_mode=mode)
        else:
            assert deadline is not None and network is not None and fraction is not None
            doc, lines = for_deadline(inputs, deadline, network, fraction, throttle_mode=mode)
        if as_json:
            echo(json.dumps({"inputs": inputs.to_json(), **doc}, default=str))
            return
        for line in inputs.lines() + lines:
            echo(line)

    return gather(proposed, bootstrap, cluster_dir, then=render)


def _quota_kwargs(inputs: Inputs) -> dict[str, Any]:
    c = inputs.configs
    return {
        "fetch_response_max_bytes": c["replica.fetch.response.max.bytes"][0],
        "window_num": c["replication.quota.window.num"][0],
        "window_size_s": float(c["replication.quota.window.size.seconds"][0]),
        "num_brokers": inputs.num_brokers,
    }


def _window_size_s(inputs: Inputs) -> float:
    return float(inputs.configs["replication.quota.window.size.seconds"][0])


def _window_total(inputs: Inputs) -> float:
    return inputs.configs["replication.quota.window.num"][0] * _window_size_s(inputs)


def _broker_table(inputs: Inputs, prediction: plan.MovePrediction) -> list[str]:
    seconds = {b.broker: b.seconds for b in prediction.brokers}
    bursts = prediction.within_first_window(_window_size_s(inputs))

    def shown(b: int) -> str:
        s = seconds.get(b, 0.0)
        return "never" if s is None else ("<= " if b in bursts else "") + human_seconds(s)

    rows = [
        {
            "broker": b,
            "copies_in": human_bytes(t.copies_in),
            "sends_out": human_bytes(t.sends_out),
            "bytes_in/s": human_rate(inputs.bytes_in.get(b, 0.0)),
            "seconds": shown(b),
        }
        for b, t in inputs.traffic.items()
    ]
    lines = table(rows, ["broker", "copies_in", "sends_out", "bytes_in/s", "seconds"]).splitlines()
    if bursts:
        burst = human_bytes(prediction.burst_bytes(_window_size_s(inputs)))
        lines.append(
            f"<=: at most throttle x window size = {burst} to move, which the quota admits at "
            "once in its first window (docs/throttling.md#overshoot): likely sooner"
        )
    return lines


def _predict(inputs: Inputs, throttle: float) -> plan.MovePrediction:
    return plan.predict_move_time(
        bytes_to_move_per_broker={b: t.bytes for b, t in inputs.traffic.items()},
        throttle=throttle,
        bytes_in_per_broker=inputs.bytes_in,
    )


def _summary(inputs: Inputs, prediction: plan.MovePrediction) -> str:
    t = human_rate(prediction.throttle)
    if not prediction.finishes:
        return (
            f"At {t} the move never finishes: the throttle is not above max BytesInPerSec "
            f"{human_rate(prediction.max_bytes_in)}"
        )
    slowest = "" if prediction.slowest is None else f" (broker {prediction.slowest} is the slowest)"
    first = prediction.within_first_window(_window_size_s(inputs))
    bound = "at most " if prediction.slowest in first else ""
    return f"At {t} the move takes {bound}{human_seconds(prediction.max_seconds)}{slowest}"


def at_throttle(
    inputs: Inputs,
    throttle: int,
    network: float | None,
    *,
    throttle_mode: str = moves.MODE_REPLICATION,
) -> tuple[dict[str, Any], list[str]]:
    prediction = _predict(inputs, throttle)
    check = plan.check_throttle(
        throttle=throttle,
        bytes_in_per_broker=inputs.bytes_in or {b: 0.0 for b in inputs.traffic},
        network_bytes_per_s=network if network is not None else HUGE_NETWORK,
        replication_factor=inputs.replication_factor,
        **_quota_kwargs(inputs),
    )
    lines = [
        *_broker_table(inputs, prediction),
        "Each broker's time = max(copies in, sends out) / (throttle - max(BytesInPerSec)): its "
        "follower and leader throttles work in parallel [KIP-73 MoveTime, both sides]",
        _summary(inputs, prediction),
    ]
    model_doc, model_lines = _model(inputs, prediction, throttle_mode)
    lines += [
        *model_lines,
        f"(Assumes the brokers' replication quotas saw no throttled traffic in the last "
        f"{_window_total(inputs):g} s, their window: traffic within it lets a new move burst "
        "ahead of the throttle)",
    ]
    check_doc = check.to_json()
    if network is None:
        check_doc["network_bytes_per_s"] = None
        check_doc["unchecked"] = [plan.RULE_CLIENT_ROOM, plan.RULE_WINDOW_NETWORK]
        if check.ok:
            lines.append(
                f"Checks: {plan.RULE_PROGRESS} on every broker and {plan.RULE_WINDOW} pass"
            )
        else:
            lines += [f"[{f.rule}] {f.message}" for f in check.failures]
        lines.append(
            f"Not checked without --network-bytes-per-s: {plan.RULE_CLIENT_ROOM}, "
            f"{plan.RULE_WINDOW_NETWORK}"
        )
    else:
        lines += check.lines()
    doc = {
        "prediction": {
            **prediction.to_json(),
            "burst_bytes": prediction.burst_bytes(_window_size_s(inputs)),
            "within_first_window": prediction.within_first_window(_window_size_s(inputs)),
        },
        "check": check_doc,
        "ok": check.ok,
        **model_doc,
    }
    return doc, lines


def _compare(
    inputs: Inputs, prediction: plan.MovePrediction, throttle_mode: str
) -> plan_model.ModelFigure:
    return plan_model.compare(
        inputs.moving,
        throttle=prediction.throttle,
        throttle_mode=throttle_mode,
        kip73_s=prediction.max_seconds,
        kip73_slowest=prediction.slowest,
        kip73_subtracted=prediction.max_bytes_in,
        kip73_bytes={b: t.bytes for b, t in inputs.traffic.items()},
        inbound_source=inputs.inbound_source,
    )


def _model(
    inputs: Inputs, prediction: plan.MovePrediction, throttle_mode: str
) -> tuple[dict[str, Any], list[str]]:
    """The traffic model's figure beside KIP-73's, and Kafka's algorithm simulated when the
    cluster runs it (the module docstring)."""
    figure = _compare(inputs, prediction, throttle_mode)
    rows = figure.rows()
    lines = [
        "Per throttle, the traffic model: catch-up / (throttle - the keep-up rate of new data it "
        "carries) [tools/reassign/model.py]",
        *(table(rows, list(rows[0])).splitlines() if rows else []),
        *figure.lines(),
    ]
    doc: dict[str, Any] = {
        "model": figure.to_json(),
        "quota_algorithm": "precise" if inputs.precise else "kafka",
        "kafka_simulation": None,
    }
    if inputs.precise:
        lines.append(
            "The cluster runs the precise quota (replication.quota.precise=true), which holds "
            "each throttle at its rate: the model's figure is its prediction"
        )
        return doc, lines
    sim = plan_model.simulate(
        inputs.moving,
        throttle=prediction.throttle,
        throttle_mode=throttle_mode,
        settings=inputs.kafka,
        model_s=figure.seconds,
    )
    doc["kafka_simulation"] = sim.to_json()
    return doc, lines + sim.lines()


def for_deadline(
    inputs: Inputs,
    deadline: float,
    network: float,
    fraction: float,
    *,
    throttle_mode: str = moves.MODE_REPLICATION,
) -> tuple[dict[str, Any], list[str]]:
    result = plan.throttle_for_deadline(
        bytes_per_broker={b: t.bytes for b, t in inputs.traffic.items()},
        deadline_s=deadline,
        bytes_in_per_broker=inputs.bytes_in or {b: 0.0 for b in inputs.traffic},
        network_bytes_per_s=network,
        max_fraction=fraction,
        replication_factor=inputs.replication_factor,
        **_quota_kwargs(inputs),
    )
    figure = _compare(inputs, result.at_required, throttle_mode)
    needed, sensor = plan_model.required_throttle(
        inputs.moving, deadline_s=deadline, throttle_mode=throttle_mode
    )
    lines = [
        *_broker_table(inputs, result.at_required),
        *result.lines(),
        *figure.lines(),
        f"The model needs {human_rate(needed)} ({needed} B/s) to finish in "
        f"{human_seconds(deadline)}"
        + ("" if sensor is None else f" ({plan_model.sensor_name(sensor)} binds)"),
    ]
    model_doc = {
        **figure.to_json(),
        "required_throttle": needed,
        "required_binding": None if sensor is None else sensor.to_json(),
    }
    return {"plan": result.to_json(), "ok": result.ok, "model": model_doc}, lines
