"""A dead run's recovery on a host with no earlier release stops the unit: said with its budget and, while it goes
on, where it stands (issue 46, finding 5; the fifteenth newcomer's hour): it went silent from `recovering: ...` to
its next line, up to the playbook's stop budget."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ticking import Said

from fleet import playbook
from fleet.deploy import recovery
from fleet.inventory import Host

HOST = Host(name="h", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(), source=Path("hosts.yaml"))


def test_the_stop_of_a_recovery_with_no_release_is_said(tmp_path, monkeypatch):
    (tmp_path / "p.yaml").write_text("name: p\nmodel: {path: /m}\nladder: [{name: base}]\n")
    book = playbook.load(tmp_path / "p.yaml")
    say = Said()
    said, ticked = say, say.ticked

    def stop(conn, host, unit, budget, log):
        assert ticked.wait(10), said  # where the stop stands was said while it went on
        return []

    monkeypatch.setattr(recovery, "drop_temp_files", lambda s, unit: [])
    monkeypatch.setattr(recovery.patches, "undo_interrupted_runs", lambda conn, host: ["reverted a half-run patch"])
    monkeypatch.setattr(recovery, "finish_commits", lambda store: [])
    monkeypatch.setattr(recovery, "find", lambda store: [])
    monkeypatch.setattr(recovery, "close_interrupted", lambda store, found: [])
    monkeypatch.setattr(recovery, "_rollback_marked", lambda s: None)
    monkeypatch.setattr(recovery.restore, "stop_and_empty_gpus", stop)
    monkeypatch.setattr(recovery.restore, "set_patches", lambda conn, host, sets, say: None)
    store = SimpleNamespace(session=None, current=lambda: None)
    notes = recovery.recover(None, HOST, book, "sglang", say, store)  # type: ignore[arg-type]
    assert "no earlier release: unit stopped and fleet's patches reverted" in notes
    assert f"stopping sglang and emptying the GPUs (budget {book.budgets.stop:.0f}s)" in said, said
