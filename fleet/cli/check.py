"""`inv check`: every playbook checked without a host (fleet.deploy.check), one line per problem, exit 0 or 2."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleet import inventory, playbook, site
from fleet.cli import print_json
from fleet.deploy.check import Checked, Problem
from fleet.deploy.inputs import check_playbook
from fleet.errors import EXIT_BAD_INPUT, EXIT_OK, InputError


def command(names: Sequence[str], inventory_file: str | None, as_json: bool) -> int:
    start = time.monotonic()
    folders = site.find().playbooks
    paths = [playbook.resolve(n) for n in names] or sorted(p for f in folders for p in f.glob("*.yaml"))
    if not paths:
        raise InputError(f"{', '.join(map(str, folders))}: no playbooks to check (give --playbook)")
    inv_path = Path(inventory_file or "")
    hosts: set[str] | None = None
    inv_problem: Problem | None = None
    if inventory_file:  # a playbook may be meant for any site: its router host is checked against one named
        try:
            hosts = set(inventory.load(inv_path).hosts)
        except InputError as exc:
            inv_problem = Problem(str(exc))
    results = [check_playbook(p, hosts) for p in paths]
    errors = sum(len(r.errors) for r in results) + (inv_problem is not None)
    if as_json:
        print_json({"playbooks": [_json(r) for r in results], "inventory": str(inv_problem) if inv_problem else None,
                    "errors": errors, "seconds": round(time.monotonic() - start, 3)})
    else:
        for problem in [*([inv_problem] if inv_problem else []), *(p for r in results for p in r.problems)]:
            sys.stdout.write(f"{'warning' if problem.warning else 'error'}: {problem}\n")
        releases = results[0].releases
        warnings = sum(len(r.warnings) for r in results)
        sys.stdout.write(f"{len(results)} playbook{'s' * (len(results) != 1)} checked against sglang "
                         f"{releases[0]} to {releases[-1]} ({len(releases)} releases)"
                         f"{'' if hosts is None else f' and {inv_path}'}: {errors} error{'s' * (errors != 1)}, "
                         f"{warnings} warning{'s' * (warnings != 1)}\n")
        sys.stdout.flush()
    return EXIT_BAD_INPUT if errors else EXIT_OK


def _json(r: Checked) -> dict[str, Any]:
    return {"path": str(r.path), "name": r.book.name if r.book else None, "releases": r.releases,
            "errors": [str(p) for p in r.errors], "warnings": [str(p) for p in r.warnings]}
