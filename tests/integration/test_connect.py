"""fleet's connections against real sshd hosts: parallel runs, strict host keys, ProxyJump, become, guard."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path

import paramiko
import pytest
from sshutil import recording_connects, sh

from fleet import inventory
from fleet.errors import ConnectError, GuardError
from fleet.host import execute
from fleet.ssh.connect import ConnectOptions, open_connection

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def connect_attempts():
    """Every socket.connect this thread makes while the test runs (Python's audit hook, not a mock)."""
    with recording_connects() as connects:
        yield connects



def test_a_command_runs_on_three_hosts_in_parallel(sandbox_inventory):
    hosts = [sandbox_inventory.hosts[n] for n in ("sbx0", "sbx1", "sbx2")]
    start = time.monotonic()
    outcomes = execute.run_everywhere(hosts, "sleep 1; hostname", ConnectOptions())
    wall = time.monotonic() - start
    assert [o.value.stdout.strip() for o in outcomes] == ["sbx0", "sbx1", "sbx2"]
    assert all(o.ok and o.value.exited == 0 for o in outcomes)
    # One after another, the run would last at least the sum of the hosts' times (each over 1 s); in parallel
    # it lasts about the slowest one's, whatever the machine's load makes each of them.
    assert min(o.seconds for o in outcomes) > 1.0 and wall < sum(o.seconds for o in outcomes) - 1.5


def test_inv_exec_json_is_pure_json_with_per_host_results(sandbox):
    proc = subprocess.run(
        [str(REPO / ".venv/bin/inv"), "exec", "-i", str(sandbox.cfg.inventory_path), "--host", "sbx0",
         "--host", sandbox.cfg.address(2), "--cmd", "hostname; exit 3", "--json", "--yes"],
        cwd=REPO, capture_output=True, text=True,
    )
    data = json.loads(proc.stdout)
    got = [(h["host"], h["exit"], h["stdout"]) for h in data["hosts"]]
    assert got == [("sbx0", 3, "sbx0\n"), ("sbx2", 3, "sbx2\n")]
    assert proc.returncode == 1


def test_unknown_host_key_is_refused_until_accepted(sandbox_inventory, tmp_path):
    host = dataclasses.replace(sandbox_inventory.hosts["sbx1"], known_hosts=str(tmp_path / "kh"))
    with pytest.raises(ConnectError, match="host key unknown.*--accept-new-host-keys"):
        sh(host, "true")
    assert sh(host, "hostname", ConnectOptions(accept_new_host_keys=True)).stdout == "sbx1\n"
    # recorded as ssh records it: hashed where ssh_config says HashKnownHosts yes (Debian's /etc/ssh/ssh_config)
    assert " ssh-ed25519 " in (tmp_path / "kh").read_text()
    assert paramiko.HostKeys(str(tmp_path / "kh")).lookup(host.address) is not None
    assert sh(host, "hostname").stdout == "sbx1\n"  # recorded: strict checking now passes


def test_a_changed_host_key_is_refused_even_with_accept_new(sandbox_inventory, tmp_path):
    sbx0, sbx1 = sandbox_inventory.hosts["sbx0"], sandbox_inventory.hosts["sbx1"]
    real = Path(sbx0.known_hosts).read_text().splitlines()
    other = next(line for line in real if line.startswith(f"{sbx1.address} ")).split()[2]
    forged = tmp_path / "kh"
    forged.write_text(f"{sbx0.address} ssh-ed25519 {other}\n")  # what we'd see if sbx0's key had changed
    host = dataclasses.replace(sbx0, known_hosts=str(forged))
    for opts in (ConnectOptions(), ConnectOptions(accept_new_host_keys=True)):
        with pytest.raises(ConnectError, match="host key CHANGED") as err:
            sh(host, "true", opts)
        # the line that holds the old key, as ssh's "Offending key in FILE:LINE", and the command that removes it
        assert f"; {forged}:1 has ssh-ed25519 SHA256:" in str(err.value), err.value
        assert f"then remove that line (`ssh-keygen -R {sbx0.address} -f {forged}`)" in str(err.value)
    assert forged.read_text() == f"{sbx0.address} ssh-ed25519 {other}\n"


def test_proxyjump_through_a_sandbox_host_from_ssh_config(sandbox_inventory, tmp_path):
    sbx0 = sandbox_inventory.hosts["sbx0"]
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host jumpbox\n  HostName {sbx0.address}\n  User root\n  IdentityFile {sbx0.identity_file}\n"
                   f"Host gpu-vm\n  HostName {sandbox_inventory.hosts['sbx2'].address}\n  ProxyJump jumpbox\n")
    host = dataclasses.replace(sandbox_inventory.hosts["sbx2"], address="gpu-vm", ssh_config=str(cfg))
    # sbx2 sees the connection arrive from sbx0, not from the bridge: it went through the jump host.
    out = sh(host, "hostname; echo $SSH_CLIENT").stdout.split()
    assert out[0] == "sbx2" and out[1] == sbx0.address


def test_become_runs_as_root_through_sudo_for_a_non_root_login(sandbox_inventory):
    host = dataclasses.replace(sandbox_inventory.hosts["sbx1"], user="fleet", become=True)
    assert sh(host, "id -un; echo $SUDO_USER").stdout.split() == ["root", "fleet"]
    plain = dataclasses.replace(host, become=False)
    assert sh(plain, "id -un").stdout == "fleet\n"


def test_guard_refuses_a_real_address_without_sending_a_packet(connect_attempts):
    real = inventory.load(REPO / "inventory/hosts.example.yaml").hosts["gpu-node-1"]
    with pytest.raises(GuardError, match=r"10\.1\.230\.174.*refused"):
        open_connection(real)
    assert connect_attempts == []


def test_guard_refuses_a_real_proxyjump_hop_without_sending_a_packet(sandbox_inventory, tmp_path, connect_attempts):
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host proxmox\n  HostName 10.1.230.174\n")
    for hop in ("proxmox", "root@10.1.230.174:22"):
        host = dataclasses.replace(sandbox_inventory.hosts["sbx0"], ssh_config=str(cfg), proxy_jump=hop)
        with pytest.raises(GuardError, match=r"ProxyJump hop 1 .*10\.1\.230\.174"):
            open_connection(host)
    assert connect_attempts == []


def test_guard_applies_to_ssh_config_hostname_too(sandbox_inventory, tmp_path, connect_attempts):
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host {sandbox_inventory.hosts['sbx0'].address}\n  HostName 10.1.230.174\n")
    host = dataclasses.replace(sandbox_inventory.hosts["sbx0"], ssh_config=str(cfg))
    with pytest.raises(GuardError):
        open_connection(host)
    assert connect_attempts == []


def test_inv_exec_refuses_the_real_inventory_with_exit_2_and_nothing_sent():
    proc = subprocess.run([str(REPO / ".venv/bin/inv"), "exec", "-i", "inventory/hosts.example.yaml", "--all", "--yes",
                           "--cmd", "true"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "refused: FLEET_SANDBOX_ONLY=1" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_host_with_no_identity_file_uses_the_default_keys_then_the_agent(sandbox_inventory, tmp_path, monkeypatch):
    """The common setup: no identity_file in the inventory, the key in ~/.ssh or in ssh-agent."""
    base = sandbox_inventory.hosts["sbx0"]
    host = dataclasses.replace(base, identity_file=None)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    # 1. no key anywhere: one clear line, not a TypeError
    with pytest.raises(ConnectError, match=r"no key to offer: no identity_file .* no ssh-agent"):
        sh(host, "true")
    # 2. the key as ~/.ssh/id_ed25519 (ssh's default IdentityFile)
    key = home / ".ssh/id_ed25519"
    key.write_bytes(Path(base.identity_file).read_bytes())
    key.chmod(0o600)
    assert sh(host, "hostname").stdout.strip() == "sbx0"
    key.unlink()
    # 3. the key in ssh-agent only
    agent = subprocess.run(["ssh-agent", "-s", "-a", str(tmp_path / "agent.sock")], capture_output=True, text=True,
                           check=True).stdout
    pid = int(agent.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
        subprocess.run(["ssh-add", "-q", base.identity_file], check=True, capture_output=True,
                       env={"SSH_AUTH_SOCK": str(tmp_path / "agent.sock"), "PATH": "/usr/bin:/bin"})
        assert sh(host, "hostname").stdout.strip() == "sbx0"
    finally:
        subprocess.run(["kill", str(pid)], check=False)
