"""Ctrl-C in `inv patch` and `inv audit` ends with where each host is (issue 46, finding 4). The seventh newcomer's
hour found it in forms nobody had tried: `inv patch --set S` (or `--revert`) on sbx0, Ctrl-C while it ran: `Ctrl-C:
... waiting for sbx0`, then only `interrupted`, exit 130, nothing on stdout, although sbx0 had been patched and
recorded as a new release; `inv audit` on four hosts waited for all four to end, then threw their audits away. A
real task, a real SIGINT twice, against a host that refuses (done at once) and one that takes the connection and
never sends an SSH banner (left by the second Ctrl-C)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import loopback
import pytest

from fleet import parallel

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"


@pytest.mark.parametrize(("args", "left", "ended"), [
    (["patch", "--set", "sm120-allreduce-fusion", "--all", "--yes"], "wedged: interrupted while patching",
     "interrupted: each host's result above says where it is"),
    (["audit", "--sm", "120"], parallel.INTERRUPTED_ROW, "interrupted: the hosts that answered are shown"),
])
def test_ctrl_c_ends_with_every_host_s_result(tmp_path, args, left, ended):
    closing = loopback.Listener(loopback.close).start()  # an sshd that refuses: closes each connection
    wedged = loopback.silent().start()
    inventory = tmp_path / "inventory" / "hosts.yaml"
    inventory.parent.mkdir()
    inventory.write_text(f"hosts:\n  refused:\n    address: 127.0.0.1\n    port: {closing.port}\n    user: root\n"
                         f"  wedged:\n    address: 127.0.0.1\n    port: {wedged.port}\n    user: root\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "FLEET_SANDBOX_ONLY": "1", "PYTHONPATH": str(REPO),
           "FLEET_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}
    inv = subprocess.Popen([str(INV), *args, "-i", str(inventory), "--json"], cwd=REPO, env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wedged.taken.wait(60), "the patch never connected"
        deadline = time.monotonic() + 60  # the refused host's 3 attempts, closed (jittered waits between)
        while len(closing.accepted) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(3.0)  # its outcome, once the third is closed, is a moment's work, even on a loaded machine
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.extend(inv.stderr), daemon=True)  # type: ignore[arg-type]
        reader.start()
        inv.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30
        while not any("Ctrl-C" in line for line in said) and time.monotonic() < deadline:
            time.sleep(0.05)  # the first is taken (and said) before the second is sent
        inv.send_signal(signal.SIGINT)
        out = inv.stdout.read() if inv.stdout else ""
        inv.wait(30)
        reader.join(30)
        err = "".join(said)
    finally:
        inv.kill()
        inv.wait(30)
        for stream in (inv.stdout, inv.stderr):
            if stream:
                stream.close()
        closing.stop()
        wedged.stop()
    assert inv.returncode == 130, err
    rows = {r["host"]: r for r in json.loads(out)["hosts"]}
    assert not rows["refused"].get("ok") and "closed the connection" in (rows["refused"]["error"] or ""), rows
    assert not rows["wedged"].get("ok") and left in (rows["wedged"]["error"] or ""), rows
    assert err.rstrip().splitlines()[-1].startswith(ended), err
