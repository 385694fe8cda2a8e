"""The next configuration `inv tune --slo` starts, chosen by a model of what it has measured, and which trials
earn a full-length measurement (pure).

Multi-fidelity: every trial is one start of the server with a short load search first (few requests a point:
cheap, noisier, and biased: a wider p99 interval keeps less, a shorter burst queues less and keeps more; the
bias is measured on the trials run both ways); only a trial whose corrected short result comes within `margin`
of the best full result (or the first) goes on, on the same running server, to the full-length search. Finalists
are then compared by interleaved replicates (fleet.deploy.replicates).

Model-guided: the log of the kept request rate is fitted as a sum of one effect per flag value set (ridge
regression; a short probe counts with the bias measured on the trials run both ways). Around the best trial so
far, every configuration that changes at most `radius` flags is scored optimistically: its predicted log rate
plus `kappa` times the uncertainty of the values it sets (`prior_sd` over the square root of one more than the
trials that served with each). The highest score is started next; the search stops when no score beats the
best by `min_gain`.

Crash-aware: a candidate sets at most one value no start has tried yet, so a crash names its suspect. A value
that crashed alone, or twice, and never served is not started again; one that crashed once among other values
gets one start on its own first (the crash may be theirs together). Where every value of a crash served
elsewhere, the pairs of it that never served together are suspects (fleet.deploy.guided.suspect_pairs).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from fleet.deploy.searchspace import Space
from fleet.deploy.trials import Outcome, Trial, crashed_values
from fleet.playbook import FlagValue

Feature = tuple[str, FlagValue]
DOUBT = 0.5  # the chance a configuration holding a pair in doubt starts: its score is weighed by it


@dataclass(frozen=True, slots=True)
class Seen:
    """One trial's result at the highest fidelity it reached."""

    trial: Trial
    rate: float | None  # the highest request rate kept; None: crashed, or served and kept none
    crashed: bool = False
    full: bool = False  # `rate` is the full-length load search's (else the short probe's)
    short: float | None = None  # the short probe's rate, where a full search followed it


@dataclass(frozen=True, slots=True)
class Settings:
    kappa: float = 1.0
    prior_sd: float = 0.15  # the spread of one value's effect on the log rate before it is measured
    ridge: float = 1.0
    radius: int = 2  # flags changed at most from the best trial
    margin: float = 0.10  # a short probe this close below the best full rate earns the full run
    min_gain: float = 0.02  # stop when no optimistic score beats the best by this


def effective(trial: Trial, defaults: Mapping[str, FlagValue]) -> tuple[Feature, ...]:
    """The values a trial sets beyond the playbook's base (one the base already gives is no change)."""
    return tuple((k, v) for k, v in trial.flags if defaults.get(k) != v)


def best_full(seen: Sequence[Seen]) -> Seen | None:
    """The full-length result with the highest rate (ties: the first)."""
    full = [s for s in seen if s.full and s.rate is not None and not s.crashed]
    return max(full, key=lambda s: s.rate or 0.0) if full else None


def incumbent(seen: Sequence[Seen]) -> Seen | None:
    """The centre of the next neighbourhood: the best full result, else the best short one."""
    short = [s for s in seen if s.rate is not None and not s.crashed]
    return best_full(seen) or (max(short, key=lambda s: s.rate or 0.0) if short else None)


def promote(short_rate: float | None, seen: Sequence[Seen], settings: Settings = Settings(),
            bounded: bool = True, failed_at: float | None = None) -> bool:
    """Whether a trial whose short probe kept `short_rate` goes on to the full-length search: its short rate,
    corrected by the short probes' measured bias (fewer requests queue less, so they may keep more, not only
    less), within `margin` of the best full result. A short probe that never failed (`bounded` False: it kept
    every rate up to the ceiling or its last point) is only a lower bound: it goes on. One that failed at
    `failed_at` kept somewhere below it: it is read there (its points double, so a coarse probe is read at the
    top of what it could not tell apart; on the sandbox three configurations 30% apart all kept 64 of 20 requests
    and failed 90.5)."""
    if short_rate is None:
        return False
    if not bounded:
        return True
    top = best_full(seen)
    read = failed_at if failed_at is not None else short_rate
    return top is None or read * math.exp(short_bias(seen)) >= (top.rate or 0.0) * (1 - settings.margin)


@dataclass(frozen=True, slots=True)
class Model:
    intercept: float
    effects: Mapping[Feature, float]
    counts: Mapping[Feature, int]  # trials that served with each value
    short_bias: float = 0.0  # the mean log of full over short on the trials measured both ways

    def predict(self, features: Sequence[Feature]) -> float:
        return self.intercept + sum(self.effects.get(f, 0.0) for f in features)

    def spread(self, features: Sequence[Feature], prior_sd: float) -> float:
        return math.sqrt(sum(prior_sd ** 2 / (1 + self.counts.get(f, 0)) for f in features))


def short_bias(seen: Sequence[Seen]) -> float:
    """How much lower a short probe keeps than the full search on the same start (log; 0 until one has both).
    Only from trials measured both ways: a column in the regression would be confounded with the promotion,
    since only the trials that did well get the full run."""
    both = [math.log(s.rate / s.short) for s in seen if s.full and s.rate and s.short]
    return sum(both) / len(both) if both else 0.0


def fit(seen: Sequence[Seen], defaults: Mapping[str, FlagValue], ridge: float = 1.0) -> Model:
    """Ridge regression of the log kept rate (a short probe's plus the short bias) on the values set, each
    effect shrunk towards 0: no change from the playbook's base. The intercept is the base's own full result
    where it has one (else fitted, not shrunk), so that the trials that did worse do not drag down what an
    untried value is expected to do. A served trial that kept none counts at half the lowest rate kept."""
    served = [s for s in seen if not s.crashed]
    kept = [s.rate for s in served if s.rate]
    if not kept:
        return Model(0.0, {}, {})
    floor, bias = min(kept) / 2, short_bias(seen)
    base = next((s for s in served if s.full and s.rate and not effective(s.trial, defaults)), None)
    fixed = math.log(base.rate) if base is not None and base.rate else None
    rows = [(effective(s.trial, defaults), math.log(s.rate or floor) + (0.0 if s.full else bias)) for s in served]
    feats = sorted({f for r in rows for f in r[0]}, key=repr)
    counts = {f: sum(f in r[0] for r in rows) for f in feats}
    cols = len(feats) + 1  # the intercept, one per value
    a = [[0.0] * cols for _ in range(cols)]
    b = [0.0] * cols
    for fs, y in rows:
        x = [0.0 if fixed is not None else 1.0, *(1.0 if f in fs else 0.0 for f in feats)]
        y -= fixed or 0.0
        for i in range(cols):
            b[i] += x[i] * y
            for j in range(cols):
                a[i][j] += x[i] * x[j]
    a[0][0] = a[0][0] or 1.0  # a fixed intercept: its row solves to 0
    for i in range(1, cols):
        a[i][i] += ridge
    beta = _solve(a, b)
    return Model(beta[0] + (fixed or 0.0), dict(zip(feats, beta[1:], strict=True)), counts, bias)


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gauss-Jordan with partial pivoting (the ridge keeps the system positive definite)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) < 1e-12:
            continue
        for r in range(n):
            if r != c and m[r][c]:
                k = m[r][c] / m[c][c]
                m[r] = [x - k * y for x, y in zip(m[r], m[c], strict=True)]
    return [m[i][n] / m[i][i] if abs(m[i][i]) >= 1e-12 else 0.0 for i in range(n)]


def neighbours(space: Space, centre: Trial, defaults: Mapping[str, FlagValue], radius: int) -> list[Trial]:
    """Every trial that changes 1..`radius` flags of `centre` to another value of the space, in the space's
    order (a value the playbook's base gives is the flag left unset)."""
    now = {**defaults, **centre.as_dict()}
    options = [[v for v in d.values if now.get(d.flag) != v] for d in space.dimensions]
    out: list[Trial] = []
    for k in range(1, radius + 1):
        for dims in itertools.combinations(range(len(space.dimensions)), k):
            for values in itertools.product(*(options[i] for i in dims)):
                flags = centre.as_dict()
                for i, v in zip(dims, values, strict=True):
                    flag = space.dimensions[i].flag
                    if defaults.get(flag) == v:
                        flags.pop(flag, None)
                    else:
                        flags[flag] = v
                out.append(Trial.of(flags))
    return out


def blamed(seen: Sequence[Seen], defaults: Mapping[str, FlagValue]) -> tuple[set[Feature], set[Feature]]:
    """(values not to start again, values to try once alone): a value that crashed and never served is blamed
    when it crashed alone over the base or in two starts; one crash among other values may be theirs together,
    so it gets one start on its own over the base before it is blamed."""
    base = Trial.of({})
    suspects = crashed_values({s.trial: Outcome(s.rate, s.crashed) for s in seen}, base)
    crashes = [effective(s.trial, defaults) for s in seen if s.crashed]
    out = {f for f in suspects if (f,) in crashes or sum(f in c for c in crashes) >= 2}
    return out, suspects - out


def suspect_pairs(seen: Sequence[Seen], defaults: Mapping[str, FlagValue]
                  ) -> tuple[set[frozenset[Feature]], set[frozenset[Feature]]]:
    """(pairs not to set together again, pairs in doubt): a crash whose values each served elsewhere is theirs
    together (memory, say: a larger pool and larger CUDA graphs each start, not both). Its pairs that never
    served together are suspects: the only one is blamed, as is one in two crashes; several are in doubt, and a
    candidate may hold one pair in doubt (its expected gain weighed by DOUBT), which clears it or blames it."""
    together: set[frozenset[Feature]] = set()
    for s in seen:
        if not s.crashed:
            together.update(frozenset(p) for p in itertools.combinations(effective(s.trial, defaults), 2))
    counts: dict[frozenset[Feature], int] = {}
    out: set[frozenset[Feature]] = set()
    for s in seen:
        if s.crashed:
            suspects = {frozenset(p) for p in itertools.combinations(effective(s.trial, defaults), 2)} - together
            for p in suspects:
                counts[p] = counts.get(p, 0) + 1
            if len(suspects) == 1:
                out |= suspects
    out |= {p for p, n in counts.items() if n >= 2}
    return out, set(counts) - out


@dataclass(frozen=True, slots=True)
class Choice:
    trial: Trial | None  # None: stop
    score: float | None = None  # the optimistic rate it was chosen for
    why: str = ""


def next_trial(space: Space, seen: Sequence[Seen], budget: int, defaults: Mapping[str, FlagValue] | None = None,
               settings: Settings = Settings(), hint: Trial | None = None,
               known_bad: Collection[Feature] = ()) -> Choice:
    """The next configuration to start: the base first, then `hint` (what served best on this hardware before),
    then the best optimistic score around the incumbent. `known_bad`: values that crashed on this hardware
    before, never started."""
    defaults = defaults or {}
    base = Trial.of({})
    if len(seen) >= budget:
        return Choice(None, why=f"the budget of {budget} starts is spent")
    tried = {s.trial for s in seen}
    if base not in tried:
        return Choice(base, why="the playbook's base")
    if hint is not None and hint not in tried and not set(effective(hint, defaults)) & set(known_bad):
        return Choice(hint, why="the winner on this hardware before (inv learned)")
    centre = incumbent(seen)
    if centre is None:
        return Choice(None, why="nothing served")
    avoid, retry = blamed(seen, defaults)
    avoid |= set(known_bad)
    bad_pairs, doubtful = suspect_pairs(seen, defaults)
    started = {f for s in seen for f in effective(s.trial, defaults)}
    model = fit(seen, defaults, settings.ridge)
    best: tuple[float, Trial] | None = None
    ref = best_full(seen) or centre
    top = ref.rate or 0.0
    # scored from the best's own measurement: the ridge shrinks every effect towards the base, so the model predicts
    # the best itself below what it kept, and around a best far above the base no untried value could beat it
    anchor = math.log(top) - model.predict(effective(ref.trial, defaults)) if top > 0 else 0.0
    alone = [Trial.of({f: v}) for f, v in sorted(retry, key=repr)]
    for cand in [*neighbours(space, centre.trial, defaults, settings.radius), *alone]:
        feats = effective(cand, defaults)
        if cand in tried or any(f in avoid for f in feats) or sum(f not in started for f in feats) > 1 \
                or any(f in retry for f in feats) and len(feats) > 1 \
                or _pairs_held(feats, bad_pairs) or _pairs_held(feats, doubtful) > 1:
            continue
        optimistic = math.exp(anchor + model.predict(feats) + settings.kappa * model.spread(feats, settings.prior_sd))
        # a pair in doubt may not start: only that chance of the gain over the best counts
        score = top + DOUBT ** _pairs_held(feats, doubtful) * (optimistic - top)
        if best is None or score > best[0]:
            best = (score, cand)
    if best is None:
        return Choice(None, why="no configuration left around the best")
    if best[0] < top * (1 + settings.min_gain):
        return Choice(None, best[0], why=f"no configuration is expected to beat the best by {settings.min_gain:.0%}")
    return Choice(best[1], best[0], why="the highest optimistic score")


def _pairs_held(feats: Sequence[Feature], pairs: set[frozenset[Feature]]) -> int:
    return sum(frozenset(p) in pairs for p in itertools.combinations(feats, 2))


def finalists(seen: Sequence[Seen], band: float) -> tuple[Trial, Trial] | None:
    """The best full result and the runner-up when it is within `band` of it (they need replicates to tell
    apart); None: a clear winner or fewer than two."""
    full = sorted((s for s in seen if s.full and s.rate and not s.crashed), key=lambda s: -(s.rate or 0.0))
    if len(full) < 2 or (full[1].rate or 0.0) < (full[0].rate or 0.0) * (1 - band):
        return None
    return full[0].trial, full[1].trial
