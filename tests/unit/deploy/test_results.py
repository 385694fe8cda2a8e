"""fleet.deploy.results: what a deploy reports of the stack it ran, beside the release that was current before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleet.deploy.bench_record import stored
from fleet.deploy.results import Attempt, BenchPoint, DeployResult, bench_point
from fleet.outcomes import DeployStatus, Outcome


def test_a_deploy_says_what_changed_in_the_stack_since_the_release_before():
    r = DeployResult(host="h", status=DeployStatus.OK,
                     versions={"sglang": "0.5.23", "flashinfer-python": "0.7.2", "driver": "580.95.05"},
                     versions_before={"sglang": "0.5.9", "flashinfer-python": "0.6.3", "driver": "580.95.05"})
    assert r.upgrade() == [("sglang", "0.5.9", "0.5.23"), ("flashinfer-python", "0.6.3", "0.7.2")]
    assert r.to_json()["versions_before"]["sglang"] == "0.5.9" and r.to_json()["versions"]["sglang"] == "0.5.23"


def test_a_first_deploy_or_one_refused_before_the_probe_compares_nothing():
    first = DeployResult(host="h", status=DeployStatus.OK, versions={"sglang": "0.5.9"})
    assert first.upgrade() == [] and first.to_json()["versions_before"] == {}
    assert "versions" not in DeployResult(host="h").to_json()
    gained = DeployResult(host="h", status=DeployStatus.OK, versions={"sglang": "0.5.9", "sgl-kernel": "0.3.21"},
                          versions_before={"sglang": "0.5.9"})
    assert gained.upgrade() == [("sgl-kernel", None, "0.3.21")]


def _raw(tok, ttft=None, runs=None):
    out = {"result": {"ok": True, "output_throughput": tok, "latency_ms": {"ttft": {"median": ttft}}}}
    return {**out, "runs": {"tok_s": runs}} if runs else out


def _record(tok, ttft=None, runs=None):
    return stored(_raw(tok, ttft, runs))


def test_a_bench_point_is_the_gates_tok_s_and_ttft_the_median_of_repeated_runs():
    assert bench_point(_record(3740.5, 812.0), "r1", "fusion") == BenchPoint("r1", "fusion", 3740.5, 812.0)
    assert bench_point(_record(3740.5, 812.0), "r1", "fusion").to_json() == {"release": "r1", "rung": "fusion",
                                                                              "tok_s": 3740.5, "ttft_ms": 812.0}
    assert bench_point(_record(100.0, runs=[90, 110, 120])).tok_s == 110.0  # tune's median, not its warm-up
    assert bench_point(_record(100.0, runs=[90, 110])).tok_s == 100.0


@pytest.mark.parametrize("hostile", [None, "x", [], {"result": "x"}, {"result": {"output_throughput": "9e9"}},
                                     _raw(float("nan")), _raw(float("inf")), _raw(-1.0), _raw(True),
                                     {"runs": {"tok_s": ["a"]}, "result": {}}])
def test_a_bench_point_trusts_nothing_but_a_finite_number_from_a_manifest(hostile):
    assert bench_point(stored(hostile)) is None


def test_ttft_that_is_not_a_number_is_left_out_not_trusted():
    assert bench_point(_record(10.0, ttft="slow")).ttft_ms is None
    assert bench_point(stored({"result": {"output_throughput": 10.0, "latency_ms": "x"}})).ttft_ms is None


def test_a_deploy_reports_the_gate_before_and_after_and_a_rung_refused_as_slower_without_a_release():
    before = BenchPoint("old", "fast", 3000.0, 700.0)
    served = DeployResult("h", DeployStatus.OK, release="new", bench_before=before, attempts=[
        Attempt("fusion", "CUDA_OOM", "e", 1), Attempt("fast", Outcome.READY, "e", 1, _record(3200.0, 650.0))])
    assert served.to_json()["bench"] == {"before": before.to_json(), "after": {"release": "new", "rung": "fast",
                                                                     "tok_s": 3200.0, "ttft_ms": 650.0}}
    slower = DeployResult("h", DeployStatus.ROLLED_BACK, release="old", bench_before=before, attempts=[
        Attempt("fast", Outcome.PERF_REGRESSION, "e", 1, _record(1000.0))])
    assert slower.bench_after() == BenchPoint(None, "fast", 1000.0, None)
    assert "bench" not in DeployResult("h").to_json()


def test_the_venv_and_the_tune_baseline_print_as_the_dicts_they_were():
    """--json's `venv` (deploy: with seconds; tune: without) and tune's `baseline` keep main's keys and order."""
    from fleet.deploy.noise import Runs
    from fleet.host.venvs import Venv
    from fleet.multihost.tune import TuneBaseline, TuneResult

    venv = Venv("/var/lib/fleet/venvs/ab12", "ab12", "/usr/bin/python3", "uv", ["a.whl"], 3, 1.23456)
    deployed = DeployResult(host="h", status=DeployStatus.OK, venv=venv.record()).to_json()
    assert deployed["venv"] == {"path": "/var/lib/fleet/venvs/ab12", "built": "uv", "sent": ["a.whl"],
                                "bytes_sent": 3, "seconds": 1.23}
    assert list(deployed["venv"]) == ["path", "built", "sent", "bytes_sent", "seconds"]
    tuned = TuneResult("h", DeployStatus.OK, venv=venv.record(timed=False),
                       baseline=TuneBaseline("r1", "fast", Runs((10.0, 12.0), 9.0))).to_json()
    assert list(tuned["venv"]) == ["path", "built", "sent", "bytes_sent"]
    assert tuned["baseline"] == {"release": "r1", "rung": "fast",
                                 "runs": {"warmup": 9.0, "tok_s": [10.0, 12.0], "median": 11.0, "spread": 2.0}}
    assert "venv" not in TuneResult("h", DeployStatus.OK).to_json()


def test_a_deploy_preflight_refused_says_the_versions_as_found_once_and_that_nothing_changed():
    refused = DeployResult(host="h", status=DeployStatus.FAILED, versions={"sglang": "0.5.9"},
                           versions_before={"sglang": "0.5.23"},
                           attempts=[Attempt("fast", Outcome.PREFLIGHT, "needs 8 GPUs, has 1", 0.0),
                                     Attempt("safe", Outcome.PREFLIGHT, "needs 8 GPUs, has 1", 0.0)])
    out = refused.to_json()
    assert out["nothing_changed"] is True and "versions_before" not in out
    assert out["versions"] == {"sglang": "0.5.23"} and out["versions_probed"] == {"sglang": "0.5.9"}
    first = replace(refused, versions_before={}).to_json()
    assert first["versions"] == {"sglang": "0.5.9"} and "versions_probed" not in first
    failed = replace(refused, attempts=[Attempt("fast", "CUDA_OOM", "out of memory", 30.0)]).to_json()
    assert "nothing_changed" not in failed and failed["versions"] == {"sglang": "0.5.23"}  # what serves, as found
    assert failed["versions_probed"] == {"sglang": "0.5.9"} and "versions_before" not in failed


@pytest.mark.parametrize("status", [DeployStatus.ROLLED_BACK, DeployStatus.FAILED])
def test_a_deploy_that_did_not_serve_says_in_json_the_versions_the_host_serves_not_a_transition(status):
    """Issue 46, finding 11, a newcomer's form (h-new22): an upgrade to sglang 0.5.23 whose rung failed its bench gate
    was put back on the 0.5.9 release (`rolled_back`); the terminal said `versions as found: serving sglang 0.5.9; in
    <venv> sglang 0.5.23`, while `--json` said `"versions": {"sglang": "0.5.23"}, "versions_before": {"sglang":
    "0.5.9"}`, the upgrade's own shape: a script read the host as upgraded. What serves is `versions`, the venv that
    was tried `versions_probed`, and there is no before and after to read as a transition."""
    put_back = DeployResult(host="h", status=status, release="r-before", versions={"sglang": "0.5.23"},
                            versions_before={"sglang": "0.5.9"},
                            attempts=[Attempt("plain", Outcome.PERF_REGRESSION, "8,957 tok/s < the floor", 8.1)])
    out = put_back.to_json()
    assert out["versions"] == {"sglang": "0.5.9"} and out["versions_probed"] == {"sglang": "0.5.23"}, out
    assert "versions_before" not in out and "nothing_changed" not in out  # it stopped and started the server
    same = replace(put_back, versions={"sglang": "0.5.9"}).to_json()
    assert same["versions"] == {"sglang": "0.5.9"} and "versions_probed" not in same
    served = replace(put_back, status=DeployStatus.OK).to_json()  # an upgrade that served keeps its transition
    assert served["versions"] == {"sglang": "0.5.23"} and served["versions_before"] == {"sglang": "0.5.9"}
