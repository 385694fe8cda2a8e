"""fleet.deploy.before_fleet when a step fails half-way (found by the review of stop 42, each failed on
its tree): a stop that fails after `systemctl stop` ran must not leave the unit stopped with its patch sets
reverted; a write that times out or loses the link must be undone like a write that fails. The host is a dict:
its files, its unit's state, its patch sets; the commands fleet would run change it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakesession import FakeSession
from ticking import Said

from fleet.deploy import before_fleet as rollback
from fleet.deploy import recovery
from fleet.deploy.results import Attempt
from fleet.errors import FleetError
from fleet.host.releases import BEFORE_FLEET, RELEASES, ROLLBACK_MARK, Release, ReleaseStore, file_key
from fleet.host.releases import CURRENT as CURRENT_LINK
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
                   ENV: b"fleet env", "kept": {}, "cmds": [], "current": CURRENT.id,
                   # what fleet recorded before its first deploy, and the release `current` names
                   f"{BEFORE_FLEET}/manifest.json": json.dumps({"files": {
                       p: {"sha256": sha256(d), "mode": "0o644"} for p, d in OLD.items()}}).encode(),
                   f"{RELEASES}/{CURRENT.id}/manifest.json": json.dumps(CURRENT.to_json()).encode(),
                   **{f"{BEFORE_FLEET}/files/{file_key(p)}": d for p, d in OLD.items()}}

    def write_atomic(path, data, mode, keep=False):
        if path == ROLLBACK_MARK:
            state[path] = data
            return
        if path in state.get("fail_write", {}):
            exc, wrote = state["fail_write"][path]
            if wrote:  # it ran on the host, its answer was lost
                state["kept"][path], state[path] = state[path], data
            raise exc
        state["kept"][path], state[path] = state[path], data

    def sh(cmd):
        state["cmds"].append(cmd)
        if cmd.startswith("systemctl start"):
            state["unit"] = "active"
        if cmd == f"rm -f -- {ROLLBACK_MARK}":
            state.pop(ROLLBACK_MARK, None)
        if cmd.startswith(f"cat -- {ROLLBACK_MARK}"):
            return state.get(ROLLBACK_MARK, b"").decode()
        if cmd.startswith(f"readlink {CURRENT_LINK}"):
            return f"releases/{state['current']}\n" if state["current"] else ""
        return ""

    def set_patches(conn, host, sets, say):
        state["patches"] = list(sets)

    class Session(FakeSession):
        """The host's files, the copies its writes kept, its unit's state; `stop` is what stopping the unit does
        (else it is not called), `read` may raise once (`read_error`)."""

        stop = None
        read_error: tuple[str, Exception] | None = None

        def write_atomic(self, path, data, mode, keep=False):
            write_atomic(path, data, mode, keep)

        def read(self, path):
            if self.read_error is not None and self.read_error[0] == path:
                path, exc = self.read_error
                self.read_error = None
                raise exc
            return state.get(path)

        def put_back_kept(self, path, want):
            if path not in state["kept"] or sha256(state["kept"][path]) != want:
                return False
            state[path] = state["kept"].pop(path)
            return True

        def drop_kept(self, paths):
            pass

        def unit_state(self, unit):
            return {"ActiveState": state["unit"]}

        def stop_and_empty_gpus(self, unit, budget, log):
            if self.stop is None:
                pytest.fail("must not stop")
            return self.stop()

    state["session"] = Session(HOST, answer=lambda cmd: (0, sh(cmd)))
    monkeypatch.setattr(rollback.restore, "set_patches", set_patches)
    return state


def test_a_stop_that_fails_after_stopping_starts_the_release_again_with_its_patch_sets(host):
    def stop():
        host["unit"] = "inactive"  # `systemctl stop` ran, then nvidia-smi failed once
        raise ServiceError("h: `nvidia-smi --query-compute-apps` failed (exit 15)")

    host["session"].stop = stop
    with pytest.raises(FleetError) as exc:
        rollback.before_fleet(HOST, "sglang", None, session=host["session"])
    assert (host[UNIT], host[ENV]) == (b"fleet unit", b"fleet env")  # the release's files, as it runs them
    assert host["patches"] == ["sm120-allreduce-fusion"] and host["unit"] == "active"
    assert f"release {CURRENT.id} was started again" in str(exc.value)
    assert isinstance(exc.value, rollback.Settled) and ROLLBACK_MARK not in host  # nothing left to recover


def test_a_stop_that_fails_while_the_server_runs_leaves_it_serving_with_its_patch_sets(host):
    def stop():
        raise ServiceError("h: GPUs still busy after 120 s")

    host["session"].stop = stop
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
        rollback._write_all(host["session"], [(UNIT, OLD[UNIT], 0o644), (ENV, OLD[ENV], 0o644)])
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
    with pytest.raises(rollback.Settled) as exc:
        rollback.before_fleet(HOST, "sglang", None, session=host["session"])
    assert (host[UNIT], host[ENV], host["unit"]) == (b"fleet unit", b"fleet env", "active")
    assert host["patches"] == ["sm120-allreduce-fusion"] and "did not finish within 120s" in str(exc.value)


def test_a_read_that_times_out_between_writes_undoes_the_writes_before_it(host):
    host["session"].read_error = ENV, CommandTimedOut("h: `cat /etc/fleet/sglang.env` did not finish within 120s")
    with pytest.raises(rollback.Settled):
        rollback._write_all(host["session"], [(UNIT, OLD[UNIT], 0o644), (ENV, OLD[ENV], 0o644)])
    assert (host[UNIT], host[ENV]) == (b"fleet unit", b"fleet env")


class Killed(BaseException):
    """SIGKILL: nothing after it runs in this process."""


def test_a_run_killed_after_the_stop_leaves_its_mark_and_the_next_recovery_puts_the_release_back(host, monkeypatch):
    """It wrote no mark: after a kill right after `systemctl stop`, the next run's recovery found nothing to
    finish, and the host stayed stopped on the before-fleet files while `current` named the release."""
    def stop():
        host["unit"] = "inactive"
        raise Killed()

    host["session"].stop = stop
    with pytest.raises(Killed):
        rollback.before_fleet(HOST, "sglang", None, session=host["session"])
    assert ROLLBACK_MARK in host and host[UNIT] == OLD[UNIT]
    restored: list[str] = []

    monkeypatch.setattr(recovery.patches, "undo_interrupted_runs", lambda *a: [])
    monkeypatch.setattr(recovery.restore, "restore",
                        lambda c, h, s, r, b, say: restored.append(r.id) or Attempt("x", Outcome.READY, "up", 0))
    store = ReleaseStore.on(host["session"])  # no temp file, no release committing or in progress
    notes = recovery.recover(None, HOST, object(), "sglang", lambda m: None, store)  # type: ignore[arg-type]
    assert restored == [CURRENT.id]
    assert any("a rollback was interrupted (to before-fleet" in n for n in notes), notes
    assert ROLLBACK_MARK not in host  # finished: the next run does not restore again


def test_without_a_playbook_it_takes_the_unit_the_current_release_serves_from(host):
    """The fifteenth newcomer (issue 46, finding 8): a playbook's serve.unit wins over the inventory's `unit` in
    the deploy, but `rollback --to before-fleet` without --playbook took the inventory's: on a host serving
    `sglang-b` it said what stood at /etc/systemd/system/sglang.service was not recorded (a unit it never wrote)."""
    served = Release(**{**CURRENT.to_json(), "files": {unit_file("sglang-b"): {"sha256": "0" * 64, "mode": "0o644"},
                                                       env_file("sglang-b"): {"sha256": "1" * 64, "mode": "0o600"}}})
    host[f"{RELEASES}/{CURRENT.id}/manifest.json"] = json.dumps(served.to_json()).encode()
    with pytest.raises(FleetError) as exc:
        rollback.before_fleet(HOST, None, None, session=host["session"])
    assert f"what stood at {unit_file('sglang-b')}, {env_file('sglang-b')} before fleet" in str(exc.value), exc.value


def test_the_stop_is_said_with_its_budget_and_where_it_stands(host):
    """issue 46, finding 5: the before-fleet rollback went silent through the stop of the server (up to 120 s, and
    systemctl's own TimeoutStopSec before that), as the rollback and the fall-back did before stop 53."""

    from fleet.progress import Live

    say = Said()
    said, ticked = say, say.ticked

    def stop():
        host["unit"] = "inactive"
        assert ticked.wait(10), said  # a line of where the stop stands came while it went on

    host["session"].stop = stop
    rollback.before_fleet(HOST, "sglang", None, say, session=host["session"])
    assert "stopping sglang and emptying the GPUs (budget 120s)" in said, said
    assert any(isinstance(m, Live) and m.startswith("phase stop: ") and "of 120s budget" in m for m in said), said
