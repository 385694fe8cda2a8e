"""A dry run against a sandbox host whose env file someone wrote by hand, with secrets and bytes that are not
UTF-8: the diff and `--json` show every secret-named value masked, and the playbook's own secret (a reference)
never appears either."""

from __future__ import annotations

import hashlib
import json

import pytest
import sshutil
from fleetcli import inv, llama_playbook

from fleet.ssh.connect import open_connection
from fleet.ssh.remote import run_bytes

HOST = "sbx2"
ENV_FILE = "/etc/fleet/sglang.env"
BY_HAND = (b'NCCL_P2P_DISABLE="1"\n'
           b'HF_TOKEN="hf_old_by_hand"\n'
           b"AWS_SECRET_ACCESS_KEY='wJalr-old'\n"
           b"export OPENAI_API_KEY=sk-old-by-hand\n"
           b'NOTE="caf\xe9"\n')


@pytest.fixture
def hand_written_env(sandbox, sandbox_inventory):
    root = sandbox_inventory.hosts[HOST]
    conn = open_connection(root)
    try:
        before = run_bytes(conn, root, f"cat {ENV_FILE} 2>/dev/null", timeout=30)
        run_bytes(conn, root, f"mkdir -p /etc/fleet && cat > {ENV_FILE} && chmod 0600 {ENV_FILE}", BY_HAND, 30)
        yield
        if before.exited == 0:
            run_bytes(conn, root, f"cat > {ENV_FILE}", before.stdout, 30)
        else:
            run_bytes(conn, root, f"rm -f {ENV_FILE}", timeout=30)
    finally:
        conn.close()


def test_a_dry_run_masks_every_secret_and_reads_any_bytes(hand_written_env, sandbox, sandbox_inventory, tmp_path):
    book = llama_playbook(tmp_path, [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}], name="llama-secrets",
                          serve={"env": {"HF_TOKEN": {"env": "FLEET_TEST_HF_TOKEN"}}})
    done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--dry-run", "--json",
               env={"FLEET_TEST_HF_TOKEN": "hf_new_from_fleet"})
    assert done.returncode == 0, done.stderr[-2000:]
    shown = done.stdout + done.stderr
    for secret in ("hf_old_by_hand", "wJalr-old", "sk-old-by-hand", "hf_new_from_fleet"):
        assert secret not in shown
    result = json.loads(done.stdout)
    assert result["config"]["env"]["HF_TOKEN"] == "<secret>"
    diff = result["diff"]
    assert "-HF_TOKEN=<secret>" in diff and "-export OPENAI_API_KEY=<secret>" in diff and 'NOTE="caf\\xe9"' in diff
    assert '+HF_TOKEN="<secret>"' in diff or "+HF_TOKEN=<secret>" in diff
    # and the host's file is as it was
    on_host = sshutil.sh(sandbox_inventory.hosts[HOST], f"sha256sum < {ENV_FILE}").stdout.split()[0]
    assert on_host == hashlib.sha256(BY_HAND).hexdigest()
