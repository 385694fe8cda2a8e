"""A Ctrl-C while a rung is tried, which then fails, starts no later rung: the release before comes back (issue 46,
finding 4, a form nobody tried). The twenty-third newcomer's hour pressed Ctrl-C in `inv deploy -H sbx0` during
rung fusion-sm120's autotune; fleet answered `one that fails falls back to the release before`, then, when the rung
died of TMA_FAILURE, started rung triton-moe, a configuration that had never served, which then served at 845 tok/s
where the release before served 3,496. The ladder's climb, with a runner that records what it is asked, under a
real Ctrl-C (SIGINT to the main thread) during fleet.parallel's run."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from fleet import parallel
from fleet.deploy import ladder
from fleet.deploy.results import Attempt
from fleet.inventory import Host
from fleet.logs.rules import LogClass
from fleet.playbook import Rung

HOST = Host(name="h1", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("x.yaml"))


class Runner:
    """The attempt runner: the first rung is under way when the operator presses Ctrl-C, and it fails."""

    touched = False

    def __init__(self) -> None:
        self.asked: list[str] = []

    def key_by(self, facts: object) -> None:
        pass

    def attempt(self, conn: object, run: object, rung: Rung, sglang: object) -> tuple[Attempt, object]:
        self.asked.append(rung.name)
        self.touched = True  # the server was stopped for this rung
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        for _ in range(100):
            if parallel.stopping():
                break
            threading.Event().wait(0.05)
        return Attempt(rung.name, LogClass.TMA_FAILURE, "died in the autotuner", 1.0), None

    def judge_hardware(self, conn: object, run: object, attempt: Attempt, facts: object) -> tuple[Attempt, None]:
        return attempt, None


class Run:
    def record(self, attempt: Attempt) -> None:
        pass


def test_a_ctrl_c_during_a_rung_that_fails_starts_no_later_rung():
    deployer = object.__new__(ladder.Deployer)  # only what the climb reads
    deployer.runner, deployer.progress, deployer.facts = Runner(), lambda m: None, None
    tried: list[Attempt] = []

    def climb(host: Host) -> str:
        try:
            deployer._climb(None, Run(), [Rung(name="fusion"), Rung(name="triton-moe"), Rung(name="plain")], None,
                            tried)
        except ladder.StoppedAfterFailure as stop:
            return str(stop)
        return "climbed"

    with pytest.raises(parallel.Interrupted) as stop:
        parallel.run_all([HOST], climb)
    assert deployer.runner.asked == ["fusion"]  # before: ['fusion', 'triton-moe'], the untried rung served
    assert stop.value.outcomes[0].value == "Ctrl-C: no rung is tried after fusion failed (TMA_FAILURE)"
    assert [a.rung for a in tried] == ["fusion"]
