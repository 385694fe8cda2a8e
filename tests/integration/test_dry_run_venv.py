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
    too. A venv preflight passes and systemd refuses is a host's doing (a venv on a noexec mount, a policy); here
    the host's systemd-analyze says it refuses (a wrapper first on root's PATH), as systemd 252 words it."""
    wrapper = "/usr/local/sbin/systemd-analyze"
    sh(sandbox_inventory, HOST, f"printf '%s\\n' '#!/bin/sh' 'if [ \"$1\" = verify ]; then echo \"${{2##*/}}: Command "
                                f"/root/ml-env/bin/python is not executable: Permission denied\" >&2; exit 1; fi' "
                                f"'exec /usr/bin/systemd-analyze \"$@\"' > {wrapper} && chmod 755 {wrapper}")
    try:
        book = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-refused-unit")
        env = {"FLEET_STATE_DIR": str(tmp_path / "state")}
        dry = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--dry-run", "--json", env=env)
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--force", "--json", env=env)
    finally:
        sh(sandbox_inventory, HOST, f"rm -f {wrapper}")
    fails = [a for a in json.loads(done.stdout)["attempts"] if a["rung"] == "plain"]
    assert done.returncode == 1 and fails and fails[0]["outcome"] == "INSTALL_FAILED", done.stdout[-3000:]
    assert "is not executable: Permission denied" in fails[0]["evidence"], fails
    said = json.loads(dry.stdout)["diff"]
    assert f"rung plain: the deploy would fail it INSTALL_FAILED before stopping anything: {fails[0]['evidence']}" \
        in said, said


def test_a_venv_whose_python_is_no_program_is_refused_alike_by_both(sandbox, sandbox_inventory, tmp_path):
    """A venv whose bin/python is a folder passes `test -x`; the owner rule read it and crashed (IsADirectoryError,
    a traceback's first line as the refusal). Now both refuse it at preflight in the rule's words, nothing changed."""
    sh(sandbox_inventory, HOST, "rm -rf /opt/fx-odd-venv && mkdir -p /opt/fx-odd-venv/bin/python")
    said = []
    try:
        book = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-oddvenv", serve={"venv": "/opt/fx-odd-venv"})
        env = {"FLEET_STATE_DIR": str(tmp_path / "state")}
        for args in (("--dry-run",), ("--force",)):
            proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), *args, "--json", env=env)
            (attempt,) = json.loads(proc.stdout)["attempts"]
            assert proc.returncode == 1 and attempt["outcome"] == "PREFLIGHT", proc.stdout[-3000:]
            said.append(attempt["evidence"])
    finally:
        sh(sandbox_inventory, HOST, "rm -rf /opt/fx-odd-venv")
    assert said[0] == said[1] == ("venv /opt/fx-odd-venv: fleet runs nothing of /opt/fx-odd-venv as root: "
                                  "/opt/fx-odd-venv/bin/python is no ELF program (what a script's #! line runs is "
                                  "not looked at)"), said


def test_a_root_unit_never_serves_a_venv_another_user_owns(sandbox, sandbox_inventory, tmp_path):
    """serve.user root (the default) with a venv the image's `fleet` user made: systemd would run that user's python
    and every .pth in its venv as root at each start. Before, the dry run and the deploy went on; now both refuse
    the host in the same words, naming the owner and what to set, nothing changed. A serve.user the host has no
    account for is refused alike (systemd would fail the start: 217/USER)."""
    venv = "/home/fleet/fx-owned-venv"
    sh(sandbox_inventory, HOST, f"rm -rf {venv} && runuser -u fleet -- python3 -m venv --without-pip {venv}")
    before = sh(sandbox_inventory, HOST, "readlink /var/lib/fleet/current || true")
    env = {"FLEET_STATE_DIR": str(tmp_path / "state")}
    said: dict[str, list[str]] = {}
    try:
        for name, serve in (("owned", {"venv": venv}), ("nouser", {"user": "fx-nosuch"})):
            book = llama_playbook(tmp_path, [{"name": "plain"}], name=f"llama-{name}", serve=serve)
            for args in (("--dry-run",), ("--force",)):
                proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), *args, "--json", env=env)
                assert proc.returncode == 1, proc.stderr[-3000:]
                (attempt,) = json.loads(proc.stdout)["attempts"]
                assert attempt["outcome"] == "PREFLIGHT", proc.stdout[-3000:]
                said.setdefault(name, []).append(attempt["evidence"])
    finally:
        sh(sandbox_inventory, HOST, f"rm -rf {venv}")
    assert said["owned"][0] == said["owned"][1] and said["nouser"][0] == said["nouser"][1], said
    assert said["owned"][0].startswith(f"venv {venv} is fleet (uid "), said
    assert "the unit runs as root (serve.user: root)" in said["owned"][0] and "serve.user to fleet" in said["owned"][0]
    assert said["nouser"][0].startswith("serve.user 'fx-nosuch' has no account on the host"), said
    assert sh(sandbox_inventory, HOST, "readlink /var/lib/fleet/current || true") == before  # nothing changed
