"""Running the probe: one exec channel per host, all hosts in parallel, facts saved locally with a time."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from fabric import Connection

from fleet import parallel, site
from fleet.host import p2pcheck, probe
from fleet.host import programs as hostside
from fleet.host.facts import HostFacts
from fleet.inventory import Host
from fleet.progress import Progress, quiet, ticking
from fleet.ssh.connect import ConnectOptions, open_connection, trace_of
from fleet.ssh.remote import run

PROBE_TIMEOUT_S = 60.0


def facts_dir() -> Path:
    return site.find().state / "facts"


def probe_host(host: Host, opts: ConnectOptions, p2p_check: bool = False) -> HostFacts:
    conn = open_connection(host, opts)
    try:
        facts = probe_on(conn, host).model_copy(update={"connection": trace_of(conn)})
        if p2p_check:  # opt-in, a second round trip: it moves data through every pair of GPUs
            res = run(conn, host, p2pcheck.command(host.venv), timeout=p2pcheck.LIMIT_S + 15)
            facts = facts.model_copy(update={"p2p_check": p2pcheck.parse(res.stdout, res.exited)})
        return facts
    finally:
        conn.close()


def probe_on(conn: Connection, host: Host, say: Progress = quiet) -> HostFacts:
    """The probe over an open connection: one exec channel. `say` is told where it stands while it runs (a host
    whose nvidia-smi hangs takes up to PROBE_TIMEOUT_S: a deploy said `probing`, then nothing for a minute)."""
    with ticking(say, "probe", PROBE_TIMEOUT_S):
        res = run(conn, host, probe.command(host.venv, host.unit), timeout=PROBE_TIMEOUT_S)
    if not probe.split_sections(res.stdout):  # probe.sh prints its sections whatever it finds: something else ran
        return HostFacts.failed(host.name, host.address, hostside.answered_otherwise(
            "the probe", res.exited, res.stdout, res.stderr))
    facts = probe.parse(res.stdout, host.name, host.address).model_copy(
        update={"probed_at": datetime.now(UTC).isoformat(timespec="seconds")})
    if res.stderr.strip():
        facts.warn(f"probe script stderr: {res.stderr.strip().splitlines()[-1][:200]}")
    return facts


def probe_hosts(hosts: Sequence[Host], opts: ConnectOptions, save: bool = True,
                p2p_check: bool = False, progress: Progress = quiet) -> list[HostFacts]:
    """Facts for every host, in order; an unreachable host is a row with its error, never an exception. Ctrl-C:
    parallel.PartlyDone with every row, the hosts it left unread marked interrupted. With the P2P data check (up to
    its LIMIT_S a host), `progress` is told where it stands: it was silent until the table; without it too, as a host
    whose nvidia-smi hangs holds the table up to PROBE_TIMEOUT_S (61 s of silence, then `probe failed`)."""
    ended: list[str] = []

    def one(host: Host) -> HostFacts:
        try:
            return probe_host(host, opts, p2p_check)
        finally:
            ended.append(host.name)

    def note() -> str:
        running = [h.name for h in hosts if h.name not in ended]
        return f"; {len(ended)} of {len(hosts)} hosts done" + (f", still running: {', '.join(running[:8])}"
                                                              + (" ..." if len(running) > 8 else "") if running else "")
    budget = PROBE_TIMEOUT_S + (p2pcheck.LIMIT_S + 15 if p2p_check else 0)
    if p2p_check:
        progress(f"P2P data check: a buffer copied between each pair of GPUs of {len(hosts)} host"
                 f"{'s' * (len(hosts) != 1)} (budget {budget:.0f}s)")
    try:
        with ticking(progress, "probe and P2P data check" if p2p_check else "probe", budget, note=note):
            outcomes: list[parallel.HostOutcome[HostFacts] | None] = list(parallel.run_all(hosts, one))
    except parallel.Interrupted as stop:
        raise parallel.PartlyDone(_rows(hosts, stop.outcomes, save)) from None
    return _rows(hosts, outcomes, save)


def _rows(hosts: Sequence[Host], outcomes: Sequence[parallel.HostOutcome[HostFacts] | None],
          save: bool) -> list[HostFacts]:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    results = []
    for host, o in zip(hosts, outcomes, strict=True):
        if o is None:  # a Ctrl-C left it unread (not started, or no longer waited for)
            results.append(HostFacts.failed(host.name, host.address, parallel.INTERRUPTED_ROW))
            continue
        failed = HostFacts.failed(o.host.name, o.host.address, o.error or "failed", o.unreached)
        facts = (o.value if o.ok and o.value else failed).model_copy(update={"probed_at": now})
        results.append(facts)
        if save and facts.ok:
            save_facts(facts, o.host)
    return results


def facts_path(host: Host) -> Path:
    """Where a host's latest facts go: keyed by its inventory and address, so two inventories that both name a
    host `sbx0` never overwrite each other's facts (`facts/<inventory>-<digest>/<name>@<address>.json`)."""
    source = host.source.resolve()
    inventory = f"{source.stem}-{hashlib.sha256(str(source).encode()).hexdigest()[:8]}"
    port = f":{host.port}" if host.port else ""
    return facts_dir() / inventory / f"{host.name}@{host.address}{port}.json"


def save_facts(facts: HostFacts, host: Host) -> Path:
    """Atomically write the latest facts of a host, for a person to read (how a probe saw it, when)."""
    path = facts_path(host)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}")
    tmp.write_text(facts.model_dump_json(indent=2))
    tmp.rename(path)
    return path
