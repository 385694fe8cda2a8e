"""The hardware profile's performance model (SIMULATED): how the server's tunable flags move its speed.

Data, not code: profile.yaml's `perf_model:` block (a YAML flow mapping written as JSON, so this stdlib
reader and any YAML reader read the same thing; sandbox/profiles/FORMAT.md documents its fields). A profile
without the block serves exactly as the behaviour table says, with no noise. fleet never reads it.

What it decides, on top of the behaviour table's serving row:
- `crashes`: a flag value whose kernels exclude this SM dies in a start-up phase with the release's own
  exception and words (each entry cites the released file it comes from);
- `factors`: the throughput ceiling times one factor per flag value (attention / MoE runner / FP4 GEMM
  backends, schedule policy, TP size);
- `cuda_graph`: decode steps of a batch larger than the captured graphs run eager, slower;
- `chunked_prefill`: prefill speed and the decode stall a large chunk causes;
- `noise`: run-to-run (per start) and request-to-request spread, lognormal.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any

from sglang_sim_core import env

KEY = "perf_model:"


def read(text: str) -> dict[str, Any] | None:
    """The `perf_model:` block of a profile.yaml text (None: the profile has none)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith(KEY):
            continue
        body = [line[len(KEY):]]
        for more in lines[i + 1:]:
            if more and not more[0].isspace():
                break
            body.append(more)
        return json.loads("\n".join(body))
    return None


def load() -> dict[str, Any] | None:
    try:
        return read((env.profile_dir() / "profile.yaml").read_text())
    except OSError:
        return None


def _flag_value(server_args: Any, flag: str) -> str:
    value = getattr(server_args, flag.replace("-", "_"), None)
    if value is None and flag == "fp4-gemm-backend":
        value = getattr(server_args, "fp4_gemm_runner_backend", None)
    return str(value)


def crash(model: dict[str, Any] | None, phase: str, server_args: Any, sm_major: int,
          installed: dict[str, str]) -> tuple[str, str] | None:
    """(exception class, message) when a `crashes` entry holds for this start-up phase, else None.
    `installed`: distribution -> version; an entry's `releases` limits it to the versions it lists."""
    for entry in (model or {}).get("crashes", []):
        if entry["phase"] != phase or _flag_value(server_args, entry["flag"]) != str(entry["value"]):
            continue
        if any(installed.get(dist) not in versions for dist, versions in entry.get("releases", {}).items()):
            continue
        if sm_major not in entry["sm_majors"]:
            return entry["exception"], entry["message"]
    return None


@dataclass(frozen=True)
class Shape:
    """What the model makes of one start: the factors the engine paces tokens with."""

    rate_factor: float = 1.0  # flag factors times this start's noise
    prefill_factor: float = 1.0  # prompt tok/s against the default chunk
    decode_stall: float = 1.0  # decode step time while a prefill chunk runs
    graph_bs: int | None = None  # batches above it decode eager (None: no limit modelled)
    eager_factor: float = 1.0  # decode speed of an eager step against a captured one
    request_sigma: float = 0.0  # lognormal spread of one request's token pace
    serial_prefill: bool = False  # prefills run one at a time (TTFT queues under load)


def _lognormal(rng: random.Random, sigma: float) -> float:
    return math.exp(rng.gauss(0.0, sigma)) if sigma > 0 else 1.0


def shape(model: dict[str, Any] | None, server_args: Any, rng: random.Random) -> Shape:
    """The factors for this start (`rng` draws the run-to-run noise)."""
    if not model:
        return Shape()
    factor = 1.0
    for flag, table in model.get("factors", {}).items():
        factor *= float(table.get(_flag_value(server_args, flag), 1.0))
    noise = model.get("noise", {})
    factor *= _lognormal(rng, float(noise.get("run_sigma", 0.0)))
    chunk_model = model.get("chunked_prefill", {})
    reference = float(chunk_model.get("reference", 8192))
    chunk = float(getattr(server_args, "chunked_prefill_size", None) or reference)
    prefill = (chunk / reference) ** float(chunk_model.get("prefill_exponent", 0.0))
    prefill *= float(model.get("prefill_speedup", 1.0))
    stall = 1.0 + float(chunk_model.get("decode_stall_per_1k", 0.0)) * max(0.0, chunk - reference) / 1024
    graphs = model.get("cuda_graph", {})
    eager = getattr(server_args, "disable_cuda_graph", False)
    graph_bs = 0 if eager else getattr(server_args, "cuda_graph_max_bs", None)
    return Shape(
        rate_factor=factor,
        prefill_factor=prefill,
        decode_stall=stall,
        graph_bs=graph_bs if graphs else None,
        eager_factor=float(graphs.get("eager_decode_factor", 1.0)),
        request_sigma=float(noise.get("request_sigma", 0.0)),
        serial_prefill=bool(model.get("serial_prefill", False)),
    )
