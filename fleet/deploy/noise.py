"""A benchmark repeated: its median and spread, and when one rung's result beats another's beyond the noise.

One run of `bench_serving` varies from the next by a few percent on the same server (scheduling, the GPU's
clocks, the client's own CPU), so the tuner measures each serving rung N times after one warm-up run that is
not counted. The spread is the max minus the min of the counted runs. A later rung of the ladder wins over
the one chosen so far only if its median is higher by more than both spreads and by `min_gain` of the
chosen one's median; otherwise the earlier rung stays (the ladder's order is the playbook author's
preference) and the decision says "within noise".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleet.yamlfile import JsonObject


@dataclass(frozen=True)
class Runs:
    tok_s: tuple[float, ...]  # the counted runs, in order
    warmup: float | None = None  # the run before them, not counted

    @property
    def median(self) -> float:
        return float(statistics.median(self.tok_s))

    @property
    def spread(self) -> float:
        return max(self.tok_s) - min(self.tok_s) if len(self.tok_s) > 1 else 0.0

    def to_json(self) -> JsonObject:
        return {"warmup": self.warmup, "tok_s": list(self.tok_s), "median": self.median, "spread": self.spread}

    @classmethod
    def from_json(cls, data: Any) -> Runs | None:
        if not isinstance(data, dict) or not data.get("tok_s"):
            return None
        try:
            return cls(tuple(float(v) for v in data["tok_s"]),
                       float(data["warmup"]) if data.get("warmup") is not None else None)
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Choice:
    winner: int | None  # index into the candidates, None if there were none
    decisions: tuple[str, ...]  # one line per later rung compared with the one chosen so far


def _tok(v: float) -> str:
    return f"{v:,.0f}"


MIN_GAIN = 0.02  # the playbook's bench.min_gain when it sets none (fleet.playbook.Bench)


def compare(held: str, a: tuple[float, float], name: str, b: tuple[float, float], min_gain: float) -> tuple[bool, str]:
    """Whether rung `name` (median, spread) beats `held` (median, spread), beyond both spreads and by min_gain of
    held's median, and the one line that says so (inv tune's decisions, and what the fleet learns)."""
    (am, asp), (bm, bsp) = a, b
    gain, need = bm - am, max(asp, bsp, min_gain * am)
    if gain > need:
        return True, (f"{name} beats {held}: {_tok(bm)} against {_tok(am)} tok/s, +{_tok(gain)} > {_tok(need)} "
                      f"(spreads {_tok(bsp)}, {_tok(asp)}; min gain {min_gain * 100:g}%)")
    if gain <= 0:
        return False, f"{name} against {held}: {_tok(bm)} against {_tok(am)} tok/s, slower: {held} stays"
    return False, (f"{name} against {held}: {_tok(bm)} against {_tok(am)} tok/s, +{_tok(gain)} is within noise "
                   f"(needs more than {_tok(need)}: spreads {_tok(bsp)}, {_tok(asp)}; min gain "
                   f"{min_gain * 100:g}%): {held} stays")


def choose(candidates: Sequence[tuple[str, Runs]], min_gain: float) -> Choice:
    """candidates in ladder order (rung name, its runs): the first, unless a later one beats the one chosen so
    far beyond both spreads and by min_gain (a fraction, 0.02 = 2%)."""
    if not candidates:
        return Choice(None, ())
    chosen, decisions = 0, []
    for i in range(1, len(candidates)):
        (held, a), (name, b) = candidates[chosen], candidates[i]
        beats, line = compare(held, (a.median, a.spread), name, (b.median, b.spread), min_gain)
        decisions.append(line)
        if beats:
            chosen = i
    return Choice(chosen, tuple(decisions))
