"""`inv patch`: the tables of what each set's edits do on each host, and the exit code."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fleet import parallel
from fleet.cli import console, print_json
from fleet.cli.audit import fetch_allowed, render_audit
from fleet.cli.deploy import progress_to
from fleet.cli.hosttext import escape
from fleet.cli.liveline import progress_on_stderr, say_now
from fleet.deploy.inputs import load_playbook
from fleet.errors import EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK, InputError
from fleet.inventory import Host
from fleet.multihost import patch as patch_run
from fleet.multihost import router as routing
from fleet.patches import offline
from fleet.patches import sets as patchsets
from fleet.patches.engine import HostResult
from fleet.patches.plan import APPLICABLE, APPLIED, CANNOT, NOT_APPLICABLE, NOT_NEEDED, NOTHING, REVERTED, REVERTIBLE
from fleet.playbook import Playbook
from fleet.ssh.connect import ConnectOptions
from fleet.upstream import corpus as upstream

if TYPE_CHECKING:
    from rich.console import Console

_STYLE = {APPLICABLE: "yellow", APPLIED: "green", CANNOT: "bold red", NOT_APPLICABLE: "dim", NOT_NEEDED: "green",
          REVERTIBLE: "yellow", REVERTED: "green", NOTHING: "dim"}


def render(results: list[HostResult], console: Console, wide: bool = False) -> None:
    """Per host: its title, one line per edit (within the terminal's width, or every value in full with wide),
    what was written, errors, and the audit when asked for."""
    from rich.text import Text

    from fleet.cli import fit, real_console

    screen = real_console(console)
    for r in results:
        verdict = "[green]ok[/]" if r.ok else "[bold red]FAILED[/]"
        sms = ", ".join(f"SM{s}" for s in sorted(set(r.sms))) or "SM ?"
        rows: list[tuple[str, str, str, str, str, str]] = []  # set, file, edit, state, occurrences, note
        for sp in r.sets:
            if not sp.edits:
                rows.append((sp.name, "", "", sp.state, "", sp.reason or ""))
            for e in sp.edits:
                rows.append((sp.name, f"{e.package}/{e.file}", e.label, e.state, e.occurrences, e.reason or ""))
            for why in sp.not_needed if sp.edits else []:
                rows.append((sp.name, "", "", NOT_NEEDED, "", why))
        if r.revert is not None:
            for f in r.revert.files:
                rows.append(("revert " + (r.revert.run or ""), f.path, "", f.state, "", f.reason or ""))
        cols = [fit.Col("file", [(row[1], "") for row in rows], cap=34, keep_end=True),
                fit.Col("edit", [(row[2], "") for row in rows], cap=26),
                fit.Col("state", [(row[3], _STYLE.get(row[3], "")) for row in rows]),
                fit.Col("occurrences", [(row[4], "") for row in rows]),
                fit.Col("note", [(row[5], "") for row in rows], fold=True),
                fit.Col("set", [(row[0], "") for row in rows], cap=24)]
        names = sorted({row[0] for row in rows})
        title = f"{escape(r.host, lines=False)} ({sms}): patch {r.action} {verdict}" + (
            f" ({escape(', '.join(names), lines=False)})" if names else "")
        fit.say(screen, Text.from_markup(title), wide)
        fit.show(screen, cols, None, wide)
        for w in r.written:
            fit.say(screen, f"{'restored' if r.action == 'revert' else 'wrote'} {w}", wide, indent=2)
        for c in r.cleared:
            fit.say(screen, f"cleared JIT cache {c}", wide, indent=2)
        if r.manifest:
            fit.say(screen, f"manifest {r.manifest}", wide, indent=2)
        if r.action == "apply" and r.ok and not r.written:
            fit.say(screen, "nothing to write (already applied, or not applicable)", wide, indent=2)
        if r.revert is not None and r.revert.state == NOTHING:
            fit.say(screen, f"nothing to revert: {r.revert.reason or ''}", wide, indent=2)
        if r.error:
            fit.say(screen, Text.from_markup(f"[bold red]error:[/] {escape(r.error, lines=False)}"), wide, indent=2)
        if r.audit is not None:
            render_audit([r.audit], console, wide)
        if r.audit_error:
            fit.say(screen, Text.from_markup(f"[bold red]audit:[/] {escape(r.audit_error, lines=False)}"), wide,
                    indent=2)


def against_command(set_names: list[str], against: str, sm: int, as_json: bool, offline_only: bool = False,
                    no_deps: bool = False, wide: bool = False) -> int:
    """`inv patch --check --against sglang==X,flashinfer-python==Y`: the sets on those releases, no host; a
    pair whose Requires-Dist disagree is refused unless `no_deps` (installed by hand with pip --no-deps)."""
    versions = offline.parse_against(against)
    sets = patchsets.load_sets(set_names)
    fetch = fetch_allowed(offline_only)
    say = progress_on_stderr()  # each fetch, and where it stands while it goes on
    offline.releases(versions, fetch, say)  # their METADATA: the pins checked against each other first
    conflicts = [] if no_deps else [line for _, line in upstream.check_pins(versions, source="--against")]
    if conflicts:
        raise InputError("; ".join(f"--against {against}: {line}" for line in conflicts))
    plan = offline.check(sets, versions, sm, fetch=fetch, say=say)
    label = ", ".join(f"{d}=={v}" for d, v in versions.items())
    bad = [f"set {sp.name}, {e.label} ({e.package}/{e.file}): {e.reason}" for sp in plan.sets
           for e in sp.edits if e.state == CANNOT] + [f"set {sp.name}: {sp.reason}" for sp in plan.sets
                                                       if sp.state == CANNOT and not sp.edits]
    result = HostResult(label, "check", plan.ok, plan.sets, sms=[sm], error="; ".join(bad) or None,
                        drift=plan.drifted)
    if as_json:
        print_json({"action": "check", "against": versions, "sets": [s.name for s in sets],
                    "hosts": [result.to_json()]})
    else:
        render([result], console, wide)
    return exit_code([result])


def patch_command(hosts: list[Host], set_names: list[str], check: bool, revert: bool, as_json: bool,
                  opts: ConnectOptions | None = None, allow_prebuilt: bool = False, sets_dir: Path | None = None,
                  audit: bool = False, wide: bool = False, playbook: str | None = None) -> int:
    """What `inv patch` does; returns the exit code (0 ok/already applied, 1 cannot apply / host failed).
    `playbook`: the replicas' (a dead run's put-back uses it; with a `router:`, each replica is out of the router
    while a put-back restarts it)."""
    if check and revert:
        raise InputError("--check and --revert: pick one")
    sets = patchsets.load_sets(set_names, sets_dir or patchsets.DEFAULT_DIR)
    action = "check" if check else "revert" if revert else "apply"
    book: Playbook | None = None
    hooks: routing.RouterHooks | None = None
    progress = progress_to(as_json)
    if playbook:  # bad input (the playbook, its router host) ends here, before any host is contacted
        book, path = load_playbook(playbook)
        if action != "check":
            hooks = routing.hooks_for(hosts, book, path, opts or ConnectOptions(), {}, progress)
    stopped = False
    try:
        results = patch_run.run_hosts(hosts, sets, action, opts, allow_prebuilt, audit, book, hooks, progress,
                                      progress_on_stderr())
    except parallel.PartlyDone as stop:  # Ctrl-C: every host's result is shown, those it left saying where they are
        results, stopped = stop.rows, True
    if as_json:
        print_json({"action": action, "sets": [s.name for s in sets], "hosts": [r.to_json() for r in results]})
    else:
        for r in results:
            for note in r.recovered:  # a dead run's leftovers, closed before patching
                console.print(f"{escape(r.host)}: recovering: {escape(note)}", soft_wrap=wide)
        render(results, console, wide)
        for r in results:
            if r.release:
                console.print(f"{escape(r.host)}: recorded as release {escape(r.release)} (`inv rollback` undoes it)",
                              soft_wrap=wide)
    if stopped:  # 130 whatever the rows say: the run is not whole
        say_now("interrupted: each host's result above says where it is")
        return EXIT_INTERRUPTED
    return exit_code(results)


def exit_code(results: list[HostResult]) -> int:
    """0 all ok; 1 a host failed or drifted from what a set expects (2 stays for input refused before any host)."""
    return EXIT_OK if all(r.ok for r in results) else EXIT_HOST_FAILED
