"""`inv bench`: the benchmark against the running server, stored in the current release's manifest (`bench`). A
replica behind a router (a playbook's `router:`) is taken out of it and drained first, and put back once it serves
(fleet.multihost.router.RouterHooks): the benchmark measures the replica alone. Ctrl-C: each host's outcome as it
stood (BenchInterrupted)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from fabric import Connection

from fleet import parallel
from fleet.deploy import bench as benching
from fleet.deploy.bench_record import BenchRecord
from fleet.deploy.hostrun import host_run, lock_only
from fleet.deploy.inputs import load_playbook
from fleet.deploy.serving import Serving
from fleet.errors import FleetError
from fleet.host import curl as hostcurl
from fleet.host import venvs
from fleet.host.releases import Release, ReleaseStore
from fleet.host.serverchecks import port_users
from fleet.host.service import printable, unit_state
from fleet.inventory import Host
from fleet.multihost import router as routing
from fleet.outcomes import DeployStatus
from fleet.playbook import Bench, Playbook
from fleet.progress import Progress, quiet, ticking
from fleet.ssh.connect import ConnectOptions
from fleet.yamlfile import JsonObject


@dataclass
class BenchOutcome:
    """`inv bench` on one host: the record stored in its current release, or why there is none."""

    host: str
    ok: bool
    release: str | None = None
    rung: str | None = None
    record: BenchRecord | None = None
    error: str | None = None

    def to_json(self) -> JsonObject:
        return {"host": self.host, "ok": self.ok, "release": self.release, "rung": self.rung,
                "bench": self.record.to_json() if self.record else None, "error": self.error}


class BenchInterrupted(KeyboardInterrupt):
    """Ctrl-C during inv bench: every host's outcome as it stood (measured, interrupted while measuring, not
    started), for the CLI to show before it exits 130."""

    def __init__(self, results: list[BenchOutcome]) -> None:
        super().__init__()
        self.results = results


def interrupted(outcomes: list[parallel.HostOutcome[BenchOutcome] | None], hosts: Sequence[Host],
                started: set[str]) -> list[BenchOutcome]:
    """Each host's outcome as it stood at a Ctrl-C (pure): measured, cut while measuring (a second Ctrl-C), or
    never started."""
    return [_benched(o) if o else BenchOutcome(h.name, False, error=f"{h.name}: interrupted while benchmarking (the "
            "load ends on the host at its budget; the server is untouched)" if h.name in started else
            f"{h.name}: not started: interrupted") for h, o in zip(hosts, outcomes, strict=True)]


def _benched(o: parallel.HostOutcome[BenchOutcome]) -> BenchOutcome:
    return o.value if o.ok and o.value else BenchOutcome(o.host.name, False, error=o.error)


def bench_host(host: Host, book: Playbook, path: Path, opts: ConnectOptions,
               hooks: routing.RouterHooks | None = None, say: Progress = quiet) -> BenchOutcome:
    spec = book.bench or Bench()
    serve = Serving.of(host, book, path)
    with host_run(host, opts, "bench", unit=None, recover=lock_only(quiet)) as run:
        conn = run.session.conn
        store = ReleaseStore(conn, host)
        current = store.current()
        if current is None:
            raise FleetError(f"{host.name}: no current release to measure (deploy first)")
        venv = venvs.release_venv(store, host, current).venv  # the one its unit runs, never the playbook's guess
        if current.playbook and current.playbook != book.name:  # --playbook (or the group's) wins: said, not silent
            say(f"release {current.id} serves playbook {current.playbook}: measured with {book.name}'s bench "
                f"settings and port (serve.port {book.serve.port}), as --playbook or the inventory's group names it")
        _refuse_unless_serving(conn, host, serve, current)
        if hooks is not None:  # the replica alone is measured: out of the router and drained first
            hooks.take_out(host, conn, say)
        say(f"benchmarking release {current.id} ({current.rung}): {spec.num_prompts} prompts of "
            f"{spec.input_len}+{spec.output_len} tokens, concurrency {spec.max_concurrency} (budget "
            f"{spec.timeout:.0f}s)")
        with ticking(say, "bench", spec.timeout):
            record = benching.run(conn, host, book, spec, venv, serve.bench_key)
        record = replace(record, release=current.id, rung=current.rung)
        benching.store_in_release(conn, host, current.dir, record)
        return BenchOutcome(host.name, True, current.id, current.rung, record)


def _refuse_unless_serving(conn: Connection, host: Host, serve: Serving, current: Release) -> None:
    """A server that does not answer /health is not measured: bench_serving's own words for it are a Python
    ValueError about its warm-up. Nor is one that answers but is not the unit's (the unit stopped or restarting, or
    the port held by another process): its figures would be stored as the release's. Said with the unit's state,
    before the router is touched. The unit is the release's own (under --playbook, another playbook may name
    another), else the playbook's."""
    port, then = serve.book.serve.port, f"release {current.id} not measured"
    units = [PurePosixPath(p).stem for p in current.files if p.endswith(".service") and not p.startswith("before:")]
    unit = units[0] if units else serve.unit
    code = hostcurl.health_code(conn, host, port)
    state = unit_state(conn, host, unit)
    other = printable(port_users(conn, host, port, unit), 160) if code == "200" else ""
    running = state.get("ActiveState") == "active"
    if code == "200" and running and not other:
        return
    active = " ".join(filter(None, (state.get("ActiveState"), state.get("SubState") and f"({state['SubState']})")))
    if code == "200" and running:
        raise FleetError(f"{host.name}: GET /health on port {port} answered 200, but port {port} is held by a process "
                         f"that is not unit {unit}'s ({other}): {then}; stop that process")
    if code == "200":
        raise FleetError(f"{host.name}: GET /health on port {port} answered 200, but not from unit {unit} "
                         f"({active or 'unknown'})" + (f"; the port is held by {other}" if other else "")
                         + f": {then} (its figures would not be the release's); `inv status -H {host.name}` says more")
    raise FleetError(f"{host.name}: the server does not serve (unit {unit} {active or 'unknown'}, GET /health on port "
                     f"{port} answered {code if code not in ('', '000') else 'nothing'}): {then}; `inv status -H "
                     f"{host.name}` says more, `inv deploy` starts it")


def bench_hosts(hosts: Sequence[Host], name: str | None, opts: ConnectOptions,
                progress_for: Callable[[Host], Progress] = lambda _: quiet) -> list[BenchOutcome]:
    """Each host's benchmark; replicas behind a router one at a time, each out of it while it is measured."""
    book, path = load_playbook(name or "glm5-nvfp4")
    hooks = routing.hooks_for(hosts, book, path, opts, {}, progress_for)
    if hooks is None:
        started: set[str] = set()

        def one(h: Host) -> BenchOutcome:
            started.add(h.name)
            return bench_host(h, book, path, opts, say=progress_for(h))
        try:
            outcomes = parallel.run_all(hosts, one)
        except parallel.Interrupted as stop:
            raise BenchInterrupted(interrupted(stop.outcomes, hosts, started)) from None
        return [_benched(o) for o in outcomes]
    results: list[BenchOutcome] = []
    for i, host in enumerate(hosts):  # one replica out of the router at a time, on run_all's Ctrl-C handling
        try:
            [outcome] = parallel.run_all([host], lambda h: bench_host(h, book, path, opts, hooks, progress_for(h)))
            results.append(_benched(outcome))
        except parallel.Interrupted as stop:
            rest = [BenchOutcome(h.name, False, error=f"{h.name}: not started: interrupted") for h in hosts[i + 1:]]
            raise BenchInterrupted([*results, *interrupted(stop.outcomes, [host], {host.name}), *rest]) from None
        finally:  # a benchmark changes no server: back in when it serves, whatever the benchmark said
            routing.back_in(hooks, host, DeployStatus.FAILED)
    return results
