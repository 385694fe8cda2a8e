"""`inv probe` and `inv unlock`: facts per host as a table or JSON; a stale lock removed by its token."""

from __future__ import annotations

from fleet import parallel
from fleet.cli import console, print_json, say_on_stderr, words
from fleet.cli.hosttext import visible
from fleet.cli.liveline import clear_all, progress_on_stderr, say_now
from fleet.errors import EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK, FleetError, InputError
from fleet.host import probe_run
from fleet.host.facts import HostFacts
from fleet.host.session import one_line
from fleet.inventory import Host
from fleet.ssh.connect import ConnectOptions, open_connection


def command(hosts: list[Host], opts: ConnectOptions, as_json: bool, verbose: bool = False,
            p2p_check: bool = False, wide: bool = False) -> int:
    try:  # the P2P data check says where it stands (up to 2 min a host: it was silent until the table)
        facts, stopped = probe_run.probe_hosts(hosts, opts, p2p_check=p2p_check, progress=progress_on_stderr()), False
    except parallel.PartlyDone as stop:  # what was gathered is shown, the rest marked interrupted
        facts, stopped = stop.rows, True
    clear_all()
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
    return exit_code(facts)


def not_clean(f: HostFacts) -> str | None:
    """Why a host makes `inv probe` exit 1 (docs/cli.md), in the words of its row, or None: not reached (the GPUs
    cell's word), a GPU fault (what a deploy would stop on: fleet.deploy.hardware), the P2P data check's mismatch
    or failure."""
    from fleet.deploy import hardware

    if not f.ok:
        return str(f.unreached or "probe failed")
    why = []
    if faults := len(hardware.assess(f).fault):
        why.append(f"GPU fault ({faults})")
    if f.p2p_check and f.p2p_check.verdict == "mismatch":
        why.append(f"P2P data check: {words.count(len(f.p2p_check.bad_pairs), 'GPU pair')} mismatched")
    elif f.p2p_check and f.p2p_check.verdict == "failed":
        why.append(f"P2P data check failed ({one_line(f.p2p_check.error or 'no reason given', 60)})")
    return ", ".join(why) or None


def exit_code(facts: list[HostFacts]) -> int:
    """EXIT_HOST_FAILED when any host is not clean, with one line on stderr naming each and why, as inv status's."""
    bad = [(f.host, why) for f in facts if (why := not_clean(f))]
    if not bad:
        return EXIT_OK
    say_on_stderr("not clean (exit 1): " + "; ".join(f"{host}: {why}" for host, why in bad))
    return EXIT_HOST_FAILED


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
