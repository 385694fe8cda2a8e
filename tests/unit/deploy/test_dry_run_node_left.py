"""`deploy --dry-run` over a node of a multi-node deployment that a dead run left in progress (issue 46, finding 1;
newcomer h-new17): it said the deploy would put back `the last known-good release (restarted and verified)`, and
the deploy put back that node's files and left its unit stopped, as a node cannot start alone
(fleet.deploy.recovery). Now it says what the deploy does."""

from __future__ import annotations

from fakesession import HOST

from fleet import playbook
from fleet.deploy import ladder, recovery
from fleet.host.releases import Release
from fleet.ssh.connect import ConnectOptions

BOOK = "name: one\nmodel: {path: /models/m}\nladder:\n  - name: base\n"


def node_release(rid: str, rank: int) -> Release:
    return Release(id=rid, host=HOST.name, playbook="two", playbook_sha256="0" * 64, created="then", status="ok",
                   config={"nodes": {"count": 2, "rank": rank, "hosts": [HOST.name, "n1"], "deployment": rid}})


def left_said(monkeypatch, tmp_path, current: Release, left: bool = True, owner=None) -> str:
    path = tmp_path / "one.yaml"
    path.write_text(BOOK)

    class Store:
        def __init__(self, *args):
            pass

        def current(self) -> Release:
            return current

    dead = recovery.Interrupted(node_release("r-new", 0), "stop", "base", 0)
    monkeypatch.setattr(ladder, "ReleaseStore", Store)
    monkeypatch.setattr(ladder.recovery, "find", lambda store: [dead] if left else [])
    monkeypatch.setattr(ladder.hostlock, "read_owner", lambda conn, host: owner)
    d = ladder.Deployer(HOST, playbook.load(path), path, ConnectOptions())
    return d.left_behind(None)  # type: ignore[arg-type]


def test_a_node_left_in_progress_is_said_put_back_and_left_stopped(monkeypatch, tmp_path):
    said = left_said(monkeypatch, tmp_path, node_release("r-old", 0))
    assert "putting back the files of node release r-old (unit left stopped: it starts with its peers)" in said
    assert "restarted and verified" not in said


def test_a_single_host_release_left_in_progress_is_said_restarted_and_verified(monkeypatch, tmp_path):
    single = Release(id="r-old", host=HOST.name, playbook="one", playbook_sha256="0" * 64, created="then",
                     status="ok", config={"rung": "base"})
    assert "putting back the last known-good release (restarted and verified)" in left_said(monkeypatch, tmp_path,
                                                                                            single)


def test_a_lock_a_dead_run_left_alone_is_said_first(monkeypatch, tmp_path):
    """h-new19: after `--host-timeout 4` gave a deploy up before its release opened, `inv status` said `left half-done
    by a run that died` (its lock's pid gone) and the dry run said nothing of it, though docs/cli.md says it does."""
    import os
    import socket
    from pathlib import Path

    from fleet.host import lock as hostlock

    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    machine = Path("/etc/machine-id").read_text().strip()
    gone = hostlock.LockOwner(owner="root@x", machine=socket.gethostname(), machine_id=machine, boot_id=boot,
                              pid=2 ** 22 + os.getpid() % 1000)
    said = left_said(monkeypatch, tmp_path, node_release("r-old", 0), left=False, owner=gone)
    assert said.startswith("the host's lock was left by a run that died (pid "), said
    assert left_said(monkeypatch, tmp_path, node_release("r-old", 0), left=False, owner=None) == ""


def test_a_first_release_left_in_progress_is_said_stopped_not_put_back(monkeypatch, tmp_path):
    """h-new20: sbx3's first deploy given up by `--host-timeout 2`: the dry run said the deploy would put back `the
    last known-good release (restarted and verified)`, and the deploy said `no earlier release: unit stopped and
    fleet's patches reverted` (fleet.deploy.recovery): there was none to put back."""
    said = left_said(monkeypatch, tmp_path, None)  # type: ignore[arg-type]
    assert "no earlier release to put back: the unit stopped and fleet's patches reverted" in said, said
    assert "restarted and verified" not in said
