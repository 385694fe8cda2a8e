"""patch_host.py and scan.py read a venv as data on the host's own python3 -I -S (venv_site.py): its packages are
found, those its .pth files' folder lines add too, and nothing of the venv runs (no .pth code line, no package's
__init__, not even a dotted name's parent)."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

from fleet.host import programs as hostside

pytestmark = pytest.mark.skipif(not Path(hostside.SYSTEM_PYTHON).exists(), reason="no /usr/bin/python3 here")


def _venv(tmp_path: Path) -> tuple[Path, Path]:
    """A venv whose every piece of code, run, leaves a file in `ran`."""
    ran = tmp_path / "ran"
    ran.mkdir()
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    run = f"open({str(ran)!r} + '/%s', 'w')"
    for pkg in ("gated", "gated/sub"):
        (site / pkg).mkdir(parents=True, exist_ok=True)
        (site / pkg / "__init__.py").write_text(run % pkg.replace("/", ".") + "\n")
    (site / "gated" / "sub" / "kernel.py").write_text("if major not in (9, 10):\n    raise RuntimeError\n")
    other = tmp_path / "elsewhere" / "linked"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text(run % "linked" + "\n")
    (site / "hook.pth").write_text(f"import os; {run % 'pth'}\n{other.parent}\n")
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    return tmp_path / "venv", ran


def _run(name: str, *args: str) -> dict:
    done = subprocess.run(["sh", "-c", hostside.system_python_command(name, *args)], capture_output=True, text=True,
                          timeout=60)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("FLEET-JSON:"))
    return json.loads(line[len("FLEET-JSON:"):])


def _b64(obj: object) -> str:
    return base64.b64encode(json.dumps(obj).encode()).decode()


def test_scan_finds_the_venvs_packages_and_runs_none_of_its_code(tmp_path):
    venv, ran = _venv(tmp_path)
    scan = _run("scan.py", _b64({"scope": {"gated.sub": ["*.py"], "linked": ["*.py"], "absent": ["*.py"]},
                                 "venv": str(venv)}))
    assert scan["packages"]["gated.sub"]["path"] == str(venv / "lib/python3.11/site-packages/gated/sub")
    assert scan["packages"]["linked"]["path"] == str(tmp_path / "elsewhere" / "linked")
    assert scan["packages"]["absent"] == {"error": f"not importable by {venv}/bin/python"}
    assert any("kernel.py" in f for f in scan["files"]), scan["files"]
    assert sorted(p.name for p in ran.iterdir()) == []  # no .pth line, no __init__ (gated's, a parent) ran


def test_the_patch_engines_read_finds_the_venvs_files_and_runs_none_of_its_code(tmp_path):
    venv, ran = _venv(tmp_path)
    read = _run("patch_host.py", "read", _b64({"packages": ["gated.sub"], "dists": [], "modules": [],
                                               "files": [["gated.sub", "kernel.py"]], "root": str(tmp_path / "b"),
                                               "venv": str(venv)}))
    assert read["files"][0]["exists"] and read["files"][0]["path"].endswith("gated/sub/kernel.py"), read["files"]
    assert sorted(p.name for p in ran.iterdir()) == []


def test_the_venvs_distributions_are_read_from_its_site_not_from_the_hosts_path(tmp_path):
    """The distribution that installs a package, and its version, are read from the venv's site-packages as data
    (importlib.metadata's distributions(path=...)): nothing of the venv goes on sys.path."""
    venv, _ = _venv(tmp_path)
    info = venv / "lib" / "python3.11" / "site-packages" / "gated-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gated\nVersion: 1.2.3\n")
    (info / "top_level.txt").write_text("gated\n")
    scan = _run("scan.py", _b64({"scope": {"gated": ["*.py"]}, "venv": str(venv)}))
    assert (scan["packages"]["gated"]["dist"], scan["packages"]["gated"]["version"]) == ("gated", "1.2.3")
    read = _run("patch_host.py", "read", _b64({"packages": ["gated"], "dists": ["gated", "absent"], "modules": [],
                                               "files": [], "root": str(tmp_path / "b"), "venv": str(venv)}))
    assert read["dists"] == {"gated": "1.2.3", "absent": None}
    assert (read["packages"]["gated"]["dist"], read["packages"]["gated"]["version"]) == ("gated", "1.2.3")
