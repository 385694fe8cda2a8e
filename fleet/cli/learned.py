"""`inv learned` and `inv forget`: what the fleet learned per fingerprint, playbook, rung and host
(fleet.deploy.fingerprint), read as a table or JSON, and cleared under the same lock deploys and tunes take."""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from fleet import errors, inventory, site
from fleet.cli import console, print_json, say_on_stderr
from fleet.cli.hosttext import escape
from fleet.deploy import fingerprint, slolearned
from fleet.deploy.fingerprint import Learned, Selection
from fleet.errors import EXIT_OK, FleetError, InputError, as_typed

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_GLOB = re.compile(r"[A-Za-z0-9*?\[][A-Za-z0-9._*?\[\]!-]{0,127}")  # a name, or a glob over names


def selection(inventory_file: str | None, hosts: Sequence[str], groups: Sequence[str], playbook: str | None,
              rungs: Sequence[str], key: str | None) -> Selection:
    """The options as a Selection (exit 2 on a bad one; exit 1 where a file of what was learned cannot be read).
    --host takes the patterns the other tasks take (a name, a glob, `!name`, `&name`), matched against the host
    names `inv learned` shows, not the inventory's, so what a host no longer in the inventory taught can be
    forgotten; a group needs the inventory."""
    patterns = inventory.split_patterns(hosts)
    for option, values in (("--host", patterns), ("--rung", rungs), ("--playbook", [playbook] if playbook else [])):
        for value in values:
            name = errors.pattern_of(option, value, "name") if option == "--host" else value  # Ansible's range too
            if not (_GLOB if option == "--host" else _NAME).fullmatch(name):
                raise InputError(f"{option} {value!r}: a name as `inv learned` shows it (letters, digits, . _ -)"
                                 + (", a glob of them (* ? [...]), with `!` or `&` before it" * (option == "--host")))
    if key is not None and not re.fullmatch(r"[0-9a-f]{16}", key):
        raise InputError(f"--fingerprint {key!r}: the 16 hex digits `inv learned` shows")
    for store, version in ((fingerprint.path(), None), (slolearned.path(), slolearned.VERSION)):
        why = fingerprint.unreadable(store, version)
        if why:  # read as empty, it said `nothing learned` while a deploy went on without what it held
            raise FleetError(f"{store}: not readable as fleet's ({why}): nothing read from it, nothing changed; "
                             f"move it aside (the next deploy or tune that learns writes a new one)")
    known = _known()
    _say_unknown(known, [p for p in patterns if not p.startswith(("!", "&")) and not inventory.is_glob(p)],
                 playbook, rungs, key)
    members: set[str] = set()
    if groups:
        path = Path(inventory_file) if inventory_file else site.find().inventory
        members = {h.name for h in inventory.load(path).select([], list(groups))}
        if not members:  # never an empty selection, which would mean everything
            raise InputError(f"--group {', '.join(groups)}: no hosts in {path}")
    return Selection(hosts_of(patterns, known["--host"], members), playbook, frozenset(rungs), key)


def hosts_of(patterns: Sequence[str], learned: AbstractSet[str],
             members: AbstractSet[str] = frozenset()) -> frozenset[str]:
    """The host names `patterns` (and the groups' `members`) select among those learned of, as --host reads for
    every task: names and globs add, `!` leaves out, `&` keeps only; only `!`/`&` start from every learned host.
    A name nothing was learned of is kept (it selects nothing; _say_unknown says so); a glob, `!` or `&` that
    matches no learned host is exit 2, naming the learned ones (a typo in an exclusion would forget the host it
    meant to spare); never empty where patterns were given, which would select everything."""
    adds: set[str] = set(members)
    leave: set[str] = set()
    keep: list[set[str]] = []
    for typed in patterns:
        name = typed.lstrip("!&")
        found = {h for h in learned if fnmatch.fnmatchcase(h, name)} if inventory.is_glob(name) else \
            {name} if name in learned or typed == name else set()
        if not found:
            what = "matches no host anything was learned of" if inventory.is_glob(name) else \
                "nothing was learned of that name"
            raise InputError(f"{as_typed('--host', typed)}: {what} (matched against the hosts `inv learned` shows, "
                             f"not the inventory){errors.hint(name, learned)}")
        if typed.startswith("!"):
            leave |= found
        elif typed.startswith("&"):
            keep.append(found)
        else:
            adds |= found
    if not patterns:
        return frozenset(adds)
    start = adds if adds or members else set(learned)
    picked = {h for h in start if h not in leave and all(h in k for k in keep)}
    if not picked:
        raise InputError(f"{' '.join(as_typed('--host', p) for p in patterns)}: leaves no host of those learned of "
                         f"({len(start)} matched, every one is left out)")
    return frozenset(picked)


def only_narrowing(hosts: Sequence[str], groups: Sequence[str]) -> bool:
    """Only `!`/`&` host patterns, no group: they narrow what was learned, they name no host by themselves."""
    return not groups and inventory.only_narrowing(hosts)


def _known() -> dict[str, set[str]]:
    rows, slo = fingerprint.learned(Selection()), slolearned.load()
    return {"--host": {r.host for r in rows} | {w.host for e in slo for w in e.wins},
            "--playbook": {r.playbook for r in rows} | {e.playbook for e in slo}, "--rung": {r.rung for r in rows},
            "--fingerprint": {k.partition("/")[0] for k in [*(r.key for r in rows), *(e.key for e in slo)]}}


def _say_unknown(known: dict[str, set[str]], hosts: Sequence[str], playbook: str | None,
                 rungs: Sequence[str], key: str | None = None) -> None:
    """Each name given that nothing learned has, said on stderr with the nearest learned one (a typo's `nothing
    learned matches` named no host, and beside a good name the typo was dropped in silence; a fingerprint a digit
    off, `inv forget --fingerprint` said `nothing changed` and no more)."""
    for option, values in (("--host", hosts), ("--playbook", [playbook] if playbook else []), ("--rung", rungs),
                           ("--fingerprint", [key] if key else [])):
        for value in values:
            if value not in known[option]:
                say_on_stderr(f"{as_typed(option, value)}: nothing was learned of that name"
                              f"{errors.hint(value, known[option])}")


def _table(rows: list[Learned], title: str) -> None:
    from fleet.cli import fit, real_console

    screen = real_console(console)
    data = [_row(r) for r in rows]
    cols = [fit.Col(header, [(d[i], "") for d in data], cap, right, fold=header == "why")
            for i, (header, cap, right) in enumerate((
                ("fingerprint", None, False), ("playbook", 24, False), ("rung", 24, False), ("host", 24, False),
                ("served", None, True), ("tok/s", None, True), ("failures", 40, False), ("last", 20, False),
                ("note", None, False), ("why", 90, False)))]
    order = [0, 2, 3, 8, 9, 6, 4, 5, 1, 7]  # what an operator needs first when the terminal is narrow
    chosen = {c.header for c in fit.choose([cols[i] for i in order], screen.width,
                                           ascii_only=fit.plain_terminal(screen))}
    screen.print(fit.table([c for c in fit.choose(cols, 10**6) if c.header in chosen], title))


def _row(r: Learned) -> list[str]:
    tok = f"{r.tok_s:,.0f}" + (f" +-{r.spread:,.0f}" if r.spread is not None else "") if r.tok_s else "-"
    failures = ", ".join(f"{c} x{n}" for c, n in sorted(r.failures.items())) or "-"
    note = ("v1, not applied" if r.legacy else "winner" if r.winner
            else "skipped" if r.skipped else "")
    return [r.key.split("/", 1)[0], r.playbook, r.rung, r.host, str(r.served), tok, failures, r.last or "-", note,
            r.why or "-"]


def _slo(pick: Selection) -> list[slolearned.SloLearned]:
    """What `inv tune --slo` learned, as `pick` selects it (a rung selection selects none of it)."""
    return [e for e in slolearned.load()
            if (pick.playbook is None or e.playbook == pick.playbook) and not pick.rungs
            and (pick.fingerprint is None or e.key == pick.fingerprint)
            and (not pick.hosts or any(w.host in pick.hosts for w in e.wins))]


def show(pick: Selection, as_json: bool) -> int:
    rows, slo = fingerprint.learned(pick), _slo(pick)
    if as_json:
        print_json({"file": str(fingerprint.path()), "results": [r.to_json() for r in rows],
                    "slo_file": str(slolearned.path()), "slo": [e.to_json() for e in slo]})
        return EXIT_OK
    if rows:
        _table(rows, f"what the fleet learned ({fingerprint.path()})")
    for e in slo:
        best = e.best()
        won = f"{', '.join(f'{k}={v}' for k, v in best.flags.items()) or 'the base'} kept {best.rate:.3g} req/s " \
              f"on {best.host}" if best else "no winner"
        crashed = "; crashed: " + ", ".join(f"--{f} {v}" for f, v in e.crashed) if e.crashed else ""
        console.print(f"{e.key} {escape(e.playbook)} within {escape(e.promise)}: {escape(won)}{escape(crashed)}",
                      highlight=False, soft_wrap=True)
    if not rows and not slo:
        sys.stdout.write(f"nothing learned{' matches' if pick != Selection() else ''} ({fingerprint.path()})\n")
    return EXIT_OK


def forget(pick: Selection, every: bool, dry_run: bool, as_json: bool, narrowing: bool = False) -> int:
    """`narrowing`: the hosts came of `!`/`&` patterns alone, which need --all (as every task that changes)."""
    if narrowing and not every:
        raise InputError("inv forget: `!`/`&` --host patterns only narrow what was learned; name hosts, or add --all "
                         "for every learned host but those")
    if pick == Selection() and not every:
        raise InputError("say what to forget: --host, --group, --playbook, --rung, --fingerprint, or --all")
    if every and pick != Selection() and not narrowing:
        raise InputError("--all forgets everything: give it alone, or drop it to forget what the others select")
    gone = fingerprint.forget(pick, dry_run)
    slo = [] if pick.rungs else slolearned.forget(pick.hosts, pick.playbook, pick.fingerprint, dry_run)
    verb = "would forget" if dry_run else "forgot"
    if as_json:
        print_json({"file": str(fingerprint.path()), "dry_run": dry_run, "forgotten": [r.to_json() for r in gone],
                    "slo_file": str(slolearned.path()), "slo_forgotten": [e.to_json() for e in slo]})
        return EXIT_OK
    if gone:
        _table(gone, f"{verb} {len(gone)} result{'s' * (len(gone) != 1)} ({fingerprint.path()}"
                     f"{'' if dry_run else '; the file before is known-good.json.bak'})")
    for e in slo:
        what = ", ".join(f"{w.host}'s winner" for w in e.wins) or "every winner and crash"
        console.print(f"{verb} {escape(what)} of {e.key} {escape(e.playbook)} within {escape(e.promise)} "
                      f"({slolearned.path()}{'' if dry_run else '; the file before is slo-learned.json.bak'})",
                      highlight=False, soft_wrap=True)
    if not gone and not slo:
        sys.stdout.write(f"nothing learned matches; nothing changed ({fingerprint.path()})\n")
    return EXIT_OK
