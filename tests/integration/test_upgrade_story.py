"""Issue 35's end to end, on the sandbox (sbx0, the seed's 8x RTX PRO 6000 Proxmox VM): the seed's playbook pinned to
sglang 0.5.9 (fusion rung patched, TMA failure in capture, fall-back), upgraded to 0.5.23 (a new venv, the 0.5.14+
spellings, the patch set's 0.5.22+ variant: the same story on that release, as its simulated wheel plays it from the
real one), rolled back to 0.5.9 (the old venv, nothing sent, nothing built); then bad pins refused in one line with
nothing stopped."""

from __future__ import annotations

import json

import pytest
from fleetcli import glm5_playbook, inv, inv_json, sh

from sandbox.sim import wheels as simwheels

HOST = "sbx0"
OLD = {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1"}
NEW = {"sglang": "0.5.23", "flashinfer-python": "0.7.2", "torch": "2.14.1"}


@pytest.fixture(scope="module")
def house(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheelhouse")
    simwheels.build(folder)
    return {"FLEET_WHEELHOUSE": str(folder)}


def host_state(inventory) -> dict[str, str]:
    """What an install or a stop would change: venv builds, the venvs and wheels (with times), the server's pid."""
    return {"builds": sh(inventory, HOST, "cat /var/lib/fleet/venvs/builds.log 2>/dev/null | wc -l").strip(),
            "listing": sh(inventory, HOST, "ls -l --time-style=+%s.%N /var/lib/fleet/venvs /var/lib/fleet/wheels 2>&1"),
            "pid": sh(inventory, HOST, "systemctl show -p MainPID --value sglang").strip(),
            "current": sh(inventory, HOST, "readlink /var/lib/fleet/current").strip()}


def served_venv(inventory) -> str:
    pid = sh(inventory, HOST, "systemctl show -p MainPID --value sglang").strip()
    return sh(inventory, HOST, f"tr '\\0' ' ' < /proc/{pid}/cmdline").split()[0].rsplit("/bin/", 1)[0]


def journal_since(inventory, cursor: str) -> str:
    return sh(inventory, HOST, f"journalctl -u sglang -o cat --no-pager --after-cursor='{cursor}'")


def cursor(inventory) -> str:
    return sh(inventory, HOST, "journalctl -u sglang -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p'"
              ).strip()


def seed_story(data: dict, venv: str) -> None:
    """The seed's story in the venv of the pins: the fusion rung died of TMA in capture, no-fusion served."""
    assert [(a["rung"], a["outcome"]) for a in data["attempts"]] == [("fusion-sm120", "TMA_FAILURE"),
                                                                     ("no-fusion", "READY")], data["attempts"]
    assert data["status"] == "ok" and data["venv"]["path"] == venv


def patched(inventory, venv: str) -> list[tuple[str, str, str]]:
    """(package, file, version) of every file the patch runs of sm120-allreduce-fusion wrote in that venv."""
    code = ("import glob, json; print(json.dumps(sorted({(f['package'], f['file'], f['version']) for m in "
            "glob.glob('/var/lib/fleet/backups/runs/*/manifest.json') for r in [json.load(open(m))] "
            "if 'sm120-allreduce-fusion' in r['sets'] for f in r['files'] if f['path'].startswith(%r)})))"
            % (venv + "/"))
    return [tuple(f) for f in json.loads(sh(inventory, HOST, f"python3 -c \"{code}\""))]


def release_of(history: dict, rid: str) -> dict:
    return next(r for r in history["hosts"][0]["releases"] if r["id"] == rid)


def test_deploy_upgrade_and_roll_back_the_seeds_playbook(sandbox, sandbox_inventory, house, tmp_path):
    book = glm5_playbook(tmp_path, "glm5-upgrade", packages=OLD)
    # --force: another test (test_pinned_venvs) may have left sbx0 serving these pins already
    rc, first, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--force", env=house)
    assert rc == 0, err[-3000:]
    old_venv = first["venv"]["path"]
    seed_story(first, old_venv)
    assert (first["versions"]["sglang"], first["versions"]["flashinfer-python"]) == ("0.5.9", "0.6.3")

    book = glm5_playbook(tmp_path, "glm5-upgrade", packages=NEW)
    mark = cursor(sandbox_inventory)
    rc, second, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), env=house)
    assert rc == 0, err[-3000:]
    # the plan is made twice (is it unchanged? then in the pins' venv) and said once (the fifth newcomer's hour)
    assert err.count("rung fusion-native: not for this host") == 1, err[-3000:]
    new_venv = second["venv"]["path"]
    assert new_venv != old_venv and second["venv"]["built"] in ("pip", "uv")  # sbx0's first 0.5.23 venv
    assert sorted(second["venv"]["sent"]) == ["flashinfer_python-0.7.2-py3-none-any.whl",
                                              "sglang-0.5.23-py3-none-any.whl", "torch-2.14.1+cu130-py3-none-any.whl"]
    seed_story(second, new_venv)
    assert (second["versions_before"]["sglang"], second["versions"]["sglang"]) == ("0.5.9", "0.5.23")
    log = journal_since(sandbox_inventory, mark)
    # 0.5.23 spoke as 0.5.23: its phase line, the fusion rung's 0.5.14+ spelling (the TMA failure needs fusion on)
    assert "Init parallel begin." in log and "Init torch distributed begin." not in log
    assert "flashinfer_allreduce_fusion_backend='auto'" in log and "Failed to initialize cutlass TMA WS" in log
    assert served_venv(sandbox_inventory) == new_venv

    # the patch set's 0.5.22+ variant, in the new venv: sglang's three files where 0.5.23 keeps its gates (flashinfer
    # 0.7.2 ships the fix: none of its files), each at that release
    assert patched(sandbox_inventory, new_venv) == [
        ("sglang", "srt/arg_groups/overrides.py", "0.5.23"),
        ("sglang", "srt/layers/flashinfer_comm_fusion.py", "0.5.23"),
        ("sglang", "srt/layers/layer_boundary/residual/add_norm.py", "0.5.23")]
    assert patched(sandbox_inventory, old_venv) == [
        ("flashinfer", "data/include/flashinfer/comm/trtllm_allreduce.cuh", "0.6.3"),
        ("flashinfer", "data/include/flashinfer/comm/trtllm_allreduce_fusion.cuh", "0.6.3"),
        ("flashinfer", "jit/comm.py", "0.6.3"), ("sglang", "srt/layers/communicator.py", "0.5.9"),
        ("sglang", "srt/server_args.py", "0.5.9")]

    before = host_state(sandbox_inventory)
    rc, back, err = inv_json(sandbox, "rollback", "--host", HOST, "--playbook", str(book), env=house)
    assert rc == 0 and back["status"] == "ok" and back["release"] == first["release"], err[-3000:]
    after = host_state(sandbox_inventory)
    assert after["builds"] == before["builds"] and after["listing"] == before["listing"]  # nothing sent nor built
    assert served_venv(sandbox_inventory) == old_venv and after["pid"] != before["pid"]

    rc, history, err = inv_json(sandbox, "history", "--host", HOST, env=house)
    assert rc == 0, err
    assert release_of(history, first["release"])["versions"]["sglang"] == "0.5.9"
    assert release_of(history, second["release"])["versions"]["sglang"] == "0.5.23"
    assert release_of(history, second["release"])["versions"]["flashinfer-python"] == "0.7.2"


@pytest.mark.parametrize(("pins", "said"), [
    ({**NEW, "sglang": "0.5.99"}, "sglang 0.5.99 is not in the upstream cache"),
    ({**NEW, "flashinfer-python": "0.7.4"}, "sglang 0.5.23 requires flashinfer-python==0.7.2; the playbook pins 0.7.4"),
], ids=["no-such-release", "requires-dist-disagree"])
def test_a_bad_pin_set_is_one_line_exit_2_and_nothing_stopped(sandbox, sandbox_inventory, house, tmp_path, pins,
                                                               said):
    before = host_state(sandbox_inventory)
    book = glm5_playbook(tmp_path, "glm5-pinned", packages=pins)
    proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json", env=house)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {book}:"), lines
    assert said in lines[0]
    line_no = int(lines[0].split(":")[2])
    assert book.read_text().splitlines()[line_no - 1].strip().startswith(("sglang:", "flashinfer-python:"))
    assert host_state(sandbox_inventory) == before
