"""The sandbox fleet itself: idempotent up, faults on demand, and a down that leaves nothing behind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sshutil import sh

from fleet.errors import ConnectError
from fleet.ssh.connect import ConnectOptions, Timeouts
from sandbox.config import SANDBOX_SUPERNET

REPO = Path(__file__).resolve().parents[2]
QUICK = ConnectOptions(timeouts=Timeouts(connect=1, banner=2, auth=2), attempts=1)



def test_up_with_the_same_arguments_is_a_no_op(sandbox, _sandbox_session):
    _, profiles = _sandbox_session
    before = {h.name: sandbox.nspawn_pid(h.name) for h in sandbox.hosts()}
    _, changed = sandbox.up(len(profiles), profiles)
    assert changed is False
    assert {h.name: sandbox.nspawn_pid(h.name) for h in sandbox.hosts()} == before


def test_each_host_has_its_own_name_keys_and_address(sandbox_inventory, sandbox):
    keys = set()
    for host in sandbox_inventory.hosts.values():
        out = sh(host, "hostname; cat /etc/ssh/ssh_host_ed25519_key.pub; ip -4 -o addr show eth0").stdout.splitlines()
        assert out[0] == host.name
        keys.add(out[1].split()[1])
        assert f"inet {host.address}/24" in out[2]
    assert len(keys) == len(sandbox_inventory.hosts)


def test_hosts_have_no_route_out(sandbox_inventory):
    out = sh(sandbox_inventory.hosts["sbx0"], "ip route; ip -6 route | grep -c default || true").stdout
    assert "default" not in out.splitlines()[0:-1]
    assert out.splitlines()[-1] == "0"


def test_cut_makes_the_host_unreachable_and_heal_restores_it(sandbox, sandbox_inventory):
    host = sandbox_inventory.hosts["sbx3"]
    sandbox.cut("sbx3")
    try:
        with pytest.raises(ConnectError, match="timed out"):
            sh(host, "true", QUICK)
    finally:
        sandbox.heal("sbx3")
    assert sh(host, "echo back").stdout == "back\n"


def test_kill_is_a_hard_stop_and_start_boots_the_same_disk(sandbox, sandbox_inventory):
    host = sandbox_inventory.hosts["sbx3"]
    sh(host, "echo kept > /root/marker && sync")
    sandbox.kill("sbx3")
    assert not sandbox.is_running("sbx3")
    with pytest.raises(ConnectError):
        sh(host, "true", QUICK)
    sandbox.start("sbx3")
    assert sh(host, "cat /root/marker; systemctl is-system-running --wait").stdout.split() == ["kept", "running"]


def test_systemd_and_journald_work_inside(sandbox_inventory):
    script = (
        "printf '[Service]\\nExecStart=/bin/sh -c \"echo hello-from-unit; sleep 30\"\\n'"
        " > /etc/systemd/system/t.service;"
        " systemctl daemon-reload && systemctl start t && systemctl is-active t;"
        " for i in $(seq 50); do journalctl -u t -o cat | grep -q hello-from-unit && break; sleep 0.1; done;"
        " journalctl -u t -o cat | grep hello; systemctl stop t; systemctl is-active t; true"
    )
    assert sh(sandbox_inventory.hosts["sbx1"], script).stdout.split() == ["active", "hello-from-unit", "inactive"]


def test_down_leaves_nothing_behind(sandbox):
    cfg = sandbox.cfg
    rootfs_mounts_before = Path("/proc/mounts").read_text().count(str(cfg.home))
    assert rootfs_mounts_before == 0  # overlays live in private mount namespaces, never in ours
    sandbox.down()
    assert f"fsb{cfg.index}-" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert subprocess.run(["ip", "link", "show", cfg.bridge], capture_output=True).returncode != 0
    assert not any(cg.exists() for h in ("sbx0", "sbx4") for cg in cfg.cgroups(h))
    assert not (cfg.home / "hosts").exists() and not (cfg.home / "wheelhouse").exists()
    assert not cfg.inventory_path.exists()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(cfg.home) not in ps


def test_a_fleet_that_is_down_keeps_its_addresses_inside_and_the_guard_refuses_them(sandbox, tmp_path):
    """After down, the sandbox range is blackholed (it never follows the default route out) and fleet refuses
    the fleet's address in one line before sending anything."""
    saved = tmp_path / "hosts.yaml"
    saved.write_text(sandbox.cfg.inventory_path.read_text())
    address = str(sandbox.cfg.subnet.network_address + 10)
    sandbox.down()
    routes = subprocess.run(["ip", "route", "show", "type", "blackhole"], capture_output=True, text=True).stdout
    assert f"blackhole {SANDBOX_SUPERNET}" in [line.strip() for line in routes.splitlines()]
    got = subprocess.run(["ip", "route", "get", address], capture_output=True, text=True)
    assert got.returncode != 0 and "dev" not in got.stdout  # no interface would carry it: not eth0, not anywhere
    probe = subprocess.run([str(REPO / ".venv/bin/inv"), "probe", "-i", str(saved), "--host", "sbx0", "--json"],
                           cwd=REPO, capture_output=True, text=True)
    assert probe.returncode != 0 and probe.stdout == "", probe.stdout[-1500:]
    assert probe.stderr == (f"error: sbx0: {address} refused: FLEET_SANDBOX_ONLY=1 and no sandbox fleet is up there "
                            "(no bridge of this machine routes it: `inv sandbox.up` its instance); nothing was sent\n")
