"""The inputs of `minikafka reassign` and its subcommands, checked, and their small outputs.

Shared by minikafka/cli/reassign.py, reassign_verify.py, reassign_plan.py and
reassign_plan_inputs.py (kept here so that none of them imports another's command module):
every check gives one line naming the accepted form (a ConfigError), before anything is sent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from minikafka.cli.in_process import echo, in_process_spec
from minikafka.client.cluster_client import parse_bootstrap
from minikafka.common import TopicPartition
from minikafka.errors import ClusterError, ConfigError
from minikafka.tools.reassign import assignment_files, moves
from minikafka.tools.reassign import progress as prog

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_INTERVAL_S = 1.0
CLIENT_ID = "minikafka-reassign"


def parse_throttle(text: str) -> int:
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise ConfigError(f"--throttle {text!r}: expected {moves.THROTTLE_FORM}, e.g. 2000000")
    return int(value)


def parse_mode(text: str | None) -> str:
    if text is None:
        return moves.MODE_REPLICATION
    if text not in moves.MODES:
        raise ConfigError(f"--throttle-mode {text!r}: expected one of {', '.join(moves.MODES)}")
    return text


def parse_positive(text: str, flag: str, *, example: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{flag} {text!r}: expected a number > 0, e.g. {example}")
    return value


def read_file(path: str, what: str, form: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or type(exc).__name__
        raise ConfigError(
            f"cannot read the {what} {path!r} ({why}): expected a file {form}"
        ) from None


def read_reassignment(path: str) -> dict[TopicPartition, list[int]]:
    return assignment_files.parse_reassignment_json(
        read_file(path, "reassignment file", assignment_files.REASSIGNMENT_FORM)
    )


def local_files(bootstrap: str | None, cluster_dir: Path) -> prog.LocalFiles | None:
    """The nodes' files when the cluster in --dir (or the cluster an in-process command talks
    to, cli/in_process.py) is the one we talk to (None otherwise)."""
    from minikafka.cluster import LOG_FILES, LocalCluster

    spec = in_process_spec()
    if spec is None:
        try:
            spec = LocalCluster.load(cluster_dir).spec
        except (ClusterError, ConfigError, OSError, ValueError):
            return None
    if bootstrap and not set(parse_bootstrap(bootstrap)) & set(parse_bootstrap(spec.bootstrap)):
        return None
    controller = next((n.node_id for n in spec.nodes if n.is_controller), None)
    return prog.LocalFiles(
        metrics={n.node_id: n.data_dir / LOG_FILES["metrics"] for n in spec.nodes if n.is_broker},
        controller_events=None
        if controller is None
        else spec.node(controller).data_dir / LOG_FILES["events"],
        node_configs=dict(spec.node_configs),
    )


# ---------------------------------------------------------------------------- formatting


def tp_list(tps: Sequence[TopicPartition]) -> str:
    return ",".join(str(tp) for tp in tps)


def print_json(doc: Any) -> None:
    echo(json.dumps(doc, default=str))
