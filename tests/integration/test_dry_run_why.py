"""`deploy --dry-run` says why the deploy will not answer `unchanged` where the files it would write are the ones
there (issue 46, finding 1; newcomer h-new17). A new API key (serve.api_key), a server stopped by hand and --force
each showed `dry-run, rung plain` over `(no differences)`, and the deploy then stopped and restarted the server:
read at 3 a.m., no differences means nothing happens."""

from __future__ import annotations

import json
import shlex

import pytest
from fleetcli import inv_at, llama_playbook, sh

HOST = "sbx3"


def test_the_dry_run_says_why_the_deploy_restarts_a_server_whose_files_are_unchanged(sandbox, sandbox_inventory,
                                                                                      tmp_path):
    key = tmp_path / "api.key"
    key.write_text("key-one-0123456789abcdef\n")
    book = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-why",
                          serve={"host": "0.0.0.0", "api_key": {"file": str(key)}})
    env = {"FLEET_STATE_DIR": str(tmp_path / "state")}

    def run(*args: str) -> dict:
        proc = inv_at(sandbox.cfg.inventory_path, "deploy", "--host", HOST, "--playbook", str(book), *args, "--json",
                      env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout)

    assert run("--force")["status"] == "ok"  # whatever an earlier test left there
    assert run("--dry-run")["unchanged"]

    key.write_text("key-two-fedcba9876543210\n")  # the key rotated: the deploy installs it and restarts
    dry = run("--dry-run")
    assert not dry["unchanged"] and "(no differences)" not in dry["diff"], dry
    assert ("is not what this deploy would serve: the API key the playbook names (serve.api_key) is not the one in "
            "/etc/fleet/sglang.key: the deploy installs it; the deploy stops its server and starts rung plain"
            in " ".join(dry["diff"].split())), dry["diff"]
    assert run()["status"] == "ok"

    sh(sandbox_inventory, HOST, "systemctl stop sglang")  # stopped by hand: the deploy starts it again
    dry = run("--dry-run")
    assert ("its server is not running (unit inactive (dead)); the deploy starts rung plain"
            in " ".join(dry["diff"].split())), dry["diff"]
    assert run()["status"] == "ok"

    dry = run("--dry-run", "--force")  # --force compares nothing: the server is restarted all the same
    assert ("--force: release" in dry["diff"] and "is not compared; the deploy stops its server and starts rung "
            "plain" in " ".join(dry["diff"].split())), dry["diff"]


@pytest.mark.parametrize("DROPIN", ["/etc/systemd/system/sglang.service.d/override.conf",
                                    # systemd quotes it: it was no drop-in at all (status clean, deploy not refused)
                                    "/etc/systemd/system/sglang.service.d/by hand.conf",
                                    # an admin's for every service applies to sglang too (it was exempt)
                                    "/etc/systemd/system/service.d/override.conf"])
def test_a_drop_in_fleet_did_not_write_is_said_by_status_and_the_dry_run_and_the_deploy_refuses_before_a_stop(
        sandbox, sandbox_inventory, tmp_path, DROPIN):  # noqa: N803
    """`systemctl edit sglang` by hand: its drop-in's Environment= (ExecStart=, User=) wins over fleet's unit, so
    what serves is not what fleet checked. Before: status was clean, the dry run said `nothing to do`, and a deploy
    that changed the unit restarted the server with the drop-in over it. Now status shows it as drift, the dry run
    says why the deploy does not leave it, and the deploy refuses every rung before it stops anything."""
    book = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-dropin")
    env = {"FLEET_STATE_DIR": str(tmp_path / "state")}

    def run(task: str, *args: str) -> tuple[int, dict]:
        proc = inv_at(sandbox.cfg.inventory_path, task, "--host", HOST, *args, "--json", env=env)
        return proc.returncode, json.loads(proc.stdout)

    assert run("deploy", "--playbook", str(book), "--force")[1]["status"] == "ok"
    try:
        sh(sandbox_inventory, HOST, f"mkdir -p {DROPIN.rsplit('/', 1)[0]} && printf '[Service]\\n"
                                    f"Environment=SGLANG_BY_HAND=1\\n' > {shlex.quote(DROPIN)} && "
                                    "systemctl daemon-reload")
        pid = sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip()
        rc, st = run("status")
        assert rc == 1 and f"{DROPIN} (a drop-in fleet did not write)" in st["hosts"][0]["drift"], st
        rc, dry = run("deploy", "--playbook", str(book), "--dry-run")
        assert not dry["unchanged"] and f"drop-ins fleet did not write override its unit: {DROPIN}" in dry["diff"]
        assert "the deploy would fail it" in dry["diff"], dry["diff"]
        rc, done = run("deploy", "--playbook", str(book))
        assert rc == 1 and done["status"] != "ok" and DROPIN in json.dumps(done), done
        assert sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip() == pid  # never stopped
    finally:
        sh(sandbox_inventory, HOST, f"rm -rf {DROPIN.rsplit('/', 1)[0]} && systemctl daemon-reload")
    assert run("deploy", "--playbook", str(book), "--dry-run")[1]["unchanged"]  # gone: nothing to do again


def test_a_host_that_cannot_say_its_drop_ins_is_refused_not_taken_as_having_none(sandbox, sandbox_inventory,
                                                                                 tmp_path):
    """`systemctl show -p DropInPaths` failing (no bus, a broken systemctl) was read as "no drop-ins": the dry run
    said `nothing to do` and a deploy that changed the unit stopped the server with whatever drop-in it could not
    see. Now the host's failure is said and nothing is stopped."""
    book = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-dropin-blind")
    env = {"FLEET_STATE_DIR": str(tmp_path / "state")}

    def run(*args: str) -> tuple[int, dict]:
        proc = inv_at(sandbox.cfg.inventory_path, "deploy", "--host", HOST, "--playbook", str(book), *args,
                      "--json", env=env)
        return proc.returncode, json.loads(proc.stdout)

    assert run("--force")[1]["status"] == "ok"
    wrapper = ('#!/bin/sh\ncase "$*" in *DropInPaths*) echo "Failed to connect to bus: No such file or directory" '
               '>&2; exit 1;; esac\nexec /usr/bin/systemctl "$@"\n')
    sh(sandbox_inventory, HOST, f"printf %s {shlex.quote(wrapper)} > /usr/local/bin/systemctl && "
                                "chmod 755 /usr/local/bin/systemctl")
    try:
        pid = sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip()
        rc, dry = run("--dry-run")
        assert not dry["unchanged"], dry  # before: unchanged
        assert "Failed to connect to bus" in json.dumps(dry), dry
        rc, done = run("--force")
        assert rc == 1 and done["status"] != "ok" and "Failed to connect to bus" in json.dumps(done), done
        assert sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip() == pid  # never stopped
    finally:
        sh(sandbox_inventory, HOST, "rm -f /usr/local/bin/systemctl")
    assert run("--dry-run")[1]["unchanged"]
