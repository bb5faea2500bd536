"""What one group request and the deadline wake it causes cost the group coordinator
(core/group/coordinator.py), as the number of groups it holds grows.

The coordinator is filled with `--groups` groups, half with a member past its join (its session
timer running), half standalone groups holding one committed offset. Then each round is what
server/groups.py does for a Heartbeat: the heartbeat, then the timer task's wake (the next
deadline, and `on_deadline` at now). The median and the worst of `--rounds` rounds are printed,
with the time to fill. Pure core, no Trio: run it against any checkout's `minikafka` on
PYTHONPATH to compare before and after.

    .venv/bin/python benchmarks/group_coordinator_bench.py [--groups 200000] [--rounds 50]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from minikafka.core.group import GroupConfig, GroupCoordinator

SESSION_MS = 30_000


def fill(c: GroupCoordinator, groups: int) -> dict[str, str]:
    members: dict[str, str] = {}
    for i in range(groups // 2):
        gid = f"consumer-{i}"
        out = c.join(
            gid,
            member_id="",
            client_id="c",
            protocol_type="consumer",
            protocols=[("range", b"")],
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=60_000,
            require_known_member_id=False,
            now_ms=0,
        )
        members[gid] = out.member_id
        sid = f"standalone-{i}"
        commit = c.commit(
            sid, member_id="", generation_id=-1, offsets={("t", 0): (i, "")}, now_ms=0
        )
        c.restore(sid, commit.effects[0].offsets, i)
    c.on_deadline(0)  # initial delay 0: every join completes (CompletingRebalance)
    return members


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args()
    ids = itertools.count()
    c = GroupCoordinator(
        config=GroupConfig(initial_rebalance_delay_ms=0), id_factory=lambda: str(next(ids))
    )
    t0 = time.perf_counter()
    members = fill(c, args.groups)
    fill_s = time.perf_counter() - t0
    gids = list(members)
    times = []
    for r in range(args.rounds):
        gid = gids[r % len(gids)]
        now = 1000 + r
        t = time.perf_counter()
        c.heartbeat(gid, member_id=members[gid], generation_id=1, now_ms=now)
        c.next_deadline_ms()
        c.on_deadline(now)
        times.append(time.perf_counter() - t)
    print(f"groups            {len(c.groups):>10,}")
    print(f"fill              {fill_s:>10.2f} s")
    print(f"request + wake    {statistics.median(times) * 1e3:>10.3f} ms median")
    print(f"                  {max(times) * 1e3:>10.3f} ms worst of {args.rounds}")


if __name__ == "__main__":
    main()
