"""`inv tune --slo`'s search (fleet.deploy.guided: model-guided, multi-fidelity, crash-aware, finalists compared by
interleaved replicates) against a grid search and against a re-implementation of sglang's auto_benchmark tiered
strategy, on the same simulated surfaces in the same run, over --seeds surfaces (and the guided search without its
short probes, every trial searched in full: what multi-fidelity saves); then the replicate comparison
(fleet.deploy.replicates) alone, with its 1% margin and without: how often it names a winner of two identical
configurations (A/A, at most 5% wanted) and how often it finds B truly 5% and 10% faster (its power).

No host: the surface is the seed profile's perf_model (sandbox/profiles/rtx-pro-6000-x8-proxmox/profile.yaml;
seed 0 as written, every other seed each factor times exp(N(0, 0.05)) and the batch shape drawn below), read and
applied by the simulator's own code (sandbox/sim/pkgs/sglang_sim_core/perfmodel.py: read, shape for the flag
factors, the chunk's prefill gain and decode stall and the CUDA-graph batch, crash for the crash regions on SM 12
with sglang 0.5.9 / flashinfer 0.6.3). What the simulator does not give as a formula is the bench's own: the
simulator's kept rate under an SLO is a measurement of its token-pacing engine in real time (a load search per
trial: test_tune_slo's 4 trials take minutes at 10x token speed, and a run of this bench evaluates thousands), and
its model has no effect of mem-fraction-static or KV capacity, half of the narrow space, so:
- the kept request rate is R0 x the factors x batch x graphs x chunk; batch = b / (b + b0), b = min(max running
  requests, KV capacity), capacity 2048 x (mem - 0.7) / 0.1 requests; b above 1,024 (the behaviour table's limit)
  keeps 0.85 of it (TPOT p99 breaks first); graphs: the steps of a batch above cuda-graph-max-bs decode at
  eager_decode_factor; chunk: a request half prefill, half decode in log terms, the square root of the
  simulator's prefill gain (chunk / 8192) ^ 0.3 over its decode stall 1 + stall x max(0, chunk - 8192) / 1024;
- one hidden crash no gate knows (SCOOT's hidden constraints): mem-fraction-static 0.9 with cuda-graph-max-bs 1024
  runs out of memory capturing graphs; the search space's gates (playbooks/upstream/backend-gates.yaml) rule out
  the rest for SM120 before any start, for every strategy but auto_benchmark, which skips only fa3 off SM8x/9x
  (sglang 0.5.16 auto_benchmark_lib.py is_attention_backend_supported);
- a measurement: true rate x the start's lognormal run noise x exp(N(0, 0.25 / sqrt(n))) x (1 - 0.3 / sqrt(n))
  (a p99 bound over n requests is wider, so fewer requests keep less) x U(1 - tol, 1) (the load search stops
  within tol of the boundary: 5% short, 2% full);
- wall time: a start 420 s, a crash 300 s (weights load before the kernels fail); a load point n / rate + 10 s;
  a full search from scratch 7 points, a short one 5 points of 200 requests, the full one after a short 3 points
  of 1,000 on the same server; auto_benchmark: tier 2, at most 8 candidates (its defaults, auto_benchmark_lib.py
  build_candidates and DEFAULT_MAX_CANDIDATES), 5 bisection rounds each relaunching the server.
"Within noise": a strategy's pick is at least exp(-2 x sqrt(2) x run_sigma) (0.958) of the best true rate.

usage: .venv/bin/python bench/bench_tune_search.py [--seeds 20] [--budget 20] [--aa 2000] [--pairs 3]
       [--space narrow|full]   (a table, then JSON; --seeds 0: the replicate checks alone)
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]
from fleet.deploy import guided, replicates, searchspace  # noqa: E402
from fleet.deploy.searchspace import Dimension, Space  # noqa: E402
from fleet.deploy.trials import Trial  # noqa: E402
from fleet.logs.proportion import wilson  # noqa: E402
from sandbox.sim import core  # noqa: E402

PROFILE = REPO / "sandbox/profiles/rtx-pro-6000-x8-proxmox/profile.yaml"
HOST = searchspace.Host(sm=120, gpus=8, versions={"sglang": "0.5.9", "flashinfer-python": "0.6.3"})
SERVER_DEFAULT = {"max-running-requests": 1024, "chunked-prefill-size": 8192, "cuda-graph-max-bs": 512,
                  "mem-fraction-static": 0.85, "schedule-policy": "fcfs", "attention-backend": "flashinfer",
                  "moe-runner-backend": "flashinfer_cutlass", "fp4-gemm-backend": "flashinfer_cutlass", "tp-size": 8}
NARROW = {"max-running-requests": [256, 512, 1024, 2048], "cuda-graph-max-bs": [256, 512, 1024],
          "mem-fraction-static": [0.8, 0.85, 0.9], "attention-backend": ["flashinfer", "triton"]}
START_S, CRASH_S, OVERHEAD_S = 420.0, 300.0, 10.0
SHORT, FULL = 200, 1000
STRATEGIES = ("grid", "tiered", "guided", "one-fid")  # one-fid: guided without short probes


PERF = core.module("perfmodel")  # the simulator's own reading of a perf_model


@dataclass(frozen=True)
class Surface:
    r0: float
    model: dict[str, Any]  # a perf_model block (this seed's), its noise left to the bench's measurement
    b0: float
    run_sigma: float

    def config(self, trial: Trial) -> dict[str, object]:
        return {**SERVER_DEFAULT, **trial.as_dict()}

    @staticmethod
    def args(config: dict[str, object]) -> SimpleNamespace:
        """The flags as the simulator reads them off sglang's ServerArgs."""
        return SimpleNamespace(**{k.replace("-", "_"): v for k, v in config.items()})

    def crashes(self, trial: Trial) -> bool:
        c = self.config(trial)
        a = self.args(c)
        if any(PERF.crash(self.model, e["phase"], a, HOST.sm // 10, HOST.versions) for e in self.model["crashes"]):
            return True
        if c["attention-backend"] == "trtllm_mha":  # SM100 only (backend-gates.yaml), not in the profile
            return True
        return c["mem-fraction-static"] == 0.9 and c["cuda-graph-max-bs"] == 1024

    def rate(self, trial: Trial) -> float:
        c = self.config(trial)
        shape = PERF.shape(self.model, self.args(c), random.Random())  # no noise in self.model: exact
        r = self.r0 * shape.rate_factor
        cap = 2048 * (float(c["mem-fraction-static"]) - 0.7) / 0.1  # type: ignore[arg-type]
        b = min(float(c["max-running-requests"]), cap)  # type: ignore[arg-type]
        r *= b / (b + self.b0) * (0.85 if b > 1024 else 1.0)
        g = float(shape.graph_bs)
        r *= 1.0 if b <= g else (g + (b - g) * shape.eager_factor) / b
        # a request half prefill, half decode (in log terms): the prefill gain's square root, the decode stall
        return r * math.sqrt(shape.prefill_factor / self.model["prefill_speedup"]) / shape.decode_stall


def surface(seed: int) -> Surface:
    model = PERF.read(PROFILE.read_text())
    rng = random.Random(seed)
    factors = {f: {v: (x if seed == 0 or x == 1.0 else x * math.exp(rng.gauss(0, 0.05))) for v, x in t.items()}
               for f, t in model["factors"].items()}
    if seed:
        for f, t in factors.items():
            for v in SERVER_DEFAULT.values():
                if str(v) in t and t[str(v)] == 1.0 and f != "tp-size":
                    t[str(v)] = math.exp(rng.gauss(0, 0.03))
    b0, eager, stall = (256, model["cuda_graph"]["eager_decode_factor"], 0.03) if seed == 0 else \
        (rng.uniform(128, 768), rng.uniform(0.6, 0.85), rng.uniform(0.01, 0.05))
    chunk = {**model["chunked_prefill"], "decode_stall_per_1k": stall}
    ours = {**model, "factors": factors, "cuda_graph": {"eager_decode_factor": eager}, "chunked_prefill": chunk,
            "noise": {}}
    return Surface(rng.uniform(8, 16) if seed else 12.0, ours, b0, model["noise"]["run_sigma"])


class Run:
    """One strategy on one surface: the wall time it spends, the starts it makes and how many crash."""

    def __init__(self, s: Surface, rng: random.Random) -> None:
        self.s, self.rng = s, rng
        self.wall = 0.0
        self.starts = 0
        self.crashes = 0
        self.full_runs = 0  # load searches with the full number of requests (the finalists' included)

    def start(self, trial: Trial) -> float | None:
        """A start's run noise, or None when it crashed."""
        self.starts += 1
        if self.s.crashes(trial):
            self.crashes += 1
            self.wall += CRASH_S
            return None
        self.wall += START_S
        return math.exp(self.rng.gauss(0, self.s.run_sigma))

    def search(self, trial: Trial, run: float, n: int, points: int, tol: float) -> float:
        true = self.s.rate(trial)
        self.wall += points * (n / true + OVERHEAD_S)
        self.full_runs += 1
        return true * run * math.exp(self.rng.gauss(0, 0.25 / math.sqrt(n))) * (1 - 0.3 / math.sqrt(n)) \
            * self.rng.uniform(1 - tol, 1)


def grid(space: Space, s: Surface, rng: random.Random) -> tuple[Trial, Run]:
    run, best = Run(s, rng), (-1.0, Trial.of({}))
    for values in itertools.product(*(d.values for d in space.dimensions)):
        t = Trial.of(dict(zip((d.flag for d in space.dimensions), values, strict=True)))
        noise = run.start(t)
        if noise is not None:
            best = max(best, (run.search(t, noise, FULL, 7, 0.02), t), key=lambda x: x[0])
    return best[1], run


def tiered(space: Space, s: Surface, rng: random.Random) -> tuple[Trial, Run]:
    """auto_benchmark's tier 2 over the ungated flags: the product of the first three flags' first three values,
    then the rest one at a time, deduplicated, fa3 skipped, the first 8."""
    items = [(d.flag, d.values[:3]) for d in space.dimensions][:8]
    head, tail = items[:3], items[3:]
    cands = [Trial.of({})]
    names = [k for k, _ in head]
    cands += [Trial.of(dict(zip(names, c, strict=True))) for c in itertools.product(*(v for _, v in head))]
    cands += [Trial.of({k: v}) for k, vs in tail for v in vs]
    seen: list[Trial] = []
    for c in cands:
        if c not in seen and c.as_dict().get("attention-backend") != "fa3":
            seen.append(c)
    run, best = Run(s, rng), (-1.0, Trial.of({}))
    for t in seen[:8]:
        found = None
        for _ in range(5):  # each QPS round relaunches the server
            noise = run.start(t)
            if noise is None:
                break
            found = run.search(t, noise, FULL, 1, 0.03)
        if found is not None:
            best = max(best, (found, t), key=lambda x: x[0])
    return best[1], run


def guided_search(space: Space, s: Surface, rng: random.Random, budget: int, pairs: int,
                  short_probes: bool = True) -> tuple[Trial, Run, str]:
    """`inv tune --slo`'s loop (fleet/multihost/slotune.py); without short probes every trial is searched in full
    from scratch (the model-guided choice alone)."""
    run, seen = Run(s, rng), []
    while (choice := guided.next_trial(space, seen, budget, SERVER_DEFAULT)).trial is not None:
        t = choice.trial
        noise = run.start(t)
        if noise is None:
            seen.append(guided.Seen(t, None, crashed=True))
            continue
        if not short_probes:
            seen.append(guided.Seen(t, run.search(t, noise, FULL, 7, 0.02), full=True))
            continue
        short = run.search(t, noise, SHORT, 5, 0.05)
        run.full_runs -= 1
        if guided.promote(short, seen):
            seen.append(guided.Seen(t, run.search(t, noise, FULL, 3, 0.02), full=True, short=short))
        else:
            seen.append(guided.Seen(t, short))
    top = guided.best_full(seen)
    assert top is not None
    pair = guided.finalists(seen, band=0.05)
    if pair is None:
        return top.trial, run, "clear"
    a, b = pair
    rates: dict[Trial, list[float]] = {a: [], b: []}
    for side in replicates.order(pairs):
        t = a if side is replicates.Side.A else b
        noise = run.start(t)
        rates[t].append(run.search(t, noise, FULL, 3, 0.02) if noise else 1e-9)
    cmp = replicates.compare(rates[a], rates[b])
    return (b if cmp.winner is replicates.Side.B else a), run, "b" if cmp.winner else "equal"


def space_of(kind: str) -> Space:
    return searchspace.build(HOST, NARROW if kind == "narrow" else None)


def ungated(kind: str) -> Space:
    flags = NARROW if kind == "narrow" else searchspace.default_space().flags
    return Space(tuple(Dimension(f, tuple(v)) for f, v in flags.items()), ())


def replicated(trials: int, pairs: int, sigma: float, ratio: float = 1.0,
               margin: float = replicates.MARGIN) -> dict[str, object]:
    """How often the replicate comparison names a winner (and names B) of two configurations, B truly `ratio`
    times A (1.0: A/A, identical), `pairs` interleaved pairs each, with a slow drift of the host; each start's
    rate as in Run.search (run noise, the p99 bound's spread, the load search's tolerance)."""
    rng, named, b_won = random.Random(4242), 0, 0
    for _ in range(trials):
        r = {replicates.Side.A: [], replicates.Side.B: []}  # type: dict[replicates.Side, list[float]]
        for i, side in enumerate(replicates.order(pairs)):
            noise = math.exp(rng.gauss(0, sigma) + rng.gauss(0, 0.25 / math.sqrt(FULL)))
            true = 10.0 * (ratio if side is replicates.Side.B else 1.0)
            r[side].append(true * noise * (1 + 0.003 * i) * rng.uniform(0.98, 1))
        won = replicates.compare(r[replicates.Side.A], r[replicates.Side.B], margin).winner
        named, b_won = named + (won is not None), b_won + (won is replicates.Side.B)
    k = named if ratio == 1.0 else b_won  # A/A: any winner is false; else: B found
    lo, hi = wilson(k, trials)
    return {"runs": trials, "pairs": pairs, "margin": margin, "ratio": ratio,
            "winner_declared": named / trials, "b_named": b_won / trials, "interval": [lo, hi]}




def spread(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def strategies(a: argparse.Namespace) -> dict[str, object]:
    """The four strategies on --seeds surfaces: quality against the best true rate, wall time, starts."""
    space, loose = space_of(a.space), ungated(a.space)
    rows = []
    for seed in range(a.seeds):
        s = surface(seed)
        truth = max(s.rate(Trial.of(dict(zip((d.flag for d in space.dimensions), v, strict=True))))
                    for v in itertools.product(*(d.values for d in space.dimensions)))
        g_pick, g = grid(space, s, random.Random(seed * 3))
        t_pick, t = tiered(loose, s, random.Random(seed * 3 + 1))
        m_pick, m, final = guided_search(space, s, random.Random(seed * 3 + 2), a.budget, a.pairs)
        o_pick, o, _ = guided_search(space, s, random.Random(seed * 3 + 2), a.budget, a.pairs, short_probes=False)
        rows.append({"seed": seed, "truth": truth, "final": final,
                     **{f"{k}_{x}": v for k, (pick, r) in {"grid": (g_pick, g), "tiered": (t_pick, t),
                                                            "guided": (m_pick, m), "one-fid": (o_pick, o)}.items()
                        for x, v in {"quality": s.rate(pick) / truth, "wall_s": r.wall, "starts": r.starts,
                                     "served": 1 - r.crashes / r.starts, "crashes": r.crashes,
                                     "full": r.full_runs}.items()}})
    near = math.exp(-2 * math.sqrt(2) * surface(0).run_sigma)
    out: dict[str, object] = {"space": a.space, "size": space.size(), "seeds": a.seeds, "budget": a.budget,
                              "within_noise": near}
    for k in STRATEGIES:
        q = [r[f"{k}_quality"] for r in rows]
        out[k] = {"quality": spread(q), "within_noise_of_best": sum(x >= near for x in q) / len(q),
                  "wall_vs_grid": spread([r[f"{k}_wall_s"] / r["grid_wall_s"] for r in rows]),
                  "starts": spread([float(r[f"{k}_starts"]) for r in rows]),
                  "full_searches": spread([float(r[f"{k}_full"]) for r in rows]),
                  "served": spread([r[f"{k}_served"] for r in rows]),
                  "served_pooled": 1 - sum(r[f"{k}_crashes"] for r in rows) / sum(r[f"{k}_starts"] for r in rows)}
    out["guided_finals"] = {f: sum(r["final"] == f for r in rows) for f in ("clear", "b", "equal")}
    print(f"{'strategy':8} {'within noise':>12} {'quality med [min,max]':>24} {'wall/grid med [max]':>20} "
          f"{'starts':>7} {'full':>5} {'served all, med [min]':>21}")
    for k in STRATEGIES:
        r = out[k]
        assert isinstance(r, dict)
        q, w = r["quality"], r["wall_vs_grid"]
        print(f"{k:8} {r['within_noise_of_best']:>12.0%} {q['median']:>10.3f} [{q['min']:.3f},{q['max']:.3f}]"
              f" {w['median']:>11.3f} [{w['max']:.3f}] {r['starts']['median']:>7.0f}"
              f" {r['full_searches']['median']:>5.0f}"
              f" {r['served_pooled']:>8.1%}, {r['served']['median']:.0%} [{r['served']['min']:.0%}]")
    return out


def replicate_checks(a: argparse.Namespace) -> dict[str, object]:
    """The replicate comparison alone: false winners on A/A with and without the margin, and its power."""
    sigma, out = surface(0).run_sigma, {}
    for ratio in (1.0, 1.05, 1.10):
        for key, margin in (("margin", replicates.MARGIN), ("none", 0.0)):
            r = out[f"x{ratio:.2f} {key}"] = replicated(a.aa, a.pairs, sigma, ratio, margin)
            what = "A/A: a winner declared" if ratio == 1.0 else f"B truly x{ratio:.2f}: B named"
            rate = r["winner_declared"] if ratio == 1.0 else r["b_named"]
            lo, hi = r["interval"]  # type: ignore[misc]
            print(f"{what} in {rate:.1%} of {a.aa} comparisons over {a.pairs} pairs (95% interval {lo:.1%}-{hi:.1%}), "
                  f"{'with the ' + format(margin, '.0%') + ' margin' if margin else 'without a margin'}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20, help="surfaces (0: the replicate checks alone)")
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=replicates.PAIRS)
    ap.add_argument("--aa", type=int, default=2000)
    ap.add_argument("--space", choices=("narrow", "full"), default="narrow")
    a = ap.parse_args()
    t0 = time.monotonic()
    out = strategies(a) if a.seeds else {}
    out["replicates"] = replicate_checks(a)
    out["seconds"] = round(time.monotonic() - t0, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
