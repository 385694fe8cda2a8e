"""A benchmark's record, typed: what `inv bench`, the performance gate and the tuner keep of a run.

Each value is made once (frozen) and written as the JSON a release manifest holds (`to_json`). What a host's
manifest sends back is data, not trust: `BenchRecord.from_json` refuses a wrong shape with one line
(BenchRecordError), and `stored` turns that refusal into "no record". Latency figures are secondary: one that
is not a finite number is left out, never trusted, and the rest of the record stands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from fleet.deploy.noise import Runs
from fleet.errors import FleetError
from fleet.yamlfile import JsonObject


class BenchRecordError(FleetError):
    """A stored benchmark record that is not one (a wrong type, a missing part): one line says which."""


def _obj(data: object, what: str) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise BenchRecordError(f"{what}: expected an object, got {type(data).__name__}")
    return data


def _num(data: Mapping[str, Any], name: str, what: str) -> float | None:
    """A finite, non-negative number or None; anything else is refused."""
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise BenchRecordError(f"{what}.{name}: not a finite number >= 0: {str(value)[:40]!r}")
    return value


def _int(data: Mapping[str, Any], name: str, what: str) -> int:
    value = data.get(name)
    if type(value) is not int:
        raise BenchRecordError(f"{what}.{name}: not an integer: {str(value)[:40]!r}")
    return value


def _str(data: Mapping[str, Any], name: str, what: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise BenchRecordError(f"{what}.{name}: not text: {str(value)[:40]!r}")
    return value


def _latency(data: object) -> dict[str, dict[str, float]]:
    """metric -> statistic -> ms, keeping only finite numbers >= 0."""
    if not isinstance(data, dict):
        return {}
    out: dict[str, dict[str, float]] = {}
    for metric, stats in data.items():
        if isinstance(stats, dict):
            kept = {str(k): float(v) for k, v in stats.items()
                    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0}
            if kept:
                out[str(metric)] = kept
    return out


@dataclass(frozen=True, kw_only=True)
class BenchSettings:
    """What makes two results comparable: the same playbook and model, the same benchmark shape."""

    playbook: str
    model: str
    backend: str
    dataset: str
    input_len: int
    output_len: int
    num_prompts: int
    max_concurrency: int

    def to_json(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> BenchSettings:
        d = _obj(data, "settings")
        def text(name: str) -> str:
            if (value := _str(d, name, "settings")) is None:
                raise BenchRecordError(f"settings: no {name}")
            return value

        return cls(playbook=text("playbook"), model=text("model"), backend=text("backend"), dataset=text("dataset"),
                   input_len=_int(d, "input_len", "settings"), output_len=_int(d, "output_len", "settings"),
                   num_prompts=_int(d, "num_prompts", "settings"),
                   max_concurrency=_int(d, "max_concurrency", "settings"))


_RESULT_TEXTS = frozenset({"error", "backend", "request_rate", "max_concurrency"})


@dataclass(frozen=True)
class BenchResult:
    """bench_serving's result block as read (fleet.deploy.bench.parse): missing labels stay None."""

    ok: bool = False
    error: str | None = None
    backend: str | None = None
    request_rate: str | None = None
    max_concurrency: str | None = None
    successful_requests: float | None = None
    duration_s: float | None = None
    total_input_tokens: float | None = None
    total_output_tokens: float | None = None
    request_throughput: float | None = None
    input_throughput: float | None = None
    output_throughput: float | None = None
    peak_output_throughput: float | None = None
    total_throughput: float | None = None
    concurrency: float | None = None
    accept_length: float | None = None
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # ttft/tpot/itl/e2e -> stat -> ms
    unknown: list[str] = field(default_factory=list)  # labels the parser does not know (kept, not fatal)

    def stat(self, metric: str, which: str) -> float | None:
        return self.latency_ms.get(metric, {}).get(which)

    def to_json(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> BenchResult:
        d = _obj(data, "result")
        ok = d.get("ok", False)
        if not isinstance(ok, bool):
            raise BenchRecordError(f"result.ok: not true or false: {str(ok)[:40]!r}")
        unknown = d.get("unknown") or []
        if not isinstance(unknown, list):
            raise BenchRecordError("result.unknown: not a list")
        parsed: dict[str, Any] = {f.name: (_str if f.name in _RESULT_TEXTS else _num)(d, f.name, "result")
                                  for f in fields(cls) if f.name not in ("ok", "latency_ms", "unknown")}
        return cls(ok=ok, **parsed, latency_ms=_latency(d.get("latency_ms")), unknown=[str(u) for u in unknown])


@dataclass(frozen=True)
class GpuPower:
    index: int
    mean_w: float
    max_w: float
    limit_w: float | None
    mean_util: float | None

    @classmethod
    def from_json(cls, data: object) -> GpuPower:
        d = _obj(data, "power.gpus[]")
        mean_w, max_w = _num(d, "mean_w", "power.gpus[]"), _num(d, "max_w", "power.gpus[]")
        if mean_w is None or max_w is None:
            raise BenchRecordError("power.gpus[]: no mean_w or max_w")
        return cls(_int(d, "index", "power.gpus[]"), mean_w, max_w, _num(d, "limit_w", "power.gpus[]"),
                   _num(d, "mean_util", "power.gpus[]"))


@dataclass(frozen=True, kw_only=True)
class Power:
    """GPU power and utilisation over the benchmark (fleet.deploy.bench.parse_power)."""

    samples: int = 0
    busy_samples: int = 0
    gpus: tuple[GpuPower, ...] = ()
    mean_w: float | None = None  # per GPU, averaged over GPUs and busy samples
    limit_w: float | None = None
    fraction: float | None = None  # mean_w / limit_w
    mean_util: float | None = None
    underutilised: bool | None = None
    note: str | None = None

    def to_json(self) -> JsonObject:
        return {**asdict(self), "gpus": [asdict(g) for g in self.gpus]}

    @classmethod
    def from_json(cls, data: object) -> Power:
        d = _obj(data, "power")
        gpus = d.get("gpus") or []
        under = d.get("underutilised")
        if not isinstance(gpus, list) or (under is not None and not isinstance(under, bool)):
            raise BenchRecordError("power: gpus not a list, or underutilised not true or false")
        return cls(samples=_int(d, "samples", "power") if "samples" in d else 0,
                   busy_samples=_int(d, "busy_samples", "power") if "busy_samples" in d else 0,
                   gpus=tuple(GpuPower.from_json(g) for g in gpus), mean_w=_num(d, "mean_w", "power"),
                   limit_w=_num(d, "limit_w", "power"), fraction=_num(d, "fraction", "power"),
                   mean_util=_num(d, "mean_util", "power"), underutilised=under, note=_str(d, "note", "power"))


@dataclass(frozen=True)
class GateVerdict:
    """The performance gate's judgement of one measurement (fleet.deploy.bench.evaluate)."""

    ok: bool
    measured: float
    required: float | None
    basis: str  # release | floor | run | none
    against: str  # e.g. "release 20261130T...", "rung no-fusion in this run"
    evidence: str

    def to_json(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> GateVerdict:
        d = _obj(data, "verdict")
        measured, texts = _num(d, "measured", "verdict"), [_str(d, n, "verdict") for n in ("basis", "against",
                                                                                            "evidence")]
        if not isinstance(d.get("ok"), bool) or measured is None or None in texts:
            raise BenchRecordError("verdict: no ok, measured, basis, against or evidence")
        return cls(d["ok"], measured, _num(d, "required", "verdict"), *(str(t) for t in texts))


@dataclass(frozen=True, kw_only=True)
class BenchRecord:
    """One benchmark as stored in a release (`bench`, or an attempt's `bench`): its settings, result and power,
    the command, when and how long; the gate's verdict, the tuner's repeated runs, and the release and rung it
    measured where those were added."""

    result: BenchResult
    settings: BenchSettings | None = None
    power: Power | None = None
    command: str | None = None
    at: str | None = None
    seconds: float | None = None
    verdict: GateVerdict | None = None
    runs: Runs | None = None
    release: str | None = None
    rung: str | None = None

    @property
    def tok_s(self) -> float | None:
        """Its result: the median of its runs where the tuner repeated it, else its one output throughput."""
        return self.runs.median if self.runs else self.result.output_throughput

    def output_tok_s(self) -> float:
        """This one run's output throughput; BenchRecordError when its result has none (not a measurement)."""
        if self.result.output_throughput is None:
            raise BenchRecordError("result: no output throughput")
        return self.result.output_throughput

    @property
    def spread(self) -> float | None:
        return self.runs.spread if self.runs else None

    def to_json(self) -> JsonObject:
        """The manifest's shape, keys in the order the fleet has always written them; parts not there are left
        out (a gate's record has no release, `inv bench`'s no verdict)."""
        parts: JsonObject = {
            "settings": self.settings.to_json() if self.settings else None, "result": self.result.to_json(),
            "power": self.power.to_json() if self.power else None, "command": self.command, "at": self.at,
            "seconds": self.seconds, "verdict": self.verdict.to_json() if self.verdict else None,
            "runs": self.runs.to_json() if self.runs else None, "release": self.release, "rung": self.rung}
        return {k: v for k, v in parts.items() if v is not None}

    @classmethod
    def from_json(cls, data: object) -> BenchRecord:
        """A record as a host or a state file holds it; a wrong shape raises BenchRecordError (one line)."""
        d = _obj(data, "bench")
        runs = None
        if d.get("runs") is not None:
            runs = Runs.from_json(d["runs"])
            if runs is None or any(not math.isfinite(v) or v < 0 for v in runs.tok_s):
                raise BenchRecordError(f"bench.runs: not a list of tok/s: {str(d['runs'])[:60]!r}")
        return cls(result=BenchResult.from_json(d.get("result")),
                   settings=BenchSettings.from_json(d["settings"]) if d.get("settings") is not None else None,
                   power=Power.from_json(d["power"]) if d.get("power") is not None else None,
                   command=_str(d, "command", "bench"), at=_str(d, "at", "bench"),
                   seconds=_num(d, "seconds", "bench"),
                   verdict=GateVerdict.from_json(d["verdict"]) if d.get("verdict") is not None else None,
                   runs=runs, release=_str(d, "release", "bench"), rung=_str(d, "rung", "bench"))


def stored(data: object) -> BenchRecord | None:
    """A record a host or a file sent, or None where it is not one (garbage is no measurement)."""
    try:
        return BenchRecord.from_json(data)
    except BenchRecordError:
        return None
