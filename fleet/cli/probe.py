"""`inv probe` and `inv unlock`: facts per host as a table or JSON; a stale lock removed by its token."""

from __future__ import annotations

from fleet.cli import console, print_json
from fleet.cli.hosttext import visible
from fleet.errors import EXIT_HOST_FAILED, EXIT_OK, InputError
from fleet.host import probe_run
from fleet.inventory import Host
from fleet.ssh.connect import ConnectOptions, open_connection


def command(hosts: list[Host], opts: ConnectOptions, as_json: bool, verbose: bool = False,
            p2p_check: bool = False, wide: bool = False) -> int:
    facts = probe_run.probe_hosts(hosts, opts, p2p_check=p2p_check)
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
    bad_p2p = p2p_check and any(f.p2p_check and f.p2p_check.verdict in ("mismatch", "failed") for f in facts)
    return EXIT_OK if all(f.ok for f in facts) and not bad_p2p else EXIT_HOST_FAILED


def unlock(target: Host, token: str, opts: ConnectOptions) -> int:
    from fleet.host import lock as hostlock  # deferred: the probe, which shares this module, needs none of it

    if why := hostlock.token_problem(token):  # before any contact: a pattern must never reach the host
        raise InputError(f"{target.name}: {why}; nothing was changed")
    conn = open_connection(target, opts)
    try:
        hostlock.break_lock(conn, target, token)
    finally:
        conn.close()
    console.print(f"{target.name}: lock {hostlock.LOCK_DIR} removed")
    return EXIT_OK
