"""After a power cut of every host, the router comes back with its replicas: every router run (a deploy, an
unchanged redeploy, a rollback) ends with the current router release's unit enabled, as the replicas' own
(fleet.deploy.boot through fleet.deploy.hostrun). Replicas sbx1 and sbx3 behind the real sglang-router on sbx0,
as in test_router."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fleetcli import inv_json, sh, write_book
from test_router import ENV, REPLICAS, ROUTER, book, generate, router_workers, urls

ROUTER_UNIT = "sglang-router"


def enabled(inventory, name: str = ROUTER, unit: str = ROUTER_UNIT) -> str:
    return sh(inventory, name, f"systemctl is-enabled {unit} 2>/dev/null; true").strip()


def routes_after_power_cut(sandbox, inventory, hosts: list[str]) -> tuple[list[str], int | None]:
    """A hard stop (no shutdown) of `hosts` and a boot of the same disks; the router's workers and a generation's
    code through it, once it routes to every replica (polled, at most 120 s)."""
    for name in hosts:
        sandbox.kill(name)
    for name in hosts:
        sandbox.start(name)
    deadline, workers, code = time.monotonic() + 120, [], None
    while time.monotonic() < deadline:
        try:
            workers = router_workers(inventory)
        except (ValueError, KeyError):  # the router does not answer yet, or not its listing
            workers = []
        if workers == sorted(urls(inventory)):
            code = generate(inventory)[0]
            if code == 200:
                break
        time.sleep(1)
    return workers, code


@pytest.fixture(scope="module")
def deployed(_sandbox_session, tmp_path_factory):
    """Both replicas, then the router on sbx0; the router's unit disabled and stopped after (the other modules'
    tests do not expect it, nor a reboot of sbx0 to start it)."""
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    from fleet import inventory as inventory_mod

    inventory = inventory_mod.load(sandbox.cfg.inventory_path)
    sh(inventory, ROUTER, f"systemctl disable --now {ROUTER_UNIT} 2>/dev/null; true")
    state = tmp_path_factory.mktemp("router-boot-state")
    books = tmp_path_factory.mktemp("books")
    env = {**ENV, "FLEET_STATE_DIR": str(state)}
    paths = {}
    for name, interval in (("a", 2), ("b", 3)):  # two router configurations: two router releases
        (books / name).mkdir()
        paths[name] = write_book(books / name, book(name="llama-dp-boot", flags={"health-check-interval-secs":
                                                                                  interval}))
    picks = [a for h in REPLICAS for a in ("--host", h)]

    def deploy(path: Path):
        return inv_json(sandbox, "deploy", *picks, "--playbook", str(path), "--yes", "--serial", "1", env=env)

    yield {"deploy": deploy, "paths": paths, "env": env}
    sh(inventory, ROUTER, f"systemctl disable --now {ROUTER_UNIT} 2>/dev/null; true")


def test_a_deployed_router_routes_to_its_replicas_again_after_every_host_is_power_cut(deployed, sandbox,
                                                                                         sandbox_inventory):
    rc, data, err = deployed["deploy"](deployed["paths"]["a"])
    assert rc == 0 and data["router"]["status"] == "ok", err[-3000:]
    assert enabled(sandbox_inventory) == "enabled", err[-3000:]  # fails before: nothing enabled the router's unit
    assert "enabled sglang-router" in err
    assert all(enabled(sandbox_inventory, h, "sglang") == "enabled" for h in REPLICAS)
    workers, code = routes_after_power_cut(sandbox, sandbox_inventory, [ROUTER, *REPLICAS])
    assert (workers, code) == (sorted(urls(sandbox_inventory)), 200)


def test_an_unchanged_redeploy_enables_a_router_unit_disabled_by_hand(deployed, sandbox_inventory):
    """As a router host an older fleet deployed (it never enabled the router's unit): the next run enables it,
    without restarting the router."""
    sh(sandbox_inventory, ROUTER, f"systemctl disable {ROUTER_UNIT}")
    pid = sh(sandbox_inventory, ROUTER, f"systemctl show -p MainPID --value {ROUTER_UNIT}").strip()
    rc, data, err = deployed["deploy"](deployed["paths"]["a"])
    assert rc == 0 and data["router"]["status"] == "unchanged", err[-3000:]
    assert enabled(sandbox_inventory) == "enabled" and "enabled sglang-router (it was disabled)" in err
    assert sh(sandbox_inventory, ROUTER, f"systemctl show -p MainPID --value {ROUTER_UNIT}").strip() == pid


def test_a_router_rollback_leaves_the_unit_of_what_serves_enabled_and_it_comes_back_after_a_power_cut(
        deployed, sandbox, sandbox_inventory):
    rc, data, err = deployed["deploy"](deployed["paths"]["b"])
    assert rc == 0 and data["router"]["status"] == "ok", err[-3000:]
    sh(sandbox_inventory, ROUTER, f"systemctl disable {ROUTER_UNIT}")  # so that only the rollback can enable it
    rc, report, err = inv_json(sandbox, "rollback", "--playbook", str(deployed["paths"]["b"]), "--router",
                               env=deployed["env"])
    assert rc == 0 and report["status"] == "ok", err[-3000:]
    current = sh(sandbox_inventory, ROUTER, "readlink /var/lib/fleet/router/current").strip()
    assert current.endswith(report["release"])
    assert enabled(sandbox_inventory) == "enabled" and "enabled sglang-router (it was disabled)" in err
    assert "health-check-interval-secs 2" in sh(sandbox_inventory, ROUTER,
                                                f"cat /etc/systemd/system/{ROUTER_UNIT}.service")
    workers, code = routes_after_power_cut(sandbox, sandbox_inventory, [ROUTER])
    assert (workers, code) == (sorted(urls(sandbox_inventory)), 200)
