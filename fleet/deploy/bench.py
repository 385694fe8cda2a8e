"""`python -m sglang.bench_serving` on a host against its running server, GPU power sampled meanwhile.

One remote script, one round trip: a background loop samples `nvidia-smi --query-gpu=...` into a temp
file while the benchmark runs (random-ids: no download, fixed lengths), then both outputs come back.
`parse` reads the result block by label text (labels differ between sglang versions: FACTS.md section 2),
`parse_power` the samples; `evaluate` is the performance gate. Those three are pure.
A benchmark that fails is an error (BenchError), never a zero.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fabric import Connection

from fleet.deploy.bench_record import (
    BenchRecord,
    BenchRecordError,
    BenchResult,
    BenchSettings,
    GateVerdict,
    GpuPower,
    Power,
    stored,
)
from fleet.errors import FleetError
from fleet.host import benchrun
from fleet.host import programs as hostside
from fleet.host.benchrun import script
from fleet.host.releases import RELEASES, ReleaseStore
from fleet.host.render import LAUNCHER
from fleet.host.service import names_in, read_file, write_atomic
from fleet.inventory import Host
from fleet.outcomes import Outcome, ReleaseStatus
from fleet.playbook import Bench, Playbook
from fleet.yamlfile import JsonObject

_MARK = benchrun.MARK


__all__ = ["BenchError", "BenchRecord", "BenchRecordError", "BenchResult", "BenchSettings", "Baseline",
           "GateVerdict", "GpuPower", "Power", "command", "evaluate", "known_good", "measured", "parse",
           "parse_power", "result_of", "run", "script", "settings_key", "stored", "summary"]


class BenchError(FleetError):
    pass


# ---------------------------------------------------------------------- the command (pure)


def command(venv: str, port: int, bench: Bench, host: str = "127.0.0.1", model: str | None = None,
            tokenizer: str | None = None, output_file: str | None = None, key_path: str | None = None,
            extra: tuple[str, ...] = ()) -> str:
    """The bench_serving invocation, shell-quoted: offline-safe dataset, fixed lengths, no progress bar.
    The tokenizer should be the local model folder: bench_serving otherwise loads it by the served model
    name, from the Hub, which an offline host cannot reach. With key_path (the server's key file), fleet's
    launcher sets $OPENAI_API_KEY inside bench_serving's process (benchrun.script names its folder): the key shows
    in no command line or environment block. benchrun.script runs it as the venv's owner (owner.py's rule)."""
    python = f"{venv}/bin/python"
    start = [python, "-m", "sglang.bench_serving"]
    if key_path:
        start = [python, LAUNCHER, posixpath.basename(key_path), "env:OPENAI_API_KEY", "sglang.bench_serving"]
    argv = [*start, "--backend", bench.backend,
            "--host", host, "--port", str(port), "--dataset-name", bench.dataset,
            "--random-input-len", str(bench.input_len), "--random-output-len", str(bench.output_len),
            "--random-range-ratio", "1.0", "--num-prompts", str(bench.num_prompts),
            "--max-concurrency", str(bench.max_concurrency), "--disable-tqdm"]
    if model:
        argv += ["--model", model]
    if tokenizer:
        argv += ["--tokenizer", tokenizer]
    if output_file:
        argv += ["--output-file", output_file]
    argv += extra
    return hostside.words(*argv)


def split_output(text: str) -> tuple[int | None, str, str, str]:
    """(exit status, bench stdout, bench stderr, sampler output) from the script's output."""
    rc: int | None = None
    parts: dict[str, list[str]] = {"out": [], "err": [], "smi": []}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(_MARK + " "):
            word = line[len(_MARK) + 1:].strip()
            if word.startswith("rc="):
                rc = int(word[3:]) if word[3:].lstrip("-").isdigit() else None
                current = None
            else:
                current = parts.get(word)
            continue
        if current is not None:
            current.append(line)
    return rc, "\n".join(parts["out"]), "\n".join(parts["err"]), "\n".join(parts["smi"])


# ---------------------------------------------------------------------- the result block (pure)

# Header counters and throughputs, matched on the label text without the colon, case- and space-insensitive.
_SCALARS = {
    "backend": "backend",
    "traffic request rate": "request_rate",
    "max request concurrency": "max_concurrency",
    "successful requests": "successful_requests",
    "benchmark duration (s)": "duration_s",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "request throughput (req/s)": "request_throughput",
    "input token throughput (tok/s)": "input_throughput",
    "output token throughput (tok/s)": "output_throughput",
    "output throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "peak_output_throughput",
    "total token throughput (tok/s)": "total_throughput",
    "concurrency": "concurrency",
    "accept length": "accept_length",
}
_TEXT_FIELDS = {"backend", "request_rate", "max_concurrency"}
_COUNTS = {"successful_requests", "total_input_tokens", "total_output_tokens"}
# "Mean TTFT (ms)", "P90 E2E Latency (ms)", "Median TPOT (ms)", "P95 ITL (ms)", "Max ITL (ms)", ...
_LATENCY = re.compile(r"^(mean|median|std|max|min|p\d+(?:\.\d+)?)\s+(ttft|tpot|itl|e2e latency|e2el)\s*\(ms\)$")
_METRIC = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e latency": "e2e", "e2el": "e2e"}
_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(\S.*?)\s*$")


def _number(text: str) -> float | None:
    try:
        value = float(text.split()[0].replace(",", ""))
    except (ValueError, IndexError):
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def parse(output: str, prompts: int | None = None, min_success: float = 1.0) -> BenchResult:
    """The last `Serving Benchmark Result` block in the output; missing labels stay None. With `prompts`
    (how many were sent), a run where fewer than `min_success` of them succeeded is an error, not a
    measurement: the throughput of the few that came back says nothing of the server's."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if "Serving Benchmark Result" in line]
    if not starts:
        return BenchResult(error="no 'Serving Benchmark Result' block in the output")
    values: dict[str, Any] = {}
    latency: dict[str, dict[str, float]] = {}
    unknown: list[str] = []
    for line in lines[starts[-1] + 1:]:
        stripped = line.strip()
        if stripped and set(stripped) == {"="}:
            break
        m = _LINE.match(line)
        if not m:
            continue  # section rules like ----Time to First Token----
        label = re.sub(r"\s+", " ", m.group(1)).lower()
        value = m.group(2)
        if (lat := _LATENCY.match(label)) is not None:
            number = _number(value)
            if number is not None:
                latency.setdefault(_METRIC[lat.group(2)], {})[lat.group(1)] = number
        elif label in _SCALARS:
            name = _SCALARS[label]
            if values.get(name) is None:  # "output token throughput" before its variants
                number = _number(value)
                if name in _COUNTS and number is not None and number.is_integer():
                    number = int(number)
                values[name] = value if name in _TEXT_FIELDS else number
        else:
            unknown.append(m.group(1))
    done, error = values.get("successful_requests"), None
    if values.get("output_throughput") is None:
        error = "the result block has no output token throughput"
    elif not done:
        error = "no request succeeded"
    elif prompts and done < math.ceil(prompts * min_success - 1e-9):
        error = (f"only {done:g} of {prompts} requests succeeded (fewer than "
                 f"{min_success:.0%}): not a measurement")
    return BenchResult(ok=error is None, error=error, **values, latency_ms=latency, unknown=unknown)


# ---------------------------------------------------------------------- power and utilisation (pure)


def parse_power(text: str, threshold: float = 0.5) -> Power:
    """Samples of `nvidia-smi --query-gpu=index,power.draw,power.limit,utilization.gpu` (csv, no units), each
    opened by an `@@ <time>` line. Averages over the busy samples (mean utilisation at least half its peak:
    the warm-up and the tail around the run are left out), else over all of them."""
    samples: list[dict[int, tuple[float | None, float | None, float | None]]] = []
    for line in text.splitlines():
        if line.startswith("@@"):
            samples.append({})
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        if not samples:
            samples.append({})
        samples[-1][int(parts[0])] = (_number(parts[1]), _number(parts[2]), _number(parts[3]))
    samples = [s for s in samples if s]
    if not samples:
        return Power(note="nvidia-smi gave no samples")

    def util(sample: dict[int, tuple[float | None, float | None, float | None]]) -> float:
        values = [u for _, _, u in sample.values() if u is not None]
        return statistics.fmean(values) if values else 0.0

    peak = max(util(s) for s in samples)
    busy = [s for s in samples if peak > 0 and util(s) >= peak / 2]  # the plateau, not warm-up or tail
    use = busy or samples
    gpus = []
    for index in sorted({i for s in use for i in s}):
        draws = [v for s in use if index in s if (v := s[index][0]) is not None]
        limits = [v for s in use if index in s if (v := s[index][1]) is not None]
        utils = [v for s in use if index in s if (v := s[index][2]) is not None]
        if not draws:
            continue
        gpus.append(GpuPower(index, round(statistics.fmean(draws), 1), round(max(draws), 1),
                             round(statistics.fmean(limits), 1) if limits else None,
                             round(statistics.fmean(utils), 1) if utils else None))
    if not gpus:
        return Power(samples=len(samples), busy_samples=len(busy), note="nvidia-smi reported no power draw")
    mean_w = round(statistics.fmean(g.mean_w for g in gpus), 1)
    limit_ws = [g.limit_w for g in gpus if g.limit_w]
    limit_w = round(statistics.fmean(limit_ws), 1) if limit_ws else None
    mean_utils = [g.mean_util for g in gpus if g.mean_util is not None]
    fraction = round(mean_w / limit_w, 3) if limit_w else None
    return Power(samples=len(samples), busy_samples=len(busy), gpus=tuple(gpus), mean_w=mean_w, limit_w=limit_w,
                 fraction=fraction,
                 mean_util=round(statistics.fmean(mean_utils), 1) if mean_utils else None,
                 underutilised=fraction < threshold if fraction is not None else None,
                 note=None if busy else "no sample caught the GPUs busy (run shorter than the sampling interval?)")


# ---------------------------------------------------------------------- the gate (pure)


def settings_key(book: Playbook, bench: Bench) -> BenchSettings:
    """What makes two results comparable: same playbook and model, same benchmark shape."""
    return BenchSettings(playbook=book.name, model=book.model.path, backend=bench.backend, dataset=bench.dataset,
                         input_len=bench.input_len, output_len=bench.output_len, num_prompts=bench.num_prompts,
                         max_concurrency=bench.max_concurrency)


def tok(value: float) -> str:
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


@dataclass(frozen=True)
class Baseline:
    """What a measurement is compared with: a result, where it comes from, and its spread (max - min of the
    runs behind it, 0 for a single run). A regression smaller than the baseline's own noise is not one."""

    tok_s: float
    label: str
    spread: float = 0.0


def evaluate(measured: float, fraction: float, history: Baseline | None = None,
             floor: float | None = None, best: Baseline | None = None) -> GateVerdict:
    """Compare with the last known-good release's result (less its spread), else the absolute floor, else the
    best rung measured in this run; with none of them the first measurement passes."""
    if floor is not None and history is None:
        ok = measured >= floor
        return GateVerdict(ok, measured, floor, "floor", "playbook floor",
                       f"{tok(measured)} tok/s {'>=' if ok else '<'} the playbook's floor of {tok(floor)} tok/s")
    for kind, baseline in (("release", history), ("run", best)):
        if baseline is not None:
            need = max(0.0, fraction * baseline.tok_s - baseline.spread)
            ok = measured >= need
            noise = f" less its spread of {baseline.spread:,.0f}" if baseline.spread else ""
            return GateVerdict(ok, measured, need, kind, baseline.label, f"{tok(measured)} tok/s {'>=' if ok else '<'} "
                           f"{fraction * 100:.0f}% of {tok(baseline.tok_s)} tok/s{noise} ({baseline.label})")
    return GateVerdict(True, measured, None, "none", "",
                   f"{tok(measured)} tok/s (no earlier result, floor or rung to compare with)")


def result_of(manifest: JsonObject, key: BenchSettings | None = None) -> BenchRecord | None:
    """A release manifest's stored benchmark (on these settings, when key is given): its own `bench`
    (inv bench), else the newest measured attempt of the rung it serves, never a rung that lost. What a host's
    manifest holds is data: a record of the wrong shape is no record."""
    def fits(raw: Any) -> BenchRecord | None:
        record = stored(raw)
        return record if record and record.result.ok and (key is None or record.settings == key) else None

    if found := fits(manifest.get("bench")):
        return found
    attempts = manifest.get("attempts")
    for attempt in reversed(attempts if isinstance(attempts, list) else []):
        if (isinstance(attempt, dict) and attempt.get("rung") == manifest.get("rung")
                and attempt.get("outcome") == Outcome.READY and (found := fits(attempt.get("bench")))):
            return found
    return None


def measured(record: BenchRecord | None) -> tuple[float, float | None] | None:
    """A benchmark record's (tok/s, spread): the median and spread of its runs where the tuner repeated it,
    else its one result and no spread."""
    if record is None or record.tok_s is None:
        return None
    return float(record.tok_s), record.spread


def known_good(manifests: list[JsonObject], current: str | None, key: BenchSettings) -> Baseline | None:
    """The last known-good release's result on these settings (the median and spread of its runs where the
    tuner repeated them): the current release first, then the newest other one that served."""
    ordered = sorted((m for m in manifests if m.get("status") == ReleaseStatus.OK),
                     key=lambda m: (m.get("id") == current, str(m.get("id", ""))), reverse=True)
    for m in ordered:
        found = result_of(m, key)
        speed = measured(found)
        if found and speed:
            label = f"release {m['id']}" + (f", median of {len(found.runs.tok_s)} runs" if found.runs else "")
            return Baseline(speed[0], label, speed[1] or 0.0)
    return None


# ---------------------------------------------------------------------- running it (I/O)


def run(conn: Connection, host: Host, book: Playbook, bench: Bench, venv: str,
        key_path: str | None = None) -> BenchRecord:
    """Run the benchmark on the host; the record stored in releases: settings, result, power, when, how long.
    Raises BenchError when it fails."""
    cmd = command(venv, book.serve.port, bench, model=book.model.served_name or book.model.path,
                  tokenizer=book.model.path, key_path=key_path)
    start = time.monotonic()
    try:
        res = benchrun.run_bench(conn, host, cmd, bench.timeout, venv=venv, key_path=key_path)
    except Exception as exc:  # a dropped connection or fabric's own timeout
        raise BenchError(f"{host.name}: benchmark did not complete: {type(exc).__name__}: {exc}") from None
    rc, out, err, smi = split_output(res.stdout)
    seconds = time.monotonic() - start
    result = parse(out, bench.num_prompts, bench.min_success)
    if rc is None:
        raise BenchError(f"{host.name}: benchmark script did not finish: {(res.stderr or res.stdout)[-300:]}")
    if rc == 124:
        raise BenchError(f"{host.name}: benchmark did not finish within {bench.timeout:.0f}s "
                         f"({bench.num_prompts} prompts x {bench.output_len} tokens)")
    if rc != 0 or not result.ok:
        tail = [line for line in (err or out).splitlines() if line.strip()]
        raise BenchError(f"{host.name}: benchmark failed (exit {rc}): "
                         f"{(result.error + '; ') if rc == 0 and result.error else ''}"
                         f"{tail[-1][:300] if tail else 'no output'}")
    power = parse_power(smi, bench.underutilised_below)
    return BenchRecord(settings=settings_key(book, bench), result=result, power=power, command=cmd,
                       at=datetime.now(UTC).isoformat(timespec="seconds"), seconds=round(seconds, 1))


def read_manifest(conn: Connection, host: Host, release_dir: str) -> JsonObject | None:
    data = read_file(conn, host, f"{release_dir}/manifest.json")
    manifest: JsonObject | None = json.loads(data) if data else None
    return manifest


def store_in_release(conn: Connection, host: Host, release_dir: str, record: BenchRecord) -> None:
    """Add the record to a release manifest as its `bench` field, keeping every other field as it is."""
    manifest = read_manifest(conn, host, release_dir)
    if manifest is None:
        raise BenchError(f"no manifest in {release_dir}")
    manifest["bench"] = record.to_json()
    write_atomic(conn, host, f"{release_dir}/manifest.json", json.dumps(manifest, indent=2).encode(), 0o600)


def manifests(conn: Connection, host: Host) -> tuple[list[JsonObject], str | None]:
    """Every release manifest on the host (raw, so fields this fleet does not model survive) and the current id."""
    store = ReleaseStore(conn, host)
    found: list[JsonObject] = []
    for rid in sorted(names_in(conn, host, RELEASES)):
        m = read_manifest(conn, host, f"{RELEASES}/{rid}")
        if m:
            found.append(m)
    return found, store.current_id()


def summary(record: BenchRecord) -> str:
    """One line: throughput, TTFT/TPOT, power against the limit, the underutilisation flag."""
    r, p = record.result, record.power or Power()

    def ms(metric: str, which: str) -> str:
        v = r.stat(metric, which)
        return f"{v:.0f}" if v is not None else "-"

    text = (f"{tok(r.output_throughput or 0.0)} tok/s; TTFT median {ms('ttft', 'median')} / p99 {ms('ttft', 'p99')} ms;"
            f" TPOT median {ms('tpot', 'median')} ms")
    if p.mean_w is not None:
        text += f"; {p.mean_w:.0f} W per GPU" + (f" of {p.limit_w:.0f} W" if p.limit_w else "")
        if p.underutilised:
            text += " (UNDERUTILISED)"
    return text
