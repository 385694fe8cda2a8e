"""`deploy --dry-run` and the deploy share one plan (fleet.deploy.ladder.Deployer.plan): on every case of that
plan the dry run, run first, says what the deploy then does. On sbx3 (8x B200), with a rung that runs out of
memory there (CUDA_OOM) ahead of a plain one: a first deploy; one that changes nothing; an env changed through
the inventory's `vars: {env: ...}` (before, the deploy said "nothing to do" and only --force applied it); a
host-local failure seen twice on one host (not known to fail for the fingerprint); and --force."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from fleetcli import inv_at, llama_playbook, sh

HOST = "sbx3"
LADDER = [{"name": "too-greedy", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"mem-fraction-static": 0.99}},
          {"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}]


def _inventory(sandbox, path: Path, marker: str) -> Path:
    """The sandbox's inventory of sbx3 alone, a fast simulated start, and `marker` as an env var of the host."""
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    doc["hosts"] = {HOST: doc["hosts"][HOST]}
    env = doc["hosts"][HOST].setdefault("vars", {}).setdefault("env", {})
    env.update({"SGLANG_SIM_TIME_SCALE": "0.004", "FLEET_TEST_MARKER": marker})
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_dry_run_says_what_the_deploy_then_does(sandbox, sandbox_inventory, tmp_path):
    inventory = _inventory(sandbox, tmp_path / "inventory" / "hosts.yaml", "one")
    book = llama_playbook(tmp_path, LADDER, name="llama-agrees")
    env = {"FLEET_STATE_DIR": str(tmp_path / "state")}
    said: list[str] = []  # each run's stderr

    def run(*args) -> dict:
        proc = inv_at(inventory, "deploy", "--host", HOST, "--playbook", str(book), *args, "--json", env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        # what it says is what it does: no "trying it again" before "nothing to do" (the newcomer's second hour)
        unchanged = out.get("unchanged") or out["status"] == "unchanged"
        assert not (unchanged and "trying it" in proc.stderr), proc.stderr[-3000:]
        said.append(proc.stderr)
        return out

    def both(*args) -> tuple[dict, dict]:
        """The dry run, then the deploy it planned; they must agree."""
        dry, done = run("--dry-run", *args), run(*args)
        assert dry["status"] == "dry-run", dry
        tried = [a["rung"] for a in done["attempts"] if a["outcome"] != "PREFLIGHT"]
        refused = [a["rung"] for a in done["attempts"] if a["outcome"] == "PREFLIGHT"]
        assert [a["rung"] for a in dry["attempts"]] == refused, (dry, done)
        if dry.get("unchanged"):
            assert (done["status"], done["release"]) == ("unchanged", dry["release"]), (dry, done)
        else:
            assert done["status"] == "ok" and tried and tried[0] == dry["config"]["rung"], (dry, done)
        return dry, done

    dry, done = both("--force")  # whatever an earlier test left there: a first deploy of this playbook
    assert [a["outcome"] for a in done["attempts"]] == ["CUDA_OOM", "READY"], done["attempts"]
    assert dry["config"]["rung"] == "too-greedy"

    dry, done = both()  # plain is the fingerprint's known-good rung and serves: nothing to do
    assert dry["unchanged"] and done["status"] == "unchanged"

    _inventory(sandbox, inventory, "two")  # the host's env changed in the inventory only
    dry, done = both()  # too-greedy, seen to fail once, is tried again first: its second sighting
    assert all("too-greedy: seen to fail on this hardware" in err and "trying it again" in err for err in said[-2:])
    assert not dry["unchanged"] and "+FLEET_TEST_MARKER=\"two\"" in dry["diff"], dry
    assert [a["outcome"] for a in done["attempts"]] == ["CUDA_OOM", "READY"], done["attempts"]
    assert "FLEET_TEST_MARKER=\"two\"" in sh(sandbox_inventory, HOST, "cat /etc/fleet/sglang.env")

    # CUDA_OOM twice, on this one host: host-local (another tenant's memory), so not known to fail for the
    # fingerprint (issue 52): the dry run names it again and the deploy tries it first again
    dry, done = both("--force")
    assert dry["config"]["rung"] == "too-greedy" and dry["attempts"] == [], dry
    assert [a["outcome"] for a in done["attempts"]] == ["CUDA_OOM", "READY"], done["attempts"]

    # A run that died after it stopped the server (killed, or a second Ctrl-C) left its release in progress: the
    # dry run says the deploy settles that first, and the deploy does (the fifth newcomer's hour: a dry run after a
    # double Ctrl-C said only "dry-run, rung plain", while the deploy rolled back and restarted before its plan).
    current = sh(sandbox_inventory, HOST, "readlink /var/lib/fleet/current").strip().rsplit("/", 1)[-1]
    left = current[:-4] + ("dead" if not current.endswith("dead") else "beef")
    sh(sandbox_inventory, HOST, f"""python3 - <<'PY'
import json, shutil
r = "/var/lib/fleet/releases"
shutil.copytree(f"{{r}}/{current}", f"{{r}}/{left}")
m = json.load(open(f"{{r}}/{left}/manifest.json"))
m.update(id="{left}", status="in-progress")
json.dump(m, open(f"{{r}}/{left}/manifest.json", "w"))
open(f"{{r}}/{left}/events.jsonl", "w").write(json.dumps({{"step": "stop", "rung": "plain"}}) + "\\n")
PY
systemctl stop sglang""")
    dry = run("--dry-run")
    assert f"release {left} (llama-agrees) was interrupted after step stop of rung plain: the deploy first takes " \
           "over what its run left, putting back the last known-good release" in dry["diff"], dry
    done = run()
    assert any(left in note for note in done.get("recovered", [])), done
    assert sh(sandbox_inventory, HOST, "systemctl is-active sglang").strip() == "active"
