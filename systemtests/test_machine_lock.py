"""The machine lock of the system tests' two workers (systemtests/harness/machine_lock.py), with
threads in this process: flock locks belong to each open file, so two threads conflict as two
workers do. The only waits are bounded waits for what must not happen yet."""

from __future__ import annotations

import threading
from pathlib import Path

from systemtests.harness.machine_lock import machine

NOT_YET_S = 0.2  # how long a waiter is watched not to get in
IN_TIME_S = 10.0


def _hold(session: Path, alone: bool, entered: threading.Event, leave: threading.Event) -> None:
    with machine(session, alone=alone):
        entered.set()
        leave.wait(IN_TIME_S)


def _start(session: Path, alone: bool) -> tuple[threading.Event, threading.Event]:
    entered, leave = threading.Event(), threading.Event()
    threading.Thread(target=_hold, args=(session, alone, entered, leave), daemon=True).start()
    return entered, leave


def test_shared_holders_run_together_and_one_alone_waits_for_them(tmp_path: Path) -> None:
    in1, out1 = _start(tmp_path, alone=False)
    in2, out2 = _start(tmp_path, alone=False)
    assert in1.wait(IN_TIME_S) and in2.wait(IN_TIME_S)  # both at once
    in3, out3 = _start(tmp_path, alone=True)
    assert not in3.wait(NOT_YET_S)
    out1.set()
    assert not in3.wait(NOT_YET_S)  # one shared holder is still in
    out2.set()
    assert in3.wait(IN_TIME_S)
    out3.set()


def test_a_shared_holder_that_comes_later_does_not_pass_one_waiting_alone(tmp_path: Path) -> None:
    in1, out1 = _start(tmp_path, alone=False)
    assert in1.wait(IN_TIME_S)
    in2, out2 = _start(tmp_path, alone=True)
    assert not in2.wait(NOT_YET_S)  # waiting, holding the turn
    in3, out3 = _start(tmp_path, alone=False)
    assert not in3.wait(NOT_YET_S)  # flock alone would let it in beside the first
    out1.set()
    assert in2.wait(IN_TIME_S)
    assert not in3.wait(NOT_YET_S)
    out2.set()
    assert in3.wait(IN_TIME_S)
    out3.set()
