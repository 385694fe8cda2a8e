"""fleet.progress.ticking: a step that is one blocking call (the verify, the bench, a venv build, a stop) says where
it stands every second while it runs, and nothing once it has returned (issue 46: a long phase never looks like a
hang)."""

from __future__ import annotations

import threading
import time

import pytest

from fleet.progress import Live, standing, ticking


def test_a_blocking_step_says_where_it_stands_while_it_runs_and_not_after():
    said: list[str] = []
    with ticking(said.append, "verify", 130, every=0.05):
        time.sleep(0.5)
    count = len(said)
    time.sleep(0.2)
    assert len(said) == count and count >= 5, said
    assert all(isinstance(m, Live) for m in said)
    assert said[0] == "phase verify: 0s of 130s budget" and said[-1].endswith("s of 130s budget")


def test_a_step_that_raises_stops_its_ticks_and_the_error_is_the_steps():
    said: list[str] = []
    with pytest.raises(TimeoutError), ticking(said.append, "bench", 600, every=0.02):
        time.sleep(0.1)
        raise TimeoutError("bench")
    count = len(said)
    time.sleep(0.1)
    assert len(said) == count and not [t for t in threading.enumerate() if t.name == "progress bench"]


def test_the_elapsed_time_is_the_steps_own_clock():
    now = [100.0]
    said: list[str] = []
    ready = threading.Event()

    def say(m: str) -> None:
        said.append(m)
        now[0] += 60
        ready.set()

    with ticking(say, "venv build", 1800, every=0.01, clock=lambda: now[0]):
        ready.wait(2)
        while len(said) < 3:
            time.sleep(0.01)
    assert said[:3] == ["phase venv build: 0s of 1800s budget", "phase venv build: 60s of 1800s budget",
                        "phase venv build: 120s of 1800s budget"]


def test_a_starting_servers_line_and_a_steps_line_read_alike():
    assert standing("jit_compile", 42.4, 1200, "  compiling 3 of 12 ") == (
        "phase jit_compile: 42s of 1200s budget; last line: compiling 3 of 12")
    assert standing("jit_compile", 1, 1200, "").endswith("last line: (none yet)")
    assert standing("bench", 3, 600) == "phase bench: 3s of 600s budget"
