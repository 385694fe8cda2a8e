"""Found by review (h-adv16, of 8788d47..f7fb7f0): 708cc5d made patch, audit and the rollback to before fleet act on
the venv the current release's unit runs (venvs.release_venv), and said bench did too; `inv bench` still took
`venvs.recorded(...) or` the venv of the playbook it was given (its serve.venv, else the inventory's): a guess. A
release served from a playbook's serve.venv, benched with the host group's playbook (no serve.venv) once the
inventory's venv is gone: bench ran /root/ml-env/bin/python, which is not there, and failed."""

from __future__ import annotations

import json

from fleetcli import inv, llama_playbook, sh

HOST = "sbx1"
VENV = "/opt/fx-adv16-bench-venv"
PLAIN = [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}}]


def test_bench_measures_with_the_venv_the_current_releases_unit_runs(sandbox, sandbox_inventory, tmp_path):
    sh(sandbox_inventory, HOST, f"rm -rf {VENV} && cp -a /root/ml-env {VENV}")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    served = llama_playbook(tmp_path / "a", PLAIN, name="llama-adv16-bench", serve={"venv": VENV})
    other = llama_playbook(tmp_path / "b", PLAIN, name="llama-adv16-bench")  # no serve.venv: the inventory's
    try:
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(served), "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        sh(sandbox_inventory, HOST, "mv /root/ml-env /root/ml-env.adv16")
        bench = inv(sandbox, "bench", "--host", HOST, "--playbook", str(other), "--json")
    finally:
        sh(sandbox_inventory, HOST, "! test -d /root/ml-env.adv16 || mv /root/ml-env.adv16 /root/ml-env; "
                                    "systemctl stop sglang 2>/dev/null; systemctl disable sglang 2>/dev/null; "
                                    "rm -rf /etc/systemd/system/sglang.service /etc/fleet/sglang.env /var/lib/fleet "
                                    f"{VENV}; systemctl daemon-reload; true")
    out = json.loads(bench.stdout)
    [one] = out if isinstance(out, list) else out.get("hosts", out.get("results", [out]))
    assert bench.returncode == 0 and one["ok"], (one.get("error"), bench.stderr[-2000:])  # before: ml-env gone
