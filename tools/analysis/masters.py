"""Which Spark the analysis runs on: the --master forms, what each implies, and --conf pairs.
Pure (no pyspark), so `minikafka analyze` refuses a bad form in one line before Spark starts.

- `local`, `local[N]`, `local[*]`, `local[N,F]`: Spark in the driver's JVM. The driver binds to
  127.0.0.1 (`SPARK_LOCAL_IP`, unless the environment sets it): nothing outside this machine
  needs to reach it, and it spares Spark's warning about a hostname resolving to a loopback or
  an unreachable address.
- `spark://HOST:PORT` (standalone), `yarn`, `k8s://https://HOST:PORT`: a cluster. Executors
  on other hosts connect back to the driver (its RPC and block manager), so the driver must
  bind and advertise an address they can route to: the analysis leaves `SPARK_LOCAL_IP` and
  `spark.driver.host` to the user (environment, spark-defaults.conf, or `--conf
  spark.driver.host=ADDR`); Spark's default, the address this host's name resolves to, is
  right on most clusters. Workers on this machine only (a standalone master and worker on
  127.0.0.1, as the integration test starts them) may as well use the loopback.
- `sc://HOST[:PORT][/;param=value...]`: Spark Connect (`SparkSession.builder.remote`). The
  server runs the job; this process is a gRPC client and starts no JVM, so Java is not
  checked, but the Connect client is (`pip install 'pyspark[connect]'`). Only SQL settings
  that a session may change at run time can be set (--conf).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from minikafka.errors import ConfigError

MASTER_FORMS = (
    "local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn, k8s://https://HOST:PORT, "
    "sc://HOST[:PORT][/;param=value...]"
)
_LOCAL = re.compile(r"^local(?:\[(?P<n>\d+|\*)(?:,\d+)?\])?$")
_CONNECT = re.compile(r"^sc://[^\s/;?#]+(?:/(?:;[^;=\s]+=[^;\s]*)*)?$")
_CLUSTER = re.compile(r"^(?:spark://\S+|yarn|k8s://\S+)$")


def check_master(master: str) -> str:
    """`master` if it is one of MASTER_FORMS, else ConfigError (one line)."""
    if _LOCAL.match(master) or _CONNECT.match(master) or _CLUSTER.match(master):
        return master
    raise ConfigError(f"--master {master!r} is not a Spark master URL; accepted: {MASTER_FORMS}")


def is_local(master: str) -> bool:
    return bool(_LOCAL.match(master))


def is_connect(master: str) -> bool:
    return master.startswith("sc://")


def local_cores(master: str) -> int | None:
    """The cores of a local master (`local` 1, `local[N]` N, `local[*]` this machine's), else
    None (a cluster's cores are the cluster's)."""
    m = _LOCAL.match(master)
    if m is None:
        return None
    n = m["n"] or "1"
    return (os.cpu_count() or 1) if n == "*" else int(n)


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    """`--conf KEY=VALUE` pairs (spark-submit's spelling) as a dict; a bad pair: ConfigError."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip() or key != key.strip():
            raise ConfigError(
                f"--conf {pair!r}: expected KEY=VALUE, e.g. spark.driver.host=10.0.0.5"
            )
        out[key] = value
    return out
