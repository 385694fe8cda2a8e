"""Remedies: every failure people see comes with the next thing to try, from the rules or deploy's outcomes."""

from __future__ import annotations

import pytest
from rich.console import Console

from fleet.cli import deploy_view
from fleet.cli.status_view import render_detail
from fleet.deploy.results import Attempt, DeployResult
from fleet.errors import InputError
from fleet.logs import remedies
from fleet.logs.classify import LineClassifier
from fleet.logs.follow import spelled
from fleet.multihost.status import HostStatus
from fleet.outcomes import DEPLOY_OUTCOMES

TMA = "[TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped gemm. Error: Error Internal"
PEER_217 = "NCCL WARN Cuda failure 217 'peer access is not supported between these two devices'"


def test_every_deploy_outcome_has_a_meaning_and_a_remedy():
    outcomes = remedies.load_outcomes()
    assert set(outcomes) == DEPLOY_OUTCOMES
    assert all(o.meaning and o.remedy for o in outcomes.values())


@pytest.mark.parametrize(("text", "problem"), [
    ("outcomes:\n  HANG: {meaning: m, remedy: r}\n", "missing ['BENCH_FAILED'"),
    ("outcomes:\n" + "".join(f"  {o}: {{meaning: m, remedy: r}}\n" for o in sorted(DEPLOY_OUTCOMES))
     + "  SLOW: {meaning: m, remedy: r}\n", "unknown ['SLOW']"),
    ("outcomes:\n  HANG: {meaning: m}\n", "remedy"),
])
def test_an_outcomes_file_that_misses_or_invents_an_outcome_is_refused_naming_the_file(tmp_path, text, problem):
    path = tmp_path / "deploy.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=str(path)) as raised:
        remedies.load_outcomes(path)
    assert problem in str(raised.value)


def test_the_rule_the_evidence_matches_gives_the_remedy_not_just_the_class():
    specific = remedies.remedy_for("COMM_FAILURE", PEER_217)
    assert "NCCL_P2P_DISABLE=1" in specific
    assert remedies.remedy_for("COMM_FAILURE", "") is not None
    assert "triton" in remedies.remedy_for("TMA_FAILURE", TMA)
    assert remedies.remedy_for("READY") is None and remedies.remedy_for("NOT_A_CLASS") is None
    assert "budgets" in remedies.remedy_for("HANG", "no progress for 30s in phase autotune")


def test_a_live_event_carries_its_rules_remedy():
    (event,) = LineClassifier().feed(TMA)
    assert event.log_class == "TMA_FAILURE" and event.remedy and "--moe-runner-backend triton" in event.remedy


def _text(result: DeployResult) -> str:
    console = Console(width=300, record=True)
    deploy_view.render(result, console)
    return console.export_text()


def test_deploys_summary_names_host_rung_expected_found_and_next_for_each_failure():
    result = DeployResult("sbx0", "ok", release="r1", config={"rung": "no-fusion"}, attempts=[
        Attempt("fusion-sm120", "TMA_FAILURE", TMA, 3.0),
        Attempt("fusion-native", "PREFLIGHT", "needs SM in [90, 100, 103], host has [120]", 0),
        Attempt("no-fusion", "READY", "ready", 5.0)])
    text = _text(result)
    assert "sbx0 rung fusion-sm120: expected READY, got TMA_FAILURE; next: run MoE on triton" in text
    assert "got PREFLIGHT" not in text and "got READY" not in text  # a rung that did not fit is no failure
    tma, skipped, ready = result.to_json()["attempts"]
    assert tma["remedy"].startswith("run MoE on triton") and "remedy" not in skipped and "remedy" not in ready


def test_a_failed_deploy_gives_the_next_step_for_its_hang_and_its_preflight():
    result = DeployResult("sbx2", "failed", error="sbx2: every rung failed; back on release r0", attempts=[
        Attempt("plain", "HANG", "no progress for 12s in phase weight_load", 12.0),
        Attempt("-", "PREFLIGHT", "disk full: 0.1 GiB free on /", 0)])
    lines = deploy_view.next_steps(result)
    assert len(lines) == 2
    assert "rung plain: expected READY, got [red]HANG[/]; next: read the last lines" in lines[0]
    assert "got [red]PREFLIGHT[/]; next: the evidence names the check" in lines[1]
    assert "every rung failed" in _text(result)
    hang, preflight = result.to_json()["attempts"]
    assert hang["remedy"].startswith("read the last lines") and preflight["remedy"].startswith("the evidence names")


def test_tunes_notes_on_the_rungs_that_lost_carry_their_next_step():
    from fleet.multihost.tune import TuneResult

    attempts = [Attempt("fusion-sm120", "TMA_FAILURE", TMA, 3.0), Attempt("no-fusion", "READY", "ready", 5.0),
                Attempt("fusion-native", "PREFLIGHT", "needs SM in [90, 100, 103], host has [120]", 0)]
    console = Console(width=400, record=True)
    result = TuneResult("sbx0", "ok", "r1", "no-fusion", None, attempts=attempts, fingerprint="f")
    deploy_view.render_tune(result, console)
    text = console.export_text()
    assert f"fusion-sm120: {TMA}; next: run MoE on triton" in text
    lines = [line.strip() for line in text.splitlines()]
    assert "3. fusion-native: needs SM in [90, 100, 103], host has [120]" in lines  # not a failure: no next step


def test_every_outcome_but_ready_is_an_outcome_a_remedy_and_a_rung_can_name():
    from fleet.outcomes import Outcome

    assert {o.value for o in Outcome} - DEPLOY_OUTCOMES == {"READY"}
    assert remedies.remedy_for(Outcome.INSTALL_FAILED, "writing /etc/fleet/sglang.env: Failure")
    result = DeployResult("h", "failed", attempts=[Attempt("a", Outcome.INSTALL_FAILED, "disk full", 1.0)])
    assert "free space" in result.to_json()["attempts"][0]["remedy"]


def test_a_remedy_names_flags_as_the_hosts_sglang_spells_them():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 150.00 MiB."
    assert "--cuda-graph-max-bs;" in remedies.remedy_for("CUDA_OOM", oom)  # no version: as the rule writes it
    assert "--cuda-graph-max-bs;" in remedies.remedy_for("CUDA_OOM", oom, sglang="0.5.9")
    for version in ("0.5.14", "0.5.20", "0.5.23", "0.6.0"):  # deprecated from 0.5.14, gone from 0.5.20
        assert "--cuda-graph-max-bs-decode;" in remedies.remedy_for("CUDA_OOM", oom, sglang=version), version
    assert remedies.remedy_for("CUDA_OOM", oom, sglang="0.4.0") == remedies.remedy_for("CUDA_OOM", oom)


OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 150.00 MiB."


def test_a_deploy_names_flags_as_the_hosts_probed_sglang_spells_them_in_summary_and_json():
    def result(sglang: str | None) -> DeployResult:
        return DeployResult("sbx0", "failed", attempts=[Attempt("default", "CUDA_OOM", OOM, 3.0)], sglang=sglang)

    new, old, unknown = result("0.5.23"), result("0.5.9"), result(None)
    assert "--cuda-graph-max-bs-decode" in _text(new) and "--cuda-graph-max-bs-decode" in new.to_json()[
        "attempts"][0]["remedy"]  # 0.5.20 renamed it
    for said in (_text(old), old.to_json()["attempts"][0]["remedy"], _text(unknown)):
        assert "--cuda-graph-max-bs" in said and "--cuda-graph-max-bs-decode" not in said


def test_status_detail_spells_the_last_failures_remedy_by_the_releases_recorded_sglang():
    def detail(sglang: str | None) -> str:
        console = Console(width=300, record=True)
        render_detail(HostStatus("sbx0", "a", unit={"ActiveState": "failed"}, last_failure="CUDA_OOM",
                                 last_failure_evidence=OOM, sglang=sglang), console)
        return console.export_text()

    assert "--cuda-graph-max-bs-decode" in detail("0.5.23")
    assert "--cuda-graph-max-bs" in detail(None) and "--cuda-graph-max-bs-decode" not in detail(None)


def test_inv_logs_spells_an_events_remedy_by_the_hosts_release_and_leaves_it_when_unknown():
    (event,) = LineClassifier().feed(OOM)
    assert "--cuda-graph-max-bs" in event.remedy
    assert "--cuda-graph-max-bs-decode" in spelled(event, "0.5.23").remedy
    assert spelled(event, None) is event and spelled(event, "0.5.9") is event


@pytest.mark.parametrize("sglang", ["abc", "../0.5.23", "0.5.23; rm -rf /", "9" * 5000])
def test_a_version_a_host_sent_that_is_no_version_leaves_the_remedy_as_written(sglang):
    plain = remedies.remedy_for("CUDA_OOM", OOM)
    assert remedies.remedy_for("CUDA_OOM", OOM, sglang=sglang) == plain
    result = DeployResult("sbx0", "failed", attempts=[Attempt("default", "CUDA_OOM", OOM, 3.0)], sglang=sglang)
    assert result.to_json()["attempts"][0]["remedy"] == plain and "--cuda-graph-max-bs" in _text(result)
