"""`inv history`: each host's releases, newest first, read in parallel; Ctrl-C shows those read."""

from __future__ import annotations

from collections.abc import Sequence

from fleet import parallel
from fleet.cli import console, print_json, say_host_error
from fleet.cli.liveline import say_now
from fleet.deploy import rollback as rollbacks
from fleet.errors import EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK
from fleet.host.releases import versions_of
from fleet.inventory import Host
from fleet.ssh.connect import ConnectOptions


def history(hosts: Sequence[Host], opts: ConnectOptions, as_json: bool, bench: bool = False,
            wide: bool = False) -> int:
    """Ctrl-C: the histories read are shown, the hosts left unread marked so, exit 130 (they were thrown away)."""
    stopped = False
    try:
        outcomes = parallel.run_all(hosts, lambda h: rollbacks.history(h, opts))
    except parallel.Interrupted as stop:
        stopped = True
        outcomes = [o if o is not None else parallel.HostOutcome(h, False, None,
                                                                 f"{h.name}: {parallel.INTERRUPTED_ROW}", 0.0)
                    for h, o in zip(hosts, stop.outcomes, strict=True)]
    if as_json:
        print_json({"hosts": [{"host": o.host.name, "ok": o.ok, "error": o.error,
                               "current": o.value[1] if o.value else None,
                               "releases": [{**r.to_json(), "versions": versions_of(r.facts)} for r in o.value[0]]
                               if o.value else []}
                              for o in outcomes]})
    else:
        from fleet.cli.deploy_view import render_history

        for o in outcomes:
            if o.value:
                render_history(o.host.name, o.value[0], o.value[1], console, bench, wide)
            else:  # no releases to list: an error, on stderr
                say_host_error(o.error or f"{o.host.name}: failed", wide)
    if stopped:
        from fleet.cli.status import INTERRUPTED_LINE

        say_now(INTERRUPTED_LINE)
        return EXIT_INTERRUPTED
    return EXIT_OK if all(o.ok for o in outcomes) else EXIT_HOST_FAILED
