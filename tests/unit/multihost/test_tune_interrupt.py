"""Ctrl-C during `inv tune` (fleet.multihost.tune.tune_hosts): the interrupt never lands inside an SSH exchange.

On the main thread a KeyboardInterrupt lands at any bytecode, paramiko's included: between a lock's acquire()
and the try that releases it, or half-way through a packet, after which the fall-back's own commands may wait
for ever (the suspected cause of an interrupted `inv tune` still alive 15 minutes later; deploys never had it:
their host work runs on pool threads). The tune runs on a worker thread; the operator's Ctrl-C is taken between
exchanges, the release that served before is put back, and the run ends with KeyboardInterrupt on the main
thread (exit 130). The interrupts are real ones: _thread.interrupt_main, as SIGINT reaches the main thread.
The SSH exchange is a stand-in that records where an interrupt landed: what is under test is where tune lets
it land, not paramiko."""

from __future__ import annotations

import _thread
import threading
import time
from pathlib import Path

import pytest

from fleet import parallel
from fleet.deploy import fallback
from fleet.deploy.attempt import AttemptRunner
from fleet.deploy.results import Attempt, FellBack
from fleet.errors import InputError
from fleet.host.releases import Release
from fleet.inventory import Host
from fleet.logs import journal
from fleet.logs.watch import LogWatcher
from fleet.multihost import tune
from fleet.outcomes import DeployStatus, Outcome, ReleaseStatus
from fleet.playbook import Playbook
from fleet.ssh.connect import ConnectOptions

BOOK = Playbook.model_validate({"name": "llama", "model": {"path": "/m"},
                                "ladder": [{"name": "fast"}, {"name": "safe"}]})
HOST = Host(name="h0", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("hosts.yaml"))


class Exchange:
    """A stand-in for one SSH exchange (paramiko: a lock taken, bytes moved, the lock released): it records an
    interrupt that lands inside it, and every later exchange waits on its lock as paramiko's would."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.landed_inside = 0
        self.count = 0

    def __call__(self, seconds: float = 0.02) -> None:
        if not self.lock.acquire(timeout=5):
            raise AssertionError("an exchange waited on a lock an interrupted one left held")
        try:
            self.count += 1
            time.sleep(seconds)
        except KeyboardInterrupt:
            self.landed_inside += 1
            raise
        finally:
            self.lock.release()


class Source:
    """The journal follower's channel: every read is an exchange; the server never becomes ready."""

    def __init__(self, exchange: Exchange, started: threading.Event):
        self.exchange, self.started, self.closed = exchange, started, False

    def read(self, timeout: float) -> str:
        self.started.set()
        self.exchange()
        return ""

    def close(self) -> None:
        self.closed = True


class World:
    def __init__(self, tmp_path: Path, fall_back_s: float = 0.0):
        self.exchange, self.started = Exchange(), threading.Event()
        self.sources: list[Source] = []
        self.fall_backs: list[str] = []
        self.attempts: list[str] = []
        self.lines: list[str] = []
        book_path = tmp_path / "llama.yaml"
        book_path.write_text("name: llama\n")
        self.book_path = book_path
        world = self

        class Runner(AttemptRunner):
            def attempt(self, conn: object, run: object, rung: object, sglang: object,
                        measure: object = None) -> tuple[Attempt, object]:
                name = getattr(rung, "name", "?")
                world.attempts.append(name)
                self.touched = True
                source = Source(world.exchange, world.started)
                world.sources.append(source)
                try:  # the journal follower as AttemptRunner.attempt runs it: journal.follow, the source closed
                    journal.follow(source, LogWatcher(), lambda: None)
                finally:
                    source.close()
                return Attempt(name, Outcome.READY, "ready", 0.1), None

            def judge_hardware(self, *a: object) -> bool:
                return False

        self.ends_as: list[str] = []  # how the fall-back was asked to close the tune's release

        def fall_back(conn: object, store: object, release: Release, previous: Release | None,
                      why: str, ends_as: str = ReleaseStatus.FAILED) -> FellBack:
            for _ in range(3):  # the fall-back's own commands go over the same connection
                world.exchange()
            time.sleep(fall_back_s)
            world.fall_backs.append(why)
            world.ends_as.append(ends_as)
            return fallback.back_on("h0", previous, why) if previous else FellBack(DeployStatus.FAILED, "", {}, "")

        self.fall_back = fall_back  # what the tuner's fall-back does (a test may give another)

        class Run:
            store = None
            release = Release(id="rel-tune", host="h0", playbook="llama", playbook_sha256="0", created="now")

        class Tuner(tune.Tuner):
            """A tune of h0 straight into its climb, on Runner, falling back as the world says."""

            def __init__(self, *args: object) -> None:
                super().__init__(*args)  # type: ignore[arg-type]
                self.runner = Runner(self.serve, self.progress, self.serve.gate(compare_history=False), measure=True)

            def fall_back(self, conn: object, store: object, release: Release, previous: Release | None,
                          why: str, ends_as: ReleaseStatus = ReleaseStatus.FAILED) -> FellBack:
                return world.fall_back(conn, store, release, previous, why, ends_as)

            def run(self) -> tune.TuneResult:
                self.confirm("h0 is serving: go ahead?")
                result = tune.TuneResult("h0", DeployStatus.FAILED)
                return self._climb(None, Run(), list(BOOK.ladder), None, result, Run.release)  # type: ignore[arg-type]

        self.tuner = Tuner

    def tune(self, confirm=lambda q: True) -> list[tune.TuneResult]:
        return tune.tune_hosts([HOST], BOOK, self.book_path, ConnectOptions(), {}, lambda h: self.lines.append,
                               confirm, runs=0, tuner=self.tuner)


def interrupt_when(event: threading.Event, after: float = 0.1, again_after: float | None = None) -> threading.Thread:
    def press() -> None:
        event.wait(10)
        time.sleep(after)
        _thread.interrupt_main()
        if again_after is not None:
            time.sleep(again_after)
            _thread.interrupt_main()

    t = threading.Thread(target=press, daemon=True)
    t.start()
    return t


def test_ctrl_c_while_a_rung_starts_is_taken_between_exchanges_and_the_release_before_comes_back(
        tmp_path):
    world = World(tmp_path)
    presser = interrupt_when(world.started)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):  # the CLI's exit 130
        world.tune()
    presser.join(5)
    assert world.exchange.landed_inside == 0, "the Ctrl-C landed inside an SSH exchange"
    assert world.fall_backs == ["tune interrupted"]
    # history says interrupted, as of a deploy Ctrl-C ended, not failed (fails before: closed as failed)
    assert world.ends_as == [ReleaseStatus.INTERRUPTED]
    assert world.attempts == ["fast"], "no rung after the Ctrl-C"
    assert all(s.closed for s in world.sources)
    assert any("putting back the release that served before the tune" in line for line in world.lines)
    # each line is the host's (fleet.cli.deploy.host_say leads it with h0): the fall-back's own line without its
    # label, not `h0 h0: tune interrupted; ...` (a newcomer's pass: the tune's progress named the host twice)
    assert world.lines[-1] == "tune interrupted; back on release rel-tune", world.lines
    assert time.monotonic() - start < 5


def test_a_second_ctrl_c_stops_waiting_for_the_fall_back(tmp_path):
    world = World(tmp_path, fall_back_s=30)
    presser = interrupt_when(world.started, again_after=0.5)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        world.tune()
    presser.join(5)
    assert time.monotonic() - start < 5, "the second Ctrl-C did not stop the wait"
    assert world.exchange.landed_inside == 0


def test_ctrl_c_at_the_question_ends_at_once_with_nothing_changed(tmp_path):
    world = World(tmp_path)
    asked = threading.Event()

    threads = []

    def confirm(question: str) -> bool:  # an operator who never answers (input() as a real SIGINT would wake it)
        threads.append(threading.current_thread())
        asked.set()
        end = time.monotonic() + 30
        while time.monotonic() < end:
            time.sleep(0.02)
        return True

    presser = interrupt_when(asked)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        world.tune(confirm)
    presser.join(5)
    assert time.monotonic() - start < 5
    assert threads == [threading.main_thread()], "the question is asked at the terminal by the main thread"
    assert world.attempts == [] and world.fall_backs == []


def test_without_ctrl_c_the_work_s_result_and_errors_reach_the_caller_and_checkpoints_do_nothing():
    assert parallel.on_worker(lambda: 42) == 42
    with pytest.raises(InputError, match="not confirmed"):
        parallel.on_worker(lambda: (_ for _ in ()).throw(InputError("h0: tune not confirmed")))

    def work() -> str:
        with parallel.interruptible():
            parallel.checkpoint()
        return "done"

    assert parallel.on_worker(work) == "done"


def test_a_checkpoint_outside_an_interruptible_region_never_raises(tmp_path):
    """The fall-back after the Ctrl-C follows the journal too (journal.follow checkpoints): it is not cut."""
    world = World(tmp_path)
    followed = []

    def fall_back(*a: object) -> FellBack:
        source = Source(world.exchange, threading.Event())
        reads = iter(["", "", None])
        source.read = lambda timeout: (world.exchange(), next(reads))[1]  # type: ignore[method-assign]
        followed.append(journal.follow(source, LogWatcher(), lambda: None))
        world.fall_backs.append(str(a[4]))  # why
        return FellBack(DeployStatus.ROLLED_BACK, "rel-before", {}, "")

    world.fall_back = fall_back
    presser = interrupt_when(world.started)
    with pytest.raises(KeyboardInterrupt):
        world.tune()
    presser.join(5)
    assert world.fall_backs == ["tune interrupted"] and followed == [None]


def test_ctrl_c_before_any_rung_started_restarts_nothing(tmp_path):
    """Newcomer's third hour: Ctrl-C while the tune measured the release serving before it (no rung started, nothing
    stopped) said 'putting back the release that served before the tune' and restarted that server for nothing: on
    dev2, sbx0's glm5 server went down and through weight_load, autotune and graph capture again."""
    world = World(tmp_path)

    class Measuring(world.tuner):  # type: ignore[name-defined, misc]
        def run(self) -> tune.TuneResult:
            world.started.set()  # measuring the release before: the operator presses Ctrl-C now
            assert parallel._STOP.wait(5)
            result = tune.TuneResult("h0", DeployStatus.FAILED)
            release = Release(id="rel-tune", host="h0", playbook="llama", playbook_sha256="0", created="now")
            run = type("Run", (), {"store": None, "release": release})()
            return self._climb(None, run, list(BOOK.ladder), None, result, release)  # type: ignore[arg-type]

    world.tuner = Measuring
    presser = interrupt_when(world.started)
    with pytest.raises(KeyboardInterrupt):
        world.tune()
    presser.join(5)
    assert world.attempts == [] and world.fall_backs == [], "a server that was never stopped was restarted"
    assert any("interrupted before any rung started: release rel-tune serves as before; nothing was changed" in line
               for line in world.lines), world.lines


class _Store:
    def __init__(self) -> None:
        self.saved: list[str] = []

    def save(self, release: Release) -> None:
        self.saved.append(release.status)


def test_a_tune_ctrl_c_ended_before_any_rung_started_is_recorded_interrupted():
    """No rung touched the host: the tune's release closes as interrupted, not failed with 0 tries."""
    from fleet.deploy.release_run import ReleaseRun

    store = _Store()
    release = Release(id="rel-tune", host="h0", playbook="llama", playbook_sha256="0", created="now")
    ReleaseRun(store, release).fail(ReleaseStatus.INTERRUPTED)  # type: ignore[arg-type]
    assert (release.status, store.saved) == ("interrupted", ["interrupted"])


def test_the_fall_back_closes_the_tunes_release_as_it_is_asked():
    from fleet.deploy import restore

    store = _Store()
    release = Release(id="rel-tune", host="h0", playbook="llama", playbook_sha256="0", created="now")
    steps = restore.ServerSteps(None, HOST, store, release, BOOK, "sglang", lambda m: None,  # type: ignore[arg-type]
                                ReleaseStatus.INTERRUPTED)
    steps.close_failed()
    assert store.saved == ["interrupted"]
