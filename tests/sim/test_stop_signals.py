"""The simulated server stops on SIGTERM however the signals come: systemd's to every process of the unit and
fleet-launch's passed on reach it twice, the second one at times while the first one's handler runs."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from sim_helpers import DENSE_MODEL

# The main thread holds the stop event's lock when the signal's handler runs in it, as the first handler's
# Event.set() holds it when a second SIGTERM comes: a handler that takes that lock never returns.
SECOND_SIGNAL_DURING_SET = """
import os, signal, sys, threading
from sglang.srt.entrypoints import http_server

class State:
    stop = threading.Event()

state = State()
http_server.stop_on_signals(state)
with state.stop._cond:
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(100000):  # bytecodes: the handler runs among them, in this thread, the lock held
        pass
print("stopped" if state.stop.wait(5) else "not stopped", flush=True)
"""


def test_a_signal_while_the_stop_event_is_held_stops_it_without_a_deadlock(make_host):
    host = make_host("rtx5090-x2-workstation")
    try:
        out = host.run_code(SECOND_SIGNAL_DURING_SET, timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError("the signal's handler deadlocked on the stop event's lock") from None
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "stopped"


def test_two_sigterms_in_a_row_stop_the_server_cleanly(make_host):
    host = make_host("rtx5090-x2-workstation")
    server = host.start("--model-path", DENSE_MODEL, "--tp", "1")
    server.wait_ready()
    server.proc.send_signal(signal.SIGTERM)  # systemd's
    time.sleep(0.0002)
    if server.proc.poll() is None:
        os.kill(server.proc.pid, signal.SIGTERM)  # fleet-launch's, passed on
    assert server.wait_exit(10) == 0
    assert "Application shutdown complete." in server.log()
