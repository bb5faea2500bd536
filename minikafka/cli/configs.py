"""`minikafka configs`: alter and describe dynamic configs, in the style of `kafka-configs`.

    minikafka configs --alter --entity-type brokers --entity-name 1 \\
        --add-config 'leader.replication.throttled.rate=1000000,follower.replication.throttled.rate=1000000'
    minikafka configs --alter --entity-type topics --entity-name orders \\
        --add-config 'leader.replication.throttled.replicas=0:1,1:2'
    minikafka configs --alter --entity-type clients --entity-default --add-config producer_byte_rate=1048576
    minikafka configs --alter --entity-type brokers --entity-name 1 --delete-config 'leader.replication.throttled.rate'
    minikafka configs --describe --entity-type brokers [--entity-name 1 | --entity-default] [--json]

`--add-config` takes `name=value` items separated by commas. A value may itself hold commas (a
throttled replica list): either bracket it as kafka-configs wants (`name=[0:1,1:2]`), or just
write it out, since an item without `=` continues the previous value. Everything is checked
before anything is sent, and the controller checks the whole request again against the cluster
state (KIP-542's rate rule, whether a topic exists) before applying any of it: bad input is one
line on stderr, exit code 2, and nothing changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from minikafka.cli.common import (
    bootstrap_option,
    emit,
    friendly_errors,
    json_option,
    resolve_bootstrap,
)
from minikafka.cli.in_process import cli_client, echo, finish
from minikafka.client.admin import Admin
from minikafka.core.dynamic_config import (
    DEFAULT,
    ENTITY_TYPES,
    ConfigSnapshot,
    check_entity_type,
    normalize_entity_name,
    validate_alter,
    validate_changes,
)
from minikafka.errors import ConfigError, ErrorCode

ADD_FORM = "expected name=value[,name=value...] (a list value may be bracketed: name=[0:1,1:2])"
DELETE_FORM = "expected name[,name...]"
COLUMNS = ["entity_type", "entity", "name", "value", "source"]
# Per-resource refusals that mean the input was wrong (exit 2), not that something failed.
BAD_INPUT_CODES = frozenset(
    {ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
)
CLIENT_ID = "minikafka-cli"


def parse_add_config(texts: tuple[str, ...]) -> dict[str, str]:
    """`name=value` items separated by commas (values may contain commas, see the module doc)."""
    out: dict[str, str] = {}
    for text in texts:
        last: str | None = None
        for item in _split_outside_brackets(text):
            name, sep, value = item.partition("=")
            if not sep:
                if last is None:
                    raise ConfigError(f"--add-config {text!r}: {ADD_FORM}")
                out[last] += "," + item  # a list value written out: name=0:1,1:2
                continue
            name, value = name.strip(), value.strip()
            if not name:
                raise ConfigError(f"--add-config {text!r}: {ADD_FORM}")
            if name in out:
                raise ConfigError(f"--add-config: {name!r} is given twice: expected it once")
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[name] = value
            last = name
    return out


def _split_outside_brackets(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def parse_delete_config(texts: tuple[str, ...]) -> list[str]:
    names: list[str] = []
    for text in texts:
        items = [item.strip() for item in text.split(",")]
        if not all(items):
            raise ConfigError(f"--delete-config {text!r}: {DELETE_FORM}")
        names += items
    return list(dict.fromkeys(names))


def _entity(entity_type: str | None, name: str | None, default: bool, *, required: bool) -> str:
    """The checked entity type; `name` checked separately. Returns the entity name or None."""
    if entity_type is None:
        raise ConfigError(f"--entity-type is required: expected one of {', '.join(ENTITY_TYPES)}")
    check_entity_type(entity_type)
    if name is not None and default:
        raise ConfigError("give --entity-name or --entity-default, not both")
    if name is None and not default and required:
        raise ConfigError(
            "--alter needs the entity: expected --entity-name NAME or --entity-default"
        )
    return entity_type


@click.command("configs")
@click.option("--alter", is_flag=True, help="Add and/or delete configs of one entity.")
@click.option("--describe", is_flag=True, help="Show configs of one entity, or all of a type.")
@click.option("--entity-type", metavar="TYPE", help="brokers, topics or clients.")
@click.option("--entity-name", metavar="NAME", help="A broker id, topic name or client id.")
@click.option(
    "--entity-default", is_flag=True, help="The cluster default broker or the default client."
)
@click.option(
    "--add-config",
    "add_configs",
    multiple=True,
    metavar="'K=V,K=V'",
    help="Configs to set, e.g. 'leader.replication.throttled.rate=1000000' (repeatable).",
)
@click.option(
    "--delete-config",
    "delete_configs",
    multiple=True,
    metavar="'K,K'",
    help="Configs to remove (repeatable).",
)
@click.option("--validate-only", is_flag=True, help="Check the alter on the controller only.")
@bootstrap_option
@json_option
@friendly_errors
def configs_cmd(
    alter: bool,
    describe: bool,
    entity_type: str | None,
    entity_name: str | None,
    entity_default: bool,
    add_configs: tuple[str, ...],
    delete_configs: tuple[str, ...],
    validate_only: bool,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> object:
    """Alter or describe dynamic broker, topic and client configs (applied without restart)."""
    if alter == describe:
        raise ConfigError("expected exactly one of --alter or --describe")
    if describe and (add_configs or delete_configs or validate_only):
        raise ConfigError("--describe takes no --add-config, --delete-config or --validate-only")
    etype = _entity(entity_type, entity_name, entity_default, required=alter)
    name = DEFAULT if entity_default else entity_name
    if alter:
        assert name is not None
        return _alter(
            etype, name, add_configs, delete_configs, validate_only, bootstrap, cluster_dir, as_json
        )
    else:
        if name is not None:
            name = normalize_entity_name(etype, name)
        return _describe(etype, name, bootstrap, cluster_dir, as_json)


def _alter(
    entity_type: str,
    entity_name: str,
    add_configs: tuple[str, ...],
    delete_configs: tuple[str, ...],
    validate_only: bool,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> object:
    to_set = parse_add_config(add_configs)
    to_delete = parse_delete_config(delete_configs)
    if not to_set and not to_delete:
        raise ConfigError(
            "--alter needs --add-config 'name=value,...' and/or --delete-config 'name,...'"
        )
    name, values, deletes = validate_changes(entity_type, entity_name, to_set, to_delete)
    # KIP-542 among the values given here (both of a pair set on this entity win over anything
    # in the cluster, so this never refuses what the controller would accept).
    validate_alter(entity_type, name, values, deletes, ConfigSnapshot())
    address = resolve_bootstrap(bootstrap, cluster_dir)

    async def run() -> None:
        async with cli_client(address, CLIENT_ID) as client:
            await Admin(client).alter_configs(
                entity_type,
                name,
                set_configs=values,
                delete_configs=deletes,
                validate_only=validate_only,
            )

    def render(_: None) -> None:
        if as_json:
            doc = {
                "entity_type": entity_type,
                "entity": name,
                "set": values,
                "deleted": deletes,
                "validate_only": validate_only,
            }
            echo(json.dumps(doc))
            return
        changes = [f"set {k}={v}" for k, v in values.items()] + [f"deleted {k}" for k in deletes]
        verb = "Validated" if validate_only else "Completed updating"
        echo(f"{verb} config for {entity_type} {_label(name)}: {', '.join(changes)}.")

    return finish(run, render, bad_input=BAD_INPUT_CODES)


def _describe(
    entity_type: str,
    entity_name: str | None,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> object:
    address = resolve_bootstrap(bootstrap, cluster_dir)

    async def run() -> list:
        async with cli_client(address, CLIENT_ID) as client:
            return await Admin(client).describe_configs(entity_type, entity_name)

    def render(results: list) -> None:
        rows = [
            {
                "entity_type": r.resource_type,
                "entity": r.resource_name if as_json else _label(r.resource_name),
                "name": e.name,
                "value": e.value,
                "source": e.source,
            }
            for r in results
            for e in r.entries
        ]
        emit(rows, COLUMNS, as_json)

    return finish(run, render, bad_input=BAD_INPUT_CODES)


def _label(entity_name: str) -> str:
    return "<default>" if entity_name == DEFAULT else entity_name
