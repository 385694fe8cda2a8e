"""The real sglang-router, both API generations, in front of replicas sbx1 and sbx3 (router on sbx0): the newest
release (0.3.2, /workers, 202 done in the background) in the hosts' venv and the oldest (0.1.9, /add_worker,
/remove_worker, /list_workers) in a venv of its own (sandbox/router.py). A one-replica redeploy takes the replica
out of the router while it restarts and puts it back after, and the router process is never restarted (issue 52,
findings 9 and 5: before, fleet spoke only the old API, and a replica put back last changed the rendered
`--worker-urls` and restarted the router)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from fleetcli import BUDGETS, inv_json, sh, write_book

from sandbox import router as sandbox_router

REPLICAS = ["sbx1", "sbx3"]
ROUTER = "sbx0"
KEY = "router-release-key"
ENV = {"SGLANG_API_KEY": KEY}
RELEASES = {sandbox_router.NEWEST: None, sandbox_router.OLDEST: sandbox_router.OLD_VENV}  # release: router.venv
LISTING = {sandbox_router.NEWEST: "/workers", sandbox_router.OLDEST: "/list_workers"}


def book(venv: str | None) -> dict:
    router = {"host": ROUTER, "port": 30080, "policy": "round_robin", **({"venv": venv} if venv else {})}
    return {"name": "llama-dp-real", "model": {"path": "/models/Llama-3.1-8B-Instruct"},
            "serve": {"host": "0.0.0.0", "port": 30000, "api_key": {"env": "SGLANG_API_KEY"}},
            "flags": {"tp-size": 1}, "ladder": [{"name": "plain"}],
            "budgets": {**BUDGETS, "start": 12, "weight_load": 12}, "router": router}


def deploy(sandbox, state: Path, path: Path, hosts: list[str], *args):
    picks = [a for h in hosts for a in ("--host", h)]
    return inv_json(sandbox, "deploy", *picks, "--playbook", str(path), "--yes", "--serial", "1", *args,
                    env={**ENV, "FLEET_STATE_DIR": str(state)})


def listed(inventory, release: str) -> list[str] | None:
    """The router's workers as its own API lists them, asked from here; None when it does not answer."""
    address = inventory.hosts[ROUTER].address
    req = urllib.request.Request(f"http://{address}:30080{LISTING[release]}",
                                 headers={"authorization": f"Bearer {KEY}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            data = json.loads(r.read())
    except (OSError, ValueError):
        return None
    return sorted(data["urls"] if "urls" in data else [w["url"] for w in data["workers"]])


def router_pid(inventory) -> str:
    return sh(inventory, ROUTER, "systemctl show -p MainPID --value sglang-router").strip()


def installed(inventory, python: str) -> str:
    code = "import importlib.metadata as m; print(m.version('sglang-router'))"
    return sh(inventory, ROUTER, f"{python} -c \"{code}\"").strip()


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("router-releases-state")


@pytest.fixture(scope="module", autouse=True)
def router_stopped_after(_sandbox_session):
    yield
    from fleet import inventory as inventory_mod

    sandbox, _ = _sandbox_session
    sh(inventory_mod.load(sandbox.cfg.inventory_path), ROUTER,
       "systemctl disable --now sglang-router 2>/dev/null || true")  # fleet enables it: no later boot starts it


@pytest.mark.parametrize("release", list(RELEASES))
def test_a_one_replica_redeploy_takes_it_out_and_back_and_never_restarts_the_router(
        sandbox, sandbox_inventory, state, tmp_path, release):
    venv = RELEASES[release]
    assert installed(sandbox_inventory, f"{venv or '/root/ml-env'}/bin/python") == release  # the real wheel
    path = write_book(tmp_path, book(venv))
    rc, data, err = deploy(sandbox, state, path, REPLICAS)
    assert rc == 0 and data["router"]["status"] in ("ok", "unchanged"), err[-3000:]
    one, three = (f"http://{sandbox_inventory.hosts[h].address}:30000" for h in REPLICAS)
    assert listed(sandbox_inventory, release) == [one, three]
    pid = router_pid(sandbox_inventory)
    assert pid not in ("", "0")

    seen: list[list[str] | None] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(listed(sandbox_inventory, release))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:  # sbx1: first in the router's list, so put back it would come last
        rc, data, err = deploy(sandbox, state, path, ["sbx1"], "--force")
    finally:
        done.set()
        watcher.join()
    assert rc == 0 and [h["status"] for h in data["hosts"]] == ["ok"], err[-3000:]
    steps = [(e["host"], e["step"]) for e in data["router"]["events"]]
    assert steps == [("sbx1", "removed"), ("sbx1", "added")], data["router"]
    assert [three] in seen, sorted({json.dumps(s) for s in seen})  # out of the router during its restart
    assert seen[-1] == [one, three] and listed(sandbox_inventory, release) == [one, three]  # and back after
    assert data["router"]["status"] == "unchanged", data["router"]
    assert router_pid(sandbox_inventory) == pid  # the router process was never restarted
