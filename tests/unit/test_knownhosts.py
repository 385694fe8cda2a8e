"""fleet.knownhosts: OpenSSH's known_hosts format, markers included, parsed without a host."""

from __future__ import annotations

import subprocess

import paramiko
import pytest

from fleet import knownhosts


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> list[str]:
    """Two real ed25519 public keys as "KEYTYPE BASE64"."""
    out = []
    for name in ("a", "b"):
        path = tmp_path_factory.mktemp("k") / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
        out.append(" ".join(path.with_suffix(".pub").read_text().split()[:2]))
    return out


def _pkey(line: str) -> paramiko.PKey:
    kind, data = line.split()
    return paramiko.PKey.from_type_string(kind, __import__("base64").b64decode(data))


def test_markers_plain_hashed_and_port_entries(keys):
    a, b = keys
    hashed = paramiko.HostKeys.hash_host("10.0.0.7")
    text = (f"# comment\n\n10.0.0.1,web1 {a}\n[10.0.0.2]:2222 {b}\n{hashed} {a}\n"
            f"@revoked * {b}\n@cert-authority *.corp,!bad.corp {a}\n@future-marker x {a}\ngarbage line\n")
    known = knownhosts.parse(text)
    assert set(known.keys_for("10.0.0.1")) == {"ssh-ed25519"} and known.keys_for("web1")
    assert known.keys_for("10.0.0.7")  # the hashed name
    assert known.keys_for("[10.0.0.2]:2222") == {}  # b is revoked everywhere: it is never offered as known
    assert known.revoked("[10.0.0.2]:2222", _pkey(b)) == "known_hosts:6" and known.revoked("10.0.0.1", _pkey(a)) is None
    assert known.authority_for("gpu1.corp") == "known_hosts:7" and known.authority_for("bad.corp") is None
    assert known.authority_for("10.0.0.1") is None


@pytest.mark.parametrize("patterns,host,expected", [
    (("10.0.0.*",), "10.0.0.9", True),
    (("10.0.0.?",), "10.0.0.19", False),
    (("*", "!10.0.0.1"), "10.0.0.1", False),
    (("gpu*", "!gpu9"), "gpu1", True),
    (("[gpu1]:2222",), "[gpu1]:2222", True),
])
def test_patterns_match_as_openssh_matches_them(patterns, host, expected):
    assert knownhosts.matches(patterns, host) is expected


def test_a_hashed_pattern_matches_only_its_host():
    hashed = paramiko.HostKeys.hash_host("gpu1")
    assert knownhosts.matches((hashed,), "gpu1") and not knownhosts.matches((hashed,), "gpu2")


def test_load_reads_a_file_once_per_content(tmp_path, keys):
    path = tmp_path / "known_hosts"
    path.write_text(f"h1 {keys[0]}\n")
    first = knownhosts.load(path)
    assert knownhosts.load(path) is first
    path.write_text(f"h1 {keys[0]}\nh2 {keys[1]}\n")
    assert knownhosts.load(path).keys_for("h2") and knownhosts.load(tmp_path / "none").keys_for("h1") == {}
