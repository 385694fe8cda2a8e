"""fleet.ssh.known_hosts: OpenSSH's known_hosts format, markers included, parsed without a host."""

from __future__ import annotations

import subprocess

import paramiko
import pytest

from fleet.ssh import known_hosts as knownhosts


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


def test_the_index_answers_as_a_scan_of_every_line_in_file_order(keys):
    """keys_for and where look only at the lines that may match (literal names by name, patterns and hashed
    names always): the answers, first line of each type first, are those of matching every line."""
    a, b = keys
    hashed = paramiko.HostKeys.hash_host("h3")
    lines = [f"10.0.0.*,!10.0.0.9 {b}", f"h1,h2 {a}", f"h1 {b}", f"{hashed} {b}", f"h3 {a}", f"[h4]:2222 {a}",
             f"h4 {b}", f"* {a}", f"@revoked h5 {b}", f"h5 {b}", f"h5,h6 {a}"]
    known = knownhosts.parse("\n".join(lines) + "\n")

    def by_scan(host: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for e in known.entries:
            kind = e.key.get_name()
            if kind not in found and knownhosts.matches(e.patterns, host) and known.revoked(host, e.key) is None:
                found[kind] = e.where
        return found

    for host in ("h1", "h2", "h3", "[h4]:2222", "h4", "h5", "h6", "10.0.0.1", "10.0.0.9", "nowhere"):
        got = known.keys_for(host)
        expected = by_scan(host)
        assert {k: known.where(host, v) for k, v in got.items()} == expected, host
    assert known.where("h1", _pkey(a)) == "known_hosts:2" and known.where("h3", _pkey(b)) == "known_hosts:4"
    assert known.where("10.0.0.9", _pkey(b)) is None  # negated in line 1; the catch-all has key a


def test_the_same_files_give_one_combined_object_until_one_changes(tmp_path, keys):
    user, system = tmp_path / "known_hosts", tmp_path / "ssh_known_hosts"
    user.write_text(f"h1 {keys[0]}\n")
    system.write_text(f"h2 {keys[1]}\n")
    both = knownhosts.load_all([user, system])
    assert knownhosts.load_all([user, system]) is both and both.keys_for("h2")
    system.write_text(f"h2 {keys[1]}\nh3 {keys[0]}\n")
    again = knownhosts.load_all([user, system])
    assert again is not both and again.keys_for("h3") and not both.keys_for("h3")
