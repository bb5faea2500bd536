"""What a fault proxy serves: its control address and its directed links (the spec file).

The launcher (cluster/local.py) writes the spec file and starts `minikafka proxy --spec-file
PATH`; the proxy reads it back with `load_proxy_config`. The format, JSON:

    {"host": "127.0.0.1", "control_port": 40000,
     "links": [{"src": 1, "dst": 2, "port": 40001, "target": "127.0.0.1:9092"}, ...]}

`port` is where the proxy listens for link (src, dst) on `host`; `target` is dst's real address.
Bad input raises ConfigError with one line naming what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minikafka.errors import ConfigError
from minikafka.faults.links import LinkId


def _port(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ConfigError(f"{what} must be a port 1..65535, got {value!r}")
    return value


def _node_id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{what} must be a node id (an integer >= 0), got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyLink:
    """Link (src, dst): the proxy listens on `port`, connections go on to target."""

    src: int
    dst: int
    port: int
    target_host: str
    target_port: int

    @property
    def link(self) -> LinkId:
        return (self.src, self.dst)

    @property
    def target(self) -> str:
        return f"{self.target_host}:{self.target_port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyConfig:
    host: str
    control_port: int
    links: tuple[ProxyLink, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "links", tuple(self.links))
        _port(self.control_port, "control_port")
        seen: set[LinkId] = set()
        ports = {self.control_port}
        for link in self.links:
            _node_id(link.src, "link src")
            _node_id(link.dst, "link dst")
            _port(link.port, f"link {link.src}->{link.dst} port")
            _port(link.target_port, f"link {link.src}->{link.dst} target port")
            if link.src == link.dst:
                raise ConfigError(f"link {link.src}->{link.dst} goes from a node to itself")
            if link.link in seen:
                raise ConfigError(f"link {link.src}->{link.dst} is listed twice")
            if link.port in ports:
                raise ConfigError(f"port {link.port} is used twice in the proxy spec")
            seen.add(link.link)
            ports.add(link.port)

    @property
    def control_address(self) -> tuple[str, int]:
        return (self.host, self.control_port)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "control_port": self.control_port,
            "links": [
                {"src": ln.src, "dst": ln.dst, "port": ln.port, "target": ln.target}
                for ln in self.links
            ],
        }

    @classmethod
    def from_json(cls, data: Any) -> ProxyConfig:
        if not isinstance(data, dict):
            raise ConfigError("a proxy spec must be a JSON object with host, control_port, links")
        try:
            links = []
            for item in data["links"]:
                host, _, port = str(item["target"]).rpartition(":")
                if not host or not port.isdigit():
                    raise ConfigError(f"link target must be host:port, got {item['target']!r}")
                links.append(
                    ProxyLink(
                        src=item["src"],
                        dst=item["dst"],
                        port=item["port"],
                        target_host=host,
                        target_port=int(port),
                    )
                )
            host = data["host"]
            if not isinstance(host, str) or not host:
                raise ConfigError(f"proxy host must be a non-empty string, got {host!r}")
            return cls(host=host, control_port=data["control_port"], links=tuple(links))
        except (KeyError, TypeError) as e:
            raise ConfigError(
                f"a proxy spec needs host, control_port and links of src, dst, port, target "
                f"({type(e).__name__}: {e})"
            ) from None


def load_proxy_config(path: Path) -> ProxyConfig:
    """Read a spec file; ConfigError if it is missing or not a valid spec."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"proxy spec file {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"proxy spec file {path} is not valid JSON ({e})") from None
    return ProxyConfig.from_json(data)
