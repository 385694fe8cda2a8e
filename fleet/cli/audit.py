"""`inv audit`: the tables of which architecture gates in the installed packages still exclude a host's SM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fleet import site
from fleet.cli import print_json, say_on_stderr
from fleet.cli.hosttext import visible
from fleet.errors import EXIT_HOST_FAILED, EXIT_OK, InputError
from fleet.inventory import Host
from fleet.patches import audit as archgate
from fleet.patches import offline
from fleet.patches import sets as patchsets
from fleet.ssh.connect import ConnectOptions

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def gates_table(title: str, gates: Sequence[archgate.Gate], console: Console) -> Table:
    """One line per gate at any width: the file (shortened from the left, keeping its name), the line, which
    set lifts it, and the condition, which folds in the rest of the line."""
    from fleet.cli import fit, real_console

    screen = real_console(console)
    ascii_only = fit.plain_terminal(screen)
    cols = [fit.Col("file", [(g.file, "") for g in gates], cap=30, keep_end=True),
            fit.Col("line", [(str(g.line), "") for g in gates], right=True),
            fit.Col("lifted by", [(", ".join(g.lifted_by) or "-", "" if g.lifted_by else "red") for g in gates],
                    cap=14),
            fit.Col("condition", [(g.condition, "") for g in gates], fold=True),
            fit.Col("kind", [(g.kind, "") for g in gates], cap=10)]
    return fit.table(fit.choose(cols, screen.width, ascii_only=ascii_only), title)


def _table(res: archgate.AuditResult, console: Console) -> None:
    from fleet.cli.hosttext import escape

    if res.excluding:
        console.print(gates_table(res.verdict(), res.excluding, console))
    else:  # all clear: one sentence, not an empty table
        console.print(escape(res.verdict()), soft_wrap=True, highlight=False)
    unread = [g for g in res.gates if g.error]
    if unread:
        console.print(f"{len(unread)} condition(s) not evaluated, e.g. {unread[0].file}:{unread[0].line}: "
                      f"{escape(unread[0].error or '')}", soft_wrap=True)


def upgrade(sglang: str | None, flashinfer: str | None, sm: int | None, packages: list[str], sets: list[str],
            full: bool, as_json: bool, console: Console, offline_only: bool = False) -> int:
    """`inv audit --sglang X --flashinfer Y --sm N`: those releases' gates, no host. Exit 0 none exclude, 1 some."""
    versions = {d: v for d, v in (("sglang", sglang), ("flashinfer-python", flashinfer)) if v}
    if sm is None:
        raise InputError("--sm: name the SM to audit the releases for (e.g. 120)")
    if packages:
        raise InputError("--package: with --sglang/--flashinfer the releases name the packages")
    for v in versions.values():
        offline.parse_against(f"sglang=={v}")
    loaded = patchsets.load_sets(sets) if sets else None
    fetch = not (offline_only or site.find().defaults.offline)
    res = offline.audit(versions, sm, loaded, full, fetch=fetch, say=say_on_stderr).result
    if as_json:
        print_json({"hosts": [res.to_json()]})
    else:
        _table(res, console)
    return EXIT_OK if not res.remaining else EXIT_HOST_FAILED


def run(hosts: Sequence[Host], opts: ConnectOptions, packages: list[str], sm: int | None, sets: list[str],
        full: bool, as_json: bool, console: Console) -> int:
    """Exit 0: nothing excludes the SM; 1: gates remain (or a host failed)."""
    outcomes = archgate.audit_hosts(hosts, opts, packages, sm, sets, full)
    if as_json:
        print_json({"hosts": [o.value.to_json() if o.value else {"host": o.host.name, "error": o.error}
                              for o in outcomes]})
    for o in outcomes if not as_json else []:
        if o.value is None:
            console.print(visible(o.error or ""), style="red", markup=False, soft_wrap=True)
            continue
        _table(o.value, console)
    if any(not o.ok for o in outcomes):
        return EXIT_HOST_FAILED
    return EXIT_OK if all(o.value is not None and not o.value.remaining for o in outcomes) else EXIT_HOST_FAILED


def render_audit(results: list[archgate.AuditResult], console: Console) -> None:
    for r in results:
        console.print(gates_table(f"{r.host} (SM{r.sm}): {len(r.excluding)} gate(s) exclude it", r.excluding,
                                  console))
