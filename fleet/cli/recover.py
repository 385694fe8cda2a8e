"""`inv recover --host H`: the GPU reset, reboot or Proxmox VM reset the GPUs' state calls for; what was done and
what the GPUs say after, as lines or --json. Exit 0 when no GPU fault is left, 1 otherwise, 2 bad input."""

from __future__ import annotations

from fleet.cli import console, print_json
from fleet.cli.deploy import progress_to
from fleet.cli.hosttext import escape
from fleet.deploy.hostrun import started_again
from fleet.deploy.inputs import load_playbook
from fleet.errors import EXIT_HOST_FAILED, EXIT_OK, FleetError, InputError
from fleet.host.session import HostSession
from fleet.inventory import Host
from fleet.multihost import proxmox as pve
from fleet.multihost import recover as rec
from fleet.multihost import router as routing
from fleet.outcomes import DeployStatus
from fleet.ssh.connect import ConnectOptions


def command(host: Host, opts: ConnectOptions, as_json: bool, power_cycle: bool, dry_run: bool,
            wait: float, unreachable: bool = False, playbook: str | None = None) -> int:
    """`playbook` (--playbook, else the one the inventory binds to the host): a replica behind its `router:` is
    taken out of the router before the reset or reboot stops its server, and put back once it serves."""
    name = playbook or host.playbook
    # bad input: exit 2, before any host; one the inventory binds is loaded as deployed (schema only, as a
    # rollback does): a check that objects now must not block an emergency recover
    loaded = load_playbook(name, checked=playbook is not None) if name else None
    guest = pve.guest_of(host)  # bad input ends here, exit 2, before any host or API is contacted
    client = pve.Proxmox.of(host, guest) if guest else None
    progress = progress_to(as_json, live=True)
    say = progress(host)  # every step on stderr, --json too; a long wait's Live line drawn in place or said each 30 s
    hooks = routing.hooks_for([host], *loaded, opts, {}, progress) if loaded and not dry_run else None
    router = hooks.book.router.unit if hooks and hooks.book.router and hooks.host.name == host.name else None

    def out(s: HostSession) -> None:
        assert hooks is not None
        hooks.take_out(host, s.conn, progress(host), strict=True)

    result: rec.RecoverResult | None = None
    try:
        result = rec.recover(host, opts, client, power_cycle=power_cycle, dry_run=dry_run, wait_s=wait, say=say,
                             unreachable=unreachable, before_stop=out if hooks else None, router=router)
    except FleetError as exc:  # --json: the document names the host's error, as every task's does
        if not as_json or isinstance(exc, InputError):
            raise
        result = rec.RecoverResult(host.name, error=str(exc))
    finally:  # back in once it serves (started again after the reset, the reboot or a dead run's clean-up)
        if hooks is not None:
            waits = hooks.taken_out(host) or (result is not None and started_again(result.steps))
            routing.back_in(hooks, host, DeployStatus.FAILED, wait=hooks.book.budgets.ready if waits else 0.0)
    if as_json:
        print_json(result.to_json())
    else:
        verb = "would do" if dry_run else "did"
        console.print(f"[bold]{escape(host.name)}[/]: {verb} {result.action}"
                      + (f" ({escape(result.why)})" if result.why else ""), highlight=False)
        for step in result.steps:
            console.print(f"  {escape(step)}", highlight=False)
        for fault in result.faults_after:
            console.print(f"  [red]still: {escape(fault)}[/]", highlight=False)
    return EXIT_OK if result.ok else EXIT_HOST_FAILED
