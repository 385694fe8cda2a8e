"""fleet.deploy.before_fleet when a step fails half-way (found by the review of stop 42, each failed on
its tree): a stop that fails after `systemctl stop` ran must not leave the unit stopped with its patch sets
reverted; a write that times out or loses the link must be undone like a write that fails. The host is a dict:
its files, its unit's state, its patch sets; the commands fleet would run change it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakesession import FakeSession

from fleet.deploy import before_fleet as rollback
from fleet.deploy import recovery
from fleet.deploy.results import Attempt
from fleet.errors import FleetError
from fleet.host import service
from fleet.host.releases import ROLLBACK_MARK, Release
from fleet.host.render import env_file, unit_file
from fleet.host.service import ServiceError, sha256
from fleet.inventory import Host
from fleet.outcomes import Outcome
from fleet.ssh.remote import CommandTimedOut

UNIT, ENV = unit_file("sglang"), env_file("sglang")
HOST = Host(name="h", address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
            known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
            source=Path("hosts.yaml"))
OLD = {UNIT: b"operator unit", ENV: b"operator env"}  # what fleet found before its first deploy
CURRENT = Release(id="20261203T000000Z-abcd", host="h", playbook="p", playbook_sha256="0" * 64, created="now",
                  rung="fusion", status="ok", config={"patches": ["sm120-allreduce-fusion"]})


@pytest.fixture
def host(monkeypatch):
    state: dict = {"unit": "active", "patches": ["sm120-allreduce-fusion"], UNIT: b"fleet unit",
                   ENV: b"fleet env", "kept": {}, "cmds": []}

    class Record:
        def __init__(self, conn, host):
            pass

        def manifest(self):
            return {p: {"sha256": sha256(d), "mode": "0o644"} for p, d in OLD.items()}

        def copy(self, p):
            return OLD[p]

    def write_atomic(conn, host, path, data, mode, keep=False, timeout=120):
        if path == ROLLBACK_MARK:
            state[path] = data
            return
        if path in state.get("fail_write", {}):
            exc, wrote = state["fail_write"][path]
            if wrote:  # it ran on the host, its answer was lost
                state["kept"][path], state[path] = state[path], data
            raise exc
        state["kept"][path], state[path] = state[path], data

    def put_back_kept(conn, host, path, want):
        if path not in state["kept"] or sha256(state["kept"][path]) != want:
            return False
        state[path] = state["kept"].pop(path)
        return True

    def sh(conn, host, cmd, **kw):
        state["cmds"].append(cmd)
        if cmd.startswith("systemctl start"):
            state["unit"] = "active"
        if cmd == f"rm -f -- {ROLLBACK_MARK}":
            state.pop(ROLLBACK_MARK, None)
        return ""

    def set_patches(conn, host, sets, say):
        state["patches"] = list(sets)

    class Store:
        def __init__(self, conn, host):
            pass

        def current(self):
            return CURRENT

    class Session(FakeSession):  # the lock and the rollback mark, as the run skeleton writes them
        def write_atomic(self, path, data, mode):
            write_atomic(None, None, path, data, mode)

    state["session"] = Session(HOST, answer=lambda cmd: (0, sh(None, None, cmd)))
    monkeypatch.setattr(rollback, "BeforeFleet", Record)
    monkeypatch.setattr(rollback, "ReleaseStore", Store)
    monkeypatch.setattr(rollback, "write_atomic", write_atomic)
    monkeypatch.setattr(rollback, "read_file", lambda c, h, p: state.get(p))
    monkeypatch.setattr(rollback, "put_back_kept", put_back_kept)
    monkeypatch.setattr(rollback, "drop_kept", lambda *a: None)
    monkeypatch.setattr(service, "sh", sh)  # the verbs (start_unit, remove_file) run through it
    monkeypatch.setattr(rollback, "unit_state", lambda c, h, u: {"ActiveState": state["unit"]})
    monkeypatch.setattr(rollback.restore, "set_patches", set_patches)
    return state


def test_a_stop_that_fails_after_stopping_starts_the_release_again_with_its_patch_sets(host, monkeypatch):
    def stop(conn, h, unit, budget, say):
        host["unit"] = "inactive"  # `systemctl stop` ran, then nvidia-smi failed once
        raise ServiceError("h: `nvidia-smi --query-compute-apps` failed (exit 15)")

    monkeypatch.setattr(rollback, "stop_and_empty_gpus", stop)
    with pytest.raises(FleetError) as exc:
        rollback.before_fleet(HOST, "sglang", None, session=host["session"])
    assert (host[UNIT], host[ENV]) == (b"fleet unit", b"fleet env")  # the release's files, as it runs them
    assert host["patches"] == ["sm120-allreduce-fusion"] and host["unit"] == "active"
    assert f"release {CURRENT.id} was started again" in str(exc.value)
    assert isinstance(exc.value, rollback.Settled) and ROLLBACK_MARK not in host  # nothing left to recover


def test_a_stop_that_fails_while_the_server_runs_leaves_it_serving_with_its_patch_sets(host, monkeypatch):
    def stop(conn, h, unit, budget, say):
        raise ServiceError("h: GPUs still busy after 120 s")

    monkeypatch.setattr(rollback, "stop_and_empty_gpus", stop)
    with pytest.raises(FleetError) as exc:
        rollback.before_fleet(HOST, "sglang", None, session=host["session"])
    assert (host[UNIT], host[ENV], host["patches"]) == (b"fleet unit", b"fleet env", ["sm120-allreduce-fusion"])
    assert not any(c.startswith("systemctl start") for c in host["cmds"])
    assert "still serves, its patch sets back" in str(exc.value)
    assert ROLLBACK_MARK not in host


@pytest.mark.parametrize("wrote", [False, True], ids=["not-run", "ran-answer-lost"])
def test_a_write_that_times_out_is_undone_with_those_before_it(host, wrote):
    host["fail_write"] = {ENV: (CommandTimedOut("h: `write.sh` did not end within 120s"), wrote)}
    with pytest.raises(FleetError) as exc:
        rollback._write_all(None, HOST, [(UNIT, OLD[UNIT], 0o644), (ENV, OLD[ENV], 0o644)])
    assert (host[UNIT], host[ENV]) == (b"fleet unit", b"fleet env")  # what the running server runs, both
    assert "the files already written were put back; nothing was changed" in str(exc.value)


def test_a_patch_revert_that_times_out_puts_the_release_back(host, monkeypatch):
    """restore.set_patches raising (a revert that timed out, not a refusal it returns) used to escape every undo:
    the before-fleet unit and env files stayed under the running release."""
    def set_patches(conn, h, sets, say):
        if not sets:
            raise CommandTimedOut("h: `python3 - ... patch state` did not finish within 120s")
        host["patches"] = list(sets)

    monkeypatch.setattr(rollback.restore, "set_patches", set_patches)
    monkeypatch.setattr(rollback, "stop_and_empty_gpus", lambda *a: pytest.fail("must not stop"))
    with pytest.raises(rollback.Settled) as exc:
        rollback.before_fleet(HOST, "sglang", None, session=host["session"])
    assert (host[UNIT], host[ENV], host["unit"]) == (b"fleet unit", b"fleet env", "active")
    assert host["patches"] == ["sm120-allreduce-fusion"] and "did not finish within 120s" in str(exc.value)


def test_a_read_that_times_out_between_writes_undoes_the_writes_before_it(host, monkeypatch):
    real = rollback.read_file

    def read_file(conn, h, path):
        if path == ENV and not host.get("read_failed"):
            host["read_failed"] = True
            raise CommandTimedOut("h: `cat /etc/fleet/sglang.env` did not finish within 120s")
        return real(conn, h, path)

    monkeypatch.setattr(rollback, "read_file", read_file)
    with pytest.raises(rollback.Settled):
        rollback._write_all(None, HOST, [(UNIT, OLD[UNIT], 0o644), (ENV, OLD[ENV], 0o644)])
    assert (host[UNIT], host[ENV]) == (b"fleet unit", b"fleet env")


class Killed(BaseException):
    """SIGKILL: nothing after it runs in this process."""


def test_a_run_killed_after_the_stop_leaves_its_mark_and_the_next_recovery_puts_the_release_back(host, monkeypatch):
    """It wrote no mark: after a kill right after `systemctl stop`, the next run's recovery found nothing to
    finish, and the host stayed stopped on the before-fleet files while `current` named the release."""
    def stop(conn, h, unit, budget, say):
        host["unit"] = "inactive"
        raise Killed()

    monkeypatch.setattr(rollback, "stop_and_empty_gpus", stop)
    with pytest.raises(Killed):
        rollback.before_fleet(HOST, "sglang", None, session=host["session"])
    assert ROLLBACK_MARK in host and host[UNIT] == OLD[UNIT]
    restored: list[str] = []

    class Store:
        def __init__(self, *a):
            pass

        def current(self):
            return CURRENT

    monkeypatch.setattr(recovery, "drop_temp_files", lambda *a: [])
    monkeypatch.setattr(recovery.patches, "undo_interrupted_runs", lambda *a: [])
    monkeypatch.setattr(recovery, "finish_commits", lambda *a: [])
    monkeypatch.setattr(recovery, "find", lambda *a: [])
    monkeypatch.setattr(recovery, "read_quiet", lambda c, h, path: host.get(path, b"").decode())
    monkeypatch.setattr(recovery, "remove_file", lambda c, h, path: None)
    monkeypatch.setattr(recovery, "ReleaseStore", Store)
    monkeypatch.setattr(recovery.restore, "restore",
                        lambda c, h, s, r, b, say: restored.append(r.id) or Attempt("x", Outcome.READY, "up", 0))
    notes = recovery.recover(None, HOST, object(), "sglang", lambda m: None)  # type: ignore[arg-type]
    assert restored == [CURRENT.id]
    assert any("a rollback was interrupted (to before-fleet" in n for n in notes), notes
