"""cli/in_process.py: the admin commands run inside a Trio run that is already going (the
simulation's operator), against a simulated cluster: the same parsing, refusals, exit codes
and output as from a shell, and the change really made on the cluster."""

from __future__ import annotations

import json
from pathlib import Path

from minikafka.cli.tool_runner import run_command
from minikafka.client.admin import Admin
from minikafka.sim.cluster import plan_sim_cluster
from minikafka.sim.target import run_simulated, simulated_cluster
from minikafka.testing.cli_tools import Completed, Env

RATE = "leader.replication.throttled.rate"


def _run(base: Path, commands: list[list[str]]) -> tuple[list[Completed], dict[str, str]]:
    """Each command in turn on a fresh 2-broker cluster; then broker 1's dynamic configs."""
    done: list[Completed] = []
    configs: dict[str, str] = {}

    async def main() -> None:
        async with simulated_cluster(plan_sim_cluster(base, brokers=2, seed=5)) as target:
            for args in commands:  # each with its own output buffers, as each its own process
                env = Env(spec=target.spec, connect=target.sim.network.connect)
                done.append(await run_command(args, env))
            async with target.client("t") as c:
                (res,) = await Admin(c).describe_configs("brokers", "1")
                configs.update({e.name: e.value for e in res.entries})

    run_simulated(main, 5)
    return done, configs


def test_alter_and_describe_change_the_cluster_and_print_as_the_cli(tmp_path: Path) -> None:
    alter = ["configs", "--alter", "--entity-type", "brokers", "--entity-name", "1"]
    done, configs = _run(
        tmp_path,
        [
            [*alter, "--add-config", f"{RATE}=5000"],
            ["configs", "--describe", "--entity-type", "brokers", "--entity-name", "1", "--json"],
        ],
    )
    assert [d.returncode for d in done] == [0, 0]
    assert done[0].stdout == f"Completed updating config for brokers 1: set {RATE}=5000.\n"
    rows = json.loads(done[1].stdout)
    assert {"entity": "1", "name": RATE, "value": "5000"}.items() <= rows[0].items()
    assert configs == {RATE: "5000"}


def test_bad_input_is_one_line_exit_2_and_changes_nothing(tmp_path: Path) -> None:
    alter = ["configs", "--alter", "--entity-type", "brokers", "--entity-name", "1"]
    done, configs = _run(
        tmp_path,
        [
            [*alter, "--add-config", f"{RATE}=fast"],  # refused before sending
            [*alter, "--add-config", "no.such.config=1"],  # refused by the controller
            ["configs", "--alter", "--no-such-option"],  # click's usage error
            ["reassign", "--execute", "--reassignment-json-file", str(tmp_path / "absent.json")],
        ],
    )
    assert [d.returncode for d in done] == [2, 2, 2, 2]
    assert all(d.stdout == "" for d in done)
    last = [d.stderr.strip().splitlines()[-1] for d in done]
    assert last[0].startswith(f"error: {RATE}"), last[0]
    assert last[1].startswith("error: ") and "no.such.config" in last[1], last[1]
    assert last[2] == "Error: No such option '--no-such-option'.", last[2]  # click's own form
    assert last[3].startswith("error: ") and "absent.json" in last[3], last[3]
    assert [len(d.stderr.strip().splitlines()) for d in done] == [1, 1, 4, 1]
    assert configs == {}
