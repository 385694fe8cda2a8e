"""One load point on a host's running server: sglang's bench_serving at a request rate (Poisson arrivals, no
concurrency cap), every request's TTFT and inter-token gaps brought back (`--output-details`), nothing restarted.
`command` and `details_of` are pure; `measure` is the one round trip (fleet.host.benchrun)."""

from __future__ import annotations

import json
from typing import Any

from fabric import Connection

from fleet.deploy import bench as benching
from fleet.deploy.bench import BenchError
from fleet.deploy.loadsearch import Speed, client_lag, samples_of, speed_of
from fleet.deploy.slo import Metric
from fleet.host import benchrun
from fleet.inventory import Host
from fleet.playbook import Bench, Playbook

_DETAILS = f"{benchrun.MARK} details"


def command(venv: str, book: Playbook, spec: Bench, rate: float, requests: int, key_path: str | None = None) -> str:
    """bench_serving with `requests` prompts offered at `rate` per second, its details into benchrun.DETAILS."""
    open_loop = spec.model_copy(update={"num_prompts": requests, "max_concurrency": requests})
    return benching.command(venv, book.serve.port, open_loop, model=book.model.served_name or book.model.path,
                            tokenizer=book.model.path, output_file=benchrun.DETAILS, key_path=key_path,
                            extra=("--request-rate", f"{rate:.6g}", "--output-details"))


def details_of(text: str) -> dict[str, Any] | None:
    """The last JSON line after the details marker of benchrun's output (None: none came back)."""
    lines = text.splitlines()
    if _DETAILS not in lines:
        return None
    for line in reversed(lines[lines.index(_DETAILS) + 1:]):
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                return None
            return record if isinstance(record, dict) else None
    return None


def measure(conn: Connection, host: Host, book: Playbook, spec: Bench, venv: str, rate: float, requests: int,
            key_path: str | None = None) -> tuple[dict[Metric, list[float]], Speed | None]:
    """Per-request samples of one load point and what it served; BenchError when the benchmark fails or brings
    back no details."""
    cmd = command(venv, book, spec, rate, requests, key_path)
    try:
        res = benchrun.run_bench(conn, host, cmd, spec.timeout, details=True, venv=venv, key_path=key_path)
    except Exception as exc:  # a dropped connection or fabric's own timeout
        raise BenchError(f"{host.name}: load point at {rate:g} req/s did not complete: {type(exc).__name__}: {exc}"
                         ) from None
    rc, out, err, _ = benching.split_output(res.stdout)
    record = details_of(res.stdout)
    if rc != 0 or record is None:
        tail = [line for line in (err or out).splitlines() if line.strip()]
        raise BenchError(f"{host.name}: load point at {rate:g} req/s failed (exit {rc}): "
                         f"{tail[-1][:300] if tail else 'no details came back'}")
    if lag := client_lag(record, rate):
        raise BenchError(f"{host.name}: load point at {rate:g} req/s: {lag}")
    return samples_of(record), speed_of(record)
