"""fleet.deploy.cacheneeds: which kept releases need which cache entry, written whole under one writer, and a
file that is not fleet's read as unknown (never as "nothing is needed")."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from fleet.deploy.cacheneeds import Need, Needs

K1, K2, K3 = "1" * 64, "2" * 64, "3" * 64


def test_a_start_is_recorded_and_a_prune_replaces_only_its_host_s_part(tmp_path: Path) -> None:
    needs = Needs(tmp_path / "needs.json")
    assert needs.read() == [] and needs.needed() == frozenset()
    needs.started("sbx0", "r1", K1)
    needs.started("sbx1", "r9", K3)
    needs.started("sbx0", "r2", K1)
    needs.started("sbx0", "r2", K2)  # its next attempt started under another key
    assert needs.read() == [Need("sbx0", "r1", K1), Need("sbx0", "r2", K2), Need("sbx1", "r9", K3)]
    assert needs.kept("sbx0", {"r2": K2, "r3": None})  # r1 pruned; r3 started under no key
    assert needs.read() == [Need("sbx0", "r2", K2), Need("sbx1", "r9", K3)]  # sbx1, not pruned, still counts
    assert needs.needed() == {K2, K3}
    needs.kept("sbx1", {})
    assert json.loads((tmp_path / "needs.json").read_text()) == {"version": 1, "hosts": {"sbx0": {"r2": K2}}}


def test_a_file_that_is_not_fleet_s_is_unknown_then_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "needs.json"
    needs = Needs(path)
    for text in ("{", "[]", '{"version": 2, "hosts": {}}', json.dumps({"version": 1, "hosts": {"h": {"r": "x"}}}),
                 json.dumps({"version": 1, "hosts": {"../h": {}}})):
        path.write_text(text)
        assert needs.read() is None and needs.needed() is None, text
    assert not needs.kept("sbx0", {"r1": K1})  # set aside: the other hosts' parts are not known now
    assert (tmp_path / "needs.json.bad").read_text() == json.dumps({"version": 1, "hosts": {"../h": {}}})
    assert needs.read() == [Need("sbx0", "r1", K1)]


def test_threads_recording_at_once_lose_no_start(tmp_path: Path) -> None:
    needs = Needs(tmp_path / "needs.json")
    threads = [threading.Thread(target=needs.started, args=(f"h{i}", "r", K1)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {n.host for n in needs.read() or []} == {f"h{i}" for i in range(16)}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".needs.json.") and not p.name.endswith(".lock")]
