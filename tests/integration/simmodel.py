"""What the simulator's model says an `inv tune --slo` search should find on sbx0 (the seed's profile), computed
from the model's own data (the profile's perf_model, the behaviour table's serving rows) and never from fleet:
the tests of the search hold its deployed winner to it.

slo_rates reads sandbox/sim/pkgs/sglang_sim_core (perfmodel.shape and engine.Engine) as formulas, for a TTFT
promise on long prompts (prefills one at a time, so TTFT is what binds): the serving row's ceiling R tok/s and
saturation S (the seed's 3,740 / 64 row needs the MoE autotuned, as the playbook's flashinfer_cutlass is, and a
batch limit of 1,024; else 880 / 24) times the perf_model's factors; each prompt prefilled in
s = prompt / (5 R x prefill_speedup x (chunk / reference) ^ exponent); its first token one decode step later,
d = S / R times the decode stall. A load point of n requests arriving at rate r: the last waits for the prefills
ahead, (n - 1)(s - 1/r), so the promise holds up to r = 1 / (s - (ttft - s - d) / (n - 1)); a batch limit below n
only lowers it (a bound for those configurations). Times at the test's token scale."""

from __future__ import annotations

import importlib.util
import itertools
import math
from pathlib import Path
from typing import Any

import yaml

SIM = Path(__file__).resolve().parents[2] / "sandbox"
PROFILE = SIM / "profiles/rtx-pro-6000-x8-proxmox/profile.yaml"  # sbx0's, the seed's
# what sbx0's sglang holds without the searched flags: the playbook's 1024, a DSA model's default attention backend
# and the chunk of a 96 GB GPU (sandbox/sim/pkgs/sglang/srt/server_args.py _handle_gpu_memory_settings)
BASE = {"max-running-requests": 1024, "attention-backend": "nsa", "chunked-prefill-size": 8192}
Config = tuple[tuple[str, Any], ...]


def _model() -> dict[str, Any]:
    return dict(yaml.safe_load(PROFILE.read_text())["perf_model"])


def _serving_rows() -> dict[str, dict[str, Any]]:
    spec = importlib.util.spec_from_file_location("sim_behaviour", SIM / "sim/pkgs/sglang_sim_core/behaviour.py")
    assert spec and spec.loader
    behaviour = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(behaviour)
    return {r["id"]: r for r in behaviour.ROWS}


def config(flags: dict[str, Any]) -> Config:
    """A trial's flags (a rung's) over the base, as slo_rates keys them."""
    return tuple(sorted({**BASE, **flags}.items()))


def slo_rates(space: dict[str, list[Any]], prompt: int, ttft_s: float, requests: int,
              scale: float) -> dict[Config, float]:
    """The highest request rate under ttft_p99 = ttft_s of each configuration of `space` (with each flag's base
    value) that starts on SM 12."""
    model, rows = _model(), _serving_rows()
    tuned, untuned = rows["sm12x-autotuned-1024"], rows["sm12x-untuned"]
    chunks, rates = model["chunked_prefill"], {}
    choices = {f: list(dict.fromkeys([BASE[f], *v])) for f, v in space.items()}
    for values in itertools.product(*choices.values()):
        c = {**BASE, **dict(zip(choices, values, strict=True))}
        if any(c.get(e["flag"]) == e["value"] and 12 not in e["sm_majors"] for e in model["crashes"]):
            continue  # dies at start on SM 12
        row = tuned if c["max-running-requests"] >= tuned["when"]["batch_limit"][1] else untuned
        ceiling = row["then"]["rate"] * math.prod(t.get(str(c.get(f)), 1.0) for f, t in model["factors"].items())
        gain = (c["chunked-prefill-size"] / chunks["reference"]) ** chunks["prefill_exponent"]
        prefill = prompt / (5 * ceiling * model["prefill_speedup"] * gain) * scale
        stall = 1 + chunks["decode_stall_per_1k"] * max(0, c["chunked-prefill-size"] - chunks["reference"]) / 1024
        step = row["then"]["saturation"] / ceiling * stall * scale
        rates[config(c)] = 1 / (prefill - (ttft_s - prefill - step) / (requests - 1))
    return rates


def near_best(rates: dict[Config, float]) -> list[Config]:
    """The best and those within the model's run noise of it: two starts' spread, exp(-2 sqrt(2) run_sigma), as
    bench/bench_tune_search.py counts 'within noise'."""
    sigma = _model()["noise"]["run_sigma"]
    return [c for c, r in rates.items() if r >= max(rates.values()) * math.exp(-2 * math.sqrt(2) * sigma)]
