"""Found by review (issue 52): `inv recover -p` on the router's own host. A reboot (or VM reset) takes the router's
unit down with the replica's; fleet enables neither, so the router is started again on the new boot as the
host's unit is. The stop mark names it apart: only a run that knows the playbook's router starts it, and a mark
naming another unit there is removed with nothing started (the hostile-mark rule)."""
from __future__ import annotations

from test_recover_points import HOST, Machine, Session, no_pause
from test_recover_reboot_first import Wants
from test_router_membership import setup  # noqa: F401 - the fixture

from fleet.deploy import hostrun
from fleet.errors import FleetError
from fleet.multihost import recover as rec
from fleet.progress import quiet
from fleet.ssh.connect import ConnectOptions

ROUTER = "sglang-router"


class RouterHost(Machine):
    """The host runs the replica's unit (`sglang`) and the router's; a reboot stops both."""

    router = True

    def answer(self, session, command):
        if ROUTER not in command:
            return super().answer(session, command)
        self.step(command, session)
        if command.startswith("systemctl start"):
            self.router = True
        elif command.startswith("systemctl stop"):
            self.router = False
        elif "is-active" in command or "ActiveState" in command:
            state = "active" if self.router else "inactive"
            return (0, state) if "is-active" in command else (0, f"ActiveState={state}\n")
        return 0, ""

    def reboot(self) -> None:
        super().reboot()
        self.router = False


def go(m, **kw):
    return rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: Wants(m),
                       **kw)


def test_a_reboot_of_the_router_host_starts_the_router_again():
    m = RouterHost(refuse=False)
    result = go(m, router=ROUTER)
    assert "systemctl reboot" in m.steps and result.ok and m.active and not m.locked
    assert m.router, "the router's unit stays stopped after the reboot of its host"
    assert rec.STOPPED_MARK not in m.files


def test_a_recover_cut_after_the_reboot_leaves_the_router_to_the_next_recover_of_that_playbook():
    m = RouterHost(refuse=False)
    m.boot, m.active, m.router = 2, False, False  # rebooted; the recover that did it died before starting anything
    m.files[rec.STOPPED_MARK] = b'{"units": ["sglang"], "router": ["%s"], "at": "x"}' % ROUTER.encode()
    result = go(m, router=ROUTER)
    assert result.ok and m.active and m.router and rec.STOPPED_MARK not in m.files


def test_a_mark_naming_another_unit_as_the_router_starts_nothing():
    m = RouterHost(refuse=False)
    m.boot, m.active = 2, False
    m.files[rec.STOPPED_MARK] = b'{"units": ["sglang"], "router": ["poweroff.target"], "at": "x"}'
    go(m, router=ROUTER)
    assert not any("poweroff" in s for s in m.steps) and not any(s.startswith("systemctl start") for s in m.steps)
    assert rec.STOPPED_MARK not in m.files


def test_a_run_that_does_not_know_the_router_starts_the_host_unit_only():
    m = RouterHost(refuse=False)
    m.active, m.router = False, False
    m.files[rec.STOPPED_MARK] = b'{"units": ["sglang"], "router": ["%s"], "at": "x"}' % ROUTER.encode()
    s = Session(m)
    with hostrun.host_run(HOST, None, "deploy", unit=None, recover=hostrun.lock_only(quiet), session=s):
        pass
    assert m.active and not m.router and not any("poweroff" in c for c in m.steps)


def test_a_router_not_shown_out_stops_nothing():
    """The take-out (strict, as patch and recover call it) raised: the reboot is not sent, the unit runs."""
    m = RouterHost(refuse=False)

    def out(_):
        raise FleetError("h1: not stopped: http://h1:30000 could not be shown out of the router")

    try:
        go(m, router=ROUTER, before_stop=out)
    except FleetError as exc:
        assert "nothing was stopped" in str(exc) or "could not be shown out" in str(exc)
    else:
        raise AssertionError("recover went on")
    assert "systemctl reboot" not in m.steps and m.active and m.router and not m.locked


def test_after_a_killed_recover_the_next_one_puts_the_replica_back_once_it_serves(monkeypatch, setup):  # noqa: F811
    """Issue 52: a recover killed after its take-out leaves the replica out and its unit stopped (the mark). The
    next `inv recover -p` finds no fault: the dead run's clean-up starts the unit, and nothing was taken out;
    the replica goes back in once its /health answers (it starts slowly), not given up on at once."""
    from functools import partial

    from test_router_membership import Live

    from fleet.cli import recover as cli
    from fleet.multihost import router as routing
    from fleet.multihost.router_plan import worker_url

    make, replicas, _ = setup
    m = RouterHost(refuse=False)
    m.boot, m.active = 2, False  # healthy; the killed run's mark names its unit
    m.files[rec.STOPPED_MARK] = b'{"units": ["sglang"], "at": "x"}'

    class Starting(Live):
        looks = 0

        def serves(self, u, conn=None):  # answers /health on the third look after its start
            self.looks += m.active
            return self.looks >= 3

    live = Starting(["http://10.0.0.2:30000"], set())
    hooks = make(live)
    monkeypatch.setattr(cli, "load_playbook", lambda name, checked=True: (hooks.book, hooks.book_path))
    monkeypatch.setattr(routing, "hooks_for", lambda *a, **k: hooks)
    monkeypatch.setattr(rec, "recover", partial(rec.recover, sleep=no_pause, sessions=lambda h, o: Wants(m)))
    assert cli.command(HOST, ConnectOptions(), True, False, False, 0.05, playbook="replicas") == 0
    assert m.active and ("add", worker_url(HOST, hooks.book)) in live.calls, live.calls


CHECK_FAILS = """name: bound
model: {path: /models/Llama-3.1-8B-Instruct}
ladder:
  - name: plain
  - name: never
    after: []
"""


def test_a_bound_playbook_a_check_objects_to_does_not_block_recover_but_a_given_one_is_checked(monkeypatch, tmp_path):
    """Issue 52: the playbook the inventory binds is loaded as deployed (schema only, as rollback does), so an
    emergency recover is not refused for what `inv check` finds now; one given with -p is checked, --dry-run too."""
    import dataclasses
    from functools import partial

    import pytest

    from fleet.cli import recover as cli
    from fleet.errors import InputError

    path = tmp_path / "bound.yaml"
    path.write_text(CHECK_FAILS)
    m = RouterHost(refuse=False)
    m.boot = 2  # healthy: nothing to do
    monkeypatch.setattr(rec, "recover", partial(rec.recover, sleep=no_pause, sessions=lambda h, o: Wants(m)))
    bound = dataclasses.replace(HOST, playbook=str(path))
    assert cli.command(bound, ConnectOptions(), True, False, False, 0.05) == 0
    for dry_run in (False, True):
        with pytest.raises(InputError, match="never runs"):
            cli.command(HOST, ConnectOptions(), True, False, dry_run, 0.05, playbook=str(path))
