"""`inv rollback --dry-run`'s command (fleet.cli.deploy): each host's plan from fleet.deploy.rollback_plan, a
replica behind a router saying its leave and rejoin, dry-run rows counted as done (exit 0), a refusal as a failed
host (exit 1), and what has no dry run refused before any host is read (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.cli import deploy as deploy_cmd
from fleet.deploy import rollback_plan
from fleet.deploy.results import DeployResult
from fleet.errors import FleetError, InputError
from fleet.inventory import Host
from fleet.outcomes import DeployStatus
from fleet.ssh.connect import ConnectOptions

HOSTS = [Host(name=n, address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
              ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(), source=Path("hosts.yaml"))
         for n in ("r1", "r2")]


def test_a_replica_behind_a_router_says_its_leave_and_rejoin_and_the_dry_run_is_done(monkeypatch, capsys):
    asked: list[tuple[str, str | None]] = []

    def plan(host, book, opts, to, before_stop=None):
        asked.append((host.name, before_stop))
        return DeployResult(host.name, DeployStatus.DRY_RUN, release="20261201T000000Z-0001", diff="x\n")

    monkeypatch.setattr(rollback_plan, "dry_run", plan)
    code = deploy_cmd.rollback(HOSTS, "llama-replicas", None, ConnectOptions(), True, dry_run=True)
    assert code == 0 and sorted(h for h, _ in asked) == ["r1", "r2"]  # the dry runs run side by side: any order
    assert all(why and "taken out of the router (sglang-router on" in why and "put back into it once it serves"
               in why for _, why in asked)
    assert '"status": "dry-run"' in capsys.readouterr().out


def test_a_host_the_rollback_would_refuse_fails_the_dry_run(monkeypatch, capsys):
    def plan(host, book, opts, to, before_stop=None):
        if host.name == "r2":
            raise FleetError("r2: no earlier known-good release to roll back to")
        return DeployResult(host.name, DeployStatus.DRY_RUN, release="20261201T000000Z-0001", diff="x\n")

    monkeypatch.setattr(rollback_plan, "dry_run", plan)
    assert deploy_cmd.rollback(HOSTS, None, None, ConnectOptions(), True, dry_run=True) == 1
    assert "no earlier known-good release" in capsys.readouterr().out


@pytest.mark.parametrize(("name", "to", "router"), [(None, "before-fleet", False), ("llama-replicas", None, True),
                                                    ("glm5-2node", None, False)])
def test_what_has_no_dry_run_is_refused_before_any_host_is_read(name, to, router, monkeypatch):
    monkeypatch.setattr(rollback_plan, "dry_run", lambda *a, **k: pytest.fail("a host was read"))
    with pytest.raises(InputError, match="not supported yet|no dry run yet"):
        deploy_cmd.rollback(HOSTS, name, to, ConnectOptions(), True, router=router, dry_run=True)
