"""Why the sandbox's canaries never fail on TTFT: what of a release's simulated slowdown reaches the TTFTs that the
canary's clients record, from the windows bench_canary_sandbox.py's rollouts recorded (their samples, each
rollout's `its samples are in ...` line). No host: it reads the recordings.

The simulator slows a request of the new release (SGLANG_SIM_SLOWER=0.10@99) when its quantile u is at or above
0.99; u also sets its spread (exp(jitter * z(u))), and both multiply its prefill and every decode step alike
(sandbox/sim/pkgs/sglang_sim_core/engine.py, Regression.factor). TPOT is paced by deadlines and averaged over
the request's tokens, so its log residual (against its length stratum's median) shows jitter * z(u) almost
exactly: it stands in for u. Against it, per length stratum, each request's TTFT (ms of wall time) is fitted as
a * factor + b: `a` the part the release's factor scales, `b` the part it does not (HTTP, the connection, the
client's thread), and what is left (`rest`: the machine's scheduling, alike on both sides). Per recording:
- corr: of the TTFT and TPOT log residuals (1.0 were the TTFT all model);
- slowed in tail: of the requests in the pooled top 1% of TPOT residual (the release's slowed requests, on the
  canary's side of a p99 rollout), the share also in the top 1% of TTFT residual, where the judge's tail looks;
- the judge's own p99 tail estimate of TTFT and TPOT (fleet.deploy.judge.replay of the recording);
- with --part K: the TTFT tail's estimate were the part the release scales K times larger (each request's TTFT
  plus (K - 1) * a * factor; K = 4: the prefill at time scale 1 beside decode at 0.25), the recording judged
  again by its policy, and how many such TTFT tails fail.

usage: .venv/bin/python bench/bench_canary_ttft.py [--part K] bench/results/canary-sandbox-*.jsonl  (a table, JSON)
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from fleet.deploy import judge  # noqa: E402

SAVED = re.compile(r"its samples are in (\S+\.json)")
Row = tuple[int, int, float, float]  # prompt tokens, output tokens, ttft, tpot (seconds)


def recording_of(row: dict[str, Any]) -> Path | None:
    """The recording a rollout's line names (its own field, else its timeline; None when none, or it is gone)."""
    if row.get("recording") and Path(row["recording"]).is_file():
        return Path(row["recording"])
    for _, line in row.get("timeline") or []:
        m = SAVED.search(line)
        if m and Path(m.group(1)).is_file():
            return Path(m.group(1))
    return None


def requests(samples: list[judge.Sample]) -> list[Row]:
    return [(s.prompt_tokens, s.output_tokens, s.ttft, s.tpot) for s in samples
            if s.ttft is not None and s.tpot is not None and s.ttft > 0 and s.tpot > 0]


def residuals(rows: list[Row], col: int) -> list[float]:
    """Each request's log value less its length stratum's median (the load's six length pairs are its strata)."""
    mid: dict[tuple[int, int], float] = {}
    for key in {(r[0], r[1]) for r in rows}:
        mid[key] = statistics.median(math.log(r[col]) for r in rows if (r[0], r[1]) == key)
    return [math.log(r[col]) - mid[(r[0], r[1])] for r in rows]


def top(values: list[float], share: float) -> set[int]:
    """The indices of the `share` largest values."""
    order = sorted(range(len(values)), key=values.__getitem__, reverse=True)
    return set(order[:max(1, round(share * len(values)))])


def fit(rows: list[Row], tpot_resid: list[float]) -> dict[tuple[int, int], tuple[float, float, list[float]]]:
    """Per length stratum: TTFT (ms) = a * factor + b, factor = exp(TPOT residual); (a, b, what is left)."""
    out = {}
    for key in sorted({(r[0], r[1]) for r in rows}):
        idx = [i for i, r in enumerate(rows) if (r[0], r[1]) == key]
        if len(idx) < 20:
            continue
        x = [math.exp(tpot_resid[i]) for i in idx]
        y = [rows[i][2] * 1000 for i in idx]
        a, b = statistics.linear_regression(x, y)
        out[key] = (a, b, [yy - (a * xx + b) for xx, yy in zip(x, y, strict=True)])
    return out


def larger(rec: judge.Recorded, part: float, fits: dict[tuple[int, int], tuple[float, float, list[float]]]
           ) -> judge.MetricVerdict:
    """The TTFT tail judged again, each request's TTFT the larger by (part - 1) * a * factor (its stratum's a)."""
    def bump(samples: tuple[judge.Sample, ...]) -> list[judge.Sample]:
        out = []
        for s in samples:
            a = fits.get((s.prompt_tokens, s.output_tokens), (0.0,))[0] / 1000
            if s.ttft is None or s.e2e is None or s.tpot is None or not a:
                out.append(s)
                continue
            extra = (part - 1) * a * s.tpot / tpot_mid[(s.prompt_tokens, s.output_tokens)]
            out.append(replace(s, ttft=s.ttft + extra, e2e=s.e2e + extra))
        return out
    tpot_mid = {}
    for key in fits:
        tpot_mid[key] = statistics.median(s.tpot for s in (*rec.base, *rec.canary) if s.tpot is not None and s.tpot
                                          > 0 and (s.prompt_tokens, s.output_tokens) == key)
    verdict = judge.sequential(bump(rec.base), bump(rec.canary), rec.policy)
    return next(m for m in verdict.metrics if m.metric == judge.Metric.TTFT and m.part.startswith("p"))


def one(recording: Path, part: float) -> dict[str, Any]:
    rec = judge.Recorded.from_json(json.loads(recording.read_text()))
    rows = requests([*rec.base, *rec.canary])
    canary_from = len(requests(list(rec.base)))
    ttft, tpot = residuals(rows, 2), residuals(rows, 3)
    slowed = {i for i in top(tpot, 0.01) if i >= canary_from}  # the canary's requests in the TPOT top 1%
    verdict = judge.replay(rec)
    tails = {m.metric.value: m.estimate for m in verdict.metrics if m.part.startswith("p")}
    fits = fit(rows, tpot)
    again = larger(rec, part, fits) if part != 1 else None
    return {"recording": recording.name, "n": len(rows), "corr": statistics.correlation(ttft, tpot),
            "slowed_in_tail": len(slowed & top(ttft, 0.01)) / len(slowed) if slowed else None,
            "ttft_tail": tails.get("ttft"), "tpot_tail": tails.get("tpot"), "fit": fits,
            "ttft_tail_larger": None if again is None else again.estimate,
            "ttft_tail_larger_fails": None if again is None else again.decision == judge.Decision.FAIL}


def mean_sd(values: list[float]) -> str:
    return f"{statistics.mean(values):+.3f} sd {statistics.pstdev(values):.3f}" if values else "-"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", type=Path, nargs="+", help="bench_canary_sandbox.py's JSON lines")
    ap.add_argument("--part", type=float, default=1.0, help="K: also judge the TTFT tail, the release's part K times")
    a = ap.parse_args()
    by_case: dict[str, list[dict[str, Any]]] = {}
    for path in a.results:
        for line in path.read_text().splitlines():
            row = json.loads(line) if line.strip() else None
            rec = recording_of(row) if row else None
            if row and rec:
                by_case.setdefault(row["case"], []).append(one(rec, a.part))
    out: dict[str, Any] = {}
    for case, found in by_case.items():
        parts = {k: [f[k] for f in found if f[k] is not None] for k in ("corr", "slowed_in_tail", "ttft_tail",
                                                                         "tpot_tail", "ttft_tail_larger")}
        fails = [f["ttft_tail_larger_fails"] for f in found if f["ttft_tail_larger_fails"] is not None]
        print(f"{case}: {len(found)} recordings; " + "; ".join(f"{k} {mean_sd(v)}" for k, v in parts.items())
              + (f"; the release's part x{a.part:g}: TTFT tail fails {sum(fails)} of {len(fails)}" if fails else ""))
        strata: dict[tuple[int, int], list[tuple[float, float, list[float]]]] = {}
        for f in found:
            for key, v in f["fit"].items():
                strata.setdefault(key, []).append(v)
        fits = {}
        for key, vs in strata.items():
            rest = sorted(e for *_, es in vs for e in es)
            av, bv = statistics.median(v[0] for v in vs), statistics.median(v[1] for v in vs)
            q = {p: rest[min(len(rest) - 1, int(p * len(rest)))] for p in (0.5, 0.99, 0.999)}
            sd, slowed = statistics.pstdev(rest), 0.1 * av * math.exp(0.25 * 2.576)
            fits[f"{key[0]}/{key[1]}"] = {"a_ms": round(av, 2), "b_ms": round(bv, 2), "rest_sd_ms": round(sd, 2),
                                          "rest_p99_ms": round(q[0.99], 2), "rest_p999_ms": round(q[0.999], 2),
                                          "slowed_10pct_ms": round(slowed, 2)}
            print(f"  prompt/output {key[0]}/{key[1]}: ttft = {av:.2f} ms x factor(u) + {bv:.2f} ms + rest "
                  f"(sd {sd:.2f} ms, p99 {q[0.99]:.2f}, p99.9 {q[0.999]:.2f} ms); "
                  f"10% of a slowed request's a x factor at u = 0.995: {slowed:.2f} ms")
        out[case] = {"recordings": len(found), **{k: {"mean": statistics.mean(v), "sd": statistics.pstdev(v)}
                                                  for k, v in parts.items() if v}, "strata": fits,
                     **({"ttft_tail_larger_fails": [sum(fails), len(fails)], "part": a.part} if fails else {})}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
