"""`packages:` installs: one venv per package set, built from the controller's wheelhouse before anything is
stopped, switched by rollback with no install (sandbox host sbx3; the simulated stack as wheels, sandbox/sim/wheels)."""

from __future__ import annotations

import shutil
import zipfile

import pytest
from fleetcli import glm5_playbook, inv, inv_json, llama_playbook, sh

from sandbox.sim import wheels as simwheels

HOST = "sbx3"
OLD = {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1"}
NEW = {"sglang": "0.5.23", "flashinfer-python": "0.7.2", "torch": "2.14.1"}
LADDER = [{"name": "plain"}]


@pytest.fixture(scope="module")
def house(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheelhouse")
    simwheels.build(folder)
    return folder


def run_env(house) -> dict[str, str]:
    return {"FLEET_WHEELHOUSE": str(house)}


def state(inventory) -> dict[str, str]:
    """What an install would change on the host: builds logged, the venvs, the wheels (with their times)."""
    out = sh(inventory, HOST, "cat /var/lib/fleet/venvs/builds.log 2>/dev/null | wc -l; echo ---; "
                              "ls -l --time-style=+%s.%N /var/lib/fleet/venvs /var/lib/fleet/wheels 2>&1")
    pid = sh(inventory, HOST, "systemctl show -p MainPID --value sglang").strip()
    return {"builds": out.split("---")[0].strip(), "listing": out, "pid": pid,
            "current": sh(inventory, HOST, "readlink /var/lib/fleet/current").strip()}


def served_venv(inventory) -> str:
    pid = sh(inventory, HOST, "systemctl show -p MainPID --value sglang").strip()
    return sh(inventory, HOST, f"tr '\\0' ' ' < /proc/{pid}/cmdline").split()[0].rsplit("/bin/", 1)[0]


def test_deploy_upgrade_and_rollback_switch_venvs_and_rollback_installs_nothing(
        sandbox, sandbox_inventory, house, tmp_path):
    # a cold start whatever ran before: other files deploy the same pins to this host (test_upgrade_rollout's
    # rolling upgrade over sbx1-sbx3), and a venv or wheel already there is reused, rightly, with nothing built or sent
    sh(sandbox_inventory, HOST, "rm -rf /var/lib/fleet/venvs /var/lib/fleet/wheels")
    env = run_env(house)
    book = llama_playbook(tmp_path, LADDER, name="llama-pinned", packages=OLD)
    # the dry run checks no unit against the venv it would build (newcomer h-new16: it said the deploy would fail
    # INSTALL_FAILED, `bin/python is not executable`, and the deploy then served)
    rc, dry, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--dry-run", env=env)
    assert rc == 0 and ": would be built" in dry["diff"] and "INSTALL_FAILED" not in dry["diff"], (dry, err[-2000:])
    rc, first, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), env=env)
    assert rc == 0 and first["status"] == "ok", err[-3000:]
    old_venv = first["venv"]["path"]
    assert first["venv"]["built"] == "pip" and len(first["venv"]["sent"]) == 4, first["venv"]
    assert (first["versions"]["sglang"], first["versions"]["flashinfer-python"]) == ("0.5.9", "0.6.3")
    assert served_venv(sandbox_inventory) == old_venv
    assert sh(sandbox_inventory, HOST, f"{old_venv}/bin/python -c 'import sglang; print(sglang.__version__)'"
              ).strip() == "0.5.9"

    book = llama_playbook(tmp_path, LADDER, name="llama-pinned", packages=NEW)
    rc, second, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), env=env)
    assert rc == 0 and second["status"] == "ok", err[-3000:]
    new_venv = second["venv"]["path"]
    assert new_venv != old_venv and second["venv"]["built"] == "pip"
    # the order of attempts is said of the plan the deploy goes by, in the new venv (no evidence there yet), once:
    # the plan made before the venv was built (the old pins' known-good) said 'trying it first' too (issue 46)
    assert "known-good on this hardware" not in err, err[-3000:]
    # only what the host lacked: the simulator's own wheel was sent with the first venv
    assert sorted(second["venv"]["sent"]) == ["flashinfer_python-0.7.2-py3-none-any.whl",
                                              "sglang-0.5.23-py3-none-any.whl",
                                              "torch-2.14.1+cu130-py3-none-any.whl"]
    assert (second["versions_before"]["sglang"], second["versions"]["sglang"]) == ("0.5.9", "0.5.23")
    assert second["versions"]["torch"] == "2.14.1+cu130"
    assert served_venv(sandbox_inventory) == new_venv
    assert sh(sandbox_inventory, HOST, f"test -x {old_venv}/bin/python && echo kept").strip() == "kept"

    before = state(sandbox_inventory)
    rc, back, err = inv_json(sandbox, "rollback", "--host", HOST, "--playbook", str(book), env=env)
    assert rc == 0 and back["status"] == "ok" and back["release"] == first["release"], err[-3000:]
    assert not back.get("notes"), back  # the release's own venv: no drift to warn about
    # the versions it went from and to, as the upgrade said them (issue 46: it changed them and said nothing)
    assert (back["versions_before"]["sglang"], back["versions"]["sglang"]) == ("0.5.23", "0.5.9"), back
    after = state(sandbox_inventory)
    assert after["builds"] == before["builds"] == "2"  # no venv built
    assert after["listing"] == before["listing"]  # no wheel sent, no venv touched
    assert served_venv(sandbox_inventory) == old_venv and after["pid"] != before["pid"]

    rc, history, err = inv_json(sandbox, "history", "--host", HOST, env=env)
    assert rc == 0, err
    releases = {r["id"]: r for r in history["hosts"][0]["releases"]}
    assert releases[first["release"]]["versions"]["sglang"] == "0.5.9"
    assert releases[second["release"]]["versions"]["sglang"] == "0.5.23"
    assert releases[first["release"]]["facts"]["venv"] == old_venv
    assert releases[second["release"]]["facts"]["venv"] == new_venv

    # the old pins again, keeping one release: the venv is reused; the upgrade's venv stays while its release is
    # where `inv rollback` goes, and goes with that release. The rollback already serves what these render (keep_
    # releases and a description render nothing: `unchanged`, issue 46), so an env changes what the unit serves
    book = llama_playbook(tmp_path, [{"name": "plain", "env": {"FLEET_AGAIN": "1"}}], name="llama-pinned",
                          packages=OLD, keep_releases=1)
    rc, third, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), env=env)
    assert rc == 0 and third["status"] == "ok", err[-3000:]
    # planned before and after the pins' venv is found (the first deploy's known-good there): said once (issue 46)
    assert err.count("rung plain: known-good on this hardware") == 1, err[-3000:]
    assert third["venv"] == {**third["venv"], "path": old_venv, "built": None, "sent": [], "bytes_sent": 0}
    assert "pruned venvs" not in err and sh(sandbox_inventory, HOST, f"test -d {new_venv} && echo kept") == "kept\n"
    book = llama_playbook(tmp_path, LADDER, name="llama-pinned", packages=OLD, keep_releases=1, description="again")
    rc, fourth, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--force", env=env)
    assert rc == 0 and fourth["status"] == "ok", err[-3000:]
    assert f"pruned venvs no release refers to: {new_venv.rsplit('/', 1)[1]}" in err
    # ls sorts by name: the venv's id is a digest, before or after builds.log
    assert sorted(sh(sandbox_inventory, HOST, "ls /var/lib/fleet/venvs").split()) == sorted(
        [old_venv.rsplit("/", 1)[1], "builds.log"])
    assert sh(sandbox_inventory, HOST, "ls /var/lib/fleet/venvs/.build").split() == [
        sh(sandbox_inventory, HOST, f"readlink {old_venv}").strip().split("/")[1]]


def test_a_pin_with_no_wheel_is_one_line_exit_2_and_nothing_stopped(sandbox, sandbox_inventory, house, tmp_path):
    before = state(sandbox_inventory)
    book = llama_playbook(tmp_path, LADDER, name="llama-pinned", packages={**OLD, "sglang-router": "0.2.2"})
    proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json", env=run_env(house))
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {book}:"), lines
    assert f"no wheel of sglang-router 0.2.2 in the wheelhouse {house}" in lines[0]
    assert state(sandbox_inventory) == before


def test_a_venv_that_fails_to_build_leaves_the_old_server_serving(sandbox, sandbox_inventory, house, tmp_path):
    broken = tmp_path / "house"
    shutil.copytree(house, broken)
    # a wheel pip resolves (its METADATA and WHEEL are whole, every name inside the venv) but cannot install: a
    # member whose bytes fail their CRC (one that is not a zip at all is refused on the controller by the resolve,
    # one with a path outside the venv by the wheel check, before any host)
    wheel = broken / "flashinfer_python-0.6.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr(zipfile.ZipInfo("flashinfer/broken_member.py"), "x = 1\n" * 64)
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("flashinfer/broken_member.py")
    with open(wheel, "r+b") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
        f.seek(info.header_offset + 30 + name_len + extra_len)
        f.write(b"y")  # stored, not compressed: the member's first byte, so its CRC no longer holds
    before = state(sandbox_inventory)
    book = llama_playbook(tmp_path, LADDER, name="llama-pinned", packages={"sglang": "0.5.9",
                                                                           "flashinfer-python": "0.6.3"})
    rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), env=run_env(broken))
    assert rc == 1 and data["status"] == "failed", (data, err[-2000:])
    assert "building the venv /var/lib/fleet/venvs/" in data["error"] and "nothing was stopped" in data["error"]
    after = state(sandbox_inventory)
    assert (after["pid"], after["current"], after["builds"]) == (before["pid"], before["current"], before["builds"])
    # nothing half-built left: every build folder is a published venv's
    links = sh(sandbox_inventory, HOST, "for l in /var/lib/fleet/venvs/*; do [ -L $l ] && readlink $l; done").split()
    assert sorted(f".build/{d}" for d in sh(sandbox_inventory, HOST, "ls -A /var/lib/fleet/venvs/.build").split()
                  ) == sorted(links)


def test_the_seed_story_runs_in_the_pinned_venv_with_its_patch_sets_there(sandbox, sandbox_inventory, house,
                                                                          tmp_path):
    """glm5-nvfp4 pinned to 0.5.9 on sbx0: the fusion rung's patch sets go into the pins' venv (the served one),
    not the inventory's, and the release records its patched files there."""
    book = glm5_playbook(tmp_path, "glm5-pinned", packages=OLD)
    rc, data, err = inv_json(sandbox, "deploy", "--host", "sbx0", "--playbook", str(book), env=run_env(house))
    assert rc == 0 and data["status"] == "ok", err[-3000:]
    venv = data["venv"]["path"]
    first = data["attempts"][0]
    assert first["rung"] == "fusion-sm120" and first["outcome"] != "ARCH_UNSUPPORTED", first  # its patch was there
    assert "applied patch sets sm120-allreduce-fusion" in err
    rc, history, _ = inv_json(sandbox, "history", "--host", "sbx0", env=run_env(house))
    release = next(r for r in history["hosts"][0]["releases"] if r["id"] == data["release"])
    assert release["patches"]["files"] and all(p.startswith(venv + "/") for p in release["patches"]["files"])
