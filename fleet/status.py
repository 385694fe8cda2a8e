"""`inv status`: per host, one round trip: unit state, current release and rung, health, and drift (managed
files whose sha256 no longer matches what the release wrote)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from fleet import parallel
from fleet.connect import ConnectOptions, open_connection
from fleet.inventory import Host
from fleet.releases import CURRENT
from fleet.remote import run

_MARK = "@@fleet-status@@"
_HASHER = (
    "import hashlib,json,sys\n"
    "m = json.load(open(sys.argv[1]))\n"
    "for p in list(m.get('files', {})) + list((m.get('patches') or {}).get('files', {})):\n"
    "    if p.startswith('/'):\n"
    "        try: print(hashlib.sha256(open(p,'rb').read()).hexdigest(), p)\n"
    "        except OSError: pass\n"
)


@dataclass
class HostStatus:
    host: str
    address: str
    ok: bool = True
    error: str | None = None
    unit: dict[str, str] = field(default_factory=dict)
    release: str | None = None
    rung: str | None = None
    playbook: str | None = None
    health: str | None = None  # the HTTP code of /health, or None when nothing answered
    drift: list[str] = field(default_factory=list)
    gpus: int = 0
    power_w: float | None = None  # summed over the GPUs, now
    power_limit_w: float | None = None
    bench_tok_s: float | None = None  # the release's latest benchmark
    last_failure: str | None = None  # the newest failure class among the release's attempts

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def command(unit: str, port: int) -> str:
    u = shlex.quote(unit)
    return "; ".join([
        f"systemctl show {u} -p ActiveState -p SubState -p MainPID -p Result 2>/dev/null",
        f"echo {_MARK}", f"cat {CURRENT}/manifest.json 2>/dev/null",
        f"echo {_MARK}", f"curl -s -o /dev/null -w '%{{http_code}}' -m 3 http://127.0.0.1:{int(port)}/health",
        f"echo; echo {_MARK}",
        # sha256 of every file the current release manages, paths taken from its manifest.
        f"python3 -c {shlex.quote(_HASHER)} {CURRENT}/manifest.json 2>/dev/null",
        f"echo {_MARK}", "nvidia-smi --query-gpu=power.draw,power.limit --format=csv,noheader,nounits 2>/dev/null",
    ])


def parse(host: Host, output: str) -> HostStatus:
    parts = output.split(_MARK + "\n")
    st = HostStatus(host.name, host.address)
    st.unit = dict(line.split("=", 1) for line in parts[0].splitlines() if "=" in line)
    manifest: dict[str, Any] = {}
    if len(parts) > 1 and parts[1].strip():
        try:
            manifest = json.loads(parts[1])
        except ValueError:
            st.drift.append("release manifest unreadable")
    st.release, st.rung, st.playbook = manifest.get("id"), manifest.get("rung"), manifest.get("playbook")
    code = parts[2].strip() if len(parts) > 2 else ""
    st.health = code if code and code != "000" else None
    actual = {}
    for line in (parts[3] if len(parts) > 3 else "").splitlines():
        bits = line.split(None, 1)
        if len(bits) == 2 and len(bits[0]) == 64:
            actual[bits[1].strip()] = bits[0]
    expected = {p: m.get("sha256") for p, m in (manifest.get("files") or {}).items() if not p.startswith("before:")}
    expected.update((manifest.get("patches") or {}).get("files") or {})
    for path, sha in expected.items():
        if actual.get(path) != sha:
            st.drift.append(path + (" (missing)" if path not in actual else " (changed)"))
    draws, limits = [], []
    for line in (parts[4] if len(parts) > 4 else "").splitlines():
        bits = [b.strip() for b in line.split(",")]
        if len(bits) == 2:
            draws.append(_float(bits[0]))
            limits.append(_float(bits[1]))
    st.gpus = len(draws)
    if draws and None not in draws:
        st.power_w = round(sum(draws), 1)  # type: ignore[arg-type]
    if limits and None not in limits:
        st.power_limit_w = round(sum(limits), 1)  # type: ignore[arg-type]
    bench = manifest.get("bench") or next((a["bench"] for a in reversed(manifest.get("attempts") or [])
                                           if isinstance(a.get("bench"), dict)), None)
    if isinstance(bench, dict):
        st.bench_tok_s = (bench.get("result") or {}).get("output_throughput")
    failures = [a.get("outcome") for a in manifest.get("attempts") or []
                if a.get("outcome") not in (None, "READY", "apply", "revert")]
    st.last_failure = failures[-1] if failures else None
    return st


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # [N/A]


def collect(hosts: Sequence[Host], opts: ConnectOptions, port: int = 30000) -> list[HostStatus]:
    def one(host: Host) -> HostStatus:
        conn = open_connection(host, opts)
        try:
            return parse(host, run(conn, host, command(host.unit, port), timeout=30).stdout)
        finally:
            conn.close()

    return [o.value if o.ok and o.value else HostStatus(o.host.name, o.host.address, ok=False, error=o.error)
            for o in parallel.run_all(hosts, one)]


def render(rows: list[HostStatus], console: Console) -> None:
    table = Table(title="fleet status")
    for col in ("host", "GPUs", "unit", "release", "rung", "health", "tok/s", "power", "last failure", "drift"):
        table.add_column(col, overflow="fold")
    for r in rows:
        if not r.ok:
            table.add_row(r.host, "-", "[red]unreachable[/]", "-", "-", "-", "-", "-", "-", f"[red]{r.error}[/]")
            continue
        state = r.unit.get("ActiveState", "?")
        colour = {"active": "green", "failed": "red"}.get(state, "yellow")
        health = "[green]ok[/]" if r.health == "200" else f"[red]{r.health or 'no answer'}[/]"
        power = (f"{r.power_w:.0f}/{r.power_limit_w:.0f} W" if r.power_w is not None and r.power_limit_w
                 else "-")
        table.add_row(r.host, str(r.gpus), f"[{colour}]{state}[/] ({r.unit.get('SubState', '?')})",
                      r.release or "-", r.rung or "-", health,
                      f"{r.bench_tok_s:,.0f}" if r.bench_tok_s else "-", power, r.last_failure or "-",
                      "[red]" + ", ".join(r.drift) + "[/]" if r.drift else "none")
    console.print(table)
