"""`inv audit`: the tables of which architecture gates in the installed packages still exclude a host's SM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fleet import parallel, site
from fleet.cli import print_json, real_console, say_host_error
from fleet.cli.liveline import progress_on_stderr, say_now
from fleet.cli.status import INTERRUPTED_LINE
from fleet.errors import EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK, InputError
from fleet.inventory import Host
from fleet.patches import audit as archgate
from fleet.patches import offline
from fleet.patches import sets as patchsets
from fleet.ssh.connect import ConnectOptions

if TYPE_CHECKING:
    from rich.console import Console

    from fleet.cli.fit import Col


def gates_columns(gates: Sequence[archgate.Gate]) -> list[Col]:
    """One line per gate: the file (shortened from the left, keeping its name), the line, which set lifts it,
    the condition (folding in the rest of the line), the function it sits in, its kind."""
    from fleet.cli import fit  # rich: only where something is drawn

    return [fit.Col("file", [(g.file, "") for g in gates], cap=30, keep_end=True),
            fit.Col("line", [(str(g.line), "") for g in gates], right=True),
            fit.Col("lifted by", [(", ".join(g.lifted_by) or "-", "" if g.lifted_by else "red") for g in gates],
                    cap=14),
            fit.Col("condition", [(g.condition, "") for g in gates], fold=True),
            fit.Col("in", [(g.where, "") for g in gates], cap=24),
            fit.Col("kind", [(g.kind, "") for g in gates], cap=10)]


def show(res: archgate.AuditResult, console: Console, wide: bool = False, title: str | None = None) -> None:
    """The verdict, then the gates that count (lifted or remaining), then those upstream keeps on purpose, each
    with its reason and source; an all-clear audit is one sentence."""
    from fleet.cli import fit

    screen = real_console(console)
    said = title or res.verdict()
    counted = [g for g in res.excluding if not g.kept]
    if counted:
        fit.show(screen, gates_columns(counted), said, wide)
    else:
        fit.say(screen, said, wide)
    if res.kept:
        fit.say(screen, f"kept by upstream on purpose ({len(res.kept)}; they do not fail the audit):", wide)
    for g in res.kept:
        assert g.kept is not None
        fit.say(screen, f"{g.file}:{g.line} in {g.where or 'module'}: {g.condition}", wide, indent=2)
        fit.say(screen, g.kept.reason, wide, indent=4)
        for source in g.kept.sources:
            fit.say(screen, f"source: {source}", wide, indent=4)
    unread = [g for g in res.gates if g.error]
    if unread:
        fit.say(screen, f"{len(unread)} condition(s) not evaluated, e.g. {unread[0].file}:{unread[0].line}: "
                        f"{unread[0].error or ''}", wide)


def upgrade(sglang: str | None, flashinfer: str | None, sm: int | None, packages: list[str], sets: list[str],
            full: bool, as_json: bool, console: Console, offline_only: bool = False, wide: bool = False) -> int:
    """`inv audit --sglang X --flashinfer Y --sm N`: those releases' gates, no host. Exit 0 none exclude, 1 some."""
    versions = {d: v for d, v in (("sglang", sglang), ("flashinfer-python", flashinfer)) if v}
    if sm is None:
        raise InputError("--sm: name the SM to audit the releases for (e.g. 120)")
    if packages:
        raise InputError("--package: with --sglang/--flashinfer the releases name the packages")
    for v in versions.values():
        offline.parse_against(f"sglang=={v}")
    loaded = patchsets.load_sets(sets) if sets else None
    fetch = fetch_allowed(offline_only)
    res = offline.audit(versions, sm, loaded, full, fetch=fetch, say=progress_on_stderr()).result
    if as_json:
        print_json({"hosts": [res.to_json()]})
    else:
        show(res, console, wide)
    return EXIT_OK if not res.remaining else EXIT_HOST_FAILED


def run(hosts: Sequence[Host], opts: ConnectOptions, packages: list[str], sm: int | None, sets: list[str],
        full: bool, as_json: bool, console: Console, wide: bool = False) -> int:
    """Exit 0: nothing excludes the SM but what upstream keeps on purpose; 1: gates remain (or a host failed)."""
    stopped = False
    try:
        outcomes = archgate.audit_hosts(hosts, opts, packages, sm, sets, full, progress_on_stderr())
    except parallel.PartlyDone as stop:  # Ctrl-C: what was gathered is shown, the rest marked interrupted
        outcomes, stopped = stop.rows, True
    if as_json:
        print_json({"hosts": [o.value.to_json() if o.value else {"host": o.host.name, "error": o.error}
                              for o in outcomes]})
    for o in outcomes if not as_json else []:
        if o.value is None:  # no gates to show: an error, on stderr
            say_host_error(o.error or f"{o.host.name}: failed", wide)
            continue
        show(o.value, console, wide)
    if stopped:  # 130 whatever the rows say: the audit is not whole
        say_now(INTERRUPTED_LINE)
        return EXIT_INTERRUPTED
    if any(not o.ok for o in outcomes):
        return EXIT_HOST_FAILED
    return EXIT_OK if all(o.value is not None and not o.value.remaining for o in outcomes) else EXIT_HOST_FAILED


def render_audit(results: list[archgate.AuditResult], console: Console, wide: bool = False) -> None:
    for r in results:
        show(r, console, wide, title=f"{r.host} (SM{r.sm}): {r.verdict().removeprefix(r.host + ': ')}")


def fetch_allowed(offline_only: bool) -> bool | str:
    """Whether a release missing from the upstream cache may be fetched: False for --offline; the site's
    `offline: true` named as where it comes from (it was said as `--offline`, an option never typed)."""
    if offline_only:
        return False
    found = site.find()
    return f"offline: true in {found.root / site.MARKER}" if found.defaults.offline else True
