"""`deploy --dry-run` on a host that serves another playbook says so (issue 46, finding 1, a form nobody tried). The
twenty-third newcomer's hour ran the dry run of glm5-2node on replicas of llama-replicas (`it serves rung plain, and
the deploy serves another (plain is not fit here or known to fail)`: plain is no rung of glm5-2node at all) and of
llama-pinned-0.5.9 on a host serving llama-replicas from /root/ml-env (`the venv it runs from
(/var/lib/fleet/venvs/cc10...) is gone`: it never ran from that venv, which was never there). Deployer.differs, the
reason both the dry run and the deploy go by, with the host's reads faked."""

from __future__ import annotations

from types import SimpleNamespace

from fleet.deploy import ladder
from fleet.host.releases import Release
from fleet.playbook import Playbook, Rung

VENV = "/var/lib/fleet/venvs/cc10ac47087dce96"


def _deployer(name: str, packages: dict[str, str] | None = None) -> ladder.Deployer:
    deployer = object.__new__(ladder.Deployer)  # only what differs reads before the host's files
    deployer.book = Playbook.model_validate({"name": name, "model": {"path": "/m"}, "ladder": [{"name": "plain"}],
                                             **({"packages": packages} if packages else {})})
    deployer.serve = SimpleNamespace(host=None, venv=VENV)
    return deployer


def _release(playbook: str, venv: str | None = None) -> Release:
    return Release(id="20261206T185911Z-8506", host="sbx1", playbook=playbook, playbook_sha256="0" * 64,
                   created="2026-12-06T18:59:11Z", status="ok", rung="plain", facts={"venv": venv} if venv else {})


def test_a_host_serving_another_playbook_is_said_as_such(monkeypatch):
    monkeypatch.setattr(ladder.fingerprint, "winner", lambda book, facts, rungs: None)
    why = _deployer("glm5-2node").differs(None, None, [Rung(name="tp8-pp2")], _release("llama-replicas"))
    assert why == "it serves playbook llama-replicas, and the deploy serves glm5-2node"  # was: plain is not fit here


def test_a_venv_the_release_never_ran_from_is_not_said_gone(monkeypatch):
    monkeypatch.setattr(ladder.venvs, "exists", lambda conn, host, venv: False)
    monkeypatch.setattr(ladder.fingerprint, "winner", lambda book, facts, rungs: None)
    deployer = _deployer("llama-pinned", {"sglang": "0.5.9"})
    why = deployer.differs(None, None, [Rung(name="plain")], _release("llama-pinned"))
    assert why == f"it runs from another venv than the playbook's pins build ({VENV}, not on the host yet)"
    why = deployer.differs(None, None, [Rung(name="plain")], _release("llama-pinned", VENV))
    assert why == f"the venv it runs from ({VENV}) is gone: the deploy builds it"
