"""fleet.parallel: every host an outcome, on a bounded pool of daemon threads (a stuck host never keeps the
process from exiting)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from fleet import parallel
from fleet.errors import FleetError
from fleet.inventory import Host

REPO = Path(__file__).resolve().parents[2]


def _host(name: str) -> Host:
    return Host(name=name, address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                source=Path("hosts.yaml"))


def test_the_pool_starts_no_more_threads_than_its_size_and_all_are_daemons():
    pool, gate = parallel.Pool(2), threading.Event()
    futures = [pool.submit(lambda i=i: (gate.wait(5), i)[1]) for i in range(5)]
    assert len(pool._threads) == 2 and all(t.daemon for t in pool._threads)
    gate.set()
    assert [f.result(timeout=5) for f in futures] == [0, 1, 2, 3, 4]
    pool.shutdown()


def test_abandoning_a_busy_thread_lets_queued_work_start():
    pool, stuck, done = parallel.Pool(1), threading.Event(), []
    pool.submit(stuck.wait, 30)
    later = pool.submit(lambda: done.append(1) or "ran")
    pool.abandon()
    assert later.result(timeout=5) == "ran" and len(pool._threads) == 2
    stuck.set()
    pool.shutdown()


def test_every_host_gets_an_outcome_in_order_and_none_hides_another():
    def fn(h: Host) -> str:
        if h.name == "b":
            raise FleetError("b: refused")
        if h.name == "c":
            raise KeyError("surprise")
        return h.name.upper()

    out = parallel.run_all([_host(n) for n in "abcd"], fn)
    assert [(o.host.name, o.ok, o.value, o.error) for o in out] == [
        ("a", True, "A", None), ("b", False, None, "b: refused"), ("c", False, None, "c: KeyError: 'surprise'"),
        ("d", True, "D", None)]


def test_a_thread_stuck_forever_does_not_keep_the_process_from_exiting():
    code = ("import threading; from fleet import parallel; p = parallel.Pool(1); "
            "p.submit(threading.Event().wait); print('submitted', flush=True)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "submitted\n"


def test_ctrl_c_lets_the_host_under_way_finish_its_own_end_and_starts_no_other():
    """A single-host deploy runs on a daemon thread: leaving at Ctrl-C would freeze it mid-step (its server
    stopped, no fall-back). run_all waits for the work under way, cancels what has not started, then re-raises."""
    started, finished, main = [], [], threading.main_thread().ident

    def work(host: Host) -> str:
        started.append(host.name)
        try:
            if host.name == "a":  # a real SIGINT: it wakes the main thread out of its wait, as Ctrl-C does
                threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT)).start()
            threading.Event().wait(0.8)  # a step under way when Ctrl-C comes
            return host.name
        finally:
            finished.append(host.name)  # a fall-back's place: it must run

    try:
        parallel.run_all([_host("a"), _host("b")], work, max_workers=1)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("Ctrl-C was swallowed")
    assert started == ["a"] and finished == ["a"]  # a ran to its end; b, queued, never started


def test_ctrl_c_between_two_submits_still_waits_for_the_host_already_queued(monkeypatch):
    """A Ctrl-C that lands while run_all is still queueing hosts (the first one already running) must settle the
    first: before, the futures were bound only once all were queued, so it was left running untracked and
    run_all returned while it was mid-step."""
    finished: list[str] = []
    submit, calls, running = parallel.Pool.submit, [], threading.Event()

    def interrupted_on_the_second(pool, fn, *args, **kw):
        calls.append(1)
        if len(calls) == 2:
            assert running.wait(5)
            raise KeyboardInterrupt  # as SIGINT would, with a running and b not queued yet
        return submit(pool, fn, *args, **kw)

    def work(host: Host) -> str:
        running.set()
        threading.Event().wait(0.5)
        finished.append(host.name)
        return host.name

    monkeypatch.setattr(parallel.Pool, "submit", interrupted_on_the_second)
    try:
        parallel.run_all([_host("a"), _host("b")], work)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the Ctrl-C was swallowed")
    assert finished == ["a"]  # waited for; b never started


def test_a_second_ctrl_c_while_the_first_is_answered_still_gives_every_outcome():
    """The CI run of stop 50: the second Ctrl-C came while the first's notice was still being written (before the
    wait for the hosts under way began), escaped run_all as a bare KeyboardInterrupt, and `inv probe --json`
    printed nothing. A second Ctrl-C anywhere after the first is 'stop waiting': Interrupted, with the outcomes."""
    main, said = threading.main_thread().ident, []
    answered = threading.Event()

    def notice(line: str) -> None:
        said.append(line)
        if len(said) == 1:
            raise KeyboardInterrupt  # the second Ctrl-C, landing in the first notice's write

    def work(host: Host) -> str:
        if host.name == "fast":
            answered.set()
            return host.name
        assert answered.wait(5)
        threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT)).start()
        threading.Event().wait(2.0)  # still under way when the wait is given up
        return host.name

    try:
        parallel.run_all([_host("fast"), _host("slow")], work, notice=notice)
    except KeyboardInterrupt as stop:  # caught whole: a bare one (before) would end the test session
        assert isinstance(stop, parallel.Interrupted), "the second Ctrl-C escaped without the outcomes"
        outcomes = stop.outcomes
    else:
        raise AssertionError("the Ctrl-C was swallowed")
    assert [o.value if o else None for o in outcomes] == ["fast", None]
    assert said[0].startswith("Ctrl-C: no host starts now; waiting for slow")
    assert said[1] == "Ctrl-C again: stopped waiting for slow; what they were doing ends with this run"


def test_a_second_ctrl_c_after_every_host_ended_names_no_empty_list():
    """The CI run of stop 52: the wedged host's step ended on its own as the second Ctrl-C came, and the line read
    'Ctrl-C again: stopped waiting for ; ...'. Here the second Ctrl-C lands in the first notice's write, after the
    only host has ended."""
    main, said = threading.main_thread().ident, []
    ended = threading.Event()

    def notice(line: str) -> None:
        said.append(line)
        if len(said) == 1:
            assert ended.wait(5)
            time.sleep(0.1)  # the host's future settled
            raise KeyboardInterrupt  # the second Ctrl-C

    def work(host: Host) -> str:
        threading.Timer(0.1, signal.pthread_kill, (main, signal.SIGINT)).start()
        threading.Event().wait(0.5)  # under way when the first Ctrl-C comes
        ended.set()
        return host.name

    try:
        parallel.run_all([_host("wedged")], work, notice=notice)
    except KeyboardInterrupt as stop:
        assert isinstance(stop, parallel.Interrupted)
        outcomes = stop.outcomes
    else:
        raise AssertionError("the Ctrl-C was swallowed")
    assert [o.value if o else None for o in outcomes] == ["wedged"]
    assert said[1] == "Ctrl-C again: every host had ended its step by then; nothing was left to stop", said


def test_work_under_way_learns_of_the_ctrl_c_and_a_new_run_starts_without_it():
    """parallel.stopping(): what a deploy asks before its first change (fleet.deploy.ladder)."""
    main, seen = threading.main_thread().ident, []

    def work(host: Host) -> str:
        seen.append(parallel.stopping())
        threading.Timer(0.1, signal.pthread_kill, (main, signal.SIGINT)).start()
        for _ in range(100):
            if parallel.stopping():
                return "stopped before any change"
            threading.Event().wait(0.05)
        return "went on"

    try:
        parallel.run_all([_host("a")], work)
    except parallel.Interrupted as stop:
        assert stop.outcomes[0].value == "stopped before any change"
    else:
        raise AssertionError("the Ctrl-C was swallowed")
    assert parallel.run_all([_host("b")], lambda h: parallel.stopping())[0].value is False
    assert seen == [False]
