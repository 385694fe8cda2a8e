"""fleet.tune's pure parts (relabelling, the table) and fleet.fingerprint's known-good memory."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from fleet import fingerprint
from fleet.cli import deploy_view
from fleet.facts import Gpu, HostFacts, Package
from fleet.playbook import Playbook
from fleet.results import Attempt
from fleet.tune import TuneResult, relabel


def measured(rung: str, outcome: str, tok: float | None) -> Attempt:
    record = None if tok is None else {"result": {"ok": True, "output_throughput": tok,
                                                  "latency_ms": {"ttft": {"median": 30.0}}},
                                       "power": {"mean_w": 250.0, "limit_w": 600.0, "underutilised": True}}
    return Attempt(rung, outcome, "evidence", 5.0, record)


def test_relabel_keeps_the_fastest_and_marks_the_slow_ones():
    attempts = [measured("fusion-sm120", "READY", 78.6), measured("no-fusion", "READY", 3740.0),
                measured("tp4-pp2", "READY", 3600.0), measured("lower-mem", "CUDA_OOM", None),
                measured("triton-moe", "READY", 880.0)]
    best = relabel(attempts, 0.9)
    assert best is attempts[1]
    assert [a.outcome for a in attempts] == ["PERF_REGRESSION", "READY", "READY", "CUDA_OOM", "PERF_REGRESSION"]
    assert attempts[0].evidence == "78.6 tok/s < 90% of 3,740 tok/s (rung no-fusion)"
    assert attempts[0].bench["verdict"]["basis"] == "run"
    assert relabel([measured("x", "CUDA_OOM", None)], 0.9) is None


def test_attempt_json_carries_the_bench_only_when_measured():
    assert "bench" not in Attempt("a", "CUDA_OOM", "e", 1.0).to_json()
    assert Attempt("a", "READY", "e", 1.0, {"result": {}}).to_json()["bench"] == {"result": {}}


def facts(driver: str = "580.95.05", sglang: str = "0.5.9") -> HostFacts:
    gpu = Gpu(index=0, name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition", compute_cap="12.0", sm=120)
    return HostFacts(host="sbx0", address="10.0.0.1", gpus=[gpu.model_copy(update={"index": i}) for i in range(8)],
                     interconnect="pcie", driver_version=driver,
                     packages={"sglang": Package(version=sglang), "flashinfer-python": Package(version="0.6.3")})


BOOK = Playbook.model_validate({
    "name": "glm5", "model": {"path": "/m"}, "flags": {"tp-size": 8},
    "ladder": [{"name": "fusion", "flags": {"enable-flashinfer-allreduce-fusion": True}},
               {"name": "greedy", "flags": {"mem-fraction-static": 0.95}},
               {"name": "no-fusion"}, {"name": "triton", "flags": {"moe-runner-backend": "triton"}}]})


def test_fingerprint_names_the_hardware_and_software():
    fp = fingerprint.of(facts())
    assert fp == {"gpu": ["NVIDIA RTX PRO 6000 Blackwell Workstation Edition"], "count": 8, "sm": [120],
                  "interconnect": "pcie", "driver": "580.95.05",
                  "packages": {"flashinfer-python": "0.6.3", "sglang": "0.5.9"}}
    assert fingerprint.key(fp) == fingerprint.key(fingerprint.of(facts()))
    assert fingerprint.key(fp) != fingerprint.key(fingerprint.of(facts(sglang="0.5.10")))
    assert fingerprint.key(fp) != fingerprint.key(fingerprint.of(facts(driver="575.1")))


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state" / "known-good.json"


def test_remember_then_arrange_tries_the_winner_first_and_skips_crashes(state):
    attempts = [{"rung": "fusion", "outcome": "PERF_REGRESSION"}, {"rung": "greedy", "outcome": "CUDA_OOM"},
                {"rung": "no-fusion", "outcome": "READY"}, {"rung": "triton", "outcome": "HANG"}]
    key = fingerprint.remember(BOOK, facts(), BOOK.rung("no-fusion"), 3740.0, "sbx0", "r1", attempts)
    saved = json.loads(state.read_text())["entries"][f"{key}/glm5"]
    assert saved["rung"] == "no-fusion" and set(saved["failed"]) == {"fusion", "greedy"}  # a HANG may pass
    said: list[str] = []
    rungs, skipped = fingerprint.arrange(BOOK, facts(), list(BOOK.ladder), said.append)
    assert [r.name for r in rungs] == ["no-fusion", "fusion", "triton"]  # slow fusion stays as a fallback
    assert skipped == [("greedy", f"known to fail on this hardware (CUDA_OOM when tuned on sbx0, fingerprint {key})")]
    assert any("known-good on this hardware (3,740 tok/s on sbx0" in m for m in said)


def test_arrange_ignores_other_hardware_and_changed_rungs(state):
    fingerprint.remember(BOOK, facts(), BOOK.rung("no-fusion"), 3740.0, "sbx0", "r1",
                         [{"rung": "greedy", "outcome": "CUDA_OOM"}])
    other = facts(sglang="0.5.10")
    assert fingerprint.arrange(BOOK, other, list(BOOK.ladder), lambda m: None) == (list(BOOK.ladder), [])
    changed = BOOK.model_copy(deep=True)
    changed.ladder[1].flags["mem-fraction-static"] = 0.9  # no longer the rung that ran out of memory
    changed.ladder[2].flags["max-running-requests"] = 2048  # no longer the rung that won
    rungs, skipped = fingerprint.arrange(changed, facts(), list(changed.ladder), lambda m: None)
    assert [r.name for r in rungs] == ["fusion", "greedy", "no-fusion", "triton"] and skipped == []


def test_no_state_file_changes_nothing(state):
    assert fingerprint.arrange(BOOK, facts(), list(BOOK.ladder), lambda m: None) == (list(BOOK.ladder), [])


def test_tune_table_has_a_bar_per_rung_and_marks_the_winner():
    attempts = [measured("fusion-sm120", "PERF_REGRESSION", 78.6), measured("no-fusion", "READY", 3740.0),
                measured("triton-moe", "PERF_REGRESSION", 880.0), measured("greedy", "CUDA_OOM", None)]
    result = TuneResult("sbx0", "ok", "r1", "no-fusion", 3740.0, attempts, fingerprint="abc")
    console = Console(record=True, width=160)
    deploy_view.render_tune(result, console)
    text = console.export_text()
    rows = {line.split()[1]: line for line in text.splitlines() if line.startswith("│ ")}
    assert rows["no-fusion"].count("█") == 20 and "◀" in rows["no-fusion"]
    assert rows["triton-moe"].count("█") == 5 and rows["fusion-sm120"].count("█") == 1
    assert "3,740" in rows["no-fusion"] and "78.6" in rows["fusion-sm120"] and "250/600 W" in rows["no-fusion"]
    assert "winner no-fusion at 3,740 tok/s" in text
