"""JSON-lines event and metrics logs in a node's data dir (the input of the PySpark analysis).

One object per line: `{"ts": <wall-clock seconds>, "mono_ms": <monotonic ms>, "node": <id>,
"event": <name>, ...fields}`. Wall-clock time is only written, never compared with `now_ms`
(the core's time is `now_ms` alone); `mono_ms` is the node's monotonic clock, for ordering one
node's lines.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from minikafka.clock import now_ms
from minikafka.server.jsonl import DEFAULT_ROTATION, JsonlFile, Rotation
from minikafka.server.metrics import Metrics


class EventLog:
    def __init__(
        self,
        path: Path | None,
        *,
        node_id: int,
        echo: IO[str] | None = None,
        metrics: Metrics | None = None,
        rotation: Rotation = DEFAULT_ROTATION,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        # A failed write never stops the node, and the file rolls over at its cap (server/jsonl.py).
        self._file = (
            JsonlFile(path, metrics=metrics, rotation=rotation) if path is not None else None
        )
        self._node_id = node_id
        self._wall_clock = wall_clock  # the `ts` of each line (server/edges.py)
        self._echo = echo
        self.counts: dict[str, int] = {}

    def emit(self, event: str, **fields: object) -> None:
        self.counts[event] = self.counts.get(event, 0) + 1
        record = {"ts": round(self._wall_clock(), 3), "mono_ms": now_ms(), "node": self._node_id}
        record["event"] = event
        record.update(fields)
        line = json.dumps(record, separators=(",", ":"), default=str)
        if self._file is not None:
            self._file.write_line(line)
        if self._echo is not None:
            print(line, file=self._echo, flush=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
