"""`deploy --dry-run` says what the deploy hits in the venv (issue 46, 1): a playbook whose `serve.venv` names a
venv the host does not have showed a clean plan in the dry run, and the deploy then failed INSTALL_FAILED in
`systemd-analyze verify`. The check is the plan's preflight (fleet.deploy.preflight.venv_problem), which both run:
both refuse the host with the same words, nothing changed; the server that served serves on."""

from __future__ import annotations

import json

from fleetcli import inv, llama_playbook, sh

HOST = "sbx1"


def test_a_serve_venv_the_host_lacks_is_refused_alike_by_the_dry_run_and_the_deploy(sandbox, sandbox_inventory,
                                                                                     tmp_path):
    book = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-novenv", serve={"venv": "/opt/no-such-venv"})
    env = {"FLEET_STATE_DIR": str(tmp_path / "state")}
    before = sh(sandbox_inventory, HOST, "readlink /var/lib/fleet/current || true")
    said = []
    for args in (("--dry-run",), ()):
        proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), *args, "--json", env=env)
        assert proc.returncode == 1, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        assert out["status"] == "failed", out
        (attempt,) = out["attempts"]
        assert attempt["outcome"] == "PREFLIGHT", out
        said.append(attempt["evidence"])
    assert said[0] == said[1], said
    assert said[0].startswith("venv /opt/no-such-venv does not exist on the host (no /opt/no-such-venv/bin/python)")
    assert sh(sandbox_inventory, HOST, "readlink /var/lib/fleet/current || true") == before  # nothing changed


def test_a_unit_systemd_would_refuse_is_said_by_the_dry_run_as_the_deploy_fails_it(sandbox, sandbox_inventory,
                                                                                     tmp_path):
    """The deploy's first step of a rung, `systemd-analyze verify` of the unit it would install, is the dry run's
    too: a venv whose bin/python is there but no program (a folder) passes `test -x` and is refused by systemd."""
    sh(sandbox_inventory, HOST, "rm -rf /opt/fx-odd-venv && mkdir -p /opt/fx-odd-venv/bin/python")
    try:
        book = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-oddvenv", serve={"venv": "/opt/fx-odd-venv"})
        env = {"FLEET_STATE_DIR": str(tmp_path / "state")}
        dry = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--dry-run", "--json", env=env)
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--force", "--json", env=env)
    finally:
        sh(sandbox_inventory, HOST, "rm -rf /opt/fx-odd-venv")
    fails = [a for a in json.loads(done.stdout)["attempts"] if a["rung"] == "plain"]
    assert done.returncode == 1 and fails[0]["outcome"] == "INSTALL_FAILED", done.stdout[-3000:]
    said = json.loads(dry.stdout)["diff"]
    assert f"rung plain: the deploy would fail it INSTALL_FAILED before stopping anything: {fails[0]['evidence']}" \
        in said, said
