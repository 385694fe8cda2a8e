"""Ctrl-C in `inv history`, `inv logs` and a pinned deploy's wheelhouse step ends with where each host is (issue 46,
finding 4; newcomer h-new14). Before: `inv history` on four hosts, one of them wedged, said `Ctrl-C: ... waiting`,
then only `interrupted`: the three histories it had read were thrown away; `inv logs -n 2` ended exit 130 with
nothing on stderr, its lines looking whole though a host was never read; a pinned deploy's Ctrl-C while the
wheelhouse was filled said only `interrupted`, no host's line. A real task and a real SIGINT against a host that
refuses (done at once) and one that takes the connection and never sends an SSH banner."""

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
from fleet.cli import deploy as deploy_cmd
from fleet.inventory import Host
from fleet.ssh.connect import ConnectOptions

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"


def _interrupted(tmp_path: Path, args: list[str], times: int) -> tuple[int, str, str]:
    """`inv ARGS` on a refused host and a wedged one, `times` SIGINTs once the refused host is done."""
    closing = loopback.Listener(loopback.close).start()
    wedged = loopback.silent().start()
    inventory = tmp_path / "inventory" / "hosts.yaml"
    inventory.parent.mkdir()
    inventory.write_text(f"hosts:\n  refused:\n    address: 127.0.0.1\n    port: {closing.port}\n    user: root\n"
                         f"  wedged:\n    address: 127.0.0.1\n    port: {wedged.port}\n    user: root\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "FLEET_SANDBOX_ONLY": "1", "PYTHONPATH": str(REPO),
           "FLEET_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}
    inv = subprocess.Popen([str(INV), *args, "-i", str(inventory)], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    try:
        assert wedged.taken.wait(60), "the task never connected"
        deadline = time.monotonic() + 60  # the refused host's 3 attempts, closed (jittered waits between)
        while len(closing.accepted) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(3.0)  # its outcome, once the third is closed, is a moment's work, even on a loaded machine
        reader = threading.Thread(target=lambda: said.extend(inv.stderr), daemon=True)  # type: ignore[arg-type]
        reader.start()
        for n in range(times):
            inv.send_signal(signal.SIGINT)
            deadline = time.monotonic() + 30
            while n + 1 < times and not any("Ctrl-C" in line for line in said) and time.monotonic() < deadline:
                time.sleep(0.05)  # the first is taken (and said) before the second is sent
        out = inv.stdout.read() if inv.stdout else ""
        inv.wait(30)
        reader.join(30)
    finally:
        inv.kill()
        inv.wait(30)
        for stream in (inv.stdout, inv.stderr):
            if stream:
                stream.close()
        closing.stop()
        wedged.stop()
    return inv.returncode, out, "".join(said)


def test_ctrl_c_in_history_shows_the_hosts_read_and_marks_the_others(tmp_path):
    code, out, err = _interrupted(tmp_path, ["history", "--json"], times=2)
    assert code == 130, err
    rows = {r["host"]: r for r in json.loads(out)["hosts"]}
    assert not rows["refused"]["ok"] and "closed the connection" in (rows["refused"]["error"] or ""), rows
    assert rows["wedged"]["error"] == f"wedged: {parallel.INTERRUPTED_ROW}", rows
    assert err.rstrip().splitlines()[-1].startswith("interrupted: the hosts that answered are shown"), err


def test_ctrl_c_in_logs_says_which_hosts_were_not_read_to_the_end(tmp_path):
    code, _, err = _interrupted(tmp_path, ["logs", "-n", "2"], times=1)
    assert code == 130, err
    assert "closed the connection" in err  # the refused host, said as it failed
    assert err.rstrip().splitlines()[-1] == ("fleet: interrupted (Ctrl-C): the journal lines read are shown; not read "
                                             "to the end: wedged"), err


def test_ctrl_c_while_the_wheelhouse_is_filled_ends_with_every_host_s_line(tmp_path, monkeypatch, capsys):
    """The wheelhouse step reads each host's python and platform, then downloads: a Ctrl-C there (run_all's, after
    the hosts under way ended) escaped as a bare `interrupted`."""
    (tmp_path / "site/playbooks").mkdir(parents=True)
    (tmp_path / "site/playbooks/llama.yaml").write_text("name: llama\nmodel: {path: /m}\nladder:\n  - name: fast\n")
    monkeypatch.setenv("FLEET_SITE", str(tmp_path / "site"))
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))

    def ctrl_c(*_: object) -> None:
        raise parallel.Interrupted([None, None])

    monkeypatch.setattr(deploy_cmd, "fill_wheelhouse", ctrl_c)
    hosts = [Host(name=f"h{i}", address=f"10.0.0.{i + 1}", port=None, user=None, become=False, identity_file=None,
                  known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                  source=Path("hosts.yaml")) for i in range(2)]
    try:
        code = deploy_cmd.deploy(hosts, "llama", ConnectOptions(), True, False, False, serial="1")
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped the deploy: a bare `interrupted`, no host's line")
    out, err = capsys.readouterr()
    rows = json.loads(out)["hosts"]
    assert code == 130 and [r["status"] for r in rows] == ["skipped", "skipped"]
    assert rows[0]["error"] == ("h0: not started: interrupted (Ctrl-C) while the wheels its pins need were gathered; "
                                "nothing was changed")
    assert "interrupted: no host was started after Ctrl-C" in err


def test_ctrl_c_in_audit_names_the_host_it_left_unread(tmp_path):
    """Without --json, the host left unread was `error: interrupted (Ctrl-C) before it answered`: which host?"""
    code, _, err = _interrupted(tmp_path, ["audit", "--sm", "120"], times=2)
    assert code == 130, err
    assert f"error: wedged: {parallel.INTERRUPTED_ROW}" in err, err
