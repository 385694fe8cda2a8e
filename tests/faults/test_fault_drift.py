"""Someone else changes what fleet manages between a deploy and a rollback: a hand edit of a patched file,
or a package reinstall that puts the pristine files back. `inv status` shows the drift, a deploy re-applies,
and a rollback never clobbers a hand edit: it refuses, says why, and leaves the running server alone."""

from __future__ import annotations

import json
import shlex

from faultkit import PATCHABLE, PATCHED, PLAIN, current, deploy_ok, managed_digest, serving
from fleetcli import inv, inv_json, llama_playbook, sh

HOST = "sbx0"
EDITED = PATCHABLE[2]  # sglang/srt/server_args.py


def _drift(sandbox) -> list[str]:
    return inv_json(sandbox, "status", "--host", HOST)[1]["hosts"][0]["drift"]


def _reinstall_pristine(inventory) -> None:
    """As `pip install --force-reinstall` would: every file of the last patch run replaced by the package's
    own content (the engine's backup of the original, which is what the package's RECORD hashes)."""
    script = ("import json,glob,os,shutil\n"
              "runs=sorted(glob.glob('/var/lib/fleet/backups/runs/*/manifest.json'))\n"
              "m=[json.load(open(r)) for r in runs if json.load(open(r))['status']=='applied'][-1]\n"
              "for f in m['files']:\n"
              "    tmp=f['path']+'.pip-tmp'\n"
              "    shutil.copyfile('/var/lib/fleet/backups/objects/'+f['sha_before'], tmp)\n"
              "    os.chmod(tmp, f['mode']); os.replace(tmp, f['path'])\n")
    sh(inventory, HOST, f"python3 -c {shlex.quote(script)}")


def test_a_hand_edit_shows_as_drift_and_rollback_refuses_to_clobber_it(sandbox, sandbox_inventory, tmp_path):
    plain = llama_playbook(tmp_path, PLAIN, name="llama-drift-base")
    base = deploy_ok(sandbox, HOST, plain)
    deploy_ok(sandbox, HOST, llama_playbook(tmp_path, PATCHED, name="llama-drift-patched"))
    assert _drift(sandbox) == []
    sh(sandbox_inventory, HOST, f"cp -p {EDITED} /tmp/edited.bak && echo '# tuned by hand' >> {EDITED}")
    try:
        assert _drift(sandbox) == [f"{EDITED} (changed)"]
        pid = sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip()
        before = managed_digest(sandbox_inventory, HOST)
        proc = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(plain), "--to", base, "--json")
        back = json.loads(proc.stdout)
        assert proc.returncode == 1 and back["status"] == "failed"
        why = back["attempts"][0]["evidence"]
        assert "edited by hand since fleet wrote it" in why and "refusing to overwrite" in why and EDITED in why
        assert managed_digest(sandbox_inventory, HOST) == before  # nothing written, nothing restored
        assert sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip() == pid
        assert serving(sandbox_inventory, HOST)
    finally:
        sh(sandbox_inventory, HOST, f"cp -p /tmp/edited.bak {EDITED}")
    assert _drift(sandbox) == []


def test_a_package_reinstall_shows_as_drift_deploy_reapplies_and_rollback_goes_back(sandbox, sandbox_inventory,
                                                                                    tmp_path):
    plain = llama_playbook(tmp_path, PLAIN, name="llama-pip-base")
    patched = llama_playbook(tmp_path, PATCHED, name="llama-pip-patched")
    base = deploy_ok(sandbox, HOST, plain)
    deploy_ok(sandbox, HOST, patched)
    _reinstall_pristine(sandbox_inventory)
    assert sorted(_drift(sandbox)) == sorted(f"{p} (changed)" for p in PATCHABLE)
    check = inv(sandbox, "patch", "--host", HOST, "--set", "sm120-allreduce-fusion", "--revert", "--json")
    assert check.returncode == 0, check.stderr[-2000:]  # the files are already the originals: nothing to clobber
    rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(patched), "--force")
    assert rc == 0 and data["status"] == "ok", err[-3000:]
    assert "applied patch sets sm120-allreduce-fusion (5 files)" in err  # re-applied
    assert _drift(sandbox) == []
    _reinstall_pristine(sandbox_inventory)
    proc = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(plain), "--to", base, "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["release"] == base, proc.stderr[-2000:]
    assert current(sandbox_inventory, HOST) == base and _drift(sandbox) == [] and serving(sandbox_inventory, HOST)
