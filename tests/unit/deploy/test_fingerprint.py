"""fleet.deploy.fingerprint: what the fleet learned per fingerprint, under concurrent learners (separate processes each
add their entry; none is lost), merged from deploys and tunes, read from a version 1 file, and forgotten."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import pytest

from fleet.deploy import fingerprint
from fleet.deploy.fingerprint import Selection
from fleet.deploy.results import Attempt
from fleet.host.facts import Gpu, HostFacts, Package
from fleet.playbook import Playbook

BOOK = Playbook.model_validate({"name": "glm5", "model": {"path": "/m"}, "flags": {"tp-size": 8},
                                "ladder": [{"name": "no-fusion"}]})
LEARNERS, EACH = 8, 4


def _tried(rung: str, outcome: str) -> Attempt:
    """A deploy's attempt as fingerprint.learn reads it (its rung and how it ended)."""
    return Attempt(rung, outcome, "", 0)


def _facts(driver: str) -> HostFacts:
    gpu = Gpu(index=0, name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition", compute_cap="12.0", sm=120)
    return HostFacts(host="h", address="10.0.0.1", gpus=[gpu], interconnect="pcie", driver_version=driver,
                     packages={"sglang": Package(version="0.5.9")})


def _learner(n: int, start: multiprocessing.synchronize.Barrier) -> None:
    start.wait()
    for i in range(EACH):
        fingerprint.learn(BOOK, _facts(f"580.{n}.{i}"), BOOK.rung("no-fusion"), f"h{n}", f"r{n}.{i}", [])


def test_parallel_learners_in_separate_processes_keep_every_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    forked = multiprocessing.get_context("fork")
    for _ in range(3):
        start = forked.Barrier(LEARNERS)
        procs = [forked.Process(target=_learner, args=(n, start)) for n in range(LEARNERS)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * LEARNERS
        entries = json.loads(fingerprint.path().read_text())["entries"]
        assert len(entries) == LEARNERS * EACH
        assert {e["release"] for e in entries.values()} == {f"r{n}.{i}" for n in range(LEARNERS) for i in range(EACH)}
        fingerprint.path().unlink()


# ---------------------------------------------------------------------- learning, arranging, forgetting


LADDER = Playbook.model_validate({
    "name": "llama", "model": {"path": "/m"}, "flags": {"tp-size": 2},
    "ladder": [{"name": "greedy", "flags": {"mem-fraction-static": 0.99}}, {"name": "fast"}, {"name": "safe"}]})
RECORDED = Path(__file__).parents[2] / "fixtures/known-good/v1-sandbox.json"  # written by the fork-point fleet


def h100(host: str = "sbx1", p2p: str = "ok", virt: str | None = "none") -> HostFacts:
    gpu = Gpu(index=0, name="NVIDIA H100 80GB HBM3", compute_cap="9.0", sm=90)
    return HostFacts(host=host, address="10.0.0.2", gpus=[gpu.model_copy(update={"index": i}) for i in range(8)],
                     interconnect="nvlink", p2p=p2p, virtualization=virt, driver_version="580.95.05",
                     packages={"sglang": Package(version="0.5.9")})


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state" / "known-good.json"


def names(rungs) -> list[str]:
    return [r.name for r in rungs]


def test_the_fingerprint_names_p2p_and_virtualisation():
    fp = fingerprint.of(h100())
    assert (fp.p2p, fp.virtualization) == ("ok", "none")
    assert fingerprint.key(fp) != fingerprint.key(fingerprint.of(h100(p2p="refused")))
    assert fingerprint.key(fp) != fingerprint.key(fingerprint.of(h100(virt="kvm")))
    assert fingerprint.of(h100(virt=None)).virtualization == "unknown"


def test_one_crash_is_tried_again_before_the_winner_and_a_second_skips_it(state):
    said: list[str] = []
    key = fingerprint.learn(LADDER, h100(), LADDER.rung("fast"), "sbx1", "r1",
                            [_tried("greedy", "CUDA_OOM"), _tried("fast", "READY")])
    rungs, skipped = fingerprint.arrange(LADDER, h100("sbx5"), list(LADDER.ladder), said.append)
    assert names(rungs) == ["greedy", "fast", "safe"] and skipped == []
    assert any("seen to fail on this hardware, not confirmed (CUDA_OOM seen 1x on sbx1 only: not known-bad until a "
               "second host): trying it again" in m for m in said)
    assert any("known-good on this hardware (served on sbx1" in m and "trying it next" in m for m in said)
    fingerprint.learn(LADDER, h100("sbx5"), LADDER.rung("fast"), "sbx5", "r2",
                      [_tried("greedy", "CUDA_OOM"), _tried("fast", "READY")])
    rungs, skipped = fingerprint.arrange(LADDER, h100(), list(LADDER.ladder), said.append)
    assert names(rungs) == ["fast", "safe"]
    assert skipped == [("greedy", f"known to fail on this hardware (CUDA_OOM, seen 2x on 2 hosts: sbx1, "
                                  f"sbx5, fingerprint {key})")]
    # other hardware (here: P2P refused) learns nothing from it
    assert fingerprint.arrange(LADDER, h100(p2p="refused"), list(LADDER.ladder), said.append) == (LADDER.ladder, [])


def test_one_hosts_fallback_keeps_the_tuned_winner_and_its_speed(state):
    runs = {"median": 3740.0, "spread": 40.0}
    key = fingerprint.remember(LADDER, h100(), "sbx1", "r0", [{"rung": "fast", "outcome": "READY",
                                                               "bench": {"runs": runs}}])
    for outcome in ("HANG", "COMM_FAILURE", "INSTALL_FAILED", "TMA_FAILURE"):  # one host's, each once
        fingerprint.learn(LADDER, h100("sbx5"), LADDER.rung("safe"), "sbx5", "r1", [_tried("fast", outcome)])
    entry = json.loads(state.read_text())["entries"][f"{key}/llama"]
    assert (entry["rung"], entry["tok_s"], entry["spread"], entry["host"]) == ("fast", 3740.0, 40.0, "sbx1")
    assert entry["rungs"]["fast"]["hosts"]["sbx5"]["failures"] == {"HANG": 1, "COMM_FAILURE": 1,
                                                                   "INSTALL_FAILED": 1, "TMA_FAILURE": 1}


def test_tunes_on_two_hosts_merge_instead_of_the_last_one_winning(state):
    def tune(host, fast, safe):
        return fingerprint.remember(LADDER, h100(host), host, f"r-{host}", [
            {"rung": "greedy", "outcome": "CUDA_OOM"},
            {"rung": "fast", "outcome": "READY" if fast > safe else "PERF_REGRESSION",
             "bench": {"runs": {"median": fast, "spread": 20.0}}},
            {"rung": "safe", "outcome": "READY" if safe > fast else "PERF_REGRESSION",
             "bench": {"runs": {"median": safe, "spread": 10.0}}},
            {"rung": "fast" if fast > safe else "safe", "outcome": "READY", "final": True}])
    key = tune("sbx1", 3740.0, 880.0)
    tune("sbx5", 3000.0, 3100.0)  # a host having a bad day: its tune alone does not move the winner
    entry = json.loads(state.read_text())["entries"][f"{key}/llama"]
    assert (entry["rung"], entry["tok_s"]) == ("fast", 3370.0)  # median of 3740 and 3000 beats 880 and 3100
    assert entry["rungs"]["greedy"]["hosts"].keys() == {"sbx1", "sbx5"}
    assert entry["failed"]["greedy"] == {"outcome": "CUDA_OOM", "flags": entry["rungs"]["greedy"]["flags"],
                                         "seen": 2, "hosts": ["sbx1", "sbx5"], "skipped": True}
    assert entry["rungs"]["fast"]["hosts"]["sbx1"]["served"] == 1  # the final restart is not counted twice


def test_a_recorded_version_1_file_is_moved_host_by_host_never_applied_as_it_is(state):
    state.parent.mkdir(parents=True)
    shutil.copy(RECORDED, state)
    old_key = "d6f73daca608472f/llama-learn"
    book = Playbook.model_validate({"name": "llama-learn", "model": {"path": "/m"},
                                    "flags": {"tp-size": 2, "enable-metrics": True},
                                    "ladder": [{"name": "too-greedy", "flags": {"mem-fraction-static": 0.99}},
                                               {"name": "plain", "flags": {"disable-custom-all-reduce": True}}]})
    gpu = Gpu(index=0, name="NVIDIA GeForce RTX 5090", compute_cap="12.0", sm=120)
    packages = {"flashinfer-python": "0.6.3", "sglang": "0.5.9", "torch": "2.9.1+cu130"}

    def rtx5090(host, p2p, virt):
        return HostFacts(host=host, address="10.0.0.3", gpus=[gpu, gpu.model_copy(update={"index": 1})],
                         interconnect="pcie", p2p=p2p, virtualization=virt, driver_version="580.126.20",
                         packages={n: Package(version=v) for n, v in packages.items()})

    # read as evidence: the CUDA_OOM was seen on sbx2 and sbx4; nothing was lost
    rows = fingerprint.learned(Selection(playbook="llama-learn"))
    assert {(r.rung, r.host, r.legacy) for r in rows} == {("too-greedy", "sbx2", True), ("too-greedy", "sbx4", True),
                                                          ("plain", "sbx4", True)}
    assert len(fingerprint.learned(Selection())) == 7
    # sbx2 (P2P refused, a workstation) is probed: its own sighting moves to its new fingerprint, sbx4's does not
    rungs, skipped = fingerprint.arrange(book, rtx5090("sbx2", "refused", "none"), list(book.ladder), lambda m: None)
    assert names(rungs) == ["too-greedy", "plain"] and skipped == []  # one sighting of its own: tried again
    entries = json.loads(state.read_text())["entries"]
    new_key = f"{fingerprint.key(fingerprint.of(rtx5090('sbx2', 'refused', 'none')))}/llama-learn"
    assert entries[new_key]["rungs"]["too-greedy"]["hosts"].keys() == {"sbx2"}
    assert entries[old_key]["rungs"]["too-greedy"]["hosts"].keys() == {"sbx4"}
    assert json.loads(state.read_text())["version"] == 2
    # sbx4 (bare, P2P OK) next: its part moves too, and the emptied version 1 entry goes
    fingerprint.learn(book, rtx5090("sbx4", "ok", None), book.rung("plain"), "sbx4", "r9", [])
    entries = json.loads(state.read_text())["entries"]
    assert old_key not in entries and len(entries) == 6
    sbx4 = entries[f"{fingerprint.key(fingerprint.of(rtx5090('sbx4', 'ok', None)))}/llama-learn"]
    assert sbx4["rungs"]["plain"]["hosts"]["sbx4"]["served"] == 2 and sbx4["rung"] == "plain"
    assert sbx4["rungs"]["too-greedy"]["hosts"]["sbx4"]["failures"] == {"CUDA_OOM": 1}


def test_forget_clears_what_it_selects_under_the_lock_and_keeps_a_backup(state):
    for host in ("sbx1", "sbx5"):
        fingerprint.learn(LADDER, h100(host), LADDER.rung("fast"), host, "r",
                          [_tried("greedy", "CUDA_OOM")])
    assert fingerprint.arrange(LADDER, h100(), list(LADDER.ladder), lambda m: None)[1] != []
    before = state.read_bytes()
    gone = fingerprint.forget(Selection(hosts=frozenset({"sbx5"}), rungs=frozenset({"greedy"})), dry_run=True)
    assert [(r.rung, r.host, r.failures) for r in gone] == [("greedy", "sbx5", {"CUDA_OOM": 1})]
    assert state.read_bytes() == before  # a dry run changes nothing
    fingerprint.forget(Selection(hosts=frozenset({"sbx5"}), rungs=frozenset({"greedy"})))
    assert state.with_name("known-good.json.bak").read_bytes() == before
    assert names(fingerprint.arrange(LADDER, h100(), list(LADDER.ladder), lambda m: None)[0]) == [
        "greedy", "fast", "safe"]  # one sighting left: tried again
    assert fingerprint.forget(Selection(playbook="nothing-like-it")) == []
    assert len(fingerprint.forget(Selection(playbook="llama"))) == 3
    assert json.loads(state.read_text())["entries"] == {}


def test_a_hand_edited_file_is_read_as_data_and_never_stops_a_deploy(state):
    key = fingerprint.learn(LADDER, h100(), LADDER.rung("fast"), "sbx1", "r1", [])
    data = json.loads(state.read_text())
    entry = data["entries"][f"{key}/llama"]
    entry.update(tok_s="fast", spread=[1], host={"x": 1}, rung=7)
    entry["rungs"]["greedy"] = "junk"
    entry["rungs"]["fast"]["hosts"]["sbx9"] = {"served": -1, "failures": {"CUDA_OOM": "2"}, "last": None}
    data["entries"]["junk/llama"] = ["not", "an", "entry"]
    state.write_text(json.dumps(data))
    said: list[str] = []
    rungs, skipped = fingerprint.arrange(LADDER, h100(), list(LADDER.ladder), said.append)
    assert names(rungs) == ["fast", "greedy", "safe"] and skipped == []
    assert any("known-good on this hardware (served on sbx1" in m for m in said)
    state.write_text("{not json")
    assert fingerprint.arrange(LADDER, h100(), list(LADDER.ladder), said.append) == (LADDER.ladder, [])
    fingerprint.learn(LADDER, h100(), LADDER.rung("fast"), "sbx1", "r2", [])  # a torn file is kept aside
    assert json.loads(state.read_text())["version"] == 2
    assert state.with_name("known-good.json.unreadable").read_text() == "{not json"


def test_the_sglang_versions_hosts_reported_are_ordered_as_pep_440_and_normalised(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    reported = ["0.5.10", "0.5.9.post1", "0.5.9", "0.5.10rc1", "0.5.9-post2", "0.5.9\x1b[2J", "latest", 7]
    fingerprint.path().parent.mkdir(parents=True)
    fingerprint.path().write_text(json.dumps({"entries": {
        str(i): {"fingerprint": {"packages": {"sglang": v}}} for i, v in enumerate(reported)}}))
    assert fingerprint.sglang_versions() == ["0.5.9", "0.5.9.post1", "0.5.9.post2", "0.5.10rc1", "0.5.10"]


def test_the_typed_fingerprint_keeps_the_json_and_so_the_key_every_entry_is_filed_under():
    """Every fleet's known-good.json is keyed by the hash of this JSON: a changed shape would lose it all."""
    import hashlib

    fp = fingerprint.of(h100())
    assert fp.to_json() == {"gpu": ["NVIDIA H100 80GB HBM3"], "count": 8, "sm": [90], "interconnect": "nvlink",
                            "p2p": "ok", "virtualization": "none", "driver": "580.95.05",
                            "packages": {"sglang": "0.5.9"}}
    assert fp.key == hashlib.sha256(json.dumps(fp.to_json(), sort_keys=True).encode()).hexdigest()[:16]
    assert list(fp.to_json()) == ["gpu", "count", "sm", "interconnect", "p2p", "virtualization", "driver",
                                  "packages"]


def test_the_evidence_of_recorded_entries_reads_and_writes_back_unchanged():
    """The fork-point fleet's recorded file: each entry's evidence, typed and written back, is the same JSON."""
    from fleet.deploy import evidence

    entries = json.loads(RECORDED.read_text())["entries"]
    for entry in entries.values():
        rungs = evidence.from_legacy(entry)
        assert rungs and evidence.rungs_from_json(evidence.rungs_to_json(rungs)) == rungs
        raw = evidence.rungs_to_json(rungs)
        assert json.dumps(evidence.rungs_to_json(evidence.rungs_from_json(raw))) == json.dumps(raw)
        summary = evidence.summary(rungs, [entry["rung"]])
        assert (summary.rung, summary.host, summary.release) == (entry["rung"], entry["host"], entry["release"])
        assert list(summary.to_json()) == ["rung", "tok_s", "spread", "host", "release", "failed", "flags",
                                           "why"]


def test_a_tunes_gain_within_noise_never_moves_the_fingerprints_winner_and_learned_says_why(state):
    """Issue 52, 2: a tune says `safe +10 tok/s is within noise: fast stays`; the fleet learns the same."""
    runs = {"fast": {"median": 1000.0, "spread": 30.0}, "safe": {"median": 1010.0, "spread": 25.0}}
    fingerprint.remember(LADDER, h100(), "sbx1", "r1", [{"rung": r, "outcome": "READY", "bench": {"runs": v}}
                                                          for r, v in runs.items()])
    said: list[str] = []
    rungs, _ = fingerprint.arrange(LADDER, h100("sbx5"), list(LADDER.ladder), said.append)
    assert names(rungs) == ["fast", "greedy", "safe"] and "rung fast: known-good" in said[-1]
    rows = {r.rung: r for r in fingerprint.learned(fingerprint.Selection())}
    assert rows["fast"].winner and not rows["safe"].winner
    assert rows["fast"].why == ("winner: the first rung of the ladder that serves (fast); safe against fast: 1,010 "
                                "against 1,000 tok/s, +10 is within noise (needs more than 30: spreads 25, 30; min "
                                "gain 2%): fast stays")
    assert rows["safe"].why == "serves; not the winner"


def test_two_ooms_on_one_host_skip_nothing_for_the_fingerprint(state):
    """Issue 52, 6: another tenant's memory on sbx1, twice: the rung is tried again on every host."""
    for release in ("r1", "r2"):
        fingerprint.learn(LADDER, h100(), LADDER.rung("fast"), "sbx1", release,
                          [_tried("greedy", "CUDA_OOM"), _tried("fast", "READY")])
    rungs, skipped = fingerprint.arrange(LADDER, h100("sbx5"), list(LADDER.ladder), lambda _: None)
    assert names(rungs) == ["greedy", "fast", "safe"] and skipped == []
    row = next(r for r in fingerprint.learned(fingerprint.Selection()) if r.rung == "greedy")
    assert row.skipped is None and row.why == "CUDA_OOM seen 2x on sbx1 only: not known-bad until a second host"


def test_two_inventories_naming_a_host_alike_never_mix_what_was_learned(state):
    # inventory A's sbx0 (10.0.0.2) crashed on greedy once; inventory B's sbx0 (10.0.0.9), same hardware, served
    a, b = h100("sbx0"), h100("sbx0").model_copy(update={"address": "10.0.0.9"})
    key = fingerprint.learn(LADDER, a, None, "sbx0", "r1", [_tried("greedy", "CUDA_OOM")])
    fingerprint.learn(LADDER, b, LADDER.rung("greedy"), "sbx0", "r2", [])
    hosts = json.loads(state.read_text())["entries"][f"{key}/llama"]["rungs"]["greedy"]["hosts"]
    assert hosts["sbx0"]["failures"] == {"CUDA_OOM": 1} and hosts["sbx0"]["address"] == "10.0.0.2"
    assert hosts["sbx0@10.0.0.9"]["served"] == 1 and hosts["sbx0@10.0.0.9"]["address"] == "10.0.0.9"
    fingerprint.learn(LADDER, a, None, "sbx0", "r3", [_tried("greedy", "CUDA_OOM")])
    greedy = json.loads(state.read_text())["entries"][f"{key}/llama"]["rungs"]["greedy"]["hosts"]
    assert greedy["sbx0"]["failures"] == {"CUDA_OOM": 2} and greedy["sbx0@10.0.0.9"]["failures"] == {}


def test_a_result_recorded_without_an_address_is_the_first_such_hosts(state):
    key = fingerprint.learn(LADDER, h100("sbx0"), None, "sbx0", "r1", [_tried("greedy", "CUDA_OOM")])
    data = json.loads(state.read_text())
    del data["entries"][f"{key}/llama"]["rungs"]["greedy"]["hosts"]["sbx0"]["address"]  # as an older fleet wrote it
    state.write_text(json.dumps(data))
    fingerprint.learn(LADDER, h100("sbx0"), None, "sbx0", "r2", [_tried("greedy", "CUDA_OOM")])
    hosts = json.loads(state.read_text())["entries"][f"{key}/llama"]["rungs"]["greedy"]["hosts"]
    assert list(hosts) == ["sbx0"] and hosts["sbx0"]["failures"] == {"CUDA_OOM": 2}
