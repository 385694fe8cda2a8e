"""A Ctrl-C during `inv tune` is answered at once (issue 46, finding 4, a form nobody tried). The twenty-third
newcomer's hour pressed Ctrl-C in `inv tune --slo` during a load point (10 requests at 0.0156 req/s: 640 s): nothing
was said for over six minutes, until the point ended and the tune put back the release before. The tune runs on
fleet.parallel.on_worker's thread, whose first Ctrl-C only set a flag the work reads at its next checkpoint; it now
says at once what it waits for and what a second Ctrl-C leaves, as run_all does for every other task. Real
interrupts: SIGINT to the main thread."""

from __future__ import annotations

import signal
import threading

import pytest

from fleet import parallel


def _interrupt_soon(after: float = 0.1) -> None:
    threading.Timer(after, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()


@pytest.fixture
def said():
    lines: list[str] = []
    parallel.tell_interrupts_to(lines.append)
    yield lines
    parallel.tell_interrupts_to(None)


def test_the_first_ctrl_c_is_answered_before_the_work_takes_it(said):
    answered_while_busy: list[bool] = []

    def work() -> str:
        with parallel.interruptible():
            for _ in range(200):  # a load point: the checkpoint comes only once it ends
                threading.Event().wait(0.01)
                if said:
                    break
            answered_while_busy.append(bool(said))
            parallel.checkpoint()  # the point ended: the request is taken here
        return "not taken"

    _interrupt_soon()
    with pytest.raises(KeyboardInterrupt):
        parallel.on_worker(work, lambda: "sbx2", "a load point ends within its budget", "left mid-step")
    assert answered_while_busy == [True]  # before: [False], nothing said until the checkpoint
    assert said == ["Ctrl-C: no host starts now; waiting for sbx2 to end the step under way (a load point ends "
                    "within its budget); Ctrl-C again to stop waiting"]


def test_a_second_ctrl_c_says_what_it_left(said):
    def work() -> None:
        threading.Event().wait(3)  # never reaches a checkpoint in time

    _interrupt_soon(0.1)
    _interrupt_soon(0.4)
    with pytest.raises(KeyboardInterrupt):
        parallel.on_worker(work, lambda: "sbx2", "ends", "its release stays in progress")
    assert said[-1] == "Ctrl-C again: stopped waiting for sbx2; its release stays in progress"
