"""`inv probe` and `inv unlock`: facts per host as a table or JSON; a stale lock removed by its token."""

from __future__ import annotations

from fleet import parallel
from fleet.cli import console, print_json, say_on_stderr
from fleet.cli.hosttext import visible
from fleet.cli.liveline import say_now
from fleet.errors import EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK, FleetError, InputError
from fleet.host import probe_run
from fleet.host.facts import HostFacts
from fleet.inventory import Host
from fleet.ssh.connect import ConnectOptions, open_connection


def command(hosts: list[Host], opts: ConnectOptions, as_json: bool, verbose: bool = False,
            p2p_check: bool = False, wide: bool = False) -> int:
    try:
        facts, stopped = probe_run.probe_hosts(hosts, opts, p2p_check=p2p_check), False
    except parallel.PartlyDone as stop:  # what was gathered is shown, the rest marked interrupted
        facts, stopped = stop.rows, True
    if as_json:
        print_json({"hosts": facts})
    else:
        from fleet.cli.probe_view import render

        render(facts, console, wide)
        if verbose:
            from fleet.cli import liblog

            for f in facts:
                for line in f.connection or ([f"not reached: {f.error}"] if f.error else []):
                    console.print(visible(f"{f.host}: {line}"), markup=False, highlight=False, soft_wrap=wide)
            for line in liblog.lines():  # paramiko's own words (a transport thread's failure), tracebacks left out
                console.print(visible(f"log: {line}"), markup=False, highlight=False, soft_wrap=wide)
    if stopped:  # 130 whatever the rows say: the probe is not whole
        say_now("interrupted: the hosts that answered are shown; a host marked interrupted was not read (Ctrl-C)")
        return EXIT_INTERRUPTED
    bad_p2p = p2p_check and any(f.p2p_check and f.p2p_check.verdict in ("mismatch", "failed") for f in facts)
    faulted = gpu_faults(facts)
    if faulted:  # what the probe checks is not clean (docs/cli.md): said once, as inv status says it
        say_on_stderr("not clean (exit 1): " + "; ".join(f"{host}: GPU fault ({n})" for host, n in faulted.items()))
    return EXIT_OK if all(f.ok for f in facts) and not bad_p2p and not faulted else EXIT_HOST_FAILED


def gpu_faults(facts: list[HostFacts]) -> dict[str, int]:
    """Hosts whose GPUs cannot serve now (a GPU off the bus, a recovery action, pending memory repair): how many
    faults each; a deploy would stop on them (fleet.deploy.hardware)."""
    from fleet.deploy import hardware

    found = {f.host: len(hardware.assess(f).fault) for f in facts if f.ok}
    return {host: n for host, n in found.items() if n}


def unlock(target: Host, token: str, opts: ConnectOptions, as_json: bool = False) -> int:
    """Exit 0 when the lock is removed or there was none (nothing to do), 1 when the host is not reached or the
    lock carries another token; --json: {host, lock, result} ("removed", "not locked"), or {host, lock, error}."""
    from fleet.host import lock as hostlock  # deferred: the probe, which shares this module, needs none of it

    if why := hostlock.token_problem(token):  # before any contact: a pattern must never reach the host
        raise InputError(f"{target.name}: {why}; nothing was changed")
    try:
        conn = open_connection(target, opts)
        try:
            done = hostlock.break_lock(conn, target, token)
        finally:
            conn.close()
    except FleetError as exc:  # --json: the document names the host's error, as every task's does
        if not as_json or isinstance(exc, InputError):
            raise
        print_json({"host": target.name, "lock": hostlock.LOCK_DIR, "error": str(exc)})
        return exc.exit_code
    if as_json:
        print_json({"host": target.name, "lock": hostlock.LOCK_DIR, "result": done.value})
    elif done is hostlock.Unlocked.REMOVED:
        console.print(f"{target.name}: lock {hostlock.LOCK_DIR} removed", markup=False, highlight=False,
                      soft_wrap=True)
    else:
        console.print(f"{target.name}: not locked (no {hostlock.LOCK_DIR}): nothing to unlock, nothing was changed",
                      markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK
