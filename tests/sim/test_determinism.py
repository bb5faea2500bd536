"""minikafka/sim/determinism.py: a Trio run under `pinned_scheduler(seed)` repeats itself.

The race below is the shape of a cluster under a virtual clock: tasks whose sleeps end on the
same instants, so both of Trio's choices (batch order, deadline ties) decide who runs first.
"""

from __future__ import annotations

from functools import partial

import pytest
import trio
import trio.testing
from trio._core import _run

from minikafka.sim.determinism import hash_seed_pinned, pinned_scheduler


def _race() -> list[str]:
    """Eight tasks waking together five times, and the order they woke in."""
    order: list[str] = []

    async def sleeper(name: str) -> None:
        for _ in range(5):
            await trio.sleep(0.1)
            order.append(name)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for i in range(8):
                nursery.start_soon(sleeper, f"t{i}")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return order


def _pinned_race(seed: int) -> list[str]:
    with pinned_scheduler(seed):
        return _race()


def test_the_same_seed_gives_the_same_order() -> None:
    assert _pinned_race(7) == _pinned_race(7) == _pinned_race(7)


def test_the_seed_chooses_the_order() -> None:
    assert len({tuple(_pinned_race(seed)) for seed in range(6)}) > 1


def test_unpinned_runs_differ_so_the_pin_is_what_repeats_them() -> None:
    """Without the pin, Trio's own batch reversal shows: the test above would prove nothing if
    Trio happened to be deterministic already."""
    assert len({tuple(_race()) for _ in range(8)}) > 1


class _Scope:
    """What Deadlines reads of a cancel scope: its deadline, and a `_cancel` to call."""

    def __init__(self, name: str, fired: list[str]) -> None:
        self.name = name
        self._registered_deadline = 1.0
        self._fired = fired

    def _cancel(self, _reason: object) -> None:
        self._fired.append(self.name)


def _expiry_order(names_in_add_order: list[str], *, pinned: bool) -> tuple[list[str], list[str]]:
    fired: list[str] = []
    scopes = {name: _Scope(name, fired) for name in names_in_add_order}
    # added in descending address order, so that Trio's tie-break (ascending id) reverses them
    ordered = sorted(scopes.values(), key=id, reverse=True)
    deadlines = _run.Deadlines()

    def fill() -> None:
        for scope in ordered:
            deadlines.add(1.0, scope)
        deadlines.expire(2.0)

    if pinned:
        with pinned_scheduler(1):
            fill()
    else:
        fill()
    return fired, [s.name for s in ordered]


def test_deadline_ties_expire_first_set_first_only_when_pinned() -> None:
    fired, added = _expiry_order([f"s{i}" for i in range(6)], pinned=True)
    assert fired == added
    fired, added = _expiry_order([f"s{i}" for i in range(6)], pinned=False)
    assert fired == added[::-1]  # Trio's own order: by address


def test_the_block_puts_trio_back_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    # Off, as in a process without hypothesis (a node's): under pytest its plugin turned it on.
    monkeypatch.setattr(_run, "_ALLOW_DETERMINISTIC_SCHEDULING", False)
    own_add = _run.Deadlines.add
    state = _run._r.getstate()
    with pinned_scheduler(3):
        assert _run.Deadlines.add is not own_add
        assert _run._ALLOW_DETERMINISTIC_SCHEDULING is True
        _run._r.random()
    assert _run.Deadlines.add is own_add
    assert _run._ALLOW_DETERMINISTIC_SCHEDULING is False
    assert _run._r.getstate() == state


def test_a_race_inside_a_failing_block_still_restores() -> None:
    own_add = _run.Deadlines.add
    with pytest.raises(ZeroDivisionError), pinned_scheduler(3):
        trio.run(partial(trio.sleep, 0), clock=trio.testing.MockClock(autojump_threshold=0))
        _ = 1 / 0
    assert _run.Deadlines.add is own_add


@pytest.mark.parametrize(
    ("environ", "pinned"),
    [({}, False), ({"PYTHONHASHSEED": "random"}, False), ({"PYTHONHASHSEED": "0"}, True),
     ({"PYTHONHASHSEED": "4242"}, True)],
)  # fmt: skip
def test_hash_seed_pinned(environ: dict[str, str], pinned: bool) -> None:
    assert hash_seed_pinned(environ) is pinned


def test_group_member_ids_come_from_the_node_edges(tmp_path) -> None:
    """A Kafka consumer's member id is `client_id-<uuid>` (GroupCoordinator.doUnknownJoinGroup);
    the uuid is drawn from the node's `Edges.token_bytes`, so a simulation seeds it and a
    replay gives the same ids, and on the machine it is uuid4."""
    import random
    import uuid

    from minikafka.server.config import NodeConfig
    from minikafka.server.edges import MACHINE, Edges
    from minikafka.server.groups import GroupService

    seeded = Edges(token_bytes=random.Random(5).randbytes)
    ids = [seeded.uuid4(), seeded.uuid4()]
    assert Edges(token_bytes=random.Random(5).randbytes).uuid4() == ids[0]  # a replay
    assert ids[0] != ids[1] and uuid.UUID(ids[0]).version == 4
    assert uuid.UUID(MACHINE.uuid4()).version == 4 and MACHINE.uuid4() != MACHINE.uuid4()

    config = NodeConfig(node_id=1, roles=("broker",), data_dir=tmp_path)
    svc = GroupService(config=config, rm=None, cache=None, events=None, forward=None,  # type: ignore[arg-type]
                       member_ids=lambda: "seeded")  # fmt: skip
    out = svc.coordinator.join(
        "g", member_id="", client_id="consumer", protocol_type="consumer",
        protocols=[("range", b"")], session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        require_known_member_id=True, now_ms=0,
    )  # fmt: skip
    assert out.member_id == "consumer-seeded"
