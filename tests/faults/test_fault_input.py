"""Hostile and broken input: each is refused with a clear one-line error (exit 2 for bad input, 1 for a host
that refuses us), and nothing changes on any host: every file fleet manages is hashed on every host before
and after (faultkit.managed_digest). Injection that is valid input reaches the server literally, inert."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import subprocess
import time
from pathlib import Path

import paramiko
import pytest
import yaml
from faultkit import PLAIN, fleet_digest_parallel, inventory_file, rung, serving
from fleetcli import inv, inv_at, llama_playbook, sh, write_book

RESULTS: list[tuple[str, str]] = []


@pytest.fixture
def unchanged(sandbox, sandbox_inventory):
    """Asserts, after the test, that no file fleet manages changed on any host."""
    before = fleet_digest_parallel(sandbox_inventory)
    yield
    assert fleet_digest_parallel(sandbox_inventory) == before


def _inventory(sandbox, tmp_path: Path, change) -> Path:
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    text = change(doc)
    path = inventory_file(tmp_path)
    path.write_text(text if isinstance(text, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def _set(key, value):
    def change(doc):
        doc["hosts"]["sbx0"][key] = value
    return change


def _conflict(doc):
    doc["groups"].update({"a": {"venv": "/opt/a"}, "b": {"venv": "/opt/b"}})
    doc["hosts"]["sbx0"]["groups"] = ["a", "b"]


def _drop_address(doc):
    del doc["hosts"]["sbx0"]["address"]


BAD_INVENTORIES = {
    "malformed YAML": (lambda doc: yaml.safe_dump(doc) + "extra: {sbx9: [\n", r"invalid YAML"),
    "unknown key": (_set("colour", "red"), r"hosts\.sbx0\.colour: unknown key"),
    "wrong type": (_set("port", "22"), r"hosts\.sbx0\.port: Input should be a valid integer"),
    "missing address": (_drop_address, r"hosts\.sbx0\.address: required key is missing"),
    "host in two groups with conflicting vars": (_conflict, r"groups a and b set venv differently"),
    "address that is not an address": (
        _set("address", "172.30.75.10; touch /tmp/pwned"),  # not an instance's address
        r"not an IP address or host name"),
    "user with a shell command": (_set("user", "root; rm -rf /"), r"not a valid user"),
    "newline in the unit": (_set("unit", "sglang\nUser=root"), r"hosts\.sbx0\.unit: .*not a systemd unit name"),
    "relative venv": (_set("venv", "ml-env/../.."), r"hosts\.sbx0\.venv: .*absolute path"),
}


@pytest.mark.parametrize("case", list(BAD_INVENTORIES))
def test_a_bad_inventory_is_refused_before_any_host_is_touched(case, sandbox, tmp_path, unchanged):
    change, expected = BAD_INVENTORIES[case]
    book = llama_playbook(tmp_path, PLAIN, name="llama-input")
    proc = inv_at(_inventory(sandbox, tmp_path, change), "deploy", "--host", "sbx0", "--playbook", str(book),
                  "--json")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and re.search(r"hosts\.yaml:\d+: .*" + expected, line), line
    RESULTS.append((f"inventory: {case}", line))


def _book(tmp_path, **extra) -> dict:
    return {"name": "llama-bad", "model": {"path": "/models/Llama-3.1-8B-Instruct"}, "flags": {"tp-size": 2},
            "ladder": [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}], **extra}


BAD_PLAYBOOKS = {
    "malformed YAML": ("name: llama-bad\nmodel: {path: /m\n", r"invalid YAML"),
    "unknown key": (dict(colour="red"), r"colour: unknown key"),
    "wrong type": (dict(budgets={"start": "soon"}), r"budgets\.start: "),
    "missing model": ({"model": None}, r"model: "),
    "newline in a flag value": ({"flags": {"tp-size": 2, "served-model-name": "x\nExecStartPre=/bin/sh"}},
                                r"flags.*newlines"),
    "newline in an env value": ({"ladder": [{"name": "p", "env": {"A": "1\nB=2"}}]}, r"env.*newlines"),
    "shell in an env name": ({"ladder": [{"name": "p", "env": {"A;touch /tmp/pwned": "1"}}]}, r"env"),
    "path traversal as a patch set": ({"ladder": [{"name": "p", "patches": ["../../etc/passwd"]}]}, r"patches"),
    "newline in serve.user": ({"serve": {"user": "root\nExecStartPre=/bin/touch /x"}}, r"serve\.user: .*user name"),
    "newline in the name": ('name: "llama\\nExecStartPre=/bin/sh"\nmodel: {path: /m}\nladder: [{name: p}]\n',
                            r"name: "),
    "newline in serve.unit": ({"serve": {"unit": "sglang\nUser=root"}}, r"serve\.unit: .*unit name"),
    "newline in serve.host": ({"serve": {"host": "0.0.0.0\nx", "api_key": {"env": "K"}}},
                              r"serve\.host: .*not an IP address"),
    "not UTF-8": (b"name: llama-bad\nmodel: {path: /m\xff}\n", r"not UTF-8 text \(byte 0xff\)"),
    "an alias inside itself": ("name: llama-bad\nmodel: {path: /m}\nladder: &a [*a]\n", r"alias refers to"),
    "an alias bomb": ("name: llama-bad\nmodel: {path: /m}\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10) if i else 'x'}]\n" for i in range(7)),
        r"aliases expand to more than"),
    "a list as a key": ("name: llama-bad\nmodel: {path: /m}\n? [a, b]\n: 1\n", r"a key must be a plain value"),
}


@pytest.mark.parametrize("case", list(BAD_PLAYBOOKS))
def test_a_bad_playbook_is_refused_before_any_host_is_touched(case, sandbox, tmp_path, unchanged):
    change, expected = BAD_PLAYBOOKS[case]
    if isinstance(change, str | bytes):
        path = tmp_path / "llama-bad.yaml"
        path.write_bytes(change if isinstance(change, bytes) else change.encode())
    else:
        book = _book(tmp_path)
        book.update(change)
        book = {k: v for k, v in book.items() if v is not None}
        path = write_book(tmp_path, book)
    proc = inv(sandbox, "deploy", "--host", "sbx0", "--host", "sbx1", "--playbook", str(path), "--json", "--yes")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and re.search(r"llama-bad\.yaml:\d+: .*" + expected, line), line
    RESULTS.append((f"playbook: {case}", line))


def test_path_traversal_in_a_patch_set_name_is_refused(sandbox, unchanged):
    proc = inv(sandbox, "patch", "--host", "sbx0", "--set", "../../etc/passwd", "--json")
    assert proc.returncode == 2 and proc.stdout == "" and "--set" in proc.stderr, proc.stderr
    RESULTS.append(("patch: --set ../../etc/passwd", proc.stderr.strip()))


def test_a_patch_target_that_resolves_outside_its_package_is_refused(sandbox, sandbox_inventory):
    site = "/root/ml-env/lib/python3.11/site-packages/sglang/srt/layers"
    # The find text sits in a file outside the package, which the package file now points at.
    sh(sandbox_inventory, "sbx4", f"cp -p {site}/communicator.py /tmp/outside.py && "
                                  f"mv {site}/communicator.py {site}/communicator.py.real && "
                                  f"ln -s /tmp/outside.py {site}/communicator.py")
    try:
        before = fleet_digest_parallel(sandbox_inventory)
        outside = sh(sandbox_inventory, "sbx4", "sha256sum /tmp/outside.py")
        proc = inv(sandbox, "patch", "--host", "sbx4", "--set", "sm120-allreduce-fusion", "--json")
        res = json.loads(proc.stdout)["hosts"][0]
        assert proc.returncode == 1 and "resolves outside the package, to /tmp/outside.py" in res["error"]
        assert fleet_digest_parallel(sandbox_inventory) == before
        assert sh(sandbox_inventory, "sbx4", "sha256sum /tmp/outside.py") == outside
        RESULTS.append(("patch: target symlinked outside its package", res["error"]))
    finally:
        sh(sandbox_inventory, "sbx4", f"mv {site}/communicator.py.real {site}/communicator.py")


HOSTILE = "a;b $(touch /tmp/pwned-1) `touch /tmp/pwned-2` 'q' \"dq\" \\ %h %n 100%"


def test_shell_and_systemd_syntax_in_values_reaches_the_server_literally(sandbox, sandbox_inventory, tmp_path):
    book = llama_playbook(tmp_path, rung("plain", FLEET_HOSTILE=HOSTILE), name="llama-hostile",
                          flags={"tp-size": 2, "served-model-name": HOSTILE})
    proc = inv(sandbox, "deploy", "--host", "sbx3", "--playbook", str(book), "--json", "--force")
    assert proc.returncode == 0, proc.stderr[-3000:]
    unit = sh(sandbox_inventory, "sbx3", "cat /etc/systemd/system/sglang.service")
    env = sh(sandbox_inventory, "sbx3", "cat /etc/fleet/sglang.env")
    assert sum(line.startswith("ExecStart=") for line in unit.splitlines()) == 1
    assert len([line for line in env.splitlines() if line.startswith("FLEET_HOSTILE=")]) == 1
    pid = sh(sandbox_inventory, "sbx3", "systemctl show -p MainPID --value sglang").strip()
    argv = sh(sandbox_inventory, "sbx3", f"cat /proc/{pid}/cmdline").split("\0")
    environ = sh(sandbox_inventory, "sbx3", f"cat /proc/{pid}/environ").split("\0")
    assert argv[argv.index("--served-model-name") + 1] == HOSTILE  # one argument, unexpanded
    assert f"FLEET_HOSTILE={HOSTILE}" in environ
    assert sh(sandbox_inventory, "sbx3", "ls /tmp/pwned* 2>/dev/null; true").strip() == ""
    assert serving(sandbox_inventory, "sbx3")
    RESULTS.append(("flag and env values with ; $() ` quotes \\ %", "deployed; argv and environ literal"))


# ---------------------------------------------------------------------- SSH


def _keyed_inventory(sandbox, tmp_path, **host) -> Path:
    def change(doc):
        doc["hosts"]["sbx2"].update(host)
    return _inventory(sandbox, tmp_path, change)


def _journal_cursor(inventory) -> str:
    out = sh(inventory, "sbx2", "journalctl -q -n 0 --show-cursor --no-pager")
    return out.strip().removeprefix("-- cursor: ")


def _refused_connections(inventory, cursor: str, pattern: str) -> set[str]:
    """The client ports of sshd's refusals matching `pattern` since `cursor`: one port per connection.

    The sandbox's sshd logs at VERBOSE, so every failed attempt is logged while the connection is still
    open (the INFO line sshd writes as the client leaves can be lost in sshd's own exit race); the
    cursor keeps the count true when journald rotates or vacuums between the two reads."""
    out = sh(inventory, "sbx2", f"journalctl -q -o cat --no-pager _COMM=sshd --after-cursor={shlex.quote(cursor)}")
    return {m.group(1) for line in out.splitlines() if pattern in line and (m := re.search(r" port (\d+)", line))}


def test_an_unknown_host_key_is_refused_unless_accepted(sandbox, sandbox_inventory, tmp_path, unchanged):
    known = tmp_path / "empty_known_hosts"
    known.write_text("")
    path = _keyed_inventory(sandbox, tmp_path, known_hosts=str(known))
    book = llama_playbook(tmp_path, PLAIN, name="llama-keys")
    proc = inv_at(path, "deploy", "--host", "sbx2", "--playbook", str(book), "--json")
    err = json.loads(proc.stdout)["error"]
    assert proc.returncode == 1 and "host key unknown" in err and "--accept-new-host-keys" in err
    assert known.read_text() == ""
    ok = inv_at(path, "history", "--host", "sbx2", "--json", "--accept-new-host-keys")
    # first contact, asked for: recorded as ssh records it (hashed where ssh_config says HashKnownHosts yes, as
    # Debian's /etc/ssh/ssh_config does), found by the host's address
    address = sandbox_inventory.hosts["sbx2"].address
    assert ok.returncode == 0 and paramiko.HostKeys(str(known)).lookup(address) is not None, known.read_text()
    RESULTS.append(("ssh: unknown host key", err))


def test_a_changed_host_key_is_refused_with_its_fingerprint(sandbox, sandbox_inventory, tmp_path, unchanged):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "impostor")], check=True)
    address = sandbox_inventory.hosts["sbx2"].address
    known = tmp_path / "known_hosts"
    known.write_text(f"{address} " + " ".join((tmp_path / "impostor.pub").read_text().split()[:2]) + "\n")
    path = _keyed_inventory(sandbox, tmp_path, known_hosts=str(known))
    book = llama_playbook(tmp_path, PLAIN, name="llama-keys")
    # the fingerprint the host really offers, as OpenSSH's own ssh-keygen prints it
    listed = subprocess.run(["ssh-keygen", "-l", "-F", address, "-f", str(sandbox.cfg.known_hosts)],
                            capture_output=True, text=True, check=True).stdout
    real = re.search(r"SHA256:\S+", listed).group(0)
    for extra in ([], ["--accept-new-host-keys"]):
        proc = inv_at(path, "deploy", "--host", "sbx2", "--playbook", str(book), "--json", *extra)
        err = json.loads(proc.stdout)["error"]
        assert proc.returncode == 1 and "host key CHANGED" in err and f"offered ssh-ed25519 {real}" in err
    RESULTS.append(("ssh: changed host key", err))


@pytest.mark.parametrize("who", ["wrong user", "wrong key"])
def test_a_wrong_user_or_key_fails_once_without_a_retry_storm(who, sandbox, sandbox_inventory, tmp_path, unchanged):
    if who == "wrong user":
        change, pattern = {"user": "nosuchuser"}, "Invalid user nosuchuser from"
    else:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
        change, pattern = {"identity_file": str(tmp_path / "stranger")}, "Failed publickey for root from"
    cursor = _journal_cursor(sandbox_inventory)
    path = _keyed_inventory(sandbox, tmp_path, **change)
    proc = inv_at(path, "deploy", "--host", "sbx2", "--playbook", str(llama_playbook(tmp_path, PLAIN)), "--json")
    err = json.loads(proc.stdout)["error"]
    assert proc.returncode == 1 and "authentication failed for user" in err
    # journald stores sshd's line a moment after the refusal: wait for it (any retry came before inv exited)
    deadline = time.monotonic() + 30
    while not (ports := _refused_connections(sandbox_inventory, cursor, pattern)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(ports) == 1, ports  # one connection, no retries
    RESULTS.append((f"ssh: {who}", err))


# ---------------------------------------------------------------------- secrets


def test_a_secret_by_reference_lives_only_in_0600_files_on_the_host(sandbox, sandbox_inventory, tmp_path):
    key = "sk-fault-" + secrets.token_hex(12)
    serve = {"host": "0.0.0.0", "api_key": {"env": "FLEET_FAULT_KEY"}}
    good = llama_playbook(tmp_path, PLAIN, name="llama-secret", serve=serve)
    doomed = llama_playbook(tmp_path, [{"name": "greedy", "flags": {"mem-fraction-static": 0.99}}],
                            name="llama-secret-doomed", serve=serve)
    said = []
    for book in (good, doomed):  # one that serves, one that fails and rolls back
        proc = inv(sandbox, "deploy", "--host", "sbx1", "--playbook", str(book), "--json", "--force",
                   env={"FLEET_FAULT_KEY": key})
        said += [proc.stdout, proc.stderr]
    for args in (["history", "--host", "sbx1", "--json"], ["status", "--host", "sbx1", "--json"],
                 ["logs", "--host", "sbx1", "--since", "1h", "--json"], ["deploy", "--host", "sbx1", "--playbook",
                 str(good), "--json", "--dry-run"]):
        proc = inv(sandbox, *args, env={"FLEET_FAULT_KEY": key})
        said += [proc.stdout, proc.stderr]
    assert [line for s in said for line in s.splitlines() if key in line] == []
    holders = sh(sandbox_inventory, "sbx1", f"grep -rl {key} /etc /var/lib/fleet /tmp /root 2>/dev/null; true").split()
    modes = {p: sh(sandbox_inventory, "sbx1", f"stat -c %a {p}").strip() for p in holders}
    assert holders == ["/etc/fleet/sglang.key"] and modes == {"/etc/fleet/sglang.key": "600"}, modes  # no release
    manifests = sh(sandbox_inventory, "sbx1", "cat /var/lib/fleet/releases/*/manifest.json "
                                              "/var/lib/fleet/releases/*/events.jsonl")
    assert key not in manifests and "LoadCredential=api-key:/etc/fleet/sglang.key" in sh(
        sandbox_inventory, "sbx1", "cat /etc/systemd/system/sglang.service")
    RESULTS.append(("secret by reference", f"only in {len(holders)} 0600 files: " + ", ".join(sorted(holders))))


@pytest.mark.parametrize("content,expected", [
    (b"   \n", r"serve\.api_key\.file: .*holds no key"),
    (b"\xff\xfe-key\n", r"serve\.api_key\.file: .*not UTF-8"),
    (b"two words\n", r"serve\.api_key\.file: .*spaces or control characters"),
])
def test_a_blank_or_garbled_api_key_is_refused_before_any_host_is_touched(content, expected, sandbox, tmp_path,
                                                                          unchanged):
    key_file = tmp_path / "key"
    key_file.write_bytes(content)
    key_file.chmod(0o600)
    book = llama_playbook(tmp_path, PLAIN, name="llama-blank-key",
                          serve={"host": "0.0.0.0", "api_key": {"file": str(key_file)}})
    proc = inv(sandbox, "deploy", "--host", "sbx0", "--playbook", str(book), "--json")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and re.search(expected, line), line
    RESULTS.append((f"api key file: {content[:12]!r}", line))


def test_a_unit_systemd_rejects_stops_nothing_and_the_ladder_goes_on(sandbox, sandbox_inventory, tmp_path):
    """A unit the host's systemd refuses (`systemd-analyze verify`) though preflight passed (a venv on a noexec
    mount, a policy: here the host's systemd-analyze says so, a wrapper first on root's PATH, in systemd 252's words;
    a venv whose bin/python is a folder is refused at preflight now, by the owner rule): each rung is INSTALL_FAILED
    before anything is stopped, and the server that was running keeps running, unit and env untouched."""
    good = llama_playbook(tmp_path, PLAIN, name="llama-verify")
    proc = inv(sandbox, "deploy", "--host", "sbx3", "--playbook", str(good), "--json", "--force")
    assert proc.returncode == 0, proc.stderr[-2000:]
    before = sh(sandbox_inventory, "sbx3", "sha256sum /etc/systemd/system/sglang.service /etc/fleet/sglang.env; "
                                           "systemctl show sglang -p MainPID -p ActiveState")
    typo = llama_playbook(tmp_path, [*rung("first"), *rung("second")], name="llama-verify-typo")
    wrapper = "/usr/local/sbin/systemd-analyze"
    sh(sandbox_inventory, "sbx3", f"printf '%s\\n' '#!/bin/sh' 'if [ \"$1\" = verify ]; then echo \"${{2##*/}}: "
                                  "Command /root/ml-env/bin/python is not executable: Permission denied\" >&2; exit 1; "
                                  f"fi' 'exec /usr/bin/systemd-analyze \"$@\"' > {wrapper} && chmod 755 {wrapper}")
    try:
        proc = inv(sandbox, "deploy", "--host", "sbx3", "--playbook", str(typo), "--json", "--force")
    finally:
        sh(sandbox_inventory, "sbx3", f"rm -f {wrapper}")
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and [a["outcome"] for a in data["attempts"]] == ["INSTALL_FAILED"] * 2, data
    assert all("systemd-analyze verify rejects the unit" in a["evidence"] and "/root/ml-env/bin/python" in
               a["evidence"] for a in data["attempts"])
    after = sh(sandbox_inventory, "sbx3", "sha256sum /etc/systemd/system/sglang.service /etc/fleet/sglang.env; "
                                          "systemctl show sglang -p MainPID -p ActiveState")
    assert after == before and "ActiveState=active" in after
    assert serving(sandbox_inventory, "sbx3")
    RESULTS.append(("unit systemd refuses", data["attempts"][0]["evidence"][:160]))
