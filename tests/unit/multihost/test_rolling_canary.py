"""--canary in a rolling deploy (fleet.multihost.rolling.roll_out): a canary batch that served is judged against
the later batches' hosts; one its judge does not pass is put back (the rollback job) and no later batch starts;
one that passes lets the rollout go on. Deploys, the window and the put-back are fakes given through the seams."""

from __future__ import annotations

from pathlib import Path

from fleet import parallel
from fleet.deploy.judge import Decision, Verdict
from fleet.deploy.numerics import NumericsVerdict
from fleet.deploy.results import DeployResult
from fleet.inventory import Host
from fleet.multihost import rolling, rollout
from fleet.multihost.canary import CanaryResult
from fleet.outcomes import DeployStatus
from fleet.playbook import Playbook
from fleet.ssh.connect import ConnectOptions

BOOK = Playbook.model_validate({"name": "llama", "model": {"path": "/m"}, "ladder": [{"name": "fast"}]})


def hosts(n: int) -> list[Host]:
    return [Host(name=f"h{i}", address=f"10.0.0.{i + 1}", port=None, user=None, become=False, identity_file=None,
                 known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                 source=Path("hosts.yaml")) for i in range(n)]


class Deploys:
    """Every deploy serves release `new`."""

    facts = None

    def __init__(self, host, *args) -> None:
        self.host = host

    def run(self, force: bool = False) -> DeployResult:
        return DeployResult(self.host.name, DeployStatus.OK, release="new", config={"rung": "fast"})


class Board:
    def says(self, headline):
        pass

    def update(self, host, state=None, note=None) -> None:
        pass


def window(decision: Decision):
    calls = []

    def judge(canaries, baselines):
        calls.append(([h.name for h in canaries], [h.name for h in baselines]))
        verdict = Verdict(decision, True, 240.0, 2, (), 9, 0)
        return CanaryResult(NumericsVerdict(True, 5, ()), verdict)
    return judge, calls


def put_back(host, say, hooks):
    return DeployResult(host.name, DeployStatus.OK, release="old")


def roll(judge, tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    plan = rolling.plan_batches(hosts(4), rollout.parse_serial("1,50%"))
    return rolling.roll_out(plan, BOOK, tmp_path / "llama.yaml", ConnectOptions(), {}, False, rollout.Amount(0),
                            None, lambda h: (lambda m: None), Board(), deployer_of=Deploys,  # type: ignore[arg-type]
                            judge_canary=judge, put_back_canary=put_back)


def test_a_canary_its_judge_fails_is_put_back_and_the_rollout_stops(tmp_path, monkeypatch):
    judge, calls = window(Decision.FAIL)
    done = roll(judge, tmp_path, monkeypatch)
    assert calls == [(["h0"], ["h1", "h2", "h3"])]  # judged once, against the hosts still on the old release
    assert [r.status for r in done.results] == [DeployStatus.FAILED, *[DeployStatus.SKIPPED] * 3]
    assert "the canary did not pass its judge (judge: fail (240 s))" in done.results[0].error
    assert done.results[0].error.endswith("put back on release old")
    assert done.stopped.startswith("the canary did not pass its judge after batch 1 of 3")
    assert done.batches[0].status == DeployStatus.FAILED and done.batches[0].failed == ("h0",)
    assert not done.ok


def test_a_canary_that_passes_lets_the_rollout_go_on(tmp_path, monkeypatch):
    judge, calls = window(Decision.PASS)
    done = roll(judge, tmp_path, monkeypatch)
    assert len(calls) == 1 and done.stopped is None and done.ok
    assert [r.status for r in done.results] == [DeployStatus.OK] * 4


def test_an_inconclusive_canary_never_promotes(tmp_path, monkeypatch):
    judge, _ = window(Decision.INCONCLUSIVE)
    done = roll(judge, tmp_path, monkeypatch)
    assert done.stopped is not None and [r.status for r in done.results][1:] == [DeployStatus.SKIPPED] * 3


def test_a_ctrl_c_in_the_canary_window_leaves_the_canary_said_not_judged(tmp_path, monkeypatch):
    """h-new20 (issue 46 finding 4): Ctrl-C while sbx1 was judged (`--serial 1,50% --canary`): the window ran to its
    end, then the summary said `sbx1 ok`, `1 ok, 2 skipped`, nothing of the canary left on the new release that no
    judge passed. Its row now says so, and how to put back the release before."""
    def judge(canaries, baselines):
        raise parallel.Interrupted([None])  # the window's run_all said the Ctrl-C at once

    told: list[str] = []
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    plan = rolling.plan_batches(hosts(4), rollout.parse_serial("1,50%"))
    done = rolling.roll_out(plan, BOOK, tmp_path / "llama.yaml", ConnectOptions(), {}, False, rollout.Amount(0),
                            None, lambda h: (lambda m: None), Board(), notice=told.append,  # type: ignore[arg-type]
                            deployer_of=Deploys, judge_canary=judge, put_back_canary=put_back)
    assert told == []  # not a second `Ctrl-C: ... nothing was under way` after the window's own line
    assert done.interrupted and [r.status for r in done.results] == [DeployStatus.OK, *[DeployStatus.SKIPPED] * 3]
    assert done.results[0].notes == ["the canary was not judged (Ctrl-C during its window): it serves release new, "
                                     "which no judge passed; `inv rollback --host h0` puts back the release before"]
