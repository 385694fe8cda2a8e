"""fleet.deploy.slolearned: each host's winner and the values that crashed, per fingerprint, playbook and promise;
read back alike, one host's later winner replacing its earlier one, a broken file read as nothing learned."""

from __future__ import annotations

from fleet.deploy import slolearned
from fleet.deploy.trials import Trial

FP, BOOK, SLO = "0123456789abcdef", "glm5-nvfp4", "ttft_p99=2s"


def test_winners_per_host_and_crashes_accumulate_and_the_best_is_the_highest_rate(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path))
    assert slolearned.lookup(FP, BOOK, SLO) is None
    slolearned.remember(FP, BOOK, SLO, "sbx0", Trial.of({"max-running-requests": 512}), 9.0, "r1",
                        [("mem-fraction-static", 0.9)])
    slolearned.remember(FP, BOOK, SLO, "sbx5", Trial.of({"attention-backend": "triton"}), 11.0, "r2", [])
    slolearned.remember(FP, BOOK, SLO, "sbx0", Trial.of({"cuda-graph-max-bs": 1024}), 10.0, "r3",
                        [("mem-fraction-static", 0.9), ("moe-runner-backend", "triton")])
    got = slolearned.lookup(FP, BOOK, SLO)
    assert got is not None
    assert {(w.host, tuple(w.flags.items()), w.rate) for w in got.wins} == {
        ("sbx5", (("attention-backend", "triton"),), 11.0), ("sbx0", (("cuda-graph-max-bs", 1024),), 10.0)}
    assert got.crashed == (("mem-fraction-static", 0.9), ("moe-runner-backend", "triton"))
    best = got.best()
    assert best is not None and best.host == "sbx5"
    assert slolearned.lookup(FP, BOOK, "ttft_p99=1s") is None and slolearned.lookup(FP, "other", SLO) is None


def test_a_search_without_a_winner_still_teaches_its_crashes(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path))
    slolearned.remember(FP, BOOK, SLO, "sbx0", None, None, "r1", [("attention-backend", "triton")])
    got = slolearned.lookup(FP, BOOK, SLO)
    assert got is not None and got.wins == () and got.best() is None and got.crashed == (("attention-backend",
                                                                                             "triton"),)


def test_a_broken_file_is_nothing_learned_and_the_next_write_replaces_it(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path))
    (tmp_path / "slo-learned.json").write_text("{torn")
    assert slolearned.load() == []
    (tmp_path / "slo-learned.json").write_text('{"version": 1, "entries": {"x": {"fingerprint": 1}}}')
    assert slolearned.load() == []
    slolearned.remember(FP, BOOK, SLO, "sbx0", Trial.of({}), 5.0, "r1", [])
    assert [e.key for e in slolearned.load()] == [FP]


def test_forget_clears_a_hosts_winner_or_whole_entries_and_keeps_the_file_before(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path))
    slolearned.remember(FP, BOOK, SLO, "sbx0", Trial.of({"max-running-requests": 512}), 9.0, "r1",
                        [("mem-fraction-static", 0.9)])
    slolearned.remember(FP, BOOK, SLO, "sbx5", Trial.of({}), 8.0, "r2", [])
    slolearned.remember(FP, "other", SLO, "sbx0", Trial.of({}), 7.0, "r3", [])
    before = (tmp_path / "slo-learned.json").read_bytes()
    dry = slolearned.forget(frozenset({"sbx0"}), BOOK, None, dry_run=True)
    assert [(e.playbook, [w.host for w in e.wins]) for e in dry] == [(BOOK, ["sbx0"])]
    assert (tmp_path / "slo-learned.json").read_bytes() == before
    slolearned.forget(frozenset({"sbx0"}), BOOK, None)
    assert (tmp_path / "slo-learned.json.bak").read_bytes() == before
    got = slolearned.lookup(FP, BOOK, SLO)
    assert got is not None and [w.host for w in got.wins] == ["sbx5"] and got.crashed  # crashes are the hardware's
    assert slolearned.lookup(FP, "other", SLO) is not None
    assert slolearned.forget(frozenset({"sbx9"}), None, None) == []
    assert [e.playbook for e in slolearned.forget(frozenset(), None, FP)] == [BOOK, "other"]
    assert slolearned.load() == []
