"""The host lock (fleet.host.lock): taken over only on positive evidence that its owner is dead, and removed by
`inv unlock --token` only for the exact token. The lock's shell runs here, against a temporary folder."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
from pathlib import Path

import pytest

from fleet.errors import InputError
from fleet.host import lock as hostlock
from fleet.inventory import Host
from fleet.ssh.remote import CommandResult

DEAD_PID = 2 ** 22 + 7


def _owner(**changes) -> hostlock.LockOwner:
    return dataclasses.replace(hostlock.LockOwner.mine("deploy x"), owner="me@" + socket.gethostname(), **changes)


def test_a_live_owner_on_a_clone_with_the_same_host_name_is_never_judged_dead():
    # Cloned images share a host name and often a missing machine id: another boot id proves nothing then.
    assert hostlock.dead_owner(_owner(machine_id=None, boot_id="another-boot")) is None
    assert hostlock.dead_owner(_owner(machine_id=None, pid=DEAD_PID)) is None
    assert hostlock.dead_owner(_owner(machine_id="", boot_id="another-boot", pid=DEAD_PID)) is None
    assert hostlock.dead_owner(_owner(machine_id="f" * 32, boot_id="another-boot", pid=DEAD_PID)) is None


def test_an_owner_of_this_machine_is_dead_after_a_reboot_or_when_its_pid_is_gone_or_reused():
    # No skip: without a machine id and a boot id no dead lock is ever taken over here, and the sandbox lock
    # tests would fail for that reason; say so first.
    assert hostlock._read_id("/etc/machine-id") and hostlock._read_id("/proc/sys/kernel/random/boot_id"), \
        "this machine has no /etc/machine-id or boot id: fleet never takes over a dead lock on it"
    assert hostlock.dead_owner(_owner()) is None  # this very process
    assert "has rebooted since" in hostlock.dead_owner(_owner(boot_id="an-earlier-boot"))
    assert "no longer running" in hostlock.dead_owner(_owner(pid=DEAD_PID))
    assert "now another process" in hostlock.dead_owner(_owner(pid_start=1))
    assert hostlock.dead_owner(_owner(boot_id=None, pid=DEAD_PID)) is None  # no boot id: no judging a pid
    assert hostlock.dead_owner(_owner(pid=0)) is None and hostlock.dead_owner(_owner(pid=-1)) is None


@pytest.fixture
def lock_dir(tmp_path, monkeypatch) -> Path:
    """The lock under a temporary folder, its commands run by sh here instead of on a host."""
    folder = tmp_path / "var-lib-fleet" / "lock"
    monkeypatch.setattr(hostlock, "LOCK_DIR", str(folder))

    def run(conn, host, command, timeout=None):
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)
        return CommandResult(command, done.returncode, done.stdout, done.stderr)

    monkeypatch.setattr(hostlock.remote, "run", run)
    return folder


HOST = Host(name="h1", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("x.yaml"))


def test_unlock_removes_the_lock_only_for_its_exact_token(lock_dir):
    lock = hostlock.acquire(None, HOST, "deploy x")
    owner = json.loads((lock_dir / "owner.json").read_text())
    assert owner["token"] == lock.token
    # owner.json keeps its keys in the order fleet has always written them (hosts' files stay byte-identical)
    assert list(owner) == ["owner", "machine", "machine_id", "boot_id", "pid", "pid_start", "purpose", "time",
                           "epoch", "token"]
    assert (lock_dir / "owner.json").read_text() == json.dumps(lock.owner.to_json()) + "\n"
    for wrong in ("a", "root", lock.token[:-1], lock.token[1:], lock.token.upper(), "deploy", "me",
                  str(owner["pid"])):
        with pytest.raises(hostlock.HostLockError, match="does not carry token"):
            hostlock.break_lock(None, HOST, wrong)
        assert (lock_dir / "owner.json").exists(), wrong
    for bad in ("", " ", ".", ".*", "a b", "$(id)", "x" * 129):
        with pytest.raises(InputError, match="is not a lock token"):
            hostlock.break_lock(None, HOST, bad)
        assert (lock_dir / "owner.json").exists(), bad
    hostlock.break_lock(None, HOST, lock.token)
    assert not lock_dir.exists()


def test_unlock_of_a_host_nobody_locked_says_so(lock_dir):
    """The newcomer's second hour: `inv unlock -H sbx0 --token T` on a host with no lock said the lock 'does not
    carry token T; now held by an unknown owner (owner.json missing or unreadable ...)': nobody held it."""
    assert hostlock.break_lock(None, HOST, "0e" * 16) is hostlock.Unlocked.NOT_LOCKED
    assert not lock_dir.exists()


class _Link:
    def close(self) -> None:
        pass


@pytest.mark.parametrize("as_json", [False, True])
def test_inv_unlock_of_a_host_not_locked_is_nothing_to_do_exit_0(lock_dir, monkeypatch, capsys, as_json):
    """A newcomer's pass: `inv unlock` on a host that is not locked exited 1 ('some host failed'); docs/cli.md's
    exit 0 is 'all done (or nothing to do)': it says so on stdout, exit 0, --json too. A lock with another token
    is still kept, exit 1 (with --json, the document names the error)."""
    from fleet.cli import probe as probing
    from fleet.errors import EXIT_HOST_FAILED, EXIT_OK
    from fleet.ssh.connect import ConnectOptions

    monkeypatch.setattr(probing, "open_connection", lambda host, opts: _Link())
    assert probing.unlock(HOST, "0e" * 16, ConnectOptions(), as_json) == EXIT_OK
    out, err = capsys.readouterr()
    if as_json:
        assert json.loads(out) == {"host": "h1", "lock": str(lock_dir), "result": "not locked"} and err == ""
    else:
        assert out == f"h1: not locked (no {lock_dir}): nothing to unlock, nothing was changed\n" and err == ""
    lock = hostlock.acquire(None, HOST, "deploy x")
    if as_json:
        assert probing.unlock(HOST, "0e" * 16, ConnectOptions(), as_json) == EXIT_HOST_FAILED
        assert "does not carry token" in json.loads(capsys.readouterr().out)["error"] and lock_dir.exists()
    else:
        with pytest.raises(hostlock.HostLockError, match="does not carry token"):
            probing.unlock(HOST, "0e" * 16, ConnectOptions(), as_json)
    assert probing.unlock(HOST, lock.token, ConnectOptions(), as_json) == EXIT_OK and not lock_dir.exists()
    out = capsys.readouterr().out
    assert (json.loads(out)["result"] == "removed") if as_json else out == f"h1: lock {lock_dir} removed\n"


def test_a_clone_s_live_lock_is_refused_and_kept(lock_dir):
    lock_dir.mkdir(parents=True)
    clone = _owner(machine_id=None, boot_id="another-boot", pid=DEAD_PID)
    (lock_dir / "owner.json").write_text(json.dumps(clone.to_json()) + "\n")
    with pytest.raises(hostlock.HostLockError, match="host is locked"):
        hostlock.acquire(None, HOST, "deploy y")
    assert json.loads((lock_dir / "owner.json").read_text())["token"] == clone.token


def test_an_owner_json_a_host_sent_is_read_field_by_field_and_wrong_types_are_dropped():
    sent = {"owner": "x" * 500, "pid": "12", "epoch": True, "token": "../../etc", "time": ["T"], "extra": 1}
    owner = hostlock.LockOwner.from_json(json.dumps(sent))
    assert owner == hostlock.LockOwner(owner="x" * 200)
    assert hostlock.LockOwner.from_json(json.dumps({"pid": 2 ** 40, "pid_start": 2 ** 70})) == hostlock.LockOwner()
    assert hostlock.LockOwner.from_json("[1]") is None and hostlock.LockOwner.from_json("{") is None
    assert hostlock.describe(owner, now=0) == "held by " + "x" * 200 + " pid ? for ? since ?"
