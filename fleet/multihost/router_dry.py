"""A deploy's dry run of the router of a playbook's replicas (fleet.multihost.router): what the deploy would do to
the router's unit, nothing changed, by the same rules (RouterHooks.members, RouterHooks.keeps)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from fleet.deploy import restore
from fleet.deploy.preflight import port_problem, router_venv_problem
from fleet.deploy.results import DeployResult
from fleet.host.releases import ROUTER_ROOT
from fleet.host.service import read_file
from fleet.inventory import Host
from fleet.logs.redact import env_text as redact_env
from fleet.multihost.router import RouterHooks
from fleet.multihost.router_plan import env_path, plan, unit_path
from fleet.multihost.router_report import RouterReport, RouterRun
from fleet.outcomes import DeployStatus
from fleet.playbook import secret_names
from fleet.ssh.connect import open_connection


def dry_run(hooks: RouterHooks, hosts: list[Host], results: Sequence[DeployResult]) -> RouterReport:
    """What the deploy would do to the router, nothing changed: its workers as the deploy counts them (every replica
    it routes to that answers, and the selected ones whose dry run plans a deploy), then either kept (`unchanged`:
    a router that serves with its own configuration keeps running, its list synced through its API) or the diff of
    its unit and env file and its preflight. It showed a unit of the selected replicas alone: `-H sbx1` read as a
    restart that dropped sbx3, where the deploy kept the router running with both."""
    book, router = hooks.book, hooks.book.router
    assert router is not None  # RouterHooks are made for playbooks with a router section
    would = [DeployResult(r.host, DeployStatus.OK) if r.status == DeployStatus.DRY_RUN else r for r in results]
    conn = open_connection(hooks.host, hooks.opts)
    try:
        workers = hooks.members(conn, hosts, would)
        if not workers:
            return RouterReport(RouterRun.DRY_RUN, hooks.host.name, DeployStatus.FAILED, router.unit,
                                error=f"{hooks.host.name}: no replica would serve; the deploy leaves the router "
                                      "as it is")
        planned = plan(book, hooks.host, workers, hooks.secrets)
        previous = hooks.stores(conn, hooks.host, ROUTER_ROOT).current()
        read = lambda path: read_file(conn, hooks.host, path)  # noqa: E731
        if previous and hooks.keeps(conn, previous, workers, read) and hooks.live.workers() is not None:
            live = hooks.live.workers() or []
            sync = [f"adds {u}" for u in workers if u not in live] + [f"removes {u}" for u in live if u not in workers]
            return RouterReport(RouterRun.DRY_RUN, hooks.host.name, DeployStatus.DRY_RUN, router.unit, router.port,
                                release=previous.id, config=planned.config, unchanged=True,
                                evidence=f"release {previous.id} serves with its own configuration unchanged: the "
                                         f"deploy keeps it running and syncs its workers through its API ("
                                         f"{'; '.join(sync) or 'nothing to add or remove'})")
        diffs: list[str] = []
        names = secret_names(book)
        for path, new in ((unit_path(book), planned.unit_text), (env_path(book), planned.env_text)):
            old = read_file(conn, hooks.host, path)
            old_text, new = (redact_env(old, names) if old is not None else ""), redact_env(new, names)
            diffs += difflib.unified_diff(old_text.splitlines(True), new.splitlines(True),
                                          fromfile=f"{path} (installed)", tofile=f"{path} (router)")
        problem = (port_problem(conn, hooks.host, router.port, router.unit)
                   or router_venv_problem(conn, hooks.host, planned.argv[0], book.serve.user)
                   or restore.unit_problem(conn, hooks.host, planned, unit_path(book)))
    finally:
        conn.close()
    return RouterReport(RouterRun.DRY_RUN, hooks.host.name, DeployStatus.FAILED if problem else DeployStatus.DRY_RUN,
                        router.unit, router.port, release=previous.id if previous else None, config=planned.config,
                        diff="".join(diffs), error=f"{hooks.host.name}: router preflight: {problem}; the deploy would "
                                                   "change nothing there" if problem else None)
