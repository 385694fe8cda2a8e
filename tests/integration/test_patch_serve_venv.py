"""`inv patch` acts on the venv the current release's unit runs (a playbook's serve.venv), not on the inventory's.
Found by review (h-adv15, stop 54): with serve.venv set, `inv patch` applied the set to /root/ml-env, said it had
applied it, and recorded a patch release whose patched files were /root/ml-env's; `--check` read the same
wrong venv, and the server went on running the unpatched serve.venv."""

from __future__ import annotations

import json

from fleetcli import inv, llama_playbook, sh
from ownerkit import UNDEPLOY

HOST = "sbx0"  # SM120: the patch set writes files there
VENV = "/opt/fx-serve-venv"
FILE = "lib/python3.11/site-packages/sglang/srt/server_args.py"  # one file sm120-allreduce-fusion patches
PLAIN = [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}}]
SET = "sm120-allreduce-fusion"


def test_patch_apply_check_and_rollback_act_on_the_units_serve_venv(sandbox, sandbox_inventory, tmp_path):
    def sums() -> dict[str, str]:
        out = sh(sandbox_inventory, HOST, f"sha256sum /root/ml-env/{FILE} {VENV}/{FILE}").split()
        return {"inventory": out[0], "serve": out[2]}

    sh(sandbox_inventory, HOST, f"rm -rf {VENV} && cp -a /root/ml-env {VENV}")
    book = llama_playbook(tmp_path, PLAIN, name="llama-serve-venv", serve={"venv": VENV})
    try:
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        before = sums()
        applied = inv(sandbox, "patch", "--host", HOST, "--set", SET, "--yes", "--json")
        assert applied.returncode == 0, applied.stderr[-2000:]
        after = sums()
        check = inv(sandbox, "patch", "--host", HOST, "--set", SET, "--check", "--json")
        back = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(book), "--json")
        rolled = sums()
    finally:
        sh(sandbox_inventory, HOST, f"rm -rf {VENV}; {UNDEPLOY}")
    assert after["inventory"] == before["inventory"]  # before: the inventory's venv was patched
    assert after["serve"] != before["serve"]  # and the venv that serves was not
    assert check.returncode == 0, check.stdout + check.stderr[-2000:]
    assert json.loads(back.stdout)["status"] == "ok", back.stderr[-2000:]
    assert rolled == before  # the rollback to the deploy's release reverted the set where it was applied


def test_rollback_to_before_fleet_reverts_the_sets_in_the_serve_venv(sandbox, sandbox_inventory, tmp_path):
    """Before: `rollback --to before-fleet` reverted patch sets in the inventory's venv, said it was back to
    before fleet, and left the serve.venv patched."""
    original = sh(sandbox_inventory, HOST, f"sha256sum /root/ml-env/{FILE}").split()[0]
    sh(sandbox_inventory, HOST, f"rm -rf {VENV} && cp -a /root/ml-env {VENV}")
    patched = [{**PLAIN[0], "name": "patched", "patches": [SET]}]
    book = llama_playbook(tmp_path, patched, name="llama-serve-venv", serve={"venv": VENV})
    try:
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        served = sh(sandbox_inventory, HOST, f"sha256sum {VENV}/{FILE}").split()[0]
        back = inv(sandbox, "rollback", "--host", HOST, "--to", "before-fleet", "--yes", "--json")
        after = sh(sandbox_inventory, HOST, f"sha256sum {VENV}/{FILE}").split()[0]
    finally:
        sh(sandbox_inventory, HOST, f"rm -rf {VENV}; {UNDEPLOY}")
    assert served != original  # the deploy patched the serve.venv
    assert back.returncode == 0, back.stdout + back.stderr[-2000:]
    assert after == original  # before: still patched
