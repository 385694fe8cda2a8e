"""What runs on a host is exactly what was checked (issue 45): the venv is built from the lock's files by path,
never from whatever else the host's wheel folder holds, and a wheel whose bytes differ from the lock is refused
before any host is changed (sandbox host sbx3; the simulated stack as wheels, sandbox/sim/wheels)."""

from __future__ import annotations

import hashlib
import shutil
import zipfile

import pytest
from fleetcli import inv, inv_json, llama_playbook, sh
from test_pinned_venvs import HOST, LADDER, OLD, state

from sandbox.sim import wheels as simwheels


@pytest.fixture(scope="module")
def house(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheelhouse")
    simwheels.build(folder)
    return folder


def test_a_leftover_local_build_on_the_host_is_never_installed_for_the_checked_wheel(
        sandbox, sandbox_inventory, house, tmp_path):
    sh(sandbox_inventory, HOST, "rm -rf /var/lib/fleet/venvs /var/lib/fleet/wheels")
    first = tmp_path / "first"
    first.mkdir()
    book = llama_playbook(first, LADDER, name="llama-pinned", packages=OLD)
    rc, out, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book),
                            env={"FLEET_WHEELHOUSE": str(house)})
    assert rc == 0 and out["versions"]["torch"] == "2.9.1+cu130", err[-3000:]  # the host now keeps that wheel
    plain = tmp_path / "plain"
    shutil.copytree(house, plain)
    (plain / "torch-2.9.1+cu130-py3-none-any.whl").unlink()
    simwheels.torch_wheel(plain, "2.9.1")  # the checked torch: no local label
    second = tmp_path / "second"
    second.mkdir()
    book = llama_playbook(second, LADDER, name="llama-pinned", packages=OLD)
    rc, out, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--force",
                            env={"FLEET_WHEELHOUSE": str(plain)})  # same playbook: --force, or it is unchanged
    assert rc == 0 and out["status"] == "ok", err[-3000:]
    assert "torch-2.9.1+cu130-py3-none-any.whl" in sh(sandbox_inventory, HOST, "ls /var/lib/fleet/wheels")
    venv = out["venv"]["path"]
    # +cu130 meets ==2.9.1 and sorts higher: a --find-links over the host's folder installed it
    assert out["versions"]["torch"] == "2.9.1", out["versions"]
    assert sh(sandbox_inventory, HOST, f"{venv}/bin/python -c 'import importlib.metadata as m; "
                                       "print(m.version(\"torch\"))'").strip() == "2.9.1"
    assert "torch-2.9.1-py3-none-any.whl" in (second / "llama-pinned.lock").read_text()


def test_a_wheel_rebuilt_under_the_same_name_is_refused_before_any_host_is_changed(
        sandbox, sandbox_inventory, house, tmp_path):
    mine = tmp_path / "house"
    shutil.copytree(house, mine)
    book = llama_playbook(tmp_path, LADDER, name="llama-pinned", packages=OLD)
    env = {"FLEET_WHEELHOUSE": str(mine)}
    rc, out, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--force", env=env)
    assert rc == 0 and out["status"] == "ok", err[-3000:]
    lock = tmp_path / "llama-pinned.lock"
    assert "torch-2.9.1+cu130-py3-none-any.whl" in lock.read_text()  # the first deploy wrote the lock
    torch = mine / "torch-2.9.1+cu130-py3-none-any.whl"
    good = torch.read_bytes()
    simwheels.torch_wheel(mine, "2.9.1+cu130", ('evil; extra == "x"',))  # same name and version, other bytes
    assert torch.read_bytes() != good
    before = state(sandbox_inventory)
    proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json", "--force", env=env)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines()  # which wheelhouse it read is said first
             if not line.startswith("fleet: FLEET_WHEELHOUSE=")]
    assert len(lines) == 1 and lines[0].startswith(f"error: {book}: packages: {torch}: sha256 "), lines
    assert f"locked in {lock}: refused, nothing was sent" in lines[0]
    assert state(sandbox_inventory) == before  # nothing sent, built, stopped or released
    on_host = sh(sandbox_inventory, HOST, f"sha256sum /var/lib/fleet/wheels/{torch.name}").split()[0]
    assert on_host == hashlib.sha256(good).hexdigest()  # the host's copy is not overwritten

    # taken on purpose: relocked, then deployed (no --force: the same pins in another venv are not "unchanged")
    proc = inv(sandbox, "check", "--lock", "--playbook", str(book), env=env)
    assert proc.returncode == 0 and f"locked {lock}: flashinfer-python 0.6.3, sglang 0.5.9, torch 2.9.1 for " \
        "CPython 3.11" in proc.stdout, proc.stdout + proc.stderr
    assert hashlib.sha256(torch.read_bytes()).hexdigest() in lock.read_text()
    rc, out, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), env=env)
    assert rc == 0 and out["status"] == "ok" and out["venv"]["built"] == "pip", err[-3000:]
    assert out["venv"]["sent"] == [torch.name]
    on_host = sh(sandbox_inventory, HOST, f"sha256sum /var/lib/fleet/wheels/{torch.name}").split()[0]
    assert on_host == hashlib.sha256(torch.read_bytes()).hexdigest()


def plain_wheel(folder, name: str, version: str) -> None:
    """A wheel of one empty module, as pip installs it (METADATA, WHEEL, RECORD)."""
    stem = f"{name.replace('-', '_')}-{version}"
    files = {f"{name.replace('-', '_')}.py": "", f"{stem}.dist-info/METADATA":
             f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n",
             f"{stem}.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n\n"}
    files[f"{stem}.dist-info/RECORD"] = "".join(f"{n},,\n" for n in [*files, f"{stem}.dist-info/RECORD"])
    with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as zf:
        for n, text in files.items():
            zf.writestr(n, text)


def test_the_resolve_and_the_lock_are_for_the_hosts_own_full_python_version(
        sandbox, sandbox_inventory, house, tmp_path):
    # the review: python_full_version was X.Y.0 for every host, whatever its python3 is
    full = sh(sandbox_inventory, HOST, "python3 -c 'import platform; print(platform.python_version())'").strip()
    assert not full.endswith(".0"), full  # else this test could not tell the two apart
    mine = tmp_path / "house"
    shutil.copytree(house, mine)
    simwheels.torch_wheel(mine, "2.9.1+cu130", (f'micro-helper==1.0; python_full_version == "{full}"',))
    plain_wheel(mine, "micro-helper", "1.0")
    book = llama_playbook(tmp_path, LADDER, name="llama-micro", packages=OLD)
    rc, out, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--force",
                            env={"FLEET_WHEELHOUSE": str(mine)})
    assert rc == 0 and out["status"] == "ok", err[-3000:]
    lock = (tmp_path / "llama-micro.lock").read_text()
    assert f"python_full: {full}" in lock and "micro_helper-1.0-py3-none-any.whl" in lock, lock
    venv = out["venv"]["path"]
    assert sh(sandbox_inventory, HOST, f"{venv}/bin/python -c 'import importlib.metadata as m; "
                                       "print(m.version(\"micro-helper\"))'").strip() == "1.0"
