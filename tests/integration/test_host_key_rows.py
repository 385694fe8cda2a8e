"""A host that answers with a host key fleet does not know, or with another than known_hosts has, on sandbox hosts
over real SSH: `inv status`, `inv probe` and `inv exec` name it on its row (`unknown key`, `key changed`), never
`unreachable` (that was status's cell: an operator reads it as the network), and the exit stays 1 (docs/cli.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fleetcli import inv_at


def _inventory(sandbox, tmp_path: Path) -> Path:
    """sbx0 as the sandbox has it; sbx1 with a known_hosts that lacks it; sbx2 with one that holds sbx1's key for it
    (as if sbx2 had been reinstalled)."""
    data = yaml.safe_load(sandbox.cfg.inventory_path.read_text())
    known = Path(data["defaults"]["known_hosts"]).read_text().splitlines()
    hosts = data["hosts"]
    sbx1_key = next(line for line in known if line.startswith(f"{hosts['sbx1']['address']} ")).split()[1:]
    (tmp_path / "empty").write_text("")
    (tmp_path / "forged").write_text(" ".join([hosts["sbx2"]["address"], *sbx1_key]) + "\n")
    hosts["sbx1"]["known_hosts"], hosts["sbx2"]["known_hosts"] = str(tmp_path / "empty"), str(tmp_path / "forged")
    data["hosts"] = {name: hosts[name] for name in ("sbx0", "sbx1", "sbx2")}
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _row(out: str, host: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"{host} ") or f"│ {host} " in line)


@pytest.mark.timeout(240)
def test_status_probe_and_exec_name_a_host_key_problem_on_its_row(sandbox, tmp_path):
    inventory = _inventory(sandbox, tmp_path)
    wide = {"COLUMNS": "250"}
    runs = {"status": inv_at(inventory, "status", env=wide), "probe": inv_at(inventory, "probe", env=wide),
            "exec": inv_at(inventory, "exec", "--all", "--yes", "--cmd", "true", env=wide)}
    for task, proc in runs.items():
        assert proc.returncode == 1, (task, proc.stdout[-2000:], proc.stderr[-2000:])
        unknown, changed = _row(proc.stdout, "sbx1"), _row(proc.stdout, "sbx2")
        assert "unknown key" in unknown and "unreachable" not in unknown, (task, unknown)
        assert "key changed" in changed and "unreachable" not in changed, (task, changed)
        assert "sbx1 (root@" in proc.stdout and "host key unknown" in proc.stdout  # the why, below the table
    assert "fleet: not clean (exit 1): sbx1: unknown key; sbx2: key changed" in runs["status"].stderr
