"""`inv status`: per host, one round trip: unit state, current release and rung, health, and drift (managed
files whose sha256 no longer matches what the release wrote)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet import parallel
from fleet.deploy import bench as benching
from fleet.deploy import hardware, recovery
from fleet.errors import ConnectError, FleetError, NotReached
from fleet.host import programs as hostside
from fleet.host.attempts import failed_attempts
from fleet.host.facts import Gpu, HostFacts
from fleet.host.gpuhealth import XidEvent, health_from_row, lost_gpus, parse_kernel_log, pci_key
from fleet.host.nvsmi import parse_query_gpu
from fleet.host.releases import ROOT, recorded_sglang, versions_of
from fleet.host.render import unit_of_files
from fleet.host.service import overriding, printable
from fleet.host.session import CommandTimedOut, HostSession
from fleet.inventory import Host
from fleet.ssh.connect import ConnectOptions

_MARK = "@@fleet-status@@"
# sglang's own gauges (python/sglang/srt/metrics/collector.py); one series per DP rank, so they are summed.
METRICS = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput", "sglang:token_usage")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+(\S+)")
# A status board answers in seconds: one connect attempt, a short timeout; a host that does not answer
# within them is shown as unreachable rather than holding up the others.
CONNECT_S = 5.0
COMMAND_S = 20.0


@dataclass(frozen=True)
class RouterStatus:
    """The sglang router fleet runs on a host, as status.sh reads it: its current release, unit, the unit's
    state, its /health code (None: no answer) and how many workers the release names. From the host: a field
    of another type is None (workers 0)."""

    release: str | None
    unit: str | None
    state: str | None
    health: int | None
    workers: int = 0

    @property
    def ok(self) -> bool:
        return self.state == "active" and self.health == 200

    def to_json(self) -> dict[str, str | int | None]:
        return {"release": self.release, "unit": self.unit, "state": self.state, "health": self.health,
                "workers": self.workers}

    @classmethod
    def from_json(cls, data: object) -> RouterStatus | None:
        """status.sh's router line (or a saved --json row's); None for what is no JSON object."""
        if not isinstance(data, dict) or not data:
            return None
        health, workers = data.get("health"), data.get("workers")
        return cls(_text(data.get("release")), _text(data.get("unit")), _text(data.get("state")),
                   health if type(health) is int else None, workers if type(workers) is int else 0)


@dataclass
class HostStatus:
    """One host's row of `inv status` (and of its --json): the unit, the release, health, drift, power, GPUs,
    a dead run's leftovers and the router fleet runs there."""

    host: str
    address: str
    ok: bool = True
    error: str | None = None
    unreached: NotReached | None = None  # not ok because the host was not reached: why, in a word
    unread: bool = False  # not ok because a Ctrl-C left it unread
    unit: dict[str, str] = field(default_factory=dict)
    release: str | None = None
    rung: str | None = None
    playbook: str | None = None
    sglang: str | None = None  # the version the current release's host was probed with (remedies spell its flags)
    health: str | None = None  # the HTTP code of /health, or None when nothing answered
    drift: list[str] = field(default_factory=list)
    gpus: int = 0
    power_w: float | None = None  # summed over the GPUs, now
    power_limit_w: float | None = None
    bench_tok_s: float | None = None  # the release's latest benchmark
    last_failure: str | None = None  # the newest failure class among the release's attempts
    last_failure_evidence: str | None = None  # and the log line or check that showed it
    last_failure_rung: str | None = None  # the rung of the attempt that failed so (not the release's, which served)
    last_failure_lost_to: str | None = None  # it was a tune's trial, slower than this rung, which the tune kept
    interrupted: str | None = None  # a dead run's leftovers or a live run's lock (fleet.deploy.recovery), None if clean
    left_by_dead_run: bool = False  # `interrupted` is what a run that died left: not clean (exit 1)
    metrics: dict[str, float] = field(default_factory=dict)  # sglang's /metrics gauges (METRICS), now
    router: RouterStatus | None = None  # the sglang router fleet runs here
    gpu_faults: list[str] = field(default_factory=list)  # fleet.deploy.hardware: why the GPUs cannot serve now
    gpu_notes: list[str] = field(default_factory=list)  # past hardware Xids on GPUs that answer, slowdowns
    xid: list[XidEvent] = field(default_factory=list)  # Xid events since boot
    kernel_log: str | None = None  # where they were read (journalctl, dmesg), or why not
    versions: dict[str, str] = field(default_factory=dict)  # what the current release ran (releases.STACK)
    boot: str | None = None  # why the current release's unit would not come back after a reboot, and the remedy

    @property
    def why_not_ok(self) -> str | None:
        """A row that is not ok, in a word: why the host was not reached, `interrupted` where a Ctrl-C left it
        unread, else `failed` (it answered, then its step failed: the error says how); None for an ok row."""
        if self.ok:
            return None
        return str(self.unreached or ("interrupted" if self.unread else "failed"))

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = self.__dict__.copy()
        out["router"] = self.router.to_json() if self.router else None
        out["xid"] = [e.model_dump() for e in self.xid]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostStatus:
        """A row as --json printed it (tests/tools/draw_board.py draws saved boards)."""
        known = {f.name for f in dataclasses.fields(cls)}
        row = {k: v for k, v in data.items() if k in known}
        row["router"] = RouterStatus.from_json(row.get("router"))
        row["unreached"] = NotReached(row["unreached"]) if row.get("unreached") else None
        row["xid"] = [XidEvent.model_validate(e) for e in row.get("xid") or []]
        return cls(**row)


def command(unit: str, port: int | None) -> str:
    """The status round trip: fleet/host/programs/status.sh with the unit, the port (None: the current release's,
    else 30000; the release's unit wins over `unit` likewise) and fleet's state folder."""
    return hostside.sh_command("status.sh", unit, "" if port is None else str(int(port)), ROOT, hostside.SYSTEM_PYTHON)


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {name: value} for METRICS; series of one name (DP ranks) are summed."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m or m.group(1) not in METRICS:
            continue
        try:
            value = float(m.group(2))
        except ValueError:
            continue
        found[m.group(1)] = found.get(m.group(1), 0.0) + value
    return found


_UNIT_KEY = re.compile(r"[A-Za-z]{1,40}")
_HOST_DATA_ERRORS = (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError)


def _text(v: Any, cap: int = 300) -> str | None:
    """A string the host sent, bounded; anything else is None."""
    return v[:cap] if isinstance(v, str) else None


def _of(v: Any, kind: type) -> Any:
    return v if isinstance(v, kind) else kind()


def parse(host: Host, output: str) -> HostStatus:
    """status.sh's answer; what the host sent is data of any shape: a section of another type or shape than
    fleet writes is reported as unreadable, never an exception that hides the row."""
    parts = output.split(_MARK + "\n")
    unit = {k: v[:300] for k, _, v in (line.partition("=") for line in parts[0].splitlines()) if _UNIT_KEY.fullmatch(k)}
    drift: list[str] = []
    manifest: dict[str, object] = {}
    if len(parts) > 1 and parts[1].strip():
        try:
            loaded: Any = json.loads(parts[1])
        except (ValueError, RecursionError):
            loaded = None
        if isinstance(loaded, dict):
            manifest = loaded
        else:
            drift.append("release manifest unreadable")
    release, rung, playbook = (_text(manifest.get(k), 80) for k in ("id", "rung", "playbook"))
    served = unit_of_files(_of(manifest.get("files"), dict)) or host.unit  # the playbook's serve.unit wins
    boot = not_at_boot(host, unit.get("UnitFileState"), served) if release else None
    code = parts[2].strip() if len(parts) > 2 else ""
    actual, unchecked = {}, None
    for line in (parts[3] if len(parts) > 3 else "").splitlines():
        bits = line.split(None, 1)
        if len(bits) == 2 and len(bits[0]) == 64:
            actual[bits[1].strip()] = bits[0]
        elif bits[:1] == ["refused"]:  # the host's python3 failed status.sh's check: nothing hashed, nothing run
            unchecked = _text(line[len("refused"):].strip(), 200)
    expected = {p: m.get("sha256") for p, m in _of(manifest.get("files"), dict).items()
                if not p.startswith("before:") and isinstance(m, dict)}
    expected.update(_of(_of(manifest.get("patches"), dict).get("files"), dict))
    if unchecked and expected:
        drift.append(f"files not checked: {unchecked}")
    for path, sha in expected.items():
        if not unchecked and actual.get(path) != sha:
            drift.append(path + (" (missing)" if path not in actual else " (changed)"))
    drift += [f"{printable(p)} (a drop-in fleet did not write)" for p in overriding(unit.get("DropInPaths", ""))[:10]]
    draws, limits = [], []
    for line in (parts[4] if len(parts) > 4 else "").splitlines():
        bits = [b.strip() for b in line.split(",")]
        if len(bits) == 2:
            draws.append(_float(bits[0]))
            limits.append(_float(bits[1]))
    bench_tok_s = None
    try:
        speed = benching.measured(benching.result_of(manifest))  # the serving rung's, never a rung that lost
        bench_tok_s = float(speed[0]) if speed else None
    except _HOST_DATA_ERRORS:
        drift.append("release benchmark unreadable")
    failures = failed_attempts(manifest.get("attempts"))
    last = failures[-1] if failures else None
    left_by_dead_run = False
    try:
        interrupted = recovery.parse_probe(parts[6] if len(parts) > 6 else "")
        left_by_dead_run = recovery.left_by_dead_run(parts[6] if len(parts) > 6 else "")
    except _HOST_DATA_ERRORS:
        interrupted = "unreadable (the host's lock or release events are not as fleet writes them)"
    return HostStatus(
        host.name, host.address, unit=unit, release=release, rung=rung, playbook=playbook,
        sglang=recorded_sglang(manifest.get("facts")), health=code if code and code != "000" else None,
        drift=drift, gpus=len(draws),
        power_w=round(sum(draws), 1) if draws and None not in draws else None,  # type: ignore[arg-type]
        power_limit_w=round(sum(limits), 1) if limits and None not in limits else None,  # type: ignore[arg-type]
        bench_tok_s=bench_tok_s, last_failure=last.outcome if last else None,
        last_failure_evidence=last.evidence if last else None, last_failure_rung=last.rung if last else None,
        last_failure_lost_to=last.lost_to if last else None,
        interrupted=interrupted, left_by_dead_run=left_by_dead_run,
        metrics=parse_metrics(parts[5] if len(parts) > 5 else ""),
        router=RouterStatus.from_json(_json_line(parts[7] if len(parts) > 7 else "")),
        **(_gpu_health(host, parts[8]) if len(parts) > 8 else {}),
        versions=versions_of(manifest.get("facts")), boot=boot)


def not_at_boot(host: Host, state: str | None, unit: str | None = None) -> str | None:
    """Why a host's current release would not serve after a reboot (its unit, `unit`, not enabled: a release deployed
    by a fleet older than its enabling, or disabled by hand), with what enables it; None when enabled, or not asked."""
    if state is None or state == "enabled":
        return None
    unit = unit or host.unit
    if state.startswith("masked"):
        return f"{unit} is {state}: it will not start after a reboot (`systemctl unmask {unit}`, then `inv deploy`)"
    return (f"{unit} is {state or 'not enabled'}: it will not start after a reboot; the next `inv deploy --host "
            f"{host.name}` (unchanged: nothing restarted) or `inv rollback` enables it, or `systemctl enable {unit}`")


def _gpu_health(host: Host, text: str) -> dict[str, Any]:
    """Section 9: the health query (GPUs that cannot be opened say so), then @xid and the kernel's Xid counts;
    the row's fields they give."""
    query, _, xid = text.partition("@xid\n")
    gpus = [Gpu(index=int(i) if (i := r.get("index")) and i.isdigit() else None, pci_bus_id=r.get("pci.bus_id"),
                health=health_from_row(r)) for r in parse_query_gpu(query).rows]
    log = parse_kernel_log(xid)
    by_bus = {pci_key(g.pci_bus_id): g.index for g in gpus}
    log = log.model_copy(update={"events": [e.model_copy(update={"gpu_index": by_bus.get(e.pci)})
                                            for e in log.events]})
    hw = hardware.assess(HostFacts(host=host.name, address=host.address, gpus=gpus, lost_gpus=lost_gpus(query),
                                   kernel_log=log))
    return {"gpu_faults": hw.fault, "gpu_notes": hw.notes, "xid": list(log.events),
            "kernel_log": log.source or log.problem}


def _json_line(text: str) -> dict[str, object] | None:
    for line in reversed(text.splitlines()):
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # [N/A]


def bounded(opts: ConnectOptions) -> ConnectOptions:
    """The caller's options (host keys) with status's own connect bounds."""
    return dataclasses.replace(opts, attempts=1, timeouts=dataclasses.replace(
        opts.timeouts, connect=min(opts.timeouts.connect, CONNECT_S), banner=min(opts.timeouts.banner, CONNECT_S),
        auth=min(opts.timeouts.auth, CONNECT_S)))


def collect_one(host: Host, opts: ConnectOptions, port: int | None = None) -> HostStatus:
    """One host's row; never raises: a host that cannot be read is a row that says so."""
    return _row(parallel.outcome_of(host, lambda h: _read(h, bounded(opts), port)))


def collect(hosts: Sequence[Host], opts: ConnectOptions, port: int | None = None) -> list[HostStatus]:
    """Every host's row, in order. Ctrl-C: parallel.PartlyDone with every row, the hosts it left unread marked
    interrupted."""
    fast = bounded(opts)
    try:
        return [_row(o) for o in parallel.run_all(hosts, lambda h: _read(h, fast, port))]
    except parallel.Interrupted as stop:
        raise parallel.PartlyDone([_row(o) if o is not None else
                                   HostStatus(h.name, h.address, ok=False, error=parallel.INTERRUPTED_ROW,
                                              unread=True)
                                   for h, o in zip(hosts, stop.outcomes, strict=True)]) from None


def _read(host: Host, opts: ConnectOptions, port: int | None) -> HostStatus:
    s = HostSession.open(host, opts)
    try:
        res = s.run(command(host.unit, port), timeout=COMMAND_S)
        if _MARK not in res.stdout:  # status.sh prints its marks whatever it finds: something else ran
            raise FleetError(f"{host.name}: " + hostside.answered_otherwise("status", res.exited, res.stdout,
                                                                           res.stderr))
        return parse(host, res.stdout)
    except CommandTimedOut:  # connected, then silence: a link cut mid-read, or a hung host
        raise ConnectError(f"{host.name}: status: expected the status command to answer within {COMMAND_S:.0f}s, "
                           f"got nothing; check the host is up and reachable (ping {host.address}, its console), "
                           "then retry", cause=NotReached.UNREACHABLE) from None
    finally:
        s.close()


def _row(o: parallel.HostOutcome[HostStatus]) -> HostStatus:
    if o.ok and o.value:
        return o.value
    return HostStatus(o.host.name, o.host.address, ok=False, error=o.error or "no answer", unreached=o.unreached)
