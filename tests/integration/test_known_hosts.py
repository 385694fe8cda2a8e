"""known_hosts the way operators have them, against the sandbox's real sshd: hashed entries (Debian's and
Ubuntu's HashKnownHosts yes), @revoked keys, @cert-authority lines; paramiko alone raises InvalidHostKey on
the markers."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest
from sshutil import sh

from fleet.errors import ConnectError
from fleet.ssh.connect import ConnectOptions


def _real_line(host) -> str:
    return next(line for line in Path(host.known_hosts).read_text().splitlines()
                if line.split()[0] == host.address)


def _with(host, tmp_path: Path, text: str):
    path = tmp_path / "known_hosts"
    path.write_text(text)
    return dataclasses.replace(host, known_hosts=str(path)), path


def test_hashed_entries_are_matched(sandbox_inventory, tmp_path):
    host = sandbox_inventory.hosts["sbx1"]
    hashed, path = _with(host, tmp_path, _real_line(host) + "\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(path)], check=True, capture_output=True)
    assert host.address not in path.read_text() and path.read_text().startswith("|1|")  # really hashed
    assert sh(hashed, "hostname").stdout == "sbx1\n"


@pytest.mark.parametrize("accept_new", [False, True])
def test_a_revoked_key_is_refused_before_anything_else(sandbox_inventory, tmp_path, accept_new):
    host = sandbox_inventory.hosts["sbx1"]
    line = _real_line(host)
    key = " ".join(line.split()[1:3])
    revoked, path = _with(host, tmp_path, f"# ours\n{line}\n@revoked * {key}\n")
    before = path.read_text()
    with pytest.raises(ConnectError) as caught:
        sh(revoked, "true", ConnectOptions(accept_new_host_keys=accept_new))
    message = str(caught.value)
    assert f"is marked @revoked in {path}:3: refusing" in message and "\n" not in message
    assert path.read_text() == before  # never recorded, even on first contact


def test_a_host_only_a_cert_authority_vouches_for_gets_one_line(sandbox_inventory, tmp_path):
    host = sandbox_inventory.hosts["sbx1"]
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "ca")], check=True)
    ca = " ".join((tmp_path / "ca.pub").read_text().split()[:2])
    only_ca, path = _with(host, tmp_path, f"@cert-authority 172.30.*,!10.* {ca}\n")
    with pytest.raises(ConnectError, match=rf"only a @cert-authority line \({path}:1\) vouches for this host, "
                                           "and fleet does not verify host certificates"):
        sh(only_ca, "true")


def test_marker_lines_beside_the_host_entry_change_nothing(sandbox_inventory, tmp_path):
    host = sandbox_inventory.hosts["sbx1"]
    other = _real_line(sandbox_inventory.hosts["sbx0"])
    text = (f"@cert-authority *.example.org {' '.join(other.split()[1:3])}\n"
            f"@revoked 10.9.9.9 {' '.join(other.split()[1:3])}\n"
            "not a valid line at all\n"
            f"{_real_line(host)}\n")
    mixed, _ = _with(host, tmp_path, text)
    assert sh(mixed, "hostname").stdout == "sbx1\n"


def test_ssh_itself_reads_the_same_files_the_same_way(sandbox_inventory, tmp_path, sandbox):
    """The reference: OpenSSH's client refuses the revoked key and accepts the hashed entry, as fleet does."""
    if shutil.which("ssh") is None:  # bootstrap.sh installs openssh-client: its absence is a broken setup
        pytest.fail("no OpenSSH client (ssh): run ./bootstrap.sh")
    host = sandbox_inventory.hosts["sbx1"]
    line = _real_line(host)
    key = " ".join(line.split()[1:3])
    _, revoked = _with(host, tmp_path, f"{line}\n@revoked * {key}\n")
    base = ["ssh", "-i", str(sandbox.cfg.identity_file), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", "GlobalKnownHostsFile=/dev/null", f"root@{host.address}", "hostname"]
    refused = subprocess.run([*base[:1], "-o", f"UserKnownHostsFile={revoked}", *base[1:]], capture_output=True,
                             text=True, timeout=30)
    assert refused.returncode == 255 and "REVOKED" in refused.stderr.upper()
