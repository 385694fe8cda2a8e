"""The deploy's dry run says what the deploy does to the router of a playbook's replicas (issue 46, finding 1, a form
nobody tried). The twenty-third newcomer's hour ran `inv deploy -H sbx1 -p llama-replicas --dry-run` with sbx1 and
sbx3 behind the router: the dry run showed the router's unit rewritten for sbx1 alone (`router for 1 replica(s)`,
sbx3's URL gone from --worker-urls), where the deploy kept the router running, unchanged, with both; and with the
router stopped and its port taken it said `dry-run`, exit 0, where the deploy failed the router's preflight, exit 1.
The router host's reads and the live router are stand-ins; the rules are the deploy's own (members, keeps)."""

from __future__ import annotations

import importlib
import json

from routerbook import BOOK

from fleet import playbook
from fleet.cli import deploy as deploy_cli
from fleet.deploy import restore
from fleet.deploy.results import DeployResult
from fleet.inventory import load as load_inventory
from fleet.multihost import rollout, router_plan
from fleet.multihost import router as routing
from fleet.outcomes import DeployStatus
from fleet.ssh.connect import ConnectOptions

INVENTORY = "hosts:\n  r1: {address: 10.0.0.2}\n  r3: {address: 10.0.0.4}\n  sbx0: {address: 10.0.0.9}\n"
BOTH = ["http://10.0.0.2:30000", "http://10.0.0.4:30000"]


class Live:
    def __init__(self, workers: list[str] | None):
        self.list = workers

    def workers(self):
        return None if self.list is None else list(self.list)

    def serves(self, u, conn=None):
        return u in BOTH


class Conn:
    def close(self) -> None:
        pass


def _dry_run(tmp_path, monkeypatch, capsys, live: Live, active: str, port_taken: str | None = None,
             serial: str | None = None) -> dict:
    (tmp_path / "hosts.yaml").write_text(INVENTORY)
    hosts = load_inventory(tmp_path / "hosts.yaml").hosts
    (tmp_path / "replicas.yaml").write_text(BOOK)
    book = playbook.load(tmp_path / "replicas.yaml")
    installed = router_plan.plan(book, hosts["sbx0"], BOTH, {})  # the router started with both replicas
    files = {router_plan.unit_path(book): installed.unit_text.encode(),
             router_plan.env_path(book): installed.env_text.encode()}
    release = type("R", (), {"id": "20261206T185722Z-1e1b", "config": {"workers": BOTH}})()
    store = type("S", (), {"current": lambda self: release})()
    try:
        modules = [routing, importlib.import_module("fleet.multihost.router_dry")]
    except ImportError:
        modules = [routing]
    for module in modules:
        monkeypatch.setattr(module, "open_connection", lambda host, opts: Conn(), raising=False)
        monkeypatch.setattr(module, "read_file", lambda conn, host, path: files.get(path), raising=False)
        monkeypatch.setattr(module, "unit_state", lambda conn, host, unit: {"ActiveState": active}, raising=False)
        monkeypatch.setattr(module, "port_problem", lambda *a: port_taken, raising=False)
        monkeypatch.setattr(module, "router_venv_problem", lambda *a: None, raising=False)
    monkeypatch.setattr(restore, "unit_problem", lambda *a: None)
    hooks = routing.RouterHooks(book, tmp_path / "replicas.yaml", hosts["sbx0"], ConnectOptions(), {},
                                lambda h, m: None, stores=lambda *a: store)
    hooks.live = live  # type: ignore[assignment]
    capsys.readouterr()
    if serial is None:
        code = deploy_cli._router_dry_run(hooks, [hosts["r1"]], [DeployResult("r1", DeployStatus.DRY_RUN)], True)
        return {"code": code, **json.loads(capsys.readouterr().out)["router"]}
    results = [DeployResult("r1", DeployStatus.DRY_RUN, release="20261206T185911Z-8506", unchanged=True),
               DeployResult("r3", DeployStatus.DRY_RUN)]
    plan = deploy_cli._dry_plan(results, rollout.parse_serial(serial), rollout.Amount(0))
    code = deploy_cli._router_dry_run(hooks, [hosts["r1"], hosts["r3"]], results, True, plan=plan)
    return {"code": code, **json.loads(capsys.readouterr().out)}


def test_a_dry_run_on_one_replica_keeps_the_others_in_the_router_as_the_deploy_does(tmp_path, monkeypatch, capsys):
    router = _dry_run(tmp_path, monkeypatch, capsys, Live(list(BOTH)), "active")
    assert router["diff"] == "", router["diff"]  # before: the unit for r1 alone, r3's URL taken out
    assert router["config"]["workers"] == BOTH and router["unchanged"] and router["code"] == 0
    assert "serves with its own configuration unchanged: the deploy keeps it running" in router["evidence"]


def test_a_router_preflight_the_deploy_fails_fails_the_dry_run(tmp_path, monkeypatch, capsys):
    router = _dry_run(tmp_path, monkeypatch, capsys, Live(None), "inactive", port_taken="port 30080 is in use by "
                                                                                     "another process")
    assert router["status"] == "failed" and router["code"] == 1  # before: dry-run, exit 0
    assert "router preflight: port 30080 is in use by another process" in router["error"]
    assert router["config"]["workers"] == BOTH  # the router's release routes to both: neither is dropped


def test_a_canary_left_unchanged_stops_the_dry_run_of_replicas_as_it_stops_their_deploy(tmp_path, monkeypatch, capsys):
    """`--serial 1,50%` with the canary unchanged: the deploy stops after batch 1, exit 1; the dry run said no batch
    and no stop, exit 0 (the rollout's dry run of hosts without a router said both)."""
    done = _dry_run(tmp_path, monkeypatch, capsys, Live(list(BOTH)), "active", serial="1,50%")
    assert done["code"] == 1 and done["rollout"]["not_started"] == ["r3"], done.get("rollout")
    assert "a canary that fell back or deployed nothing" in done["rollout"]["stopped"]
    assert done["router"]["config"]["workers"] == BOTH  # r3, never started, serves as it is: it stays in
