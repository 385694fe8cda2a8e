"""What `inv status` says about a dead run's leftovers (fleet.deploy.recovery.parse_probe) and when a lock's owner is
provably dead (fleet.host.lock.dead_owner): pure, no host."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import time
from pathlib import Path

from fleet.deploy import recovery
from fleet.host import lock as hostlock
from fleet.host import releases
from fleet.inventory import Host


def _owner(**changes) -> hostlock.LockOwner:
    return dataclasses.replace(hostlock.LockOwner.mine("deploy x"), owner="me@" + socket.gethostname(), **changes)


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
    assert hostlock.dead_owner(None) is None and hostlock.dead_owner(
        hostlock.LockOwner.from_json(json.dumps({**_owner().to_json(), "pid": "12"}))) is None


def test_status_probe_output_names_an_interrupted_release_and_what_the_next_deploy_does():
    dead = json.dumps(_owner(pid=hostlock.PID_MAX).to_json())  # pids stay below pid_max: never a live one
    text = (f'release 20261130T101010Z-abcd {{"t": 1, "step": "installed", "rung": "plain"}}\n'
            f"lock {dead}\npatch-run 20261130T101011Z-ef0123\n")
    line = recovery.parse_probe(text)
    assert line.startswith("lock left by a dead run (pid 4194304 is no longer running")
    assert "release 20261130T101010Z-abcd was interrupted after step installed" in line
    assert "patch run 20261130T101011Z-ef0123 was interrupted half-way" in line


def test_status_probe_output_while_a_live_run_holds_the_lock_says_in_progress():
    owner = json.dumps(_owner(epoch=int(time.time())).to_json())
    text = f'release 20261130T101010Z-abcd {{"step": "stop"}}\nlock {owner}\n'
    line = recovery.parse_probe(text)
    assert line.startswith(f"locked: held by me@{socket.gethostname()} pid {os.getpid()}")
    assert "deploy 20261130T101010Z-abcd in progress (at step stop)" in line and "STALE" not in line


def test_a_clean_host_has_nothing_to_say():
    assert recovery.parse_probe("lock \n") is None and recovery.parse_probe("") is None


def test_a_lock_owner_that_is_no_object_or_has_wrong_types_is_an_unknown_holder_not_a_crash():
    # status read owner.json with json.loads and handed the list or the huge pid on to dead_owner (AttributeError,
    # OverflowError in os.kill); now the owner is read as a host sends it (LockOwner.from_json)
    for sent in ("[1]", "7", json.dumps({"machine": socket.gethostname(), "pid": 2 ** 70}), "{"):
        line = recovery.parse_probe(f"lock {sent}\n")
        assert line is not None and line.startswith("locked: held by "), sent


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

    monkeypatch.setattr(rec, "sh", sh)
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
    cmd = recovery.drop_temp_command([(str(etc), ".sglang.env.fleet-"), (str(root), releases.CURRENT_TEMP)])
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(out) == sorted([str(etc / ".sglang.env.fleet-12-34"), str(root / ".current.0a1b2c3d")])
    assert sorted(p.name for p in root.iterdir()) == ["current"] and [p.name for p in etc.iterdir()] == ["sglang.env"]
    assert subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True).stdout == ""


class _Saved:
    """A release store that keeps what close_interrupted saves and logs."""

    def __init__(self) -> None:
        self.saved: list[dict] = []
        self.events: list[dict] = []

    def save(self, release: releases.Release) -> None:
        self.saved.append(json.loads(json.dumps(release.to_json())))

    def event(self, release: releases.Release, event: dict) -> None:
        self.events.append(event)


def test_an_interrupted_release_records_the_rung_its_journal_named_and_a_dash_for_anything_else():
    def it(rung: object) -> recovery.Interrupted:
        rel = releases.Release(id="20261130T101010Z-abcd", host="h", playbook="p", playbook_sha256="0", created="t")
        return recovery.Interrupted(rel, "stop", rung if isinstance(rung, str) else None)

    store = _Saved()
    notes = recovery.close_interrupted(store, [it("fast"), it({"x": 1})])  # type: ignore[arg-type]
    assert [s["attempts"] for s in store.saved] == [
        [{"rung": "fast", "outcome": "INTERRUPTED", "evidence": "the fleet run died after step stop", "seconds": 0}],
        [{"rung": "-", "outcome": "INTERRUPTED", "evidence": "the fleet run died after step stop", "seconds": 0}]]
    assert notes[0].endswith("interrupted after step stop of rung fast: marked interrupted")
    assert store.events == [{"step": "interrupted", "after": "stop"}] * 2
