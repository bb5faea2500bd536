"""The one clock of the shell: monotonic milliseconds from Trio's clock.

Everything time-dependent in the core takes `now_ms`; the shell reads it here, so a Trio
`MockClock` drives the whole node in tests. Outside a Trio run (a log line written during
shutdown), it falls back to 0 rather than mixing in another clock.
"""

from __future__ import annotations

import trio

from minikafka.core.throttle_gate import ThrottleGate


def now_ms() -> int:
    try:
        return int(trio.current_time() * 1000)
    except RuntimeError:
        return 0


async def wait_out(gate: ThrottleGate) -> None:
    """Sleep until `gate` is no longer throttled (KIP-219), reading it again after each sleep:
    a throttle may be extended meanwhile. The deadline is compared in Trio's seconds, as
    `trio.sleep_until` compares it: `now_ms()` truncates, and may read 1 ms short at the
    deadline itself, which would turn into one more needless 1 ms sleep."""
    while (deadline_ms := gate.next_deadline_ms()) is not None:
        if trio.current_time() >= deadline_ms / 1000:
            return
        await trio.sleep_until(deadline_ms / 1000)
