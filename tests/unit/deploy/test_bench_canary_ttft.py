"""bench/bench_canary_ttft.py on windows of known make: each request's TTFT a x factor(u) + b (+ a heavy-tailed
rest), its TPOT times the same factor, the canary's factor 10% larger from u = 0.99 (the simulator's
SGLANG_SIM_SLOWER=0.10@99): the fit finds a and b, the slowed requests are in the TTFT tail when nothing else is,
and a part it does not scale with a rest like the sandbox's push them out of it."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from statistics import NormalDist

import benchmodule
import pytest

from fleet.deploy import judge
from fleet.policy import Canary

STRATA = ((64, 16, 2.4), (512, 128, 9.0))  # prompt, output tokens, a (ms)


@pytest.fixture(scope="module")
def ttft():
    return benchmodule.load("bench_canary_ttft")


def side(rng: random.Random, n: int, slower: float, b_ms: float, rest_ms: float) -> list[judge.Sample]:
    out = []
    for i in range(n):
        p, o, a = STRATA[i % len(STRATA)]
        u = min(max(rng.random(), 1e-9), 1 - 1e-9)
        factor = math.exp(0.25 * NormalDist().inv_cdf(u)) * (1 + slower if u >= 0.99 else 1.0)
        rest = rest_ms * rng.expovariate(1.0) ** 2  # heavy-tailed, on both sides alike
        ttft = (a * factor + b_ms + rest) / 1000
        out.append(judge.Sample(i / 40, p, o, ttft, ttft + 0.005 * factor * (o - 1)))
    return out


def window(tmp_path: Path, b_ms: float, rest_ms: float, seed: int = 1) -> Path:
    rng = random.Random(seed)
    base, canary = side(rng, 4000, 0.0, b_ms, rest_ms), side(rng, 4000, 0.10, b_ms, rest_ms)
    verdict = judge.sequential(base, canary, Canary())
    path = tmp_path / f"rec-{b_ms}-{rest_ms}.json"
    path.write_text(json.dumps(judge.Recorded(Canary(), tuple(base), tuple(canary), verdict).to_json()))
    return path


def test_the_fit_finds_the_part_the_release_scales_and_the_part_it_does_not(ttft, tmp_path):
    found = ttft.one(window(tmp_path, b_ms=2.0, rest_ms=0.0), 1.0)
    for p, o, a in STRATA:
        fa, fb, rest = found["fit"][(p, o)]
        assert fa == pytest.approx(a, rel=0.03) and fb == pytest.approx(2.0, abs=0.1)
        assert max(abs(e) for e in rest) < 0.05
    assert found["corr"] > 0.95


def test_the_slowed_requests_fill_the_ttft_tail_only_without_a_rest_like_the_sandboxs(ttft, tmp_path):
    clean = ttft.one(window(tmp_path, b_ms=0.0, rest_ms=0.0), 1.0)
    noisy = ttft.one(window(tmp_path, b_ms=2.0, rest_ms=0.8), 4.0)
    assert clean["slowed_in_tail"] > 0.9 and clean["ttft_tail"] > 0.05
    assert noisy["slowed_in_tail"] < 0.6 and noisy["ttft_tail"] < clean["ttft_tail"]
    assert noisy["ttft_tail_larger"] > noisy["ttft_tail"]  # the release's part 4x larger shows more of the 10%
