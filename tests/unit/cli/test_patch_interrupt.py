"""Ctrl-C in `inv patch` ends with where each host is (issue 46, finding 4). The seventh newcomer's hour found it
in a form nobody had tried: `inv patch --set S` (or `--revert`) on sbx0, Ctrl-C while it ran: `Ctrl-C: ... waiting
for sbx0`, then only `interrupted`, exit 130, nothing on stdout, although sbx0 had been patched and recorded as a
new release. A real `inv patch`, a real SIGINT twice, against a host that refuses (done at once) and one that
takes the connection and never sends an SSH banner (left by the second Ctrl-C)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import loopback

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"


def test_ctrl_c_in_a_patch_ends_with_every_host_s_result(tmp_path):
    closing = loopback.Listener(loopback.close).start()  # an sshd that refuses: closes each connection
    wedged = loopback.silent().start()
    inventory = tmp_path / "inventory" / "hosts.yaml"
    inventory.parent.mkdir()
    inventory.write_text(f"hosts:\n  refused:\n    address: 127.0.0.1\n    port: {closing.port}\n    user: root\n"
                         f"  wedged:\n    address: 127.0.0.1\n    port: {wedged.port}\n    user: root\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "FLEET_SANDBOX_ONLY": "1", "PYTHONPATH": str(REPO),
           "FLEET_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}
    inv = subprocess.Popen([str(INV), "patch", "--set", "sm120-allreduce-fusion", "-i", str(inventory), "--all",
                            "--yes", "--json"], cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        assert wedged.taken.wait(60), "the patch never connected"
        deadline = time.monotonic() + 60  # the refused host's 3 attempts, closed (jittered waits between)
        while len(closing.accepted) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        inv.send_signal(signal.SIGINT)
        time.sleep(0.5)
        inv.send_signal(signal.SIGINT)
        out, err = inv.communicate(timeout=30)
    finally:
        inv.kill()
        closing.stop()
        wedged.stop()
    assert inv.returncode == 130, err
    rows = {r["host"]: r for r in json.loads(out)["hosts"]}
    assert not rows["refused"]["ok"] and "closed the connection" in (rows["refused"]["error"] or ""), rows
    assert not rows["wedged"]["ok"] and "interrupted while patching" in (rows["wedged"]["error"] or ""), rows
    assert err.rstrip().splitlines()[-1].startswith("interrupted: each host's result above says where it is"), err
