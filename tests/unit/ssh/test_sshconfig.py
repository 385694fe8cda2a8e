"""fleet.ssh.config against the reference: for each ssh_config case, what fleet resolves equals what OpenSSH's own
`ssh -G` prints for the same file (no network: -G only evaluates the configuration)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.errors import InputError
from fleet.ssh import config as sshconfig


@pytest.fixture(autouse=True)
def _ssh():
    """OpenSSH's own `ssh -G` is the reference: without it these tests fail, never skip."""
    if shutil.which("ssh") is None:
        pytest.fail("OpenSSH's ssh is needed (Debian: openssh-client); bootstrap.sh installs it")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def ssh_g(cfg: Path, alias: str) -> dict[str, list[str]]:
    """`ssh -G`'s answer; its `~` is the passwd home, fleet's is $HOME (the tests' own), so that one prefix is
    mapped, and nothing else."""
    out = subprocess.run(["ssh", "-G", "-F", str(cfg), alias], capture_output=True, text=True, check=True).stdout
    got: dict[str, list[str]] = {}
    pw_home = pwd.getpwuid(os.getuid()).pw_dir
    for line in out.replace(f"{pw_home}/.ssh/", "~/.ssh/").splitlines():
        key, _, value = line.partition(" ")
        got.setdefault(key, []).append(value)
    return got


def check_against_ssh(cfg: Path, alias: str) -> sshconfig.Endpoint:
    """fleet's endpoint for alias, asserted equal to `ssh -G` field by field."""
    ep = sshconfig.endpoint(sshconfig.load(str(cfg), "test"), alias)
    ref = ssh_g(cfg, alias)
    assert ep.hostname == ref["hostname"][0]
    assert ep.port == int(ref["port"][0])
    if "user" in ref and ref["user"][0] != subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip():
        assert ep.user == ref["user"][0]
    assert list(ep.identity_files) == [os.path.expanduser(p) for p in ref["identityfile"]
                                       if "xmss" not in p and not p.endswith("id_dsa")]
    assert ep.identities_only == (ref["identitiesonly"][0] == "yes")
    assert ep.host_key_alias == (ref["hostkeyalias"][0] if "hostkeyalias" in ref else None)
    assert list(ep.user_known_hosts) == [os.path.expanduser(p) for p in ref["userknownhostsfile"][0].split()]
    assert list(ep.global_known_hosts) == ref["globalknownhostsfile"][0].split()
    jump = ref.get("proxyjump", [None])[0]
    if jump:  # ssh -G prints the chain as written; fleet's last hops are its elements, in order
        written = [sshconfig.parse_jump(e) for e in jump.split(",")]
        assert [(h.alias, h.port) for h in ep.hops[-len(written):]] == [(a, p or 22) for _, a, p in written]
    command = ref.get("proxycommand", [None])[0]  # ssh -G prints it before expanding %h and %p
    assert ep.proxy_command == (command and command.replace("%h", ep.hostname).replace("%p", str(ep.port)))
    return ep


CASES = {
    "host patterns, first value wins, defaults at the end": """
Host gpu-*
  User ops
  Port 2200
Host gpu-1
  HostName 10.9.0.1
  User ignored
Host *
  IdentityFile ~/.ssh/fleet_key
  IdentityFile ~/.ssh/other_key
""",
    "no IdentityFile: the defaults, in order": """
Host gpu-1
  HostName 10.9.0.1
  User root
""",
    "Match host and Match user": """
Match host gpu-1 user root
  Port 2222
Match host gpu-*
  HostName 10.9.0.77
  User root
  IdentitiesOnly yes
  IdentityFile ~/.ssh/gpu_key
""",
    "HostKeyAlias and known_hosts files": """
Host gpu-1
  HostName 10.9.0.1
  User root
  HostKeyAlias gpu-1.fleet
  UserKnownHostsFile ~/.ssh/kh_a ~/.ssh/kh_b
  GlobalKnownHostsFile /etc/ssh/fleet_known_hosts
""",
    "ProxyCommand": """
Host gpu-1
  HostName 10.9.0.1
  User root
  ProxyCommand nc -X connect -x proxy:3128 %h %p
""",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fleet_resolves_what_ssh_G_prints(case, home, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text(CASES[case])
    check_against_ssh(cfg, "gpu-1")


def test_include_globs_relative_to_dot_ssh_and_a_host_block_ends_with_its_file(home, tmp_path):
    (home / ".ssh/conf.d").mkdir()
    (home / ".ssh/conf.d/10-gpu.conf").write_text("Host gpu-1\n  HostName 10.9.0.1\n  Port 2201\n")
    (home / ".ssh/conf.d/20-other.conf").write_text("Host other\n  HostName 10.9.0.9\n")
    cfg = tmp_path / "config"
    # the User line after the Include belongs to "Host gpu-*" again, not to the included file's "Host other"
    cfg.write_text("Host gpu-*\n  Include conf.d/*.conf\n  User ops\nHost *\n  User root\n")
    ep = check_against_ssh(cfg, "gpu-1")
    assert (ep.hostname, ep.port, ep.user) == ("10.9.0.1", 2201, "ops")
    assert sshconfig.load(str(cfg), "t").files[1:] == (str(home / ".ssh/conf.d/10-gpu.conf"),
                                                       str(home / ".ssh/conf.d/20-other.conf"))


def test_an_include_loop_is_one_line_naming_the_file(home, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text(f"Include {cfg}\n")
    with pytest.raises(InputError, match=r"config: Include nested more than 16 deep"):
        sshconfig.load(str(cfg), "t")


def test_proxyjump_chain_of_two_hops_each_looked_up_as_its_own_host(home, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text("""
Host gpu-1
  HostName 10.9.0.1
  ProxyJump ops@bastion:2222,pve
Host bastion
  HostName 10.9.0.250
  IdentityFile ~/.ssh/bastion_key
Host pve
  HostName 10.9.0.2
  User jump
  ProxyJump elsewhere
""")
    ep = check_against_ssh(cfg, "gpu-1")
    # ssh -J a,b connects to b through a, so b's own ProxyJump is overridden by the chain
    assert [(h.hostname, h.user, h.port) for h in ep.hops] == [("10.9.0.250", "ops", 2222), ("10.9.0.2", "jump", 22)]
    assert ep.hops[0].identity_files == (str(home / ".ssh/bastion_key"),)
    # a jump host with its own ProxyJump: that one is followed too (as `ssh -W` through it would)
    cfg.write_text("Host gpu-1\n  HostName 10.9.0.1\n  ProxyJump pve\nHost pve\n  HostName 10.9.0.2\n"
                   "  ProxyJump bastion\nHost bastion\n  HostName 10.9.0.250\n")
    ep = sshconfig.endpoint(sshconfig.load(str(cfg), "t"), "gpu-1")
    assert [h.hostname for h in ep.hops] == ["10.9.0.250", "10.9.0.2"]


def test_a_proxyjump_loop_is_refused(home, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text("Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n")
    with pytest.raises(InputError, match=r"more than 8 ProxyJump hops"):
        sshconfig.endpoint(sshconfig.load(str(cfg), "t"), "a")


def test_match_exec_and_canonicalize_are_found_with_file_and_line_before_any_lookup(home, tmp_path):
    marker = tmp_path / "ran"
    cfg = tmp_path / "config"
    cfg.write_text(f"Host gpu-1\n  HostName 10.9.0.1\nMatch exec \"touch {marker}\"\n  User x\n")
    loaded = sshconfig.load(str(cfg), "t")
    with pytest.raises(InputError, match=rf"^h: {cfg}:3: 'Match exec \"touch .*' refused: FLEET_SANDBOX_ONLY=1"):
        loaded.refuse_risky("h")
    assert not marker.exists()  # found by reading the text; paramiko did not evaluate it
    cfg.write_text("CanonicalizeHostname always\nCanonicalDomains corp\n")
    with pytest.raises(InputError, match=r"config:1: 'CanonicalizeHostname always' refused"):
        sshconfig.load(str(cfg), "t").refuse_risky("h")
    cfg.write_text("CanonicalizeHostname no\nMatch host x\n  User y\n")
    sshconfig.load(str(cfg), "t").refuse_risky("h")


def test_proxycommand_under_the_guard_only_as_ssh_dash_w(home, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text("Host gpu-1\n  HostName 10.9.0.1\n  ProxyCommand ssh -q -l admin -p 2222 -W %h:%p pve\n"
                   "Host pve\n  HostName 10.9.0.2\n"
                   "Host gpu-2\n  HostName 10.9.0.3\n  ProxyCommand nc %h %p\n"
                   "Host gpu-3\n  HostName 10.9.0.4\n  ProxyCommand ssh -W otherhost:22 pve\n")
    loaded = sshconfig.load(str(cfg), "t")
    ep = sshconfig.endpoint(loaded, "gpu-1", sandbox=True)
    assert ep.proxy_command is None and [(h.hostname, h.user, h.port) for h in ep.hops] == [("10.9.0.2", "admin", 2222)]
    for alias in ("gpu-2", "gpu-3"):  # another command, or a relay to somewhere else than this host
        with pytest.raises(InputError, match=rf"{alias}: ProxyCommand .* refused: under FLEET_SANDBOX_ONLY=1"):
            sshconfig.endpoint(loaded, alias, sandbox=True)
    # outside the guard every form is run as written (and ssh -G agrees on the command)
    assert sshconfig.endpoint(loaded, "gpu-2").proxy_command == "nc 10.9.0.3 22"
    assert sshconfig.endpoint(loaded, "gpu-1").proxy_command == "ssh -q -l admin -p 2222 -W 10.9.0.1:22 pve"


@pytest.mark.parametrize("spec,expected", [("gw", (None, "gw", None)), ("ops@gw:2222", ("ops", "gw", 2222)),
                                           ("[fd00::1]:22", (None, "fd00::1", 22)), ("a@b@gw", ("a@b", "gw", None))])
def test_proxyjump_elements(spec, expected):
    assert sshconfig.parse_jump(spec) == expected


@pytest.mark.parametrize("spec", ["gw:notaport", "gw:0", "@", "[fd00::1]:x"])
def test_bad_proxyjump_elements_are_one_line(spec):
    with pytest.raises(InputError, match="bad ProxyJump element"):
        sshconfig.parse_jump(spec)


def test_a_config_is_read_once_until_a_file_or_an_include_match_changes(home, tmp_path):
    """Every host of a fleet looks the same files up: parsed once, and again as soon as a file read (or what
    an Include glob matches) changes."""
    (home / ".ssh/conf.d").mkdir()
    (home / ".ssh/conf.d/10-a.conf").write_text("Host a\n  HostName 10.9.0.1\n")
    cfg = tmp_path / "config"
    cfg.write_text("Include conf.d/*.conf\nHost *\n  User root\n")
    first = sshconfig.load(str(cfg), "t")
    assert sshconfig.load(str(cfg), "t") is first
    (home / ".ssh/conf.d/20-b.conf").write_text("Host b\n  HostName 10.9.0.2\n")  # a new match of the glob
    second = sshconfig.load(str(cfg), "t")
    assert second is not first and sshconfig.endpoint(second, "b").hostname == "10.9.0.2"
    (home / ".ssh/conf.d/10-a.conf").write_text("Host a\n  HostName 10.9.0.11\n")  # an included file's text
    third = sshconfig.load(str(cfg), "t")
    assert third is not second and sshconfig.endpoint(third, "a").hostname == "10.9.0.11"
    before = sshconfig.load(None, "t")  # the default files, ~/.ssh/config not there yet
    assert sshconfig.load(None, "t") is before and sshconfig.endpoint(before, "c").hostname == "c"
    (home / ".ssh/config").write_text("Host c\n  HostName 10.9.0.3\n")
    assert sshconfig.endpoint(sshconfig.load(None, "t"), "c").hostname == "10.9.0.3"
    (home / ".ssh/config").unlink()
    assert sshconfig.endpoint(sshconfig.load(None, "t"), "c").hostname == "c"


@pytest.mark.parametrize("hostname", ["$(touch /tmp/owned)", "a;id", "-oProxyCommand=id", "a,gpu-node-2", "a b",
                                      "`id`"])
def test_a_host_name_that_a_shell_or_known_hosts_would_read_as_more_is_refused(home, tmp_path, hostname):
    """ProxyCommand's %h goes through `sh -c`; known_hosts reads ',' as a second name (OpenSSH 9.6 refuses
    such names too)."""
    cfg = tmp_path / "config"
    cfg.write_text(f"Host gpu-1\n  HostName {hostname}\n  ProxyCommand nc %h %p\n")
    with pytest.raises(InputError, match=r"gpu-1: host name .* refused"):
        sshconfig.endpoint(sshconfig.load(str(cfg), "t"), "gpu-1")


def test_an_inventory_address_with_a_zone_id_reaches_proxycommand_as_an_interface_name(home, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text("Host *\n  ProxyCommand nc %h %p\n")
    loaded = sshconfig.load(str(cfg), "t")
    assert sshconfig.endpoint(loaded, "fe80::1%eth0").proxy_command == "nc fe80::1%eth0 22"
    assert sshconfig.endpoint(loaded, "::1").proxy_command == "nc ::1 22"
    assert sshconfig.endpoint(loaded, "gpu_node-1.example.org").hostname == "gpu_node-1.example.org"
