"""A host whose login shell prints before every command (a `~/.bashrc` that echoes a greeting: bash reads it for
the commands sshd runs, interactive or not), on a sandbox host over real SSH: fleet's commands read their own
output, never the shell's greeting, and a task says what the host holds, not what the greeting made of it."""

from __future__ import annotations

import json

import pytest
from fleetcli import inv, sh

GREETING = "Welcome to this host, managed by puppet"
CHATTY = (f"cp /root/.bashrc /root/.bashrc.fleet-test && {{ echo 'echo \"{GREETING}\"'; "
          "echo 'echo \"motd: be careful\" >&2'; cat /root/.bashrc.fleet-test; } > /root/.bashrc")


@pytest.mark.timeout(300)
def test_a_greeting_from_the_login_shell_is_never_read_as_a_commands_output(sandbox, sandbox_inventory):
    """A newcomer's host (issue 46, 12, a new form): `inv history` said `/var/lib/fleet/current points at 'Welcome
    to ...', not at a release` (exit 1), `inv logs` showed the greeting as a journal line, `inv deploy --dry-run`
    said `the host's python3 did not say its version and platform`, and a deploy `cannot take the host lock (exit
    0): Welcome ... ACQUIRED`, leaving the lock it had taken behind."""
    sh(sandbox_inventory, "sbx1", CHATTY)
    assert GREETING in sh(sandbox_inventory, "sbx1", "head -n 1 /root/.bashrc")  # the shell greets every command
    history = inv(sandbox, "history", "--host", "sbx1")
    assert history.returncode == 0 and "no releases" in history.stdout + history.stderr, history.stderr
    assert GREETING not in history.stdout + history.stderr
    logs = inv(sandbox, "logs", "--host", "sbx1", "-n", "5")
    assert logs.returncode == 0 and GREETING not in logs.stdout, logs.stdout
    ran = inv(sandbox, "exec", "--host", "sbx1", "--json", "--cmd", "echo hi; echo ho >&2")
    row = json.loads(ran.stdout)["hosts"][0]
    # the operator's command runs in the login user's shell, which greets as `ssh HOST CMD` shows it: once (twice)
    assert ran.returncode == 0 and row["stdout"].endswith("hi\n") and row["stderr"].endswith("ho\n"), row
    assert row["stdout"].count(GREETING) == 1, row
    dry = inv(sandbox, "deploy", "--host", "sbx1", "--playbook", "glm5-nvfp4", "--dry-run")
    assert dry.returncode == 0 and GREETING not in dry.stdout + dry.stderr, dry.stdout[-2000:] + dry.stderr[-2000:]


MISMATCH = ("printf '#!/bin/sh\\necho \"Failed to initialize NVML: Driver/library version mismatch\"\\n"
            "echo \"NVML library version: 580.95\"\\nexit 18\\n' > /usr/local/bin/nvidia-smi && "
            "chmod 755 /usr/local/bin/nvidia-smi")


@pytest.mark.timeout(300)
def test_a_driver_that_nvml_cannot_reach_is_said_in_its_words_not_as_fleets_shell_snippet(sandbox, sandbox_inventory):
    """A host whose NVIDIA driver was upgraded under a running kernel module (issue 46, 12's kind: what a broken
    host makes fleet print): `inv deploy --dry-run` said `` `apps=$(nvidia-smi --query-compute-apps=pid,gpu_bus_id,
    used_gpu_memory,process_na` failed (exit 3): NVML library version: 580.95``: a cut piece of fleet's own shell
    and the one line of nvidia-smi's that does not say what is wrong."""
    sh(sandbox_inventory, "sbx3", MISMATCH)
    try:
        dry = inv(sandbox, "deploy", "--host", "sbx3", "--playbook", "glm5-nvfp4", "--dry-run")
    finally:
        sh(sandbox_inventory, "sbx3", "rm -f /usr/local/bin/nvidia-smi")
    said = " ".join((dry.stdout + dry.stderr).split())
    assert dry.returncode == 1, said[-2000:]
    assert "apps=$(" not in said and "Failed to initialize NVML: Driver/library version mismatch" in said, said[-2000:]
