"""`inv status` reads the unit and port the host's current release serves, not the inventory's `unit` and the
default port 30000 (issue 46, finding 8; the fifteenth newcomer's hour on the sandbox). A playbook's `serve.unit`
and `serve.port` win over the inventory's for the deploy (docs/playbooks.md), so after `inv deploy -p` of a playbook
with `serve: {unit: sglang-b, port: 31000}`, serving and healthy, the board said `inactive`, health `none`, `not
enabled` and exit 1, with `systemctl enable sglang` for a remedy: a unit fleet never wrote there. `--port` given
still wins (it says where to look)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.host import programs as hostside
from fleet.inventory import Host
from fleet.multihost import status

UNIT_TEXT = """[Service]
ExecStart=/root/ml-env/bin/python -m sglang.launch_server --model-path /m --host 127.0.0.1 --port 31000 --tp-size 1
"""
# stand-ins: each says how it was called; systemctl answers for the unit it was asked about
_CALLED = """#!/bin/sh
echo "__NAME__ $*" >> __LOG__
case __NAME__ in
  curl) printf 200;;
  systemctl) echo ActiveState=active; echo SubState=running; echo UnitFileState=disabled;;
esac
"""


def _host() -> Host:
    return Host(name="h", address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
                source=Path("hosts.yaml"))


def _run(tmp: Path, port: str, release: bool = True) -> tuple[str, str]:
    bin_dir, log = tmp / "bin", tmp / "calls.log"
    bin_dir.mkdir(parents=True)
    for name in ("curl", "systemctl", "nvidia-smi"):
        (bin_dir / name).write_text(_CALLED.replace("__NAME__", name).replace("__LOG__", str(log)))
        (bin_dir / name).chmod(0o755)
    for tool in ("cat", "grep", "sed", "head", "tail", "tr", "rm", "mktemp"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    root = tmp / "fleet"
    (root / "releases/r1/files").mkdir(parents=True)
    manifest = {"id": "r1", "rung": "plain", "status": "ok", "playbook": "llama-port",
                "files": {"before:/etc/systemd/system/sglang-b.service": {"absent": True},
                          "/etc/systemd/system/sglang-b.service": {"sha256": "0" * 64, "mode": "0o644"},
                          "/etc/fleet/sglang-b.env": {"sha256": "1" * 64, "mode": "0o600"}}}
    (root / "releases/r1/manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (root / "releases/r1/files/etc__systemd__system__sglang-b.service").write_text(UNIT_TEXT)
    if release:
        (root / "current").symlink_to("releases/r1")
    done = subprocess.run(["/bin/sh", "-c", hostside.text("status.sh"), "fleet-status", "sglang", port, str(root),
                           "/nonexistent/python3"], capture_output=True, text=True, timeout=60,
                          env={"PATH": str(bin_dir), "TMPDIR": str(tmp)})
    assert done.returncode == 0, done.stderr
    return done.stdout, log.read_text()


def test_the_board_reads_the_unit_and_port_the_current_release_serves(tmp_path):
    out, calls = _run(tmp_path, "")
    assert "systemctl show sglang-b " in calls and "systemctl show sglang " not in calls, calls
    assert "http://127.0.0.1:31000/health" in calls and ":30000/" not in calls, calls
    row = status.parse(_host(), out)
    assert (row.unit.get("ActiveState"), row.health) == ("active", "200")
    assert row.boot is not None and "systemctl enable sglang-b`" in row.boot and "sglang is" not in row.boot, row.boot


def test_a_port_given_still_wins_and_no_release_reads_the_inventorys_unit_on_30000(tmp_path):
    _, calls = _run(tmp_path / "a", "31555")
    assert "http://127.0.0.1:31555/health" in calls and "systemctl show sglang-b " in calls, calls
    _, calls = _run(tmp_path / "b", "", release=False)
    assert "http://127.0.0.1:30000/health" in calls and "systemctl show sglang " in calls, calls


@pytest.mark.parametrize("given", [None, 31555])
def test_inv_status_passes_a_port_only_where_one_was_given(given):
    command = status.command("sglang", given)
    assert command.split()[-4:-2] == (["sglang", str(given)] if given else ["sglang", "''"]), command
