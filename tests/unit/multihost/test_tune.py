"""fleet.multihost.tune's pure parts (relabelling, the table)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rich.console import Console

from fleet.cli import deploy_view
from fleet.deploy.bench import BenchError, BenchRecord, BenchResult
from fleet.deploy.results import Attempt
from fleet.host.facts import Gpu, HostFacts, Package
from fleet.host.releases import Release
from fleet.inventory import load as load_inventory
from fleet.multihost import tune as tuning
from fleet.multihost.tune import TuneResult, downtime_words, pick
from fleet.playbook import Playbook
from fleet.ssh.connect import ConnectOptions


def measured(rung: str, outcome: str, tok: float | None, runs: list[float] | None = None) -> Attempt:
    record = None if tok is None else {"result": {"ok": True, "output_throughput": tok,
                                                  "latency_ms": {"ttft": {"median": 30.0}}},
                                       "power": {"mean_w": 250.0, "limit_w": 600.0, "underutilised": True}}
    if record is not None and runs:
        record["runs"] = {"warmup": runs[0] * 0.8, "tok_s": runs}
    return Attempt(rung, outcome, "evidence", 5.0, BenchRecord.from_json(record) if record else None)


def test_pick_keeps_the_fastest_and_marks_the_slow_ones():
    attempts = [measured("fusion-sm120", "READY", 78.6), measured("no-fusion", "READY", 3740.0),
                measured("tp4-pp2", "READY", 3600.0), measured("lower-mem", "CUDA_OOM", None),
                measured("triton-moe", "READY", 880.0)]
    judged, best, decisions = pick(attempts, 0.9, 0.02)
    assert best is attempts[1] and judged[1] is best
    # the attempts given stay as they were
    assert [a.outcome for a in attempts] == ["READY"] * 3 + ["CUDA_OOM", "READY"]
    attempts = judged
    assert [a.outcome for a in attempts] == ["PERF_REGRESSION", "READY", "READY", "CUDA_OOM", "PERF_REGRESSION"]
    assert attempts[0].evidence == "78.6 tok/s < 90% of 3,740 tok/s (rung no-fusion)"
    assert attempts[0].bench.verdict.basis == "run"
    assert attempts[0].to_json()["bench"]["verdict"]["basis"] == "run"
    assert len(decisions) == 3 and decisions[1].startswith("tp4-pp2 against no-fusion: 3,600 against 3,740")
    oom = [measured("x", "CUDA_OOM", None)]
    assert pick(oom, 0.9, 0.02) == (oom, None, ())


def test_a_tunes_losing_trial_names_the_rung_it_lost_to_and_needs_no_remedy():
    """A trial slower than the winner is the tune's choice, not a failure to act on: it records the rung the tune
    kept (`lost_to`), and the tune's report gives it no `next:` (it said "compare rungs with inv tune")."""
    attempts = [measured("no-fusion", "READY", 3740.0), measured("triton-moe", "READY", 880.0),
                measured("lower-mem", "CUDA_OOM", None)]
    judged, best, _ = pick(attempts, 0.9, 0.02)
    assert [a.lost_to for a in judged] == [None, "no-fusion", None]
    assert judged[1].to_json()["lost_to"] == "no-fusion" and "lost_to" not in judged[2].to_json()
    result = TuneResult("sbx0", "ok", "r1", "no-fusion", 3740.0, attempts=judged, fingerprint="abc")
    console = Console(record=True, width=400)
    deploy_view.render_tune(result, console)
    lines = [line.strip() for line in console.export_text().splitlines()]
    assert "2. triton-moe: 880 tok/s < 90% of 3,740 tok/s (rung no-fusion)" in lines
    assert any(line.startswith("3. lower-mem: evidence; next: ") for line in lines)


def test_the_seeds_three_way_tie_is_within_noise_and_the_ladders_first_rung_stays():
    """The issue's run: lower-mem-fraction 3,583, no-fusion 3,553, tp4-pp2 3,542 tok/s, each a median of
    runs about 60 tok/s apart: no later rung beats the first beyond the noise."""
    attempts = [measured("no-fusion", "READY", 3553.0, [3521.0, 3553.0, 3580.0]),
                measured("tp4-pp2", "READY", 3542.0, [3500.0, 3542.0, 3561.0]),
                measured("lower-mem-fraction", "READY", 3583.0, [3549.0, 3583.0, 3611.0])]
    judged, best, decisions = pick(attempts, 0.9, 0.02)
    assert best is attempts[0] and [a.outcome for a in judged] == ["READY"] * 3
    assert decisions[0] == "tp4-pp2 against no-fusion: 3,542 against 3,553 tok/s, slower: no-fusion stays"
    assert decisions[1] == ("lower-mem-fraction against no-fusion: 3,583 against 3,553 tok/s, +30 is within noise "
                            "(needs more than 71: spreads 62, 59; min gain 2%): no-fusion stays")


def test_a_later_rung_wins_only_beyond_both_spreads_and_the_minimum_gain():
    steady = measured("no-fusion", "READY", 3550.0, [3540.0, 3550.0, 3560.0])
    # 5% faster but one of its runs swings by 400: within its own spread
    noisy = measured("fusion", "READY", 3730.0, [3500.0, 3730.0, 3900.0])
    assert pick([steady, noisy], 0.9, 0.02)[1] is steady
    # 5% faster and steady: beyond both spreads and 2%
    fast = measured("fusion", "READY", 3730.0, [3720.0, 3730.0, 3745.0])
    _, best, decisions = pick([steady, fast], 0.9, 0.02)
    assert best is fast and decisions[0].startswith("fusion beats no-fusion: 3,730 against 3,550 tok/s, +180 > 71")
    # the same gain with a playbook asking for 10%
    assert pick([steady, fast], 0.9, 0.10)[1] is steady
    # the winner changes as the ladder goes on: each later rung is compared with the one chosen so far
    faster = measured("greedy", "READY", 3900.0, [3890.0, 3900.0, 3910.0])
    assert pick([steady, fast, faster], 0.9, 0.02)[1] is faster


def test_attempt_json_carries_the_bench_only_when_measured():
    assert "bench" not in Attempt("a", "CUDA_OOM", "e", 1.0).to_json()
    record = BenchRecord(result=BenchResult(ok=True, output_throughput=1.0))
    assert Attempt("a", "READY", "e", 1.0, record).to_json()["bench"] == {"result": record.result.to_json()}


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


def test_tune_table_has_a_bar_per_rung_and_marks_the_winner():
    attempts = [measured("fusion-sm120", "PERF_REGRESSION", 78.6), measured("no-fusion", "READY", 3740.0),
                measured("triton-moe", "PERF_REGRESSION", 880.0), measured("greedy", "CUDA_OOM", None)]
    result = TuneResult("sbx0", "ok", "r1", "no-fusion", 3740.0, attempts=attempts, fingerprint="abc")
    console = Console(record=True, width=160)
    deploy_view.render_tune(result, console)
    text = console.export_text()
    rows = {line.split()[1]: line for line in text.splitlines() if line.split()[1:2] and line.split()[1] in
            ("no-fusion", "triton-moe", "fusion-sm120", "greedy")}
    assert rows["no-fusion"].count("█") == 20 and "◀" in rows["no-fusion"]
    assert rows["triton-moe"].count("█") == 5 and rows["fusion-sm120"].count("█") == 1
    assert "3,740" in rows["no-fusion"] and "78.6" in rows["fusion-sm120"] and "250/600 W" in rows["no-fusion"]
    assert "winner no-fusion at 3,740 tok/s" in text


def test_tune_table_shows_each_rungs_median_and_spread_and_the_decisions_below():
    attempts = [measured("no-fusion", "READY", 3553.0, [3521.0, 3553.0, 3580.0]),
                measured("lower-mem-fraction", "READY", 3583.0, [3549.0, 3583.0, 3611.0])]
    attempts, best, decisions = pick(attempts, 0.9, 0.02)
    result = TuneResult("sbx0", "ok", "r1", best.rung, 3553.0, 59.0, decisions, attempts, fingerprint="abc")
    console = Console(record=True, width=80)
    deploy_view.render_tune(result, console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    row = next(line for line in text.splitlines() if line.startswith("1  no-fusion "))
    assert "3,553" in row and "±59" in row and "◀" in row
    assert "winner no-fusion at 3,553 tok/s ±59 (median of 3 runs)" in text
    lines = text.splitlines()
    last_row = max(i for i, line in enumerate(lines) if line.split()[2:3] == ["READY"])
    below = " ".join(" ".join(lines[last_row + 1:]).split())  # the text under the table, unwrapped
    assert below.startswith("lower-mem-fraction against no-fusion: 3,583 against 3,553 tok/s, +30 is within noise")


class Scripted(tuning.Tuner):
    """A tuner whose benchmarks answer `answers` in turn (a record, or the error a run raises)."""

    answers: Iterator[BenchRecord | Exception]

    def bench(self, conn):
        answer = next(self.answers)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _tuner(tmp_path, answers):
    path = tmp_path / "glm5.yaml"
    path.write_text("name: glm5\n")
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory/hosts.yaml").write_text("hosts:\n  sbx0: {address: 10.0.0.1}\n")
    host = load_inventory(tmp_path / "inventory/hosts.yaml").hosts["sbx0"]
    said: list[str] = []
    t = Scripted(host, BOOK, path, ConnectOptions(), said.append, {}, lambda q: True, runs=2)
    t.answers = iter(answers)
    previous = Release(id="r-before", host="sbx0", playbook="glm5", playbook_sha256="0" * 64, created="t")
    return t.measure_serving(object(), previous), said


def ok(tok):
    return BenchRecord(result=BenchResult(ok=True, output_throughput=tok))


def test_the_release_serving_before_a_tune_is_measured_as_each_rung_is(tmp_path):
    runs, said = _tuner(tmp_path, [ok(3000.0), ok(3700.0), ok(3740.0)])
    assert (runs.warmup, runs.tok_s, runs.median, runs.spread) == (3000.0, (3700.0, 3740.0), 3720.0, 40.0)
    assert any("release r-before: median of 2 runs" in m for m in said)


@pytest.mark.parametrize("answers", [[ok(1.0), BenchRecord(result=BenchResult())], [ok(1.0), BenchError("refused")],
                                     [BenchRecord(result=BenchResult(ok=True))]])
def test_a_serving_release_that_answers_garbage_is_not_measured_and_the_tune_goes_on(tmp_path, answers):
    answers = [*answers, BenchError("unused")]
    runs, said = _tuner(tmp_path, answers + [ok(1.0)] * 3)
    assert runs is None and any("could not be measured" in m and "the fastest rung wins" in m for m in said)


@pytest.mark.parametrize(("seconds", "words"), [(0.4, "under a minute"), (25.0, "under a minute"),
                                                (60.0, "about a minute"), (420.0, "about 7 min")])
def test_tunes_question_words_a_short_downtime_honestly_never_about_0_min(seconds, words):
    assert downtime_words(seconds) == words


def test_a_tune_refused_at_preflight_says_nothing_changed_in_json_as_deploy_does():
    """`inv tune -H sbx2 -p glm5-nvfp4 --json` on a host of 2 GPUs (issue 46, 11, newcomer h-new25's form): every
    rung refused at preflight (`TP x PP x DP = 8 GPUs, host has 2`), the terminal said `nothing was changed`, and
    the JSON only `"status": "failed"`, as for a host a tune had stopped and put back; deploy's JSON says
    `"nothing_changed": true` there."""
    refused = [Attempt(rung, "PREFLIGHT", "TP x PP x DP = 8 GPUs, host has 2", 0.0) for rung in ("a", "b")]
    error = "sbx2: no rung of glm5-nvfp4 can run here; nothing was changed"
    assert TuneResult("sbx2", "failed", attempts=refused, error=error).to_json()["nothing_changed"] is True
    tried = [*refused, measured("c", "CUDA_OOM", None)]  # a rung started: what served was stopped, then put back
    assert "nothing_changed" not in TuneResult("sbx2", "failed", attempts=tried).to_json()
    assert "nothing_changed" not in TuneResult("sbx2", "ok", "r1", "a", attempts=[measured("a", "READY", 3740.0)]
                                               ).to_json()
