"""What deploy, history and bench print, at 80 columns as at 200: no line wider than the terminal, ids whole
where a user types them, long evidence below the table (folded), and bars where people compare. Rows are
recorded sandbox output (tests/fixtures/status/, tests/fixtures/bench/)."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from fleet.cli import deploy_view
from fleet.deploy import bench
from fleet.deploy.results import Attempt, BenchPoint, DeployResult
from fleet.host.releases import Release
from fleet.host.venvs import VenvRecord
from fleet.outcomes import DeployStatus

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


SETTINGS = bench.BenchSettings(playbook="glm5", model="/models/m", backend="sglang", dataset="random-ids",
                               input_len=128, output_len=64, num_prompts=128, max_concurrency=64)


def drawn(width: int, draw) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    draw(console)
    return console.export_text().splitlines()


def recorded_deploy() -> DeployResult:
    d = json.loads((FIXTURES / "status/deploy-sbx0.json").read_text())
    return DeployResult(host=d["host"], status=d["status"], release=d["release"], config=d["config"],
                        attempts=[Attempt(a["rung"], a["outcome"], a["evidence"], a["seconds"],
                                          bench.stored(a.get("bench"))) for a in d["attempts"]], error=d["error"])


def test_a_deploy_over_a_new_stack_says_old_and_new_versions_under_its_first_line():
    result = replace(recorded_deploy(),
                     versions={"sglang": "0.5.23", "flashinfer-python": "0.7.2", "driver": "580.95.05"},
                     versions_before={"sglang": "0.5.9", "flashinfer-python": "0.6.3", "driver": "580.95.05"})
    lines = drawn(80, lambda c: deploy_view.render(result, c))
    assert lines[1] == "  versions: sglang 0.5.9 -> 0.5.23, flashinfer-python 0.6.3 -> 0.7.2"
    result = replace(result, versions_before=dict(result.versions))
    assert not any("versions:" in line for line in drawn(80, lambda c: deploy_view.render(result, c)))
    # host text, not markup
    result = replace(result, notes=["release r1 ran sglang 0.5.9 -> 0.5.23 now in the venv: [red]x[/]"])
    assert lines[0].startswith("sbx0") and "  note: release r1 ran sglang 0.5.9 -> 0.5.23 now in the venv: [red]x[/]" \
        in drawn(200, lambda c: deploy_view.render(result, c))


@pytest.mark.parametrize("width", [80, 200])
def test_a_refused_preflight_says_nothing_changed_and_shows_versions_as_found(width):
    """Issue 46 finding 11: the pins' venv had sglang 0.5.9, preflight refused every rung; the host still serves
    0.5.23. Before, this printed 'versions: sglang 0.5.23 -> 0.5.9', a downgrade that never happened."""
    result = DeployResult(host="sbx0", status=DeployStatus.FAILED,
                          versions={"sglang": "0.5.9", "flashinfer-python": "0.6.3"},
                          versions_before={"sglang": "0.5.23", "flashinfer-python": "0.7.2"},
                          venv=VenvRecord("/root/.fleet/venvs/abc", None, (), 0),
                          attempts=[Attempt("plain", "PREFLIGHT", "--foo is not in the installed sglang 0.5.9", 0)],
                          error="sbx0: no rung of llama can run here; nothing was changed")
    text = " ".join(drawn(width, lambda c: deploy_view.render(result, c)))
    assert "->" not in text
    assert ("versions as found: serving sglang 0.5.23, flashinfer 0.7.2; in /root/.fleet/venvs/abc sglang 0.5.9, "
            "flashinfer 0.6.3; nothing changed") in " ".join(text.split())
    row = drawn(width, lambda c: deploy_view.render_rollout([result], {"sbx0": 1}, {}, None, c))
    assert not any("->" in line for line in row) and any("0.5.23/0.7.2" in line for line in row)


@pytest.mark.parametrize("width", [80, 200])
def test_attempts_are_one_line_each_with_the_evidence_folded_below(width):
    result = recorded_deploy()
    lines = drawn(width, lambda c: deploy_view.render(result, c))
    assert max(len(line) for line in lines) <= width
    rows = [line for line in lines if line.split()[:2] in (["1", "fusion-sm120"], ["2", "no-fusion"])]
    assert len(rows) == 2 and "TMA_FAILURE" in rows[0] and "3,609" in rows[1]
    table_end = lines.index(rows[1])
    below = " ".join(" ".join(lines[table_end + 1:]).split())
    assert "1. fusion-sm120: RuntimeError: [TensorRT-LLM][ERROR] Assertion failed" in below
    evidence = json.loads((FIXTURES / "status/deploy-sbx0.json").read_text())["attempts"][0]["evidence"]
    assert "".join(evidence.split()) in "".join(below.split())  # all of it, folded (a path may break anywhere)
    assert "next: run MoE on triton" in below


def _releases() -> list[Release]:
    d = json.loads((FIXTURES / "status/deploy-sbx0.json").read_text())
    tuned = Release(id="20261202T150000Z-9f3c", host="sbx0", playbook="glm5-nvfp4-sandbox-long-name",
                    playbook_sha256="x", created="2026-12-02T15:00:00+00:00", status="ok", rung="no-fusion",
                    attempts=[{"rung": "no-fusion", "outcome": "READY", "bench": {
                        "result": {"ok": True, "output_throughput": 3611.0},
                        "runs": {"warmup": 3300, "tok_s": [3521, 3553, 3611]}}}])
    older = Release(id=d["release"], host="sbx0", playbook="glm5-nvfp4", playbook_sha256="x",
                    created="2026-12-02T14:33:05+00:00", status="ok", rung="no-fusion", attempts=d["attempts"])
    broken = Release(id="20261202T151500Z-0001", host="sbx0", playbook="glm5-nvfp4", playbook_sha256="x",
                     created="2026-12-02T15:15:00+00:00", status="rolled_back", rung=None,
                     attempts=[{"rung": "fusion-sm120", "outcome": "TMA_FAILURE"}])
    return [older, tuned, broken]


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("with_bench", [False, True])
def test_history_shows_every_release_id_whole_on_one_line(width, with_bench):
    releases = _releases()
    lines = drawn(width, lambda c: deploy_view.render_history("sbx0", releases, releases[1].id, c, with_bench))
    assert max(len(line) for line in lines) <= width
    for r in releases:
        assert len([line for line in lines if line.startswith(r.id + " ")]) == 1
    current = next(line for line in lines if line.startswith(releases[1].id))
    assert "◀" in current
    if with_bench:  # a trend: the tuned release's median and spread, the bars scaled to the fastest
        assert "3,553" in current and current.split("3,553", 1)[1].split()[0] == "90"
        older = next(line for line in lines if line.startswith(releases[0].id))
        assert "3,609" in older and older.count("█") == 16 and 15 <= current.count("█") <= 16
    if width >= 200:
        assert "TMA_FAILURE" in next(line for line in lines if line.startswith(releases[0].id))


@pytest.mark.parametrize("with_bench", [False, True])
def test_history_labels_each_release_with_the_sglang_and_flashinfer_it_ran(with_bench):
    older, tuned, broken = _releases()
    older.facts = {"versions": {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1"}}
    tuned.facts = {"versions": {"sglang": "0.5.23", "flashinfer-python": "0.7.2"}}
    lines = drawn(120, lambda c: deploy_view.render_history("sbx0", [older, tuned, broken], tuned.id, c, with_bench))
    assert any("sglang/flashinfer" in line for line in lines)
    row = {r.id: next(line for line in lines if line.startswith(r.id + " ")) for r in (older, tuned, broken)}
    assert "0.5.9/0.6.3" in row[older.id] and "0.5.23/0.7.2" in row[tuned.id]
    assert "0.5." not in row[broken.id]  # it recorded nothing: an empty cell
    if with_bench:  # the tok/s sits beside the versions that gave it
        assert row[tuned.id].index("0.5.23/0.7.2") < row[tuned.id].index("3,553")


def test_history_of_releases_that_recorded_no_versions_has_no_versions_column():
    lines = drawn(200, lambda c: deploy_view.render_history("sbx0", _releases(), None, c, True))
    assert not any("sglang/flashinfer" in line for line in lines)


@pytest.mark.parametrize("width", [80, 200])
def test_history_of_a_host_fleet_never_deployed_to_is_one_line(width):
    """The newcomer's second hour: `inv history` over the tour's fleet drew sbx1's empty table as a title folded
    into a 7-character column ('sbx1:', 'release', 's', '(newest', 'last)', 'release')."""
    assert drawn(width, lambda c: deploy_view.render_history("sbx1", [], None, c)) == [
        "sbx1: no releases (fleet has not deployed here)"]


def test_bench_gpus_have_a_bar_of_power_against_the_limit_at_80_columns():
    result = bench.parse((FIXTURES / "bench/sglang-v0.5.9.txt").read_text())
    power = bench.parse_power((FIXTURES / "bench/nvidia-smi-samples.txt").read_text())
    record = bench.BenchRecord(result=result, power=power, settings=SETTINGS)
    lines = drawn(80, lambda c: deploy_view.render_bench("sbx0", "r1", "no-fusion", record, None, c))
    assert max(len(line) for line in lines) <= 80
    gpu_rows = [line for line in lines if line.split() and line.split()[0].isdigit() and "600" in line]
    assert gpu_rows and all("█" * 5 in row for row in gpu_rows)  # about 42% of 600 W: 8 of 20 cells


def _upgraded(host: str, status: str, tok: float | None, ttft: float | None) -> DeployResult:
    record = bench.BenchRecord(result=bench.BenchResult(ok=True, output_throughput=tok,
                                                        latency_ms={"ttft": {"median": ttft}} if ttft else {}))
    return DeployResult(host=host, status=status, release="20261203T101500Z-aaaa", config={"rung": "plain"},
                        versions={"sglang": "0.5.23", "flashinfer-python": "0.7.2"},
                        versions_before={"sglang": "0.5.9", "flashinfer-python": "0.6.3"},
                        bench_before=BenchPoint("20261202T090000Z-bbbb", "plain", 3740.0, 812.0),
                        attempts=[Attempt("plain", "READY" if status == "ok" else "PERF_REGRESSION", "e", 3.0,
                                          record if tok is not None else None)])


@pytest.mark.parametrize("width", [120, 160])
def test_a_rolling_upgrade_reads_like_one_versions_tok_s_and_ttft_before_and_after_per_host(width):
    results = [_upgraded("sbx1", "ok", 3810.0, 790.0), _upgraded("sbx2", "rolled_back", 1020.0, None),
               DeployResult(host="sbx3", status="skipped", error="sbx3: not started: the canary failed")]
    lines = drawn(width, lambda c: deploy_view.render_rollout(results, {"sbx1": 1, "sbx2": 2, "sbx3": 2}, {}, "x", c,
                                                              False, canary=True))
    table = lines[next(i for i, line in enumerate(lines) if line.strip() == "rollout"):]
    header = next(line for line in table if line.lstrip().startswith("host"))
    assert "sglang/flashinfer" in header and "tok/s" in header and "TTFT ms" in header
    row = {line.split()[0]: line for line in table if line.split() and line.split()[0] in ("sbx1", "sbx2", "sbx3")}
    assert "0.5.9/0.6.3 -> 0.5.23/0.7.2" in row["sbx1"] and "3,740 -> 3,810" in row["sbx1"]
    assert "812 -> 790" in row["sbx1"]
    assert "3,740 -> 1,020" in row["sbx2"] and "812 -> -" in row["sbx2"]
    assert "-" in row["sbx3"].split() and "0.5" not in row["sbx3"]
    assert any("(batch 1 the canary)" in line for line in lines)


def test_a_host_left_unchanged_shows_what_serves_not_a_drop_to_nothing():
    """A newcomer's two-host deploy: the host already serving was `unchanged` and its row read `3,484 -> -` tok/s and
    `22 -> -` ms, as if it had stopped serving; nothing was measured because nothing changed."""
    same = DeployResult(host="sbx0", status="unchanged", release="20261202T090000Z-bbbb", config={"rung": "plain"},
                        versions={"sglang": "0.5.9", "flashinfer-python": "0.6.3"},
                        versions_before={"sglang": "0.5.9", "flashinfer-python": "0.6.3"},
                        bench_before=BenchPoint("20261202T090000Z-bbbb", "plain", 3484.0, 22.0))
    results = [_upgraded("sbx1", "ok", 3810.0, 790.0), same]
    lines = drawn(160, lambda c: deploy_view.render_rollout(results, {"sbx0": 1, "sbx1": 1}, {}, None, c, False))
    row = next(line for line in lines if line.startswith("sbx0 ") and "unchanged" in line)
    assert "->" not in row and "3,484" in row.split() and "22" in row.split(), row


def test_a_rollouts_lines_name_each_host_once():
    """The fifth newcomer's hour: `sbx2: sbx2: not started: interrupted by the operator (Ctrl-C)` and `sbx1: sbx1:
    timed out after 3s (--host-timeout)`: the error names its host already; the view named it again."""
    results = [DeployResult(host="sbx2", status="skipped", error="sbx2: not started: the canary failed"),
               DeployResult(host="sbx3", status="failed", error="no rung of llama can run here")]
    lines = drawn(120, lambda c: deploy_view.render_rollout(results, {"sbx2": 1, "sbx3": 1}, {}, "x", c, False))
    assert "sbx2: not started: the canary failed" in lines and not any("sbx2: sbx2" in line for line in lines)
    assert "sbx3: no rung of llama can run here" in lines, lines


def test_one_hosts_upgrade_says_the_bench_gate_before_and_after_under_its_versions():
    lines = drawn(100, lambda c: deploy_view.render(_upgraded("sbx1", "ok", 3810.0, 790.0), c))
    assert lines[1:3] == ["  versions: sglang 0.5.9 -> 0.5.23, flashinfer-python 0.6.3 -> 0.7.2",
                          "  bench gate: 3,740 -> 3,810 tok/s, TTFT 812 -> 790 ms"]


def test_history_shows_each_releases_canary_verdict_and_a_hostile_one_as_unreadable():
    import random

    from judge_traffic import side

    from fleet.deploy import judge
    from fleet.policy import Canary

    rng = random.Random(1)
    verdict = judge.sequential(side(rng, 2.0, 600), side(rng, 2.0, 600, slower=0.10), Canary())
    older, tuned, broken = _releases()
    tuned.canary = verdict.to_json()
    broken.canary = {**verdict.to_json(), "metrics": [{"part": "[red]x[/]"}]}
    lines = drawn(200, lambda c: deploy_view.render_history("sbx0", [older, tuned, broken], tuned.id, c))
    row = {r.id: next(line for line in lines if line.startswith(r.id + " ")) for r in (older, tuned, broken)}
    assert "canary" in " ".join(lines)
    assert verdict.summary() in row[tuned.id] and verdict.summary().startswith("fail: ")
    assert "unreadable verdict" in row[broken.id] and "[red]" not in row[broken.id]
    assert " - " in row[older.id]
    plain = drawn(200, lambda c: deploy_view.render_history("sbx0", [older], None, c))
    assert "canary" not in " ".join(plain)  # no release was a canary: no column


@pytest.mark.parametrize("width", [80, 200])
def test_a_tune_that_tried_no_rung_draws_no_table(width):
    """Found on the way (issue 46, newcomer items): `inv tune` on a host it could not reach printed its table's
    title one letter a line (a table of no rows and no width), 60 lines of 'a', '1', ':'."""
    from fleet.multihost.tune import TuneResult

    result = TuneResult("a1", DeployStatus.FAILED, error="a1 (root@127.0.0.1:1): connection refused")
    lines = drawn(width, lambda c: deploy_view.render_tune(result, c))
    assert lines == ["a1: failed", "a1 (root@127.0.0.1:1): connection refused"]


def test_a_rollout_says_each_hosts_error_once_below_its_table():
    """Issue 46, 7: a failed host's error was printed under its attempts and again under the rollout table."""
    failed = DeployResult(host="sbx3", status="failed", error="sbx3: no rung of llama served (2 tried)",
                          attempts=[Attempt("fast", "CUDA_OOM", "torch.OutOfMemoryError: CUDA out of memory", 31.0)])
    lines = drawn(160, lambda c: deploy_view.render_rollout([failed], {"sbx3": 1}, {}, None, c, False))
    said = [i for i, line in enumerate(lines) if "no rung of llama served" in line]
    table = max(i for i, line in enumerate(lines) if line.startswith("sbx3 ") and "failed" in line)
    assert len(said) == 1 and said[0] > table, lines


def test_a_bench_that_failed_names_its_host_once():
    """`inv bench` of a host with no release said `sbx1: failed sbx1: no current release to measure`."""
    lines = drawn(80, lambda c: deploy_view.render_bench("sbx1", None, None, None,
                                                         "sbx1: no current release to measure (deploy first)", c))
    assert lines == ["sbx1: failed: no current release to measure (deploy first)"]
