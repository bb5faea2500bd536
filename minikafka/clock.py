"""The one clock of the shell: monotonic milliseconds from Trio's clock.

Everything time-dependent in the core takes `now_ms`; the shell reads it here, so a Trio
`MockClock` drives the whole node in tests. Outside a Trio run (a log line written during
shutdown), it falls back to 0 rather than mixing in another clock.

`RunSync` is how the shell leaves the event loop for a blocking call (every LMDB call): Trio's
worker threads in a node, inline under a MockClock (testing/memory_node.py `run_sync_inline`),
where a task waiting for a thread would let the autojump clock leap. The writer, the replica
manager and the controller service take one at construction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from minikafka.core.quota.gate import ThrottleGate

RunSync = Callable[..., Awaitable[Any]]  # trio.to_thread.run_sync's shape


def now_ms() -> int:
    """Trio's time in whole milliseconds. The nanosecond added absorbs the float error of
    seconds times 1000: a task woken at a deadline of `until_ms / 1000` (wait_out) reads
    `until_ms`, not `until_ms - 1` (8.105 * 1000 = 8104.999...); otherwise a 1 ms throttle
    starting there would end where it began, and under a MockClock time would never move."""
    try:
        return int(trio.current_time() * 1000 + 1e-6)
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
