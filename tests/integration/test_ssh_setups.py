"""The SSH setups operators really have, each against the sandbox's real sshd: keys in ssh-agent and in
ssh_config, IdentitiesOnly, passphrase-protected keys, known_hosts files named by ssh_config (hashed, global,
HostKeyAlias), Include, ProxyJump chains, ProxyCommand, Match exec, pinned addresses, and `inv probe -v`."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from fleetcli import inv, inv_at, inv_json
from sshutil import lookups, recording_connects, sh

from fleet.errors import ConnectError, InputError
from fleet.ssh import connect as connect_module
from fleet.ssh.connect import open_connection, trace_of
from fleet.ssh.remote import run


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A user with nothing in ~/.ssh and no agent, as a new operator's account starts."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home


@pytest.fixture
def agent(tmp_path, monkeypatch):
    """A real ssh-agent for this test; returns a function that adds a key file to it."""
    sock = tmp_path / "agent.sock"
    out = subprocess.run(["ssh-agent", "-s", "-a", str(sock)], capture_output=True, text=True, check=True).stdout
    pid = int(out.split("SSH_AGENT_PID=")[1].split(";")[0])
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))

    def add(path: Path | str) -> None:
        subprocess.run(["ssh-add", "-q", str(path)], check=True, capture_output=True,
                       env={"SSH_AUTH_SOCK": str(sock), "PATH": "/usr/bin:/bin"})

    yield add
    subprocess.run(["kill", str(pid)], check=False)


def keygen(path: Path, passphrase: str = "") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", path.name, "-f", str(path)],
                   check=True)
    return path


def copy_key(src: str, dst: Path, passphrase: str = "") -> Path:
    dst.write_bytes(Path(src).read_bytes())
    dst.chmod(0o600)
    if passphrase:
        subprocess.run(["ssh-keygen", "-q", "-p", "-N", passphrase, "-f", str(dst)], check=True, capture_output=True)
    dst.with_name(dst.name + ".pub").write_text(
        subprocess.run(["ssh-keygen", "-y", "-f", src], capture_output=True, text=True, check=True).stdout)
    return dst


def configured(base, tmp_path: Path, text: str, **changes):
    cfg = tmp_path / "ssh_config"
    cfg.write_text(text)
    return dataclasses.replace(base, ssh_config=str(cfg), **changes)


def traced(host, command: str = "hostname") -> tuple[str, list[str]]:
    conn = open_connection(host)
    try:
        return run(conn, host, command).stdout.strip(), trace_of(conn)
    finally:
        conn.close()


def test_agent_keys_come_first_then_ssh_config_identity_files_and_identities_only_drops_the_rest(
        sandbox_inventory, tmp_path, home, agent):
    sbx0 = sandbox_inventory.hosts["sbx0"]
    stranger = keygen(tmp_path / "stranger")
    agent(stranger)
    right = copy_key(sbx0.identity_file, home / ".ssh/fleet_key")
    text = f"Host {sbx0.address}\n  IdentityFile ~/.ssh/fleet_key\n"
    host = configured(sbx0, tmp_path, text, identity_file=None)
    name, trace = traced(host)
    offered = [line.split("identity ", 1)[1] for line in trace if " identity " in line]
    assert name == "sbx0"
    assert offered[0].startswith("agent key SHA256:") and "(stranger): refused by the server" in offered[0]
    assert offered[1] == f"{right}: accepted"
    host = configured(sbx0, tmp_path, text + "  IdentitiesOnly yes\n", identity_file=None)
    name, trace = traced(host)
    assert [line.split("identity ", 1)[1] for line in trace if " identity " in line] == [f"{right}: accepted"]


def test_a_passphrase_protected_key_without_an_agent_is_one_line_naming_it_and_works_through_the_agent(
        sandbox_inventory, tmp_path, home, agent, monkeypatch):
    sbx0 = sandbox_inventory.hosts["sbx0"]
    locked = copy_key(sbx0.identity_file, home / ".ssh/id_ed25519", passphrase="s3cret phrase")
    host = dataclasses.replace(sbx0, identity_file=None)
    monkeypatch.delenv("SSH_AUTH_SOCK")
    with pytest.raises(ConnectError) as err:
        sh(host, "true")
    message = str(err.value)
    assert len(message.splitlines()) == 1 and "s3cret" not in message
    assert f"key {locked} is passphrase-protected and no ssh-agent holds it" in message
    assert f"ssh-add {locked}" in message
    # the same key unlocked in an agent: offered from there, the file is never opened for its passphrase
    agent(sbx0.identity_file)
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    name, trace = traced(host)
    assert name == "sbx0"
    assert [line.split("identity ", 1)[1].split(": ")[1] for line in trace if " identity " in line] == ["accepted"]


def test_the_users_own_ssh_config_is_read_when_the_inventory_names_none(sandbox_inventory, home):
    sbx1 = sandbox_inventory.hosts["sbx1"]
    (home / ".ssh/config").write_text(f"Host gpu-box\n  HostName {sbx1.address}\n  User root\n"
                                      f"  IdentityFile {sbx1.identity_file}\n")
    host = dataclasses.replace(sbx1, address="gpu-box", ssh_config=None, identity_file=None, user=None)
    name, trace = traced(host)
    assert name == "sbx1" and f"target: identity {sbx1.identity_file}: accepted" in trace


def test_known_hosts_files_from_ssh_config_hashed_and_global_and_the_line_that_matched(
        sandbox_inventory, tmp_path, home):
    sbx0 = sandbox_inventory.hosts["sbx0"]
    line = next(x for x in Path(sbx0.known_hosts).read_text().splitlines() if x.startswith(f"{sbx0.address} "))
    user_file = tmp_path / "hashed_known_hosts"
    user_file.write_text(f"# first line\n{line}\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(user_file)], check=True, capture_output=True)
    assert sbx0.address not in user_file.read_text()
    global_file = tmp_path / "global_known_hosts"
    global_file.write_text("")
    text = (f"Host {sbx0.address}\n  UserKnownHostsFile {user_file}\n  GlobalKnownHostsFile {global_file}\n")
    host = configured(sbx0, tmp_path, text, known_hosts=None)
    name, trace = traced(host)
    assert name == "sbx0" and any(f"matched {user_file}:2" in t for t in trace)
    # the key only in the global file: still known, and the trace says where
    global_file.write_text(line + "\n")
    user_file.write_text("")
    name, trace = traced(host)
    assert any(f"matched {global_file}:1" in t for t in trace)
    # in neither: refused, the message lists every file looked in
    global_file.write_text("")
    with pytest.raises(ConnectError, match=rf"host key unknown \(no entry for {sbx0.address} in {user_file}, "
                                           rf"{global_file}\)"):
        sh(host, "true")


def test_host_key_alias_the_key_is_known_by_name_never_by_address_alone(sandbox_inventory, tmp_path, home):
    sbx0 = sandbox_inventory.hosts["sbx0"]
    key = next(x for x in Path(sbx0.known_hosts).read_text().splitlines() if x.startswith(f"{sbx0.address} "))
    kh = tmp_path / "known_hosts"
    kh.write_text(key.replace(sbx0.address, "gpu-box.fleet", 1) + "\n")
    text = f"Host gpu-box\n  HostName {sbx0.address}\n  HostKeyAlias gpu-box.fleet\n"
    host = configured(sbx0, tmp_path, text, address="gpu-box", known_hosts=str(kh))
    name, trace = traced(host)
    assert name == "sbx0" and any("for gpu-box.fleet matched" in t for t in trace)
    kh.write_text(key + "\n")  # the same key under the address only: the alias is not vouched for
    with pytest.raises(ConnectError, match="host key unknown .no entry for gpu-box.fleet"):
        sh(host, "true")


def test_proxyjump_chain_of_two_hops_from_an_included_file(sandbox_inventory, tmp_path, home):
    sbx0, sbx1, sbx2 = (sandbox_inventory.hosts[n] for n in ("sbx0", "sbx1", "sbx2"))
    (home / ".ssh/fleet.d").mkdir()
    (home / ".ssh/fleet.d/hops.conf").write_text(
        f"Host edge\n  HostName {sbx0.address}\n  IdentityFile {sbx0.identity_file}\n"
        f"Host inner\n  HostName {sbx1.address}\n  IdentityFile {sbx1.identity_file}\n")
    text = (f"Include fleet.d/*.conf\nHost gpu\n  HostName {sbx2.address}\n  ProxyJump edge,inner\n"
            f"Host *\n  User root\n")
    host = configured(sbx2, tmp_path, text, address="gpu")
    out = sh(host, "hostname; echo $SSH_CLIENT").stdout.split()
    assert out[0] == "sbx2" and out[1] == sbx1.address  # it arrived from the second hop
    _, trace = traced(host)
    roles = [t.split(":")[0] for t in trace if "@" in t.split(": ", 1)[1][:40] and "(" in t]
    assert roles[:3] == ["jump host 1", "jump host 2", "target"]


def test_proxycommand_ssh_w_is_a_hop_under_the_guard_and_any_other_is_refused_before_a_packet(
        sandbox_inventory, tmp_path, home):
    sbx0, sbx2 = sandbox_inventory.hosts["sbx0"], sandbox_inventory.hosts["sbx2"]
    text = (f"Host relay\n  HostName {sbx0.address}\n  IdentityFile {sbx0.identity_file}\n"
            f"Host gpu\n  HostName {sbx2.address}\n  ProxyCommand ssh -q -W %h:%p root@relay\n"
            f"Host other\n  HostName {sbx2.address}\n  ProxyCommand nc %h %p\n")
    host = configured(sbx2, tmp_path, text, address="gpu")
    out = sh(host, "hostname; echo $SSH_CLIENT").stdout.split()
    assert out[0] == "sbx2" and out[1] == sbx0.address
    with recording_connects() as connects, pytest.raises(InputError) as err:
        open_connection(dataclasses.replace(host, address="other"))
    assert connects == [] and len(str(err.value).splitlines()) == 1
    assert "ProxyCommand 'nc " in str(err.value) and "only the `ssh -W %h:%p HOST` form" in str(err.value)


def test_proxycommand_is_run_as_written_outside_the_guard(sandbox_inventory, tmp_path, home, monkeypatch):
    sbx0, sbx2 = sandbox_inventory.hosts["sbx0"], sandbox_inventory.hosts["sbx2"]
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "0")  # every address below is a sandbox host's
    marker = tmp_path / "proxy-ran"
    relay = (f"ssh -i {sbx0.identity_file} -o BatchMode=yes -o StrictHostKeyChecking=yes "
             f"-o UserKnownHostsFile={sbx0.known_hosts} -W %h:%p root@{sbx0.address}")
    text = f"Host gpu\n  HostName {sbx2.address}\n  ProxyCommand touch {marker}; exec {relay}\n"
    host = configured(sbx2, tmp_path, text, address="gpu")
    out = sh(host, "hostname; echo $SSH_CLIENT").stdout.split()
    assert out[0] == "sbx2" and out[1] == sbx0.address and marker.exists()


def test_match_exec_is_refused_under_the_guard_before_it_runs(sandbox_inventory, tmp_path, home):
    sbx0 = sandbox_inventory.hosts["sbx0"]
    marker = tmp_path / "exec-ran"
    host = configured(sbx0, tmp_path, f"Match exec \"touch {marker}\"\n  User nobody\n")
    with recording_connects() as connects, pytest.raises(InputError, match=r"ssh_config:1: 'Match exec .* refused"):
        open_connection(host)
    assert connects == [] and not marker.exists()


def test_each_name_is_resolved_once_and_the_connection_goes_to_that_address(sandbox_inventory, tmp_path, home):
    sbx0 = sandbox_inventory.hosts["sbx0"]
    key = next(x for x in Path(sbx0.known_hosts).read_text().splitlines() if x.startswith(f"{sbx0.address} "))
    kh = tmp_path / "known_hosts"
    kh.write_text(key + "\n" + key.replace(sbx0.address, "self.fleet", 1) + "\n")
    # through sbx0 to "localhost": fleet resolves the name here, once, and asks the jump host for that address
    text = (f"Host gpu\n  HostName localhost\n  HostKeyAlias self.fleet\n  ProxyJump root@{sbx0.address}\n"
            f"Host *\n  IdentityFile {sbx0.identity_file}\n")
    host = configured(sbx0, tmp_path, text, address="gpu", known_hosts=str(kh))
    with recording_connects() as connects:
        name, trace = traced(host, "hostname; echo $SSH_CLIENT")
    assert lookups().count("localhost") == 1
    pinned = next(t for t in trace if t.startswith("target: root@localhost:22")).split("pinned to ")[1].split(",")[0]
    assert name.split()[0] == "sbx0" and name.split()[1] == pinned
    assert [c[0] for c in connects] == [sbx0.address]  # the only socket opened here is to the jump host


def test_inv_probe_verbose_says_how_each_host_was_reached(sandbox, sandbox_inventory):
    proc = inv(sandbox, "probe", "--host", "sbx0", "-v", "--wide")  # each line whole, as grep wants it
    assert proc.returncode == 0, proc.stderr
    sbx0 = sandbox_inventory.hosts["sbx0"]
    lines = [x for x in proc.stdout.splitlines() if x.startswith("sbx0: ")]
    assert f"sbx0: target: root@{sbx0.address}:22 (pinned to {sbx0.address})" in lines
    assert any(x.startswith("sbx0: target: host key ssh-ed25519 SHA256:") and f"matched {sbx0.known_hosts}:" in x
               for x in lines)
    assert f"sbx0: target: identity {sbx0.identity_file}: accepted" in lines
    _, data, _ = inv_json(sandbox, "probe", "--host", "sbx0")
    assert data["hosts"][0]["connection"] == [x.removeprefix("sbx0: ") for x in lines]
    assert os.environ.get("FLEET_SANDBOX_ONLY") == "1"


def test_targets_behind_one_jump_host_share_one_connection_to_it(sandbox, sandbox_inventory, tmp_path, home):
    sbx0 = sandbox_inventory.hosts["sbx0"]
    targets = [dataclasses.replace(sandbox_inventory.hosts[n], proxy_jump=f"root@{sbx0.address}")
               for n in ("sbx1", "sbx2", "sbx3")]
    with recording_connects() as connects:
        conns = [open_connection(t) for t in targets]
        try:
            assert [run(c, t, "hostname").stdout.strip() for c, t in zip(conns, targets, strict=True)] == [
                "sbx1", "sbx2", "sbx3"]
            conns.pop(0).close()  # the others keep the jump host
            assert run(conns[0], targets[1], "echo $SSH_CLIENT").stdout.split()[0] == sbx0.address
        finally:
            for c in conns:
                c.close()
    assert [c[0] for c in connects] == [sbx0.address]  # one handshake with the jump host for three targets
    assert not connect_module._shared  # closed with its last user
    # the same through `inv exec`, in parallel: the jump host's sshd accepts fleet once
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    doc["hosts"] = {t.name: {**doc["hosts"][t.name], "proxy_jump": f"root@{sbx0.address}"} for t in targets}
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv/hosts.yaml").write_text(yaml.safe_dump(doc))
    since = sh(sbx0, "date +%s.%N").stdout.strip()
    proc = inv_at(tmp_path / "inv/hosts.yaml", "exec", "--all", "--yes", "--cmd", "hostname", "--json")
    assert proc.returncode == 0, proc.stderr
    accepted = sh(sbx0, f"journalctl -q -o cat --since @{since} _COMM=sshd | grep -c '^Accepted publickey'").stdout
    assert accepted.strip() == "2"  # fleet's shared jump connection, and this check's own
