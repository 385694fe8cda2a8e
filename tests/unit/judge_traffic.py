"""Synthetic traffic for the canary judge's tests and bench/bench_canary_judge.py: one side's requests as a
client would record them, from a seeded RNG.

Each request has a prompt and output length from a fixed mix, a TTFT of prefill plus one step and a TPOT, each
times its own log-normal jitter (sigma `sigma`), and fails with probability `errors`. The regression is the
simulator's (sandbox/sim/README.md, SGLANG_SIM_SLOWER): a request whose jitter quantile is at or above
`percentile` is slower by `slower` (a fraction), TTFT and TPOT alike; percentile 0 slows every request.
"""

from __future__ import annotations

import math
import random
from statistics import NormalDist

from fleet.deploy.judge import Sample

PROMPTS = (64, 128, 256, 512, 1024)
OUTPUTS = (16, 32, 64, 128, 256)


def side(rng: random.Random, rate: float, seconds: float, *, slower: float = 0.0, percentile: float = 0.0,
         sigma: float = 0.25, errors: float = 0.002) -> list[Sample]:
    """`rate` requests a second for `seconds`, ended evenly through the window."""
    out = []
    unit = NormalDist()
    for i in range(int(rate * seconds)):
        p, o = rng.choice(PROMPTS), rng.choice(OUTPUTS)
        u1, u2 = rng.random(), rng.random()
        at = (i + 1) / rate
        if rng.random() < errors:
            out.append(Sample(at, p, o))
            continue
        factor = 1 + slower if u1 >= percentile else 1.0
        ttft = (0.02 + p / 20_000) * math.exp(sigma * unit.inv_cdf(u1)) * factor
        tpot = 0.02 * math.exp(sigma * unit.inv_cdf(u2) / 2) * factor
        out.append(Sample(at, p, o, ttft, ttft + tpot * (o - 1)))
    return out
