"""`packages:` venvs built by the real uv (sandbox host sbx3; the image has no uv, so the binary of the uv wheel
bootstrap.sh downloads, or FLEET_UV_WHEEL names, is put at /usr/local/bin/uv for this module and removed after).
No test fetches it: without the wheel the module fails, naming bootstrap.sh."""

from __future__ import annotations

import shutil
import zipfile

import pytest
from fleetcli import inv, inv_json, llama_playbook, sh

from fleet.ssh.connect import ConnectOptions, open_connection
from sandbox import uv as sandbox_uv
from sandbox.sim import wheels as simwheels

HOST = "sbx3"
PINS = {"sglang": "0.5.9", "flashinfer-python": "0.6.3"}
LADDER = [{"name": "plain"}]
# a site's uv config fleet must not read (it would fail every uv command: --no-config)
SITE_CONFIG = "mkdir -p /etc/uv && echo 'index-url = [not toml' > /etc/uv/uv.toml"
FIND_STRAY = "find / -name outside.py -not -path '/proc/*' 2>/dev/null; true"



@pytest.fixture(scope="module")
def house(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheelhouse")
    simwheels.build(folder)
    return folder


@pytest.fixture
def with_uv(sandbox, sandbox_inventory):
    host = sandbox_inventory.hosts[HOST]
    conn = open_connection(host, ConnectOptions())
    wheel = sandbox_uv.wheel()
    assert wheel is not None, (f"no uv {sandbox_uv.VERSION} wheel in {sandbox_uv.CACHE}: run ./bootstrap.sh "
                               "(or set FLEET_UV_WHEEL to a uv-*-manylinux*_x86_64.whl)")
    try:
        version = sandbox_uv.install(conn, host, wheel)
        sh(sandbox_inventory, HOST, SITE_CONFIG)
        yield version
    finally:
        sh(sandbox_inventory, HOST, "rm -rf /etc/uv")
        sandbox_uv.remove(conn, host)
        conn.close()


def main_pid(inventory) -> str:
    return sh(inventory, HOST, "systemctl show -p MainPID --value sglang").strip()


def test_uv_builds_the_venv_offline_with_the_hosts_python3_and_leaves_nothing_outside_it(
        sandbox, sandbox_inventory, house, with_uv, tmp_path):
    assert with_uv.startswith("uv ")
    book = llama_playbook(tmp_path, LADDER, name="llama-uv", packages=PINS)
    rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book),
                             env={"FLEET_WHEELHOUSE": str(house)})
    assert rc == 0 and data["status"] == "ok", err[-3000:]
    venv = data["venv"]["path"]
    assert data["venv"]["built"] == "uv" and data["versions"]["sglang"] == "0.5.9", data["venv"]
    said = sh(sandbox_inventory, HOST, f"cat {venv}/pyvenv.cfg; readlink {venv}/bin/python; "
                                       f"find {venv}/ -name '*.pyc' | grep -c sglang; tail -n1 "
                                       "/var/lib/fleet/venvs/builds.log; test -e /root/.cache/uv && echo 'uv cache "
                                       "left'; true")
    assert f"uv = {with_uv.split()[1]}" in said and "home = /usr/bin" in said
    lines = said.splitlines()
    builds = sh(sandbox_inventory, HOST, "ls -A /var/lib/fleet/venvs/.build").split()
    assert "/usr/bin/python3" in lines and int(lines[lines.index("/usr/bin/python3") + 1]) > 0  # bytecode, as pip
    assert f"Z {venv.rsplit('/', 1)[1]} uv" in said and "uv cache left" not in said
    # only published venvs in .build: no uv cache, no log
    links = sh(sandbox_inventory, HOST, "for l in /var/lib/fleet/venvs/*; do [ -L $l ] && readlink $l; done").split()
    assert sorted(f".build/{d}" for d in builds) == sorted(links)
    pid = main_pid(sandbox_inventory)
    assert sh(sandbox_inventory, HOST, f"tr '\\0' ' ' < /proc/{pid}/cmdline").startswith(f"{venv}/bin/python ")


def test_a_build_uv_refuses_says_why_and_stops_nothing(sandbox, sandbox_inventory, house, with_uv, tmp_path):
    broken = tmp_path / "house"
    shutil.copytree(house, broken)
    (broken / "flashinfer_python-0.6.3-py3-none-any.whl").write_bytes(b"not a zip file")
    before = main_pid(sandbox_inventory)
    book = llama_playbook(tmp_path, LADDER, name="llama-uv-broken", packages=PINS)
    proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json",
               env={"FLEET_WHEELHOUSE": str(broken)})
    # refused on the controller now, by pip's resolve over the wheelhouse (issue 45), before any host: exit 2
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr[-2000:]
    assert "flashinfer_python-0.6.3-py3-none-any.whl is invalid" in proc.stderr and "nothing was changed" in proc.stderr
    assert main_pid(sandbox_inventory) == before


def test_a_wheel_holding_a_file_outside_the_venv_is_refused_on_the_controller_before_any_host(
        sandbox, sandbox_inventory, house, with_uv, tmp_path):
    # the review: uv installed a wheel holding ../outside.py. On main it built and served the venv (exit 0) and
    # wrote outside.py nowhere on the host: it left the member out without a word (pip refuses, once it was sent)
    stray = tmp_path / "house"
    shutil.copytree(house, stray)
    flashinfer = stray / "flashinfer_python-0.6.3-py3-none-any.whl"
    with zipfile.ZipFile(flashinfer, "a") as zf:
        zf.writestr("../outside.py", "print('written outside site-packages')\n")
    before = main_pid(sandbox_inventory), sh(sandbox_inventory, HOST, "ls /var/lib/fleet/wheels /var/lib/fleet/venvs")
    book = llama_playbook(tmp_path, LADDER, name="llama-uv-stray", packages=PINS)
    proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json",
               env={"FLEET_WHEELHOUSE": str(stray)})
    # were it built, the find says where ../outside.py went
    assert proc.returncode == 2 and proc.stdout == "", (proc.stdout[-600:], sh(sandbox_inventory, HOST, FIND_STRAY))
    lines = [line for line in proc.stderr.strip().splitlines()  # which wheelhouse it read is said first
             if not line.startswith("fleet: FLEET_WHEELHOUSE=")]
    assert lines == [f"error: {book}: packages: {flashinfer}: holds '../outside.py', a path outside the venv: "
                     "refused, nothing was sent; nothing was changed"], lines
    after = main_pid(sandbox_inventory), sh(sandbox_inventory, HOST, "ls /var/lib/fleet/wheels /var/lib/fleet/venvs")
    assert after == before
    assert sh(sandbox_inventory, HOST, FIND_STRAY).strip() == ""
