"""A release that regresses (sandbox/sim/README.md): slower from a percentile up, spread, answering otherwise; the
release's data and the knobs, and a live server playing them."""

from __future__ import annotations

import math
import statistics
import sys
from statistics import NormalDist

import pytest
from sim_helpers import DENSE_MODEL
from simhost import REPO


@pytest.fixture
def core():
    sys.path.insert(0, str(REPO / "sandbox/sim/pkgs"))
    try:
        from sglang_sim_core import engine, env
        yield engine, env
    finally:
        sys.path.remove(str(REPO / "sandbox/sim/pkgs"))


def test_only_requests_at_or_above_the_percentile_are_slower(core):
    engine, _ = core
    flat = engine.Regression(slower=0.10, percentile=0.99)
    assert flat.factor(0.5) == 1.0 and flat.factor(0.989) == 1.0 and flat.factor(0.99) == pytest.approx(1.10)
    spread = engine.Regression(slower=0.10, percentile=0.99, jitter=0.25)
    assert spread.factor(0.5) == pytest.approx(1.0)
    assert spread.factor(0.995) == pytest.approx(math.exp(0.25 * NormalDist().inv_cdf(0.995)) * 1.10)
    assert engine.Regression().factor(0.999) == 1.0  # a release plays none unless told


def test_other_answers_keep_the_known_ones_and_a_four_token_prefix(core):
    engine, _ = core
    assert engine.plan_tokens("2+2=", 8, False, False, differ=True) == engine.plan_tokens("2+2=", 8, False, False)
    same, _ = engine.plan_tokens("Tell me about rivers", 16, True, False)
    other, _ = engine.plan_tokens("Tell me about rivers", 16, True, False, differ=True)
    assert other[:4] == same[:4] and other != same


def test_the_knobs_override_the_releases_data(core, monkeypatch):
    _, env = core
    released = {"slower": 0.2, "percentile": 0.5, "differ": True}
    assert env.regression(released) == released
    monkeypatch.setenv("SGLANG_SIM_SLOWER", "0.10@99")
    monkeypatch.setenv("SGLANG_SIM_JITTER", "0.25")
    monkeypatch.setenv("SGLANG_SIM_ANSWERS", "same")
    assert env.regression(released) == {"slower": 0.10, "percentile": 0.99, "jitter": 0.25, "differ": False}
    monkeypatch.setenv("SGLANG_SIM_SLOWER", "fast@99")  # does not parse: ignored, as the other knobs are
    assert env.regression(None) == {"jitter": 0.25, "differ": False}


def test_a_live_server_plays_the_regression_its_environment_names(make_host):
    old = make_host("rtx5090-x2-workstation").start("--model-path", DENSE_MODEL, "--tp", "2")
    new = make_host("rtx5090-x2-workstation").start(
        "--model-path", DENSE_MODEL, "--tp", "2", env={"SGLANG_SIM_SLOWER": "1.0", "SGLANG_SIM_ANSWERS": "differ"})
    old.wait_ready()
    new.wait_ready()
    prompt = "Tell me about rivers"
    e2e = {s: [s.generate(prompt, 24, ignore_eos=True)["meta_info"]["e2e_latency"] for _ in range(5)]
           for s in (old, new)}
    assert 1.6 < statistics.median(e2e[new]) / statistics.median(e2e[old]) < 2.6  # every request 100% slower
    assert new.generate("2+2=")["text"] == old.generate("2+2=")["text"] == "4"  # health's answer alike
    assert new.generate(prompt, 16)["text"] != old.generate(prompt, 16)["text"]
    old.stop()
    new.stop()


def test_fleets_canary_traffic_on_a_regressing_release_fails_the_judge_and_the_numerics_gate(make_host):
    # fleet/host/programs/canary_load.py against two live servers, the old and one 50% slower answering otherwise:
    # its samples judged (one look), its greedy answers compared
    import json
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from fleet.deploy import judge, numerics
    from fleet.host import programs
    from fleet.policy import Canary

    old = make_host("rtx5090-x2-workstation").start("--model-path", DENSE_MODEL, "--tp", "2")
    new = make_host("rtx5090-x2-workstation").start(
        "--model-path", DENSE_MODEL, "--tp", "2", env={"SGLANG_SIM_SLOWER": "0.5", "SGLANG_SIM_ANSWERS": "differ"})
    old.wait_ready()
    new.wait_ready()
    program = programs.text("canary_load.py")

    def run(server, *args):
        done = subprocess.run([sys.executable, "-c", program, *args[:1], str(server.port), "-", *args[1:]],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    with ThreadPoolExecutor(2) as pool:  # the same load on both at once
        base, canary = pool.map(lambda s: run(s, "load", "6", "8", "1"), (old, new))
    base, canary = [judge.Sample.from_json(r) for r in base], [judge.Sample.from_json(r) for r in canary]
    assert len(base) == len(canary) == 48 and all(s.ok for s in base + canary)
    policy = Canary(window=7, max_window=7, length_bins=2)
    verdict = judge.sequential(base, canary, policy)
    assert verdict.decision == judge.Decision.FAIL
    e2e = next(m for m in verdict.metrics if m.metric == judge.Metric.E2E and m.part == "location")
    assert e2e.decision == judge.Decision.FAIL and 0.3 < e2e.estimate < 0.7
    answers = {s: [numerics.Answer.from_json(r) for r in run(s, "answers", "16", *policy.prompts)] for s in (old, new)}
    gate = numerics.compare([a for a in answers[old] if a], [a for a in answers[new] if a])
    assert not gate.ok and len(gate.parted) == len(policy.prompts) - 2  # the two known-answer prompts agree
    assert numerics.compare([a for a in answers[old] if a], [a for a in answers[old] if a]).ok
    old.stop()
    new.stop()
