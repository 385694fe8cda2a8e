"""`inv check`: every playbook checked without a host (fleet.deploy.check), one line per problem, exit 0 or 2.
`--json` names each playbook (even one that does not load) and the inventory checked against, with its error
apart (`inventory_error`). Every path it names is absolute."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from fleet import inventory, playbook, site, yamlfile
from fleet.cli import print_json, say_site_over, use_wheelhouse
from fleet.deploy.check import Checked, Problem
from fleet.deploy.inputs import check_playbook
from fleet.errors import EXIT_BAD_INPUT, EXIT_OK, InputError, did_you_mean
from fleet.logs import datafiles
from fleet.ssh.config import parse_jump
from fleet.ssh.connect import ssh_config_of
from fleet.upstream import flags as sglang_cli
from fleet.upstream import lockfile
from fleet.upstream.wheelhouse import WheelhouseError
from fleet.yamlfile import JsonObject


def command(names: Sequence[str], inventory_file: str | None, as_json: bool, lock: bool = False) -> int:
    """The report (_report), FLEET_WHEELHOUSE as it was after it: the inventory's wheelhouse is the check's alone."""
    before = os.environ.get("FLEET_WHEELHOUSE")
    try:
        return _report(names, inventory_file, as_json, lock)
    finally:
        if before is None:
            os.environ.pop("FLEET_WHEELHOUSE", None)
        else:
            os.environ["FLEET_WHEELHOUSE"] = before


def _report(names: Sequence[str], inventory_file: str | None, as_json: bool, lock: bool) -> int:
    start = time.monotonic()
    folders = site.find().playbooks
    say_site_over(site.find().root)
    # every path absolute, in the lines and in --json alike: a name resolves to a file of the site or the clone,
    # which has no relative form the operator gave (docs/cli.md, inv check)
    paths: list[Path] = []
    unresolved: dict[int, Checked] = {}  # a name that is no playbook: one error among the rest, in its place
    for i, name in enumerate(names):
        try:
            paths.append(_absolute(playbook.resolve(name)))
        except InputError as exc:
            unresolved[i] = Checked(_absolute(Path(name)), None, [], [Problem(str(exc))])
    if not names:
        paths = sorted(_absolute(p) for f in folders for p in f.glob("*.yaml"))
        if not paths:
            raise InputError(f"{', '.join(map(str, folders))}: no playbooks to check (give --playbook)")
    # without -i, the inventory the site names, when there is one: it said 0 errors while every host task refused it
    # (its own problems only: a shipped playbook's router.host is no host of a site's, so none is checked against it)
    defaulted = not inventory_file and site.find().inventory.is_file()
    inventory_file = str(site.find().inventory) if defaulted else inventory_file
    inv_path = _absolute(Path(inventory_file or ""))
    hosts: set[str] | None = None
    inv_problems: list[Problem] = []
    inv_warnings: list[Problem] = []
    if inventory_file:  # a playbook may be meant for any site: its router host is checked against one named
        # every problem of the inventory and the files beside it at once; its host names all the same
        held: dict[str, inventory.Host] = {}
        hosts, found = inventory.check(inv_path, held)
        inv_problems = [Problem(str(e)) for e in [*found, *_bound_playbooks(inv_path), *_ssh_configs(held)]]
        inv_warnings = [Problem(str(e), warning=True) for e in _group_slips(inv_path)]
        try:  # the pins are checked against the wheelhouse a deploy of these hosts builds from (the inventory's)
            use_wheelhouse(list(held.values()))
        except InputError as exc:
            inv_problems.append(Problem(f"{inv_path}: {exc}"))
    inv_problem = inv_problems[0] if inv_problems else None
    unread = f"{inv_path}: its host names cannot be read" if inventory_file and hosts is None else None
    against, unread = (None, None) if defaulted else (hosts, unread)
    results = [check_playbook(p, against, unread) for p in paths]
    locked: list[str] = []
    if lock:  # on purpose: the locks rewritten from the wheelhouse, then checked again
        locked = relock(results)
        results = [check_playbook(p, against, unread) for p in paths]
    for i, missing in sorted(unresolved.items()):
        results.insert(i, missing)
    # the files a deploy reads the server's log with: 0 errors here, and the deploy failed on them mid-start
    log_problems = [Problem(p) for p in datafiles.problems()]
    errors = sum(len(r.errors) for r in results) + len(inv_problems) + len(log_problems)
    if as_json:
        print_json({"playbooks": [_json(r) for r in results], "inventory": str(inv_path) if inventory_file else None,
                    "inventory_error": str(inv_problem) if inv_problem else None,
                    "inventory_errors": [str(p) for p in inv_problems],
                    "inventory_warnings": [str(p) for p in inv_warnings],
                    "rules_errors": [str(p) for p in log_problems],
                    "locked": locked, "errors": errors, "seconds": round(time.monotonic() - start, 3)})
    else:
        for line in locked:
            sys.stdout.write(f"{line}\n")
        for problem in [*log_problems, *inv_problems, *inv_warnings, *(p for r in results for p in r.problems)]:
            sys.stdout.write(f"{'warning' if problem.warning else 'error'}: {problem}\n")
        releases = next((r.releases for r in results if r.releases), None) or sglang_cli.default_table().versions
        warnings = sum(len(r.warnings) for r in results) + len(inv_warnings)
        sys.stdout.write(f"{len(results)} playbook{'s' * (len(results) != 1)} checked against sglang "
                         f"{releases[0]} to {releases[-1]} ({len(releases)} releases)"
                         f"{'' if not inventory_file else f' and {inv_path}'}: {errors} error{'s' * (errors != 1)}, "
                         f"{warnings} warning{'s' * (warnings != 1)}\n")
        sys.stdout.flush()
    return EXIT_BAD_INPUT if errors else EXIT_OK


def _bound_playbooks(inv_path: Path) -> list[InputError]:
    """Each group's `playbook:` that names nothing (a deploy without --playbook would stop on it), in the inventory
    file and every *.yaml read beside it, a file with a duplicate key too: a path relative to the inventory file's
    folder, else a name in the site's playbooks/ or the shipped ones."""
    found = []
    for path in inventory.files_of(inv_path) if inv_path.is_file() else []:
        try:
            doc = yamlfile.load(path, collect=True)
        except InputError:
            continue  # said among the inventory's problems
        groups = doc.data.get("groups") if isinstance(doc.data, dict) else None
        for name, group in groups.items() if isinstance(groups, dict) else []:
            book = group.get("playbook") if isinstance(group, dict) else None
            if not isinstance(book, str) or not book.strip():
                continue  # a wrong type is the schema's to say
            try:
                playbook.resolve(str(inv_path.parent / book) if book.endswith((".yaml", ".yml")) else book)
            except InputError as exc:
                found.append(doc.error(("groups", name, "playbook"), f"{book}: {str(exc).partition(': ')[2]}"))
    return found


def _group_slips(inv_path: Path) -> list[InputError]:
    """A host's group that no file's `groups:` defines, a letter or two from one that is (`canry` beside `canary`): a
    group named only by its hosts is fine (membership), but this one takes none of the group's settings and
    `--group canary` leaves the host out: inv check said nothing."""
    paths = inventory.files_of(inv_path) if inv_path.is_file() else []
    docs = []
    for path in paths:
        with suppress(InputError):
            docs.append(yamlfile.load(path, collect=True))
    defined = {str(g) for d in docs if isinstance(d.data, dict) and isinstance(d.data.get("groups"), dict)
               for g in d.data["groups"]}
    found = []
    for doc in docs:
        hosts = doc.data.get("hosts") if isinstance(doc.data, dict) else None
        for name, host in hosts.items() if isinstance(hosts, dict) else []:
            groups = host.get("groups") if isinstance(host, dict) else None
            for g in [str(g) for g in groups if str(g) not in defined] if isinstance(groups, list) else []:
                near = did_you_mean(g, defined).removeprefix("; did you mean ").removesuffix("?")
                if near:
                    found.append(doc.error(("hosts", name, "groups"), f"{g} is no group of groups:; did you mean "
                                           f"{near}? (--group {near} leaves {name} out; a group named only by its "
                                           "hosts has no settings)"))
    return found


def _ssh_configs(hosts: dict[str, inventory.Host]) -> list[InputError]:
    """Each host's `ssh_config:` file read as a connection reads it (no lookup: nothing runs): a missing file, an
    Include cycle, and under FLEET_SANDBOX_ONLY a Match exec refused every host task at once (exit 2), and `inv
    check -i` said 0 errors."""
    found: list[InputError] = []
    for host in hosts.values():
        if host.ssh_config:
            try:
                ssh_config_of(host)
            except InputError as exc:
                found.append(exc)
        spec = "" if (host.proxy_jump or "").lower() == "none" else host.proxy_jump or ""
        for hop in [p.strip() for p in spec.split(",") if p.strip()]:  # as every host task reads it
            try:
                parse_jump(hop)
            except InputError as exc:  # `root@bastion:99999`: 0 errors here, and every task refused the host
                found.append(InputError(f"{host.source}: hosts.{host.name}.proxy_jump: {exc}"))
    return found


def _absolute(path: Path) -> Path:
    """Absolute with `..` folded, symlinks kept (the file the operator named, not what it points to)."""
    return Path(os.path.abspath(path))


def relock(results: Sequence[Checked]) -> list[str]:
    """Each checked playbook's lock rewritten from the wheelhouse (fleet.upstream.lockfile.relock); a line each.
    A pin set the wheelhouse cannot resolve is bad input (one line), its lock left as it was."""
    out = []
    for r in results:
        if r.book is None or not r.book.packages:
            continue
        lock = lockfile.path_for(r.path)
        try:
            entries = lockfile.relock(lock, r.book.packages, [])
        except WheelhouseError as exc:
            raise InputError(f"{r.path}: packages: {exc}; {lock} was left as it was") from None
        out += [f"locked {lock}: {', '.join(f'{d} {v}' for d, v in e.pins)} for {e.target}: {len(e.wheels)} wheels"
                for e in entries]
    return out


def name_of(r: Checked) -> str:
    """The playbook's name: the loaded one's, else the `name:` its file says (a playbook with errors is not
    loaded), else the file's stem; never null, so a script can say which playbook an error belongs to."""
    if r.book is not None:
        return r.book.name
    try:
        data = yamlfile.load(r.path).data
    except InputError:
        data = None
    named = data.get("name") if isinstance(data, dict) else None
    return named if isinstance(named, str) and named.strip() else r.path.stem


def _json(r: Checked) -> JsonObject:
    return {"path": str(r.path), "name": name_of(r), "releases": r.releases,
            "errors": [str(p) for p in r.errors], "warnings": [str(p) for p in r.warnings]}
