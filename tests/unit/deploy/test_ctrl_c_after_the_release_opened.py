"""A Ctrl-C after a deploy opened its release and before its first rung touched the server stops it there (issue
46, finding 4, a form nobody tried). The seventh newcomer's hour pressed Ctrl-C as `inv deploy -H sbx3` had said its
plan (`rung plain: known-good ... trying it first`): fleet answered `a deploy that has changed nothing yet stops
before it does`, then stopped the server and served the new release. `parallel.stopping()` was asked before the
venv build and before the release opened, never between that and the first stop. The ladder's climb, with a
runner that records what it is asked, under a real Ctrl-C (SIGINT to the main thread) during fleet.parallel's run."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from fleet import parallel
from fleet.deploy import ladder
from fleet.inventory import Host
from fleet.playbook import Rung

HOST = Host(name="h1", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("x.yaml"))


class Runner:
    """The attempt runner: nothing touched yet, and every attempt it is asked for recorded (none should be)."""

    touched = False

    def __init__(self) -> None:
        self.asked: list[str] = []

    def key_by(self, facts: object) -> None:
        pass

    def attempt(self, conn: object, run: object, rung: Rung, sglang: object) -> tuple[object, object]:
        self.asked.append(rung.name)
        raise AssertionError("an attempt started after the Ctrl-C")


def test_a_ctrl_c_after_the_release_opened_stops_before_the_first_rung():
    deployer = object.__new__(ladder.Deployer)  # only what the climb reads
    deployer.runner, deployer.progress, deployer.facts = Runner(), lambda m: None, None
    main = threading.main_thread().ident

    def climb(host: Host) -> str:
        threading.Timer(0.1, signal.pthread_kill, (main, signal.SIGINT)).start()
        for _ in range(100):  # the release is being opened when the operator's Ctrl-C comes
            if parallel.stopping():
                break
            threading.Event().wait(0.05)
        try:
            deployer._climb(None, None, [Rung(name="plain")], None, [])
        except Exception as exc:  # noqa: BLE001 - the test says which it was
            return type(exc).__name__
        return "climbed"

    with pytest.raises(parallel.Interrupted) as stop:
        parallel.run_all([HOST], climb)
    assert deployer.runner.asked == []  # before: ['plain'], the server stopped and the new release served
    assert stop.value.outcomes[0].value == "StoppedBeforeChange", stop.value.outcomes
