"""SIGTERM is answered as Ctrl-C (issue 46, finding 4; newcomer h-new17). `timeout 600 inv deploy ...`, a CI job
cancelled or a `kill` send SIGTERM, which killed the run silently, exit 143: a deploy's host left mid-step with
its lock held, nothing said, no host's line. Now it is said at once, the task's Ctrl-C follows (no host starts,
the step under way ends, a line per host), exit 130; a second one stops waiting. A real `inv probe`, a real
SIGTERM, against a host that takes the connection and never sends an SSH banner (a wedged sshd)."""

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

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"


def _line(stream, deadline: float) -> str:
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()))
    assert got, "nothing said in time"
    return got[0]


def test_sigterm_is_said_at_once_and_ends_as_ctrl_c_with_every_hosts_row(tmp_path):
    with loopback.silent() as wedged:
        (tmp_path / "inventory").mkdir()
        (tmp_path / "inventory" / "hosts.yaml").write_text(
            f"hosts:\n  wedged:\n    address: 127.0.0.1\n    port: {wedged.port}\n    user: root\n")
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "FLEET_SANDBOX_ONLY": "1", "PYTHONPATH": str(REPO),
               "FLEET_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}
        inv = subprocess.Popen([str(INV), "probe", "-i", str(tmp_path / "inventory" / "hosts.yaml"), "--json"],
                               cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            assert wedged.taken.wait(60), "the probe never connected"
            assert inv.poll() is None, inv.communicate()
            inv.send_signal(signal.SIGTERM)
            assert _line(inv.stderr, time.monotonic() + 15) == "fleet: SIGTERM: taken as Ctrl-C\n"
            assert _line(inv.stderr, time.monotonic() + 15).startswith("Ctrl-C: no host starts now; waiting for "
                                                                       "wedged")
            inv.send_signal(signal.SIGTERM)  # a second one: stop waiting, as a second Ctrl-C
            assert inv.wait(10) == 130
            out, err = inv.communicate()
        finally:
            inv.kill()
    [row] = json.loads(out)["hosts"]
    assert row["host"] == "wedged" and not row["ok"] and "interrupted" in row["error"], row
    assert "Traceback" not in err
