"""What `inv status` says about a dead run's leftovers (fleet.deploy.recovery.parse_probe) and when a lock's owner is
provably dead (fleet.host.lock.dead_owner): pure, no host."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from fleet.deploy import recovery
from fleet.host import leftovers, releases
from fleet.host import lock as hostlock
from fleet.inventory import Host


def _owner(**changes) -> dict:
    return {**hostlock._me("deploy x"), "owner": "me@" + socket.gethostname(), **changes}


def test_a_lock_is_provably_dead_only_on_this_machine_with_its_pid_gone_or_reused():
    assert hostlock.dead_owner(_owner()) is None  # this very process
    assert "no longer running" in hostlock.dead_owner(_owner(pid=2 ** 22 + 7))
    assert "now another process" in hostlock.dead_owner(_owner(pid_start=1))
    assert hostlock.dead_owner(_owner(machine="elsewhere", pid=2 ** 22 + 7)) is None
    if hostlock._read_id("/etc/machine-id"):  # the same host name on another machine is not this machine
        assert hostlock.dead_owner(_owner(machine_id="0" * 32, pid=2 ** 22 + 7)) is None
    if hostlock._read_id("/proc/sys/kernel/random/boot_id"):  # no process outlives a reboot
        assert "has rebooted since" in hostlock.dead_owner(_owner(boot_id="an-earlier-boot"))
    assert hostlock.dead_owner(_owner(machine_id=None, boot_id=None, pid=2 ** 22 + 7)) is None  # maybe a clone
    assert hostlock.dead_owner(None) is None and hostlock.dead_owner(_owner(pid="12")) is None


def test_status_probe_output_names_an_interrupted_release_and_what_the_next_deploy_does():
    dead = json.dumps(_owner(pid=2 ** 22 + 7))
    text = (f'release 20261130T101010Z-abcd {{"t": 1, "step": "installed", "rung": "plain"}}\n'
            f"lock {dead}\npatch-run 20261130T101011Z-ef0123\n")
    line = recovery.parse_probe(text)
    assert line.startswith("lock left by a dead run (pid 4194311 is no longer running")
    assert "release 20261130T101010Z-abcd was interrupted after step installed" in line
    assert "patch run 20261130T101011Z-ef0123 was interrupted half-way" in line


def test_status_probe_output_while_a_live_run_holds_the_lock_says_in_progress():
    text = f'release 20261130T101010Z-abcd {{"step": "stop"}}\nlock {json.dumps(_owner(epoch=int(time.time())))}\n'
    line = recovery.parse_probe(text)
    assert line.startswith(f"locked: held by me@{socket.gethostname()} pid {os.getpid()}")
    assert "deploy 20261130T101010Z-abcd in progress (at step stop)" in line and "STALE" not in line


def test_a_clean_host_has_nothing_to_say():
    assert recovery.parse_probe("lock \n") is None and recovery.parse_probe("") is None


def test_a_damaged_manifest_among_the_releases_is_passed_over_not_a_wall(tmp_path, monkeypatch):
    """A hand-made copy of an interrupted release (its id not its folder's) made every deploy, rollback and tune
    fail in recovery, before any of them could put the host right; it is passed over as list() passes it."""
    rec, rel = recovery, releases
    root = tmp_path / "releases"

    def local(path: str) -> str:
        return path.replace(rel.RELEASES, str(root))

    def sh(conn, host, command, timeout=120, check=True):
        return subprocess.run(["sh", "-c", local(command)], capture_output=True, text=True, timeout=30).stdout

    def read_file(conn, host, path):
        p = Path(local(path))
        return p.read_bytes() if p.exists() else None

    monkeypatch.setattr(leftovers, "sh", sh)
    monkeypatch.setattr(rel, "sh", sh)
    monkeypatch.setattr(rel, "read_file", read_file)
    good = rel.Release(id="20261201T000001Z-abcd", host="h", playbook="p", playbook_sha256="x", created="t",
                       status="in-progress")
    for folder, doc in ((good.id, good.to_json()), (good.id + ".saved", good.to_json())):
        (root / folder).mkdir(parents=True)
        (root / folder / "manifest.json").write_text(json.dumps(doc))
    host = Host(name="h", address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
                    known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
                    source=Path("x.yaml"))
    found = rec.find(None, host)  # type: ignore[arg-type]
    assert [i.release.id for i in found] == [good.id]


def test_recovery_removes_a_dead_run_s_new_current_link_and_temp_files_but_nothing_else(tmp_path):
    """A run killed between mark_current's `ln -s` and its `mv` left .current.HEX (dangling once its release is
    pruned); recovery's one round trip removes it with write_atomic's temp files, and names what it removed."""
    root, etc = tmp_path / "fleet", tmp_path / "etc"
    root.mkdir()
    etc.mkdir()
    (root / ".current.0a1b2c3d").symlink_to("releases/20261201T000000Z-gone")  # dangling
    (root / "current").symlink_to("releases/20261201T000000Z-live")
    (etc / ".sglang.env.fleet-12-34").write_text("half")
    (etc / "sglang.env").write_text("kept")
    cmd = leftovers.drop_temp_command([(str(etc), ".sglang.env.fleet-"), (str(root), releases.CURRENT_TEMP)])
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(out) == sorted([str(etc / ".sglang.env.fleet-12-34"), str(root / ".current.0a1b2c3d")])
    assert sorted(p.name for p in root.iterdir()) == ["current"] and [p.name for p in etc.iterdir()] == ["sglang.env"]
    assert subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True).stdout == ""
