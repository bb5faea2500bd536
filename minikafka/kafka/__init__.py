"""Kafka's binary protocol, sans-IO, for the second listener real Kafka clients connect to.

`codec.py`: requests in, responses out, via kio (dataclasses generated from Kafka's own
`clients/src/main/resources/common/message/*.json`). `apis.py`: the pure handlers that need no
broker state beyond what is passed in. Framing (the 4-byte length) lives in `wire/framing.py`;
everything here takes and returns payloads without it.

kio is loaded here, before any module of this package uses it, and without hypothesis: kio's
phantom types (kio/static/_phantom.py) import `hypothesis.strategies` whenever it is installed
(a dev dependency here) and register a strategy for each type as it is defined. In a node that
was 0.35 s of its start for nothing a broker uses: hypothesis itself; trio's hypothesis plugin,
which hypothesis runs when imported, and the trio.testing and pytest that plugin imports; and
the strategies built for every kio primitive. So, unless this process imported hypothesis
already, the import of `hypothesis` fails while kio's phantom module loads (a None in
sys.modules is what `import` takes for "not installed") and kio goes on without it; kio itself
is not changed. A process that wants kio's strategies (the fuzzer, property tests: `st.from_type`
on a kio schema) imports hypothesis first: minikafka/testing/fuzz.py does, and under pytest the
pytest-trio plugin and tests/conftest.py do before any test module. Modules outside this
package take kio's names from here, never from kio directly, so that this runs first
(tests/repo/test_node_startup.py holds a node's start free of hypothesis).
"""

import sys
import threading

# kio is imported lazily from two threads (the event loop and the schema preload, codec.py says
# why and what went wrong without it): every lazy kio import of this package holds this lock.
KIO_IMPORTS = threading.RLock()

if "hypothesis" not in sys.modules and "kio.static._phantom" not in sys.modules:
    sys.modules["hypothesis"] = None  # type: ignore[assignment]
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        del sys.modules["hypothesis"]
