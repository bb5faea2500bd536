"""Network fault injection for local clusters: a TCP proxy on every inter-node link.

The pure fault model is in `links` and `requests`, the Trio proxy in `pump` and `proxy`, the
control-port clients in `control`.
"""

from minikafka.faults.config import ProxyConfig, ProxyLink, load_proxy_config
from minikafka.faults.control import KEEP, BlockingFaultProxyClient, FaultProxyClient, both_ways
from minikafka.faults.links import Faults, FaultTable, LinkId, LinkState, TokenBucket

__all__ = [
    "KEEP",
    "BlockingFaultProxyClient",
    "FaultProxyClient",
    "FaultTable",
    "Faults",
    "LinkId",
    "LinkState",
    "ProxyConfig",
    "ProxyLink",
    "TokenBucket",
    "both_ways",
    "load_proxy_config",
]
