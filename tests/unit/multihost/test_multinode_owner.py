"""Found by review (h-adv15, stop 54) of the owner rule at every put-back:
restore.restore asks restore.owner_problem before
anything stops, but a multi-node rollback and a multi-node fall-back call restore.put_back (which does not ask it)
and then start every node together: a release whose venv another user owns now is started as root on every node.
Each test states what should hold; they fail on main (dbbc9f2)."""

from __future__ import annotations

from test_multinode_decisions import deployment  # noqa: F401 - the fixture
from test_multinode_rollback import Store, _two_nodes

from fleet.multihost import multinode

REFUSED = "venv /opt/ml-env is ops (uid 1000)'s, and the unit runs as root (serve.user: root)"


def test_a_multinode_fall_back_never_starts_a_release_whose_venv_another_user_owns(deployment, monkeypatch):  # noqa: F811
    m, steps, said, _ = deployment
    asked = []

    def owner_problem(conn, host, store, release):
        asked.append(host.name)
        return REFUSED

    monkeypatch.setattr(multinode.restore, "owner_problem", owner_problem)
    m._fall_back("every rung failed")
    assert asked, "the owner rule was never asked for the release put back"  # before: never asked
    assert not [s for s in steps if s[0] == "start"], steps  # before: ('start', 'n0,n1'): ops's code as root


def test_a_multinode_rollback_refuses_a_release_whose_venv_another_user_owns_before_anything_stops(tmp_path,
                                                                                                     monkeypatch):
    stores = {"n0": Store("n0"), "n1": Store("n1")}
    mn, started = _two_nodes(tmp_path, stores)
    monkeypatch.setattr(multinode.restore, "owner_problem", lambda conn, host, store, release: REFUSED)
    mn._rollback(None)
    assert started == [], started  # before: [('rollback', ['r1-old', 'r1-old'])]: stopped, put back, started
    assert all("ops" in (n.result.error or "") for n in mn.nodes), [n.result.error for n in mn.nodes]


def test_a_router_put_back_never_restarts_a_release_whose_venv_another_user_owns(tmp_path, monkeypatch):
    # RouterHooks.restore (the router's fall-back, and what its recovery does by hand) stops the router, puts the
    # release's files back and restarts it, asking no owner rule: the router's unit runs its venv's python as root
    from test_router_fallback import PREVIOUS, hooks  # noqa: F401

    from fleet.multihost import router as routing
    from fleet.outcomes import Outcome

    h, _, mp = hooks.__wrapped__(tmp_path, monkeypatch)
    did: list[str] = []
    mp.setattr(routing.restore, "verified_copies", lambda store, release: {
        "/etc/systemd/system/sglang-router.service": b"[Service]\nExecStart=/opt/router/bin/python -m sglang_router\n"})
    mp.setattr(routing.restore, "owner_problem", lambda *a: REFUSED)
    mp.setattr(routing, "stop_quietly", lambda *a: did.append("stop"))
    mp.setattr(routing.restore, "put_files", lambda *a: did.append("put back"))
    mp.setattr(routing, "daemon_reload", lambda *a: None)
    mp.setattr(routing.restore, "restart", lambda *a: did.append("restart"))
    mp.setattr(routing.RouterHooks, "_ready", lambda self, conn: (Outcome.READY, "up"))
    outcome, _ = routing.RouterHooks.restore(h, None, None, PREVIOUS)
    assert did == [] and outcome == Outcome.PREFLIGHT, (did, outcome)  # before: ['stop', 'put back', 'restart']
