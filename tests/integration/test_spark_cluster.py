"""`minikafka analyze` on a real Spark cluster: a standalone master and one worker started from
the installed pyspark (`spark-class ...deploy.master.Master`, `...deploy.worker.Worker`) on
127.0.0.1, and, where the Spark Connect client is installed, a Spark Connect server: the same
report as with local[2].

Three fixture runs (tests/fixtures/runs, cases with known answers) are named by a pattern that
Spark expands, so the cluster's executors both list and read them: the workers share this
machine, so file: paths are theirs too. Everything binds to 127.0.0.1: SPARK_LOCAL_IP is set
for every process, the driver of `analyze` included (the user's setting for a one-host
cluster; the analysis sets it itself only for local masters). Reports are compared figure by
figure, floats to 1e-9 (a sum's order may differ with the partitioning); paths, timings and
file names aside. Master, worker and server are stopped in a finally, by process group.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from minikafka.tools.analysis.environment import connect_client_missing

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
# three of the fixture runs (a clean move, a violated throttle, produce load), as a pattern
PATTERN = str(ROOT / "tests" / "fixtures" / "runs" / "{clean,burst,produce}_move")
START_TIMEOUT_S = 60.0
ANALYZE_TIMEOUT_S = 150.0
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _free_port() -> int:
    return _free_ports(1)[0]


def _free_ports(n: int) -> list[int]:
    """`n` distinct free ports: each socket stays bound until all are chosen, so the kernel
    cannot hand one port out twice. (Once, under two workers, the master's `/json/` answered
    with an HTML page: some other Spark UI held the port; a repeated port is one way in.)"""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def _spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines()
        return f"{self.name} (exit {self.proc.poll()}), its log ends:\n" + "\n".join(lines[-25:])

    def stop(self) -> None:
        """SIGTERM to its process group (its executors too), SIGKILL after 15 s."""
        for sig, wait_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
            if self.proc.poll() is not None:
                return
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue


def _start(name: str, cmd: list[str], env: dict[str, str], tmp: Path) -> Daemon:
    log = tmp / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp, start_new_session=True
        )
    return Daemon(name, proc, log)


def _wait(what: str, ready: Any, daemons: list[Daemon]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for d in daemons:
            if d.proc.poll() is not None:
                pytest.fail(f"{what}: {d.tail()}")
        if ready():
            return
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {START_TIMEOUT_S:.0f} s; " + daemons[-1].tail())


def _master_state(ui_port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
            return json.loads(r.read())
    except OSError:
        return {}


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@dataclass
class Cluster:
    url: str
    ui_port: int
    env: dict[str, str]
    tmp: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    pytest.importorskip("pyspark")
    from minikafka.tools.analysis.environment import AnalysisUnavailable, require_analysis

    try:
        require_analysis()
    except AnalysisUnavailable as exc:
        pytest.skip(str(exc))
    tmp = tmp_path_factory.mktemp("spark-cluster")
    (tmp / "conf").mkdir()  # no spark-defaults.conf of the machine's
    home = _spark_home()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_CONF_DIR": str(tmp / "conf"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(tmp / "local"),
        "PYSPARK_PYTHON": sys.executable,
    }
    port, ui, worker_ui = _free_ports(3)
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    daemons: list[Daemon] = []
    try:
        daemons.append(
            _start(
                "master",
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui),
                ],
                env,
                tmp,
            )  # fmt: skip
        )
        _wait("the master", lambda: _master_state(ui).get("status") == "ALIVE", daemons)
        daemons.append(
            _start(
                "worker",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(worker_ui),
                    "--work-dir",
                    str(tmp / "work"),
                ],
                env,
                tmp,
            )  # fmt: skip
        )
        _wait(
            "the worker's registration", lambda: _master_state(ui).get("aliveworkers") == 1, daemons
        )
        yield Cluster(url=url, ui_port=ui, env=env, tmp=tmp)
    finally:
        for d in reversed(daemons):
            d.stop()


def _analyze(master: str, cluster: Cluster, name: str) -> tuple[dict[str, Any], list[Any]]:
    """`minikafka analyze PATTERN --master MASTER --json` in a process of its own: (report.json,
    the per-second rows), after checking that it exited as the verdicts say."""
    out = cluster.tmp / name
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "minikafka", "analyze", PATTERN, "--master", master,
         "--out", str(out), "--json"],
        env=cluster.env, capture_output=True, text=True, timeout=ANALYZE_TIMEOUT_S, check=False,
    )  # fmt: skip
    took = time.monotonic() - started
    assert done.returncode in (0, 1), f"{master}: exit {done.returncode}\n{done.stderr[-3000:]}"
    report = json.loads(done.stdout)
    assert done.returncode == (0 if report["summary"]["verdict"] == "pass" else 1)
    assert "reading 3 run folder(s)" in done.stderr, done.stderr
    print(f"analyze --master {master}: {took:.1f} s")
    rows = [json.loads(line) for line in (out / "per_second.jsonl").read_text().splitlines()]
    return report, rows


def _same(a: Any, b: Any, where: str = "") -> None:
    """a == b, floats to 1e-9 (relative) or 1e-6 (absolute), every difference named."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, int | float) and isinstance(b, int | float), (where, a, b)
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6), (where, a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (where, a, b)
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, (where, a, b)


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    """report.json less what names files (the same here either way, but not a figure)."""
    return {k: v for k, v in report.items() if k != "files"}


@pytest.fixture(scope="module")
def local_report(cluster: Cluster) -> tuple[dict[str, Any], list[Any]]:
    return _analyze("local[2]", cluster, "local")


def test_a_standalone_cluster_gives_the_report_of_local(
    cluster: Cluster, local_report: tuple[dict[str, Any], list[Any]]
) -> None:
    report, rows = _analyze(cluster.url, cluster, "standalone")
    expected, expected_rows = local_report
    assert [c["id"] for c in report["cases"]] == ["burst_move", "clean_move", "produce_move"]
    assert [c["verdict"] for c in report["cases"]] == ["fail", "pass", "pass"]
    _same(_figures(report), _figures(expected), "report")
    key = lambda r: (r["case_id"], r["node"], r["ts"])  # noqa: E731
    _same(sorted(rows, key=key), sorted(expected_rows, key=key), "per_second")
    # The job ran on the cluster: the master saw the application come and go.
    apps = _master_state(cluster.ui_port).get("completedapps", [])
    assert any(a.get("name") == "minikafka-analysis" for a in apps), apps


def test_spark_connect_gives_the_report_of_local(
    cluster: Cluster, local_report: tuple[dict[str, Any], list[Any]]
) -> None:
    """A Spark Connect server (pyspark ships its jar) on 127.0.0.1, running its jobs in
    local[2]; `analyze --master sc://...` is its gRPC client."""
    missing = connect_client_missing()
    if missing:
        pytest.skip(f"no Spark Connect client here (pip install 'pyspark[connect]'): {missing}")
    port = _free_port()
    server = _start(
        "connect-server",
        [str(_spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER,
         "--master", "local[2]", "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", "spark.ui.enabled=false", "spark-internal"],
        cluster.env, cluster.tmp,
    )  # fmt: skip
    try:
        _wait("the Spark Connect server", lambda: _listening(port), [server])
        report, rows = _analyze(f"sc://127.0.0.1:{port}", cluster, "connect")
    finally:
        server.stop()
    expected, expected_rows = local_report
    _same(_figures(report), _figures(expected), "report")
    key = lambda r: (r["case_id"], r["node"], r["ts"])  # noqa: E731
    _same(sorted(rows, key=key), sorted(expected_rows, key=key), "per_second")
