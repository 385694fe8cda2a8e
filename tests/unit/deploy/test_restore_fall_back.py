"""fleet.deploy.fallback.fall_back after a deploy whose move of `current` ran but whose answer was lost, and the
re-read of `current` too: ReleaseRun.succeed raises, the ladder falls back, the previous release is put back and
serves, and `current` used to keep naming the new release, closed FAILED (a rerun of the playbook then said
"already serves"). The store's shell runs here, against a temporary folder standing in for /var/lib/fleet; the
restore itself is a stand-in."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fakesession import Here, here

from fleet.deploy import fallback, restore
from fleet.deploy.release_run import ReleaseRun
from fleet.host.releases import Release, ReleaseStore
from fleet.inventory import Host
from fleet.outcomes import DeployStatus, Outcome, ReleaseStatus
from fleet.ssh.remote import CommandTimedOut

HOST = Host(name="h1", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("x.yaml"))


def test_fall_back_after_a_lost_answer_of_the_move_of_current_points_it_back(tmp_path):
    lost = {"n": -1}  # armed once the host is set up

    def answer(command):
        if "mv -T" in command and lost["n"] == 0:
            subprocess.run(["sh", "-c", command], check=True)  # the rename ran on the host ...
            lost["n"] = 1
            raise CommandTimedOut("h1: `ln -s releases/...` did not finish within 120s")  # ... its answer lost
        if command.startswith("readlink") and lost["n"] == 1:
            lost["n"] = 2
            raise CommandTimedOut("h1: `readlink ...` did not finish within 120s")  # the re-read too, once
        return here(command)

    store = ReleaseStore.on(Here(HOST, answer), root=str(tmp_path / "fleet"))
    old = Release(id="20261201T000000Z-aaaa", host="h1", playbook="p", playbook_sha256="x", created="t",
                  status=ReleaseStatus.OK, rung="a")
    Path(store.dir(old)).mkdir(parents=True)
    store.save(old)
    store.mark_current(old)
    new = Release(id="20261202T000000Z-bbbb", host="h1", playbook="p", playbook_sha256="y", created="t")
    run = ReleaseRun.open(store, new)
    lost["n"] = 0
    served = {"files of": new.id}
    try:
        run.succeed("a", {}, keep=5)
        raise AssertionError("succeed did not raise")
    except CommandTimedOut as exc:  # what ladder._climb's `except Exception` gets
        why = f"error: {exc}"

    class Steps(restore.ServerSteps):
        def put_back(self, previous):  # the restore itself: its files serve at once
            served["files of"] = previous.id
            return Outcome.READY, "up"

    steps = Steps(None, HOST, store, new, None, "sglang", lambda m: None)  # type: ignore[arg-type]
    fell = fallback.fall_back(steps, old, why, lambda m: None)
    assert fell.status == DeployStatus.ROLLED_BACK and fell.release == old.id and served["files of"] == old.id
    assert store.load(new.id).status == ReleaseStatus.FAILED
    # the invariant: `current` names what serves
    assert store.current_id() == old.id
