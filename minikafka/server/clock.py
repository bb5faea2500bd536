"""The one clock of the shell: monotonic milliseconds from Trio's clock.

Everything time-dependent in the core takes `now_ms`; the shell reads it here, so a Trio
`MockClock` drives the whole node in tests. Outside a Trio run (a log line written during
shutdown), it falls back to 0 rather than mixing in another clock.
"""

from __future__ import annotations

import trio


def now_ms() -> int:
    try:
        return int(trio.current_time() * 1000)
    except RuntimeError:
        return 0
