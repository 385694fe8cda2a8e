"""fleet.faulthook numbers steps taken on several threads at once (a multi-node deployment follows its nodes'
journals together) one number each: found by the many-host fault harness, whose traced 2-node rollback had two
steps numbered 69 (the counter was read after another thread's increment), so a point ran twice and the step
after it (`current`'s move) was never a point."""

from __future__ import annotations

import sys
import threading

from fleet import faulthook


def test_steps_on_many_threads_get_one_number_each_and_the_armed_one_faults_once(tmp_path, monkeypatch):
    faulthook.number_from_one()
    trace = tmp_path / "trace"
    monkeypatch.setenv(faulthook.TRACE, str(trace))
    monkeypatch.setenv(faulthook.AT, "150:fail")
    start = threading.Barrier(8)
    faults: list[str] = []

    def steps(t: int) -> None:
        start.wait()
        for i in range(50):
            kind = faulthook.remote_step(lambda: f"thread {t} step {i}")  # noqa: B023 - called at once
            if kind:
                faults.append(kind)

    threads = [threading.Thread(target=steps, args=(t,)) for t in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: a race shows at once
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    numbers = [int(line.split("\t")[0]) for line in trace.read_text().splitlines()]
    assert sorted(numbers) == list(range(1, 401))  # none twice, none missing
    assert numbers == sorted(numbers)  # traced in the order numbered
    assert faults == ["fail"]
