"""`deploy --dry-run` on several hosts says the rollout the deploy would run and where it would stop (issue 46,
finding 1; newcomer h-new14). Before: `inv deploy -H sbx0,sbx1,sbx3 --serial 1,50% --dry-run` showed sbx1's and
sbx3's diffs, exit 0, while the same deploy stopped after its canary sbx0 (`unchanged`: a canary that deployed
nothing is no change that passed), sbx1 and sbx3 `skipped`, exit 1. The deploy's own stop rule, fed the dry run's
outcomes (fleet.multihost.rollout.dry_rollout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.cli import deploy as deploy_cmd
from fleet.deploy.ladder import Deployer
from fleet.deploy.results import Attempt, DeployResult
from fleet.inventory import Host
from fleet.multihost import rollout
from fleet.outcomes import DeployStatus
from fleet.ssh.connect import ConnectOptions


def hosts(n: int) -> list[Host]:
    return [Host(name=f"h{i}", address=f"10.0.0.{i + 1}", port=None, user=None, become=False, identity_file=None,
                 known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                 source=Path("hosts.yaml")) for i in range(n)]


def dry(results: dict[str, DeployResult]) -> type[Deployer]:
    class Scripted(Deployer):
        def run(self, dry_run=False, force=False):
            assert dry_run
            return results[self.host.name]
    return Scripted


@pytest.fixture
def site(tmp_path, monkeypatch):
    (tmp_path / "site/playbooks").mkdir(parents=True)
    (tmp_path / "site/playbooks/llama.yaml").write_text("name: llama\nmodel: {path: /m}\nladder:\n  - name: fast\n")
    monkeypatch.setenv("FLEET_SITE", str(tmp_path / "site"))
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))


def plan(rung: str = "fast", **kw) -> DeployResult:
    return DeployResult("h", DeployStatus.DRY_RUN, config={"rung": rung}, **kw)


UNCHANGED = plan(release="rel-1", unchanged=True)
DIFF = plan(unchanged=False)


@pytest.mark.parametrize(("case", "h0", "serial", "code", "stopped", "not_started"), [
    ("a canary left unchanged", UNCHANGED, "1,50%", 1, "a canary that fell back or deployed nothing", ["h1", "h2"]),
    ("a canary that serves only after a refused rung",
     plan(rung="slow", unchanged=False, attempts=[Attempt("fast", "PREFLIGHT", "known to fail", 0.0)]),
     "1,50%", 1, "h0 would serve rung slow only after fast (PREFLIGHT) failed", ["h1", "h2"]),
    ("a canary refused by preflight", DeployResult("h0", DeployStatus.FAILED, error="h0: preflight"), "1,50%", 1,
     "1 host failed, more than --max-fail 0 after batch 1 of 3 (the canary: h0 failed)", ["h1", "h2"]),
    ("a failed host, no canary", DeployResult("h0", DeployStatus.FAILED, error="h0: preflight"), "1", 1,
     "1 host failed, more than --max-fail 0", ["h1", "h2"]),
    ("unchanged, no canary", UNCHANGED, "1", 0, None, []),
    ("a canary that would change", DIFF, "1,50%", 0, None, []),
])
def test_a_dry_run_on_several_hosts_says_where_the_deploy_would_stop(site, case, h0, serial, code, stopped,
                                                                     not_started, capsys):
    import dataclasses

    results = {"h0": dataclasses.replace(h0, host="h0"), "h1": dataclasses.replace(DIFF, host="h1"),
               "h2": dataclasses.replace(DIFF, host="h2")}
    rc = deploy_cmd.deploy(hosts(3), "llama", ConnectOptions(), True, True, False, serial=serial,
                           deployer_of=dry(results))
    data = json.loads(capsys.readouterr().out)
    assert [h["host"] for h in data["hosts"]] == ["h0", "h1", "h2"]
    assert rc == code and data["rollout"]["not_started"] == not_started, data["rollout"]
    assert (stopped in data["rollout"]["stopped"]) if stopped else data["rollout"]["stopped"] is None


def test_the_dry_run_says_the_batches_and_the_stop_in_words(site, capsys):
    import dataclasses

    results = {"h0": dataclasses.replace(UNCHANGED, host="h0"), "h1": dataclasses.replace(DIFF, host="h1"),
               "h2": dataclasses.replace(DIFF, host="h2")}
    assert deploy_cmd.deploy(hosts(3), "llama", ConnectOptions(), False, True, False, serial="1,50%",
                             deployer_of=dry(results), wide=True) == 1
    out = capsys.readouterr().out
    assert "rollout batch 1 (canary): h0\nrollout batch 2: h1\nrollout batch 3: h2\n" in out
    assert ("the deploy would stop: a canary that fell back or deployed nothing is no change that passed after batch "
            "1 of 3 (the canary: h0 unchanged (release rel-1 already serves this playbook: nothing would be tried)); "
            "batches 2-3 not started (h1, h2)") in out


def test_the_stop_is_the_deploys_own_rule():
    """dry_rollout runs rollout.stop_after over the batches, as rolling.roll_out does over what they did."""
    said = rollout.dry_rollout(["a", "b", "c", "d"], rollout.parse_serial("2"), rollout.parse_max_fail("1"),
                               ["a", "c"], [])
    assert said.batches == [["a", "b"], ["c", "d"]] and not said.canary
    assert said.stopped == "2 hosts failed, more than --max-fail 1 after batch 2 of 2" and said.not_started == ()


def test_a_rollback_without_playbook_honours_serial_and_max_fail(site, capsys):
    """newcomer h-new14: `inv rollback -H sbx1,sbx0 --serial 1` (each host's release names its playbook) rolled every
    host back at once: sbx1 had no earlier release and failed, and sbx0 was rolled back anyway, where with
    --playbook the same rollback stops after sbx1's batch (--max-fail 0), sbx0 skipped."""
    called: list[str] = []

    def back(host, book, opts, to, say, before_stop=None):
        called.append(host.name)
        if host.name == "h0":
            return DeployResult("h0", DeployStatus.FAILED, error="h0: no earlier known-good release to roll back to")
        return DeployResult(host.name, DeployStatus.OK, release="rel-0", config={"rung": "fast"})

    rc = deploy_cmd.rollback(hosts(2), None, None, ConnectOptions(), True, serial="1", rollback_of=back)
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and called == ["h0"]
    assert [h["status"] for h in data["hosts"]] == ["failed", "skipped"] and "after batch 1 of 2" in data["stopped"]


def test_a_rollback_dry_run_in_batches_says_where_the_rollback_would_stop(site, monkeypatch, capsys):
    """The rollback's dry run ran each host's plan side by side and said nothing of --serial: exit 1 for h0's
    refusal, and h1's plan shown as if the rollback would reach it."""
    from fleet.deploy import rollback_plan
    from fleet.errors import FleetError

    def plan(host, book, opts, to, before_stop=None):
        if host.name == "h0":
            raise FleetError("h0: no earlier known-good release to roll back to")
        return DeployResult(host.name, DeployStatus.DRY_RUN, release="20261201T000000Z-0001", diff="x\n")

    monkeypatch.setattr(rollback_plan, "dry_run", plan)
    assert deploy_cmd.rollback(hosts(2), None, None, ConnectOptions(), False, dry_run=True, serial="1", wide=True) == 1
    out = capsys.readouterr().out
    assert ("the rollback would stop: 1 host failed, more than --max-fail 0 after batch 1 of 2; batch 2 not started "
            "(h1)") in out
