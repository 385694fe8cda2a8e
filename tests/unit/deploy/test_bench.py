"""fleet.deploy.bench: the bench_serving command, the result block parser, power samples, the performance gate."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from pydantic import ValidationError

from fleet.deploy import bench
from fleet.host import programs as hostside
from fleet.playbook import Bench, Playbook

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bench"
REPO = Path(__file__).resolve().parents[3]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def book(**bench_section) -> Playbook:
    return Playbook.model_validate({"name": "glm5", "model": {"path": "/models/GLM-5-NVFP4"},
                                    "ladder": [{"name": "a"}], "bench": bench_section})


# ---------------------------------------------------------------------- command


def test_command_is_offline_safe_with_fixed_lengths_and_quoted():
    spec = Bench(input_len=32, output_len=16, num_prompts=64, max_concurrency=8)
    cmd = bench.command("/opt/my venv", 30001, spec, model="glm-5", tokenizer="/models/GLM 5")
    argv = shlex.split(cmd)  # the venv's own words: benchrun.script runs them as the venv's owner
    assert argv[:3] == ["/opt/my venv/bin/python", "-m", "sglang.bench_serving"]
    pairs = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--")}
    assert pairs["--dataset-name"] == "random-ids"  # random and sharegpt download ShareGPT (FACTS.md section 2)
    assert pairs["--random-range-ratio"] == "1.0"  # the default 0.0 draws random lengths
    assert (pairs["--random-input-len"], pairs["--random-output-len"]) == ("32", "16")
    assert (pairs["--num-prompts"], pairs["--max-concurrency"], pairs["--port"]) == ("64", "8", "30001")
    assert pairs["--host"] == "127.0.0.1" and pairs["--model"] == "glm-5"
    assert pairs["--tokenizer"] == "/models/GLM 5"  # local: by the served name it would come from the Hub


def test_with_a_key_the_launcher_sets_it_inside_bench_serving():
    cmd = bench.command("/opt/venv", 30001, Bench(), key_path="/etc/fleet/sglang.key")
    assert shlex.split(cmd)[:5] == ["/opt/venv/bin/python", "/var/lib/fleet/bin/fleet-launch", "sglang.key",
                                      "env:OPENAI_API_KEY", "sglang.bench_serving"]
    assert "OPENAI_API_KEY=" not in cmd and shlex.split(bench.command("/v", 1, Bench()))[1:3] == [
        "-m", "sglang.bench_serving"]
    text = bench.script(cmd, 60, venv="/opt/venv", key_path="/etc/fleet/sglang.key")  # the key's folder, by script
    assert "k=/etc/fleet/sglang.key; [ -z \"$k\" ] || export CREDENTIALS_DIRECTORY=\"${k%/*}\"" in text


def test_script_samples_in_the_background():
    text = bench.script("python -m sglang.bench_serving", 120, venv="/opt/venv")
    assert "nvidia-smi --query-gpu=index,power.draw,power.limit,utilization.gpu" in text
    as_owner = hostside.as_decided('"$o"', "python -m sglang.bench_serving")  # the owner --who named
    assert f"timeout 120 {as_owner}" in text and ") > \"$d/smi\" 2>&1 &" in text


def test_split_output_separates_the_parts():
    text = ("@@FLEET-BENCH rc=0\n@@FLEET-BENCH out\nline a\nline b\n@@FLEET-BENCH err\noops\n"
            "@@FLEET-BENCH smi\n@@ 1.0\n0, 10, 600, 0\n")
    rc, out, err, smi = bench.split_output(text)
    assert (rc, out, err) == (0, "line a\nline b", "oops")
    assert smi.splitlines() == ["@@ 1.0", "0, 10, 600, 0"]
    assert bench.split_output("connection lost")[0] is None


# ---------------------------------------------------------------------- the result block


def test_parses_the_v0_5_9_block():
    r = bench.parse(fixture("sglang-v0.5.9.txt"))
    assert r.ok and r.error is None
    assert set(r.unknown) == {"Total input text tokens", "Total generated tokens (retokenized)",
                              "Peak concurrent requests"}  # kept for the record, not needed
    assert r.output_throughput == 3739.51 and r.peak_output_throughput == 3904.0
    assert r.successful_requests == 512 and isinstance(r.successful_requests, int)
    assert r.total_output_tokens == 131072 and r.duration_s == 35.05
    assert r.max_concurrency == "64" and r.request_rate == "inf" and r.backend == "sglang"
    assert r.stat("ttft", "median") == 57.12 and r.stat("ttft", "p99") == 118.33
    assert r.stat("tpot", "median") == 16.86 and r.stat("tpot", "p99") == 17.02
    assert r.stat("e2e", "p90") == 4402.17 and r.stat("itl", "p95") == 18.04 and r.stat("itl", "max") == 131.5


def test_parses_the_v0_5_3_block_without_tpot_peak_or_p90():
    r = bench.parse(fixture("sglang-v0.5.3.txt"))
    assert r.ok and r.output_throughput == 78.6 and r.total_throughput == 157.2
    assert r.stat("tpot", "median") is None and "tpot" not in r.latency_ms
    assert r.peak_output_throughput is None and r.stat("e2e", "p90") is None
    assert r.stat("e2e", "median") == 833498.04 and r.stat("ttft", "p99") == 1544.87


def test_a_failed_run_is_an_error_not_a_zero():
    r = bench.parse(fixture("failed-server-down.txt"))
    assert not r.ok and r.output_throughput is None and "no 'Serving Benchmark Result'" in r.error
    r = bench.parse(fixture("all-failed.txt"))
    assert not r.ok and r.error == "no request succeeded"


def test_the_last_block_wins_and_unknown_labels_are_kept():
    text = fixture("sglang-v0.5.3.txt") + "\n" + fixture("sglang-v0.5.9.txt").replace(
        "Concurrency:", "Mean Acceptance Rate:  0.5\nConcurrency:")
    r = bench.parse(text)
    assert r.output_throughput == 3739.51 and "Mean Acceptance Rate" in r.unknown


# ---------------------------------------------------------------------- power


def test_power_averages_the_busy_samples_and_flags_underutilisation():
    p = bench.parse_power(fixture("nvidia-smi-samples.txt"))
    assert (p.samples, p.busy_samples) == (4, 2)
    assert [(g.index, g.mean_w, g.max_w, g.limit_w, g.mean_util) for g in p.gpus] == [
        (0, 249.5, 250.0, 600.0, 97.0), (1, 250.5, 251.0, 600.0, 97.0)]
    assert p.mean_w == 250.0 and p.limit_w == 600.0 and p.fraction == pytest.approx(0.417, abs=1e-3)
    assert p.underutilised is True  # the seed: 250 W of 600 W
    assert bench.parse_power(fixture("nvidia-smi-samples.txt"), threshold=0.4).underutilised is False


def test_power_without_samples_says_so():
    p = bench.parse_power("nvidia-smi: command not found\n")
    assert p.samples == 0 and p.mean_w is None and p.underutilised is None and p.note


# ---------------------------------------------------------------------- the gate


def test_gate_against_the_last_known_good_release():
    v = bench.evaluate(78.6, 0.9, history=bench.Baseline(3740.0, "release 20261130T120000Z-ab12"), floor=500)
    assert not v.ok and v.basis == "release"
    assert v.evidence == "78.6 tok/s < 90% of 3,740 tok/s (release 20261130T120000Z-ab12)"
    assert bench.evaluate(3400, 0.9, history=bench.Baseline(3740.0, "release x")).ok


def test_gate_falls_back_to_the_floor_then_to_the_best_rung_of_the_run():
    v = bench.evaluate(78.6, 0.9, floor=500.0, best=bench.Baseline(3740.0, "rung no-fusion in this run"))
    assert not v.ok and v.basis == "floor" and v.evidence == "78.6 tok/s < the playbook's floor of 500 tok/s"
    v = bench.evaluate(880.0, 0.9, best=bench.Baseline(3740.0, "rung no-fusion in this run"))
    assert not v.ok and v.basis == "run" and "< 90% of 3,740 tok/s (rung no-fusion in this run)" in v.evidence
    first = bench.evaluate(78.6, 0.9)
    assert first.ok and first.basis == "none"


def _key(playbook: str = "glm5") -> bench.BenchSettings:
    return bench.BenchSettings(playbook=playbook, model="/models/m", backend="sglang", dataset="random-ids",
                               input_len=128, output_len=64, num_prompts=64, max_concurrency=16)


def _manifest(rid, status="ok", rung="no-fusion", tok=3740.0, key=None, top=None):
    key = (key or _key()).to_json()
    record = {"settings": key, "result": {"ok": True, "output_throughput": tok}}
    m = {"id": rid, "status": status, "rung": rung,
         "attempts": [{"rung": "fusion", "outcome": "PERF_REGRESSION",
                       "bench": {"settings": key, "result": {"ok": True, "output_throughput": 78.6}}},
                      {"rung": rung, "outcome": "READY", "bench": record}]}
    if top is not None:
        m["bench"] = {"settings": key, "result": {"ok": True, "output_throughput": top}}
    return m


def test_known_good_prefers_the_current_release_and_matching_settings():
    key = _key()
    ms = [_manifest("r1", tok=3000.0), _manifest("r2", tok=3740.0, top=3600.0), _manifest("r3", status="failed"),
          _manifest("r4", tok=9999.0, key=_key("other"))]
    assert bench.known_good(ms, "r1", key) == bench.Baseline(3000.0, "release r1", 0.0)
    assert bench.known_good(ms, None, key) == bench.Baseline(3600.0, "release r2")  # newest ok; `inv bench`'s own
    assert bench.known_good(ms, "r3", key) == bench.Baseline(3600.0, "release r2")  # a failed release is no baseline
    assert bench.known_good(ms, None, _key("new")) is None


def test_known_good_passes_over_a_record_a_host_sent_in_the_wrong_shape():
    ms = [_manifest("r1", tok=3000.0), _manifest("r2", tok=3740.0, top=3600.0)]
    ms[1]["bench"]["result"]["output_throughput"] = "fast"  # `inv bench`'s own record: garbage
    ms[1]["attempts"][-1]["bench"]["settings"] = "x"  # the serving rung's: garbage too
    assert bench.known_good(ms, None, _key()) == bench.Baseline(3000.0, "release r1")


def test_a_tuned_release_is_a_baseline_of_its_median_and_the_gate_allows_its_spread():
    key = _key()
    m = _manifest("r9", tok=3611.0, key=key)
    m["attempts"][-1]["bench"]["runs"] = {"warmup": 3300.0, "tok_s": [3521.0, 3553.0, 3611.0]}
    base = bench.known_good([m], "r9", key)
    assert base == bench.Baseline(3553.0, "release r9, median of 3 runs", 90.0)
    # 90% of 3,553 is 3,198; less the spread of 90: 3,108 passes, 3,100 does not
    ok, short = bench.evaluate(3108.0, 0.9, history=base), bench.evaluate(3100.0, 0.9, history=base)
    assert ok.ok and not short.ok and short.required == pytest.approx(0.9 * 3553.0 - 90.0)
    assert short.evidence == "3,100 tok/s < 90% of 3,553 tok/s less its spread of 90 (release r9, median of 3 runs)"


def test_settings_key_and_the_shipped_playbook_bench_section():
    from fleet.deploy.inputs import load_playbook

    shipped, _ = load_playbook(str(REPO / "playbooks/glm5-nvfp4.yaml"))
    assert shipped.bench and shipped.bench.gate and shipped.bench.dataset == "random-ids"
    assert shipped.bench.floor and 78.6 < shipped.bench.floor < 880  # catches fusion, keeps untuned triton
    key = bench.settings_key(shipped, shipped.bench)
    assert key.model == "/models/GLM-5-NVFP4" and key.num_prompts == shipped.bench.num_prompts
    assert key.to_json() == {"playbook": shipped.name, "model": "/models/GLM-5-NVFP4", "backend": shipped.bench.backend,
                             "dataset": "random-ids", "input_len": shipped.bench.input_len,
                             "output_len": shipped.bench.output_len, "num_prompts": shipped.bench.num_prompts,
                             "max_concurrency": shipped.bench.max_concurrency}


def test_bench_section_is_validated():
    assert book(fraction=0.8).bench.fraction == 0.8
    for bad in ({"fraction": 1.5}, {"dataset": "sharegpt"}, {"num_prompts": 0}, {"floor": -1}, {"bogus": 1}):
        with pytest.raises(ValidationError):
            book(**bad)


def test_summary_line_shows_throughput_latency_power_and_the_flag():
    r = bench.parse(fixture("sglang-v0.5.9.txt"))
    p = bench.parse_power(fixture("nvidia-smi-samples.txt"))
    line = bench.summary(bench.BenchRecord(result=r, power=p))
    assert line == ("3,740 tok/s; TTFT median 57 / p99 118 ms; TPOT median 17 ms; 250 W per GPU of 600 W "
                    "(UNDERUTILISED)")


def test_a_run_where_most_requests_failed_is_not_a_measurement():
    # the recorded v0.5.9 block: 512 requests succeeded
    out = fixture("sglang-v0.5.9.txt")
    assert bench.parse(out, 512, 0.99).ok and bench.parse(out, 517, 0.99).ok  # 5 of 517 lost: within 99%
    r = bench.parse(out, 520, 0.99)
    assert not r.ok and r.error == "only 512 of 520 requests succeeded (fewer than 99%): not a measurement"
    r = bench.parse(out, 6400, 0.99)  # 8% succeeded: its tok/s says nothing of the server
    assert not r.ok and r.output_throughput is not None and "only 512 of 6400" in r.error
    assert not bench.parse(out, 513, 1.0).ok and bench.parse(out).ok


def test_the_success_share_is_a_bench_setting():
    assert Bench().min_success == 0.99 and Bench(min_success=0.5).min_success == 0.5
    with pytest.raises(ValidationError):
        Bench(min_success=0)
