"""A terminal's Ctrl-C and hang-up go to the whole job: fleet and the ProxyCommand it runs (`ssh -W` through a
bastion, outside FLEET_SANDBOX_ONLY). fleet answers them by waiting for its hosts' steps to end, but the proxy's
ssh died at once, so every link through it was lost mid-step (a deploy's host left with its lock held). `timeout N
inv ...` sends SIGTERM to the job the same way. The proxy now leaves the three ignored; fleet still ends it when the
connection closes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from fleetcli import REPO
from sshutil import sh

MARK = "/tmp/fleet-hangup-proxy-under-way"


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGINT, signal.SIGTERM])  # TERM: `timeout` sends it to the job
def test_a_hang_up_or_ctrl_c_to_the_job_leaves_a_proxycommand_link_up_while_the_host_ends_its_step(
        sandbox_inventory, tmp_path, monkeypatch, sig):
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "0")  # a ProxyCommand runs as written; every address is a sandbox host's
    relay, target = sandbox_inventory.hosts["sbx0"], sandbox_inventory.hosts["sbx1"]
    (tmp_path / "ssh_config").write_text(
        f"Host gpu\n  HostName {target.address}\n  ProxyCommand ssh -q -i {relay.identity_file} -o BatchMode=yes "
        f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={relay.known_hosts} -W %h:%p root@{relay.address}\n")
    (tmp_path / "inv.yaml").write_text(
        f"defaults:\n  user: root\n  identity_file: {target.identity_file}\n  known_hosts: {target.known_hosts}\n"
        f"  ssh_config: {tmp_path / 'ssh_config'}\nhosts:\n  sbx1:\n    address: gpu\n")
    sh(target, f"rm -f {MARK}")
    inv = subprocess.Popen([str(REPO / ".venv/bin/inv"), "exec", "-i", str(tmp_path / "inv.yaml"), "--all", "--yes",
                            "--json", "--timeout", "60", "--cmd", f"touch {MARK}; sleep 3; echo finished"],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           stdin=subprocess.DEVNULL, start_new_session=True)  # a job of its own, as a shell's
    try:
        deadline = time.monotonic() + 60
        while sh(target, f"test -e {MARK} && echo yes").stdout.strip() != "yes":
            assert time.monotonic() < deadline and inv.poll() is None, inv.communicate()
        os.killpg(inv.pid, sig)  # what the terminal's line discipline or the shell does to the job
        out, err = inv.communicate(timeout=60)
    finally:
        if inv.poll() is None:
            os.killpg(inv.pid, signal.SIGKILL)
    [row] = json.loads(out)["hosts"]
    assert inv.returncode == 130, err
    assert row["ok"] and row["stdout"] == "finished\n", row  # before: "connection lost during `touch ...`"
