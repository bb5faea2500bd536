"""Shared CLI plumbing: one-line errors with exit code 2, output as tables or JSON, and the
bootstrap address taken from `--bootstrap` (or Kafka's `--bootstrap-server`) or the local
cluster file."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from minikafka.cli.in_process import echo, exit_code, in_process_spec
from minikafka.errors import MiniKafkaError

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DIR = Path(os.environ.get("MINIKAFKA_HOME", ".minikafka/cluster"))


def fail(message: str, code: int = 2) -> None:
    echo(f"error: {message}", err=True)
    sys.exit(code)


def friendly_errors(fn: F) -> F:
    """Turn our exceptions into one line on stderr: exit 2 for bad input, 1 for the rest
    (cli/in_process.py `exit_code`)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MiniKafkaError as exc:
            fail(str(exc), exit_code(exc))
        except KeyboardInterrupt as exc:
            fail("interrupted", exit_code(exc))

    return wrapper  # type: ignore[return-value]


def dir_option(fn: F) -> F:
    return click.option(
        "--dir",
        "cluster_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_DIR,
        show_default=True,
        help="Cluster directory (env MINIKAFKA_HOME).",
    )(fn)


def bootstrap_option(fn: F) -> F:
    fn = click.option(
        "--bootstrap",
        "--bootstrap-server",  # Kafka's tools' spelling (kafka-topics.sh, kafka-console-*.sh)
        "bootstrap",
        help="host:port[,host:port...] of brokers (default: the cluster in --dir).",
    )(fn)
    return dir_option(fn)


def resolve_bootstrap(bootstrap: str | None, cluster_dir: Path) -> str:
    """`--bootstrap` if given, else the brokers of the cluster in `--dir` (or of the cluster an
    in-process command talks to, cli/in_process.py)."""
    if bootstrap:
        return bootstrap
    spec = in_process_spec()
    if spec is not None:
        return spec.bootstrap
    from minikafka.cluster import LocalCluster

    return LocalCluster.load(cluster_dir).bootstrap()


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(
        fn
    )


def emit(rows: Sequence[dict[str, Any]], columns: Sequence[str], as_json: bool) -> None:
    if as_json:
        echo(json.dumps(list(rows), default=str))
        return
    echo(table(rows, columns))


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)
