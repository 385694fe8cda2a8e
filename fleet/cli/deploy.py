"""The deploy, rollback and history commands: inputs checked before any host is touched (exit 2), the
library run per host, progress and tables drawn, the exit code chosen."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet import site
from fleet.cli import (
    console,
    err_console,
    print_json,
    print_results,
    real_console,
    targets,
    wheelhouse_over_inventory,
)
from fleet.cli.board import Board
from fleet.cli.hosttext import escape, visible
from fleet.cli.liveline import Heartbeat, LiveLine, progress_on_stderr, say_now
from fleet.deploy import before_fleet, rollback_plan
from fleet.deploy import rollback as rollbacks
from fleet.deploy.inputs import check_units, load_playbook, secrets_for
from fleet.deploy.ladder import Deployer
from fleet.deploy.results import DeployResult
from fleet.errors import EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK, FleetError, InputError
from fleet.inventory import Host
from fleet.logs import datafiles
from fleet.multihost import canary as canary_window
from fleet.multihost import multinode, rolling, rollout, router_dry, router_rollback, wheels
from fleet.multihost import router as routing
from fleet.multihost.router_report import RouterReport, RouterRun
from fleet.multihost.together import together
from fleet.outcomes import SERVING, DeployStatus
from fleet.playbook import Playbook
from fleet.progress import Live, Progress, prefixed
from fleet.ssh.connect import ConnectOptions
from fleet.upstream import lockfile
from fleet.upstream.wheelhouse import WheelhouseError

if TYPE_CHECKING:
    from rich.console import Console


def host_say(as_json: bool, live: bool = False, heartbeat: Heartbeat | None = None,
             board: bool = False) -> routing.HostSay:
    """Progress lines, each prefixed with its host's name, on stderr (stdout carries only the task's data): on the
    terminal, dimmed; with --json, plain lines, without loading rich. A Live line (where a long step
    stands now) is drawn in place on a terminal where `live` (one host: the line is wiped before anything else the
    consoles print), is the host's note where a `board` is drawn on the terminal; elsewhere one is printed as a
    line of its own when the host has said nothing for `heartbeat`'s while (30 s): each phase has its own line, and
    a long one is never silent (fleet.cli.liveline)."""
    beat = heartbeat or Heartbeat()
    if as_json:
        def plain(name: str, m: str) -> None:
            if isinstance(m, Live) and not beat.due(name):
                return
            beat.said(name)
            sys.stderr.write(f"{name} {visible(m)}\n")
            sys.stderr.flush()
        return plain

    screen = real_console(err_console)  # progress is not the task's data: stdout keeps only that (docs/cli.md)
    line = LiveLine(screen.file, live and screen.is_terminal, screen.width)
    if line.on:
        line.wiped_by(real_console(console), screen)

    def drawn(name: str, m: str) -> None:
        if isinstance(m, Live):
            if line.on:
                line.show(f"{name} {visible(m, lines=False)}")
                return
            if (board and screen.is_terminal) or not beat.due(name):
                return
        beat.said(name)
        line.clear()
        screen.print(f"[dim]{name}[/] {escape(m)}", highlight=False, soft_wrap=True)
    return drawn


def progress_to(as_json: bool, live: bool = False, board: bool = False) -> Callable[[Host], Progress]:
    """Each host's progress lines (host_say), for the library's Progress of one host."""
    say = host_say(as_json, live, board=board)

    def for_host(host: Host) -> Progress:
        return lambda m: say(host.name, m)

    return for_host


def deploy(hosts: Sequence[Host], name: str, connect: ConnectOptions | Callable[[], ConnectOptions], as_json: bool,
           dry_run: bool, force: bool, serial: str | None = None, max_fail: str | None = None,
           host_timeout: str | float | None = None, yes: bool = True, wide: bool = False,
           deployer_of: type[Deployer] = Deployer, canary: bool = False) -> int:
    """connect: how to connect, or what makes it once the plan is agreed (--ask-become-pass prompts then, after the
    operator said yes to the plan, never before it is shown). `deployer_of`: what deploys one host."""
    # every flag and the playbook are checked before any host is contacted (bad input: exit 2)
    sizes = rollout.parse_serial(serial)
    limit = rollout.parse_max_fail(max_fail)
    timeout = rollout.parse_timeout(host_timeout)
    book, path = load_playbook(name)
    datafiles.refuse_broken()  # the watcher of its starts reads them: it failed there, after the server stopped
    secrets = secrets_for(book)
    check_units(book, hosts)
    if canary and not rollout.is_canary(sizes, len(rollout.batches(list(hosts), sizes))):
        raise InputError("--canary: give the canary a batch of its own and more batches after it, e.g. "
                         "--serial 1,25%: its hosts are judged against the later batches' hosts")
    if book.nodes is not None and (sizes or max_fail is not None or timeout):  # refused before the plan is shown
        raise InputError(f"playbook {book.name} spans {book.nodes.count} nodes: --serial, --max-fail and "
                         "--host-timeout do not apply (its nodes are deployed together)")
    if not dry_run:
        targets.confirm("deploy", hosts, yes, deploy_plan(hosts, book, path, sizes, limit))
    opts = connect() if callable(connect) else connect
    if not dry_run:
        try:
            fill_wheelhouse(hosts, book, path, opts)
        except KeyboardInterrupt:  # it said only `interrupted`: no host's line, nothing said of what changed
            return _interrupted(rolling.DeployInterrupted(_not_started(hosts, "while the wheels its pins need were "
                                                                              "gathered")), as_json, wide)
    if book.nodes is not None:  # one server over several hosts: deployed together, not rolled out
        nodes = multinode.MultiNode(hosts, book, path, opts, progress_to(as_json), secrets)
        try:
            results = together(hosts, lambda: nodes.run(dry_run, force), say_now)
        except rolling.DeployInterrupted as stop:
            return _interrupted(stop, as_json, wide)
        return finish(results, as_json, ok={DeployStatus.OK, DeployStatus.UNCHANGED, DeployStatus.DRY_RUN}, wide=wide)
    hooks = None
    if book.router is not None:  # data-parallel replicas behind sglang's router (fleet.multihost.router)
        hooks = routing.prepare(list(hosts), book, path, opts, secrets, host_say(as_json))
        sizes = sizes or [rollout.Amount(1)]  # one replica out at a time unless --serial says otherwise
    note = rollout.host_timeout_note(timeout, book.budgets)
    if not dry_run and (hooks or len(hosts) > 1 or sizes or max_fail is not None or timeout):
        judging = _judging(book, opts, as_json) if canary else None
        if note:
            say_now(f"fleet: {note}")
        return _rollout(list(hosts), book, path, opts, secrets, as_json, force, sizes, limit, timeout, hooks, wide,
                        deployer_of=deployer_of, judging=judging)
    if note:  # the dry run too: it said nothing, exit 0, and the deploy gave the host up mid-step
        say_now(f"fleet: {note}")
    try:
        results = rolling.each(hosts, book, path, opts, secrets, progress_to(as_json, live=len(hosts) == 1),
                               dry_run=dry_run, force=force, notice=say_now, deployer_of=deployer_of)
    except rolling.DeployInterrupted as stop:
        return _interrupted(stop, as_json, wide)
    if hooks:
        return _router_dry_run(hooks, list(hosts), results, as_json, wide, _dry_plan(results, sizes, limit))
    if dry_run and len(hosts) > 1:
        return _dry_rollout(results, sizes, limit, as_json, wide)
    return finish(results, as_json, ok={DeployStatus.OK, DeployStatus.UNCHANGED, DeployStatus.DRY_RUN}, wide=wide)


def _dry_rollout(results: list[DeployResult], sizes: list[rollout.Amount] | None, limit: rollout.Amount,
                 as_json: bool, wide: bool, what: str = "deploy") -> int:
    """Several hosts: each host's dry run, the rollout and where it would stop by what the dry run found; exit 1
    where the deploy would leave hosts not started (it showed their diffs, exit 0, where the deploy exited 1)."""
    plan = _dry_plan(results, sizes, limit)
    if as_json:
        print_json({"hosts": [r.to_json() for r in results], "rollout": plan.to_json()})
    else:
        _draw_dry_rollout(results, plan, wide, what)
    ok = all(r.status == DeployStatus.DRY_RUN for r in results) and not plan.not_started
    return EXIT_OK if ok else EXIT_HOST_FAILED


def _dry_plan(results: list[DeployResult], sizes: list[rollout.Amount] | None,
              limit: rollout.Amount) -> rollout.DryRollout:
    names = [r.host for r in results]
    first = set(rollout.batches(names, sizes)[0])
    misses = [why for r in results if r.host in first and (why := _canary_miss(r))]
    return rollout.dry_rollout(names, sizes, limit, [r.host for r in results if r.status != DeployStatus.DRY_RUN],
                               misses)


def _draw_dry_rollout(results: list[DeployResult], plan: rollout.DryRollout, wide: bool, what: str = "deploy") -> None:
    for r in results:
        draw(r, wide)
    for line in deploy_plan_batches(plan.batches, plan.canary):
        console.print(escape(f"rollout {line}"), highlight=False, soft_wrap=wide)
    if plan.not_started:  # a stop after the last batch leaves nothing out: each host's line says it all
        console.print(escape(f"the {what} would stop: {plan.stopped} ({', '.join(plan.not_started)})"),
                      highlight=False, soft_wrap=wide)


def _canary_miss(r: DeployResult) -> str | None:
    """Why a canary host's dry run says its deploy would prove nothing (rolling.canary_misses, ahead of time)."""
    if r.status != DeployStatus.DRY_RUN:
        return None
    if r.unchanged:
        return f"{r.host} unchanged (release {r.release} already serves this playbook: nothing would be tried)"
    if r.attempts:  # rungs preflight or the fleet's learning refuses: it would serve only after them
        return (f"{r.host} would serve rung {r.rung} only after "
                f"{', '.join(f'{a.rung} ({a.outcome})' for a in r.attempts)} failed")
    return None


def _interrupted(stop: rolling.DeployInterrupted, as_json: bool, wide: bool) -> int:
    """After Ctrl-C: where each host is, then exit 130."""
    finish(stop.results, as_json, ok=set(), wide=wide)
    sys.stderr.write("interrupted: no host was started after Ctrl-C; each host's line above says where it is\n")
    return EXIT_INTERRUPTED


def _not_started(hosts: Sequence[Host], step: str) -> list[DeployResult]:
    """Every host's line after a Ctrl-C before any host's deploy began (the wheelhouse, the router's read)."""
    return [DeployResult(h.name, DeployStatus.SKIPPED, error=f"{h.name}: not started: interrupted (Ctrl-C) {step}; "
                                                             "nothing was changed") for h in hosts]


def _each_rollback(hosts: Sequence[Host], back: Callable[[Host], DeployResult], as_json: bool, wide: bool,
                   ok: set[DeployStatus] | None = None) -> int:
    """Each host rolled back on its own, in parallel; Ctrl-C is answered at once and ends with each host's line,
    as a deploy's (docs/cli.md#ctrl-c)."""
    try:
        results = rolling.each_host(hosts, back, say_now, "rolling back",
                                    "a rollback that fails puts back the release before")
    except rolling.DeployInterrupted as stop:
        return _interrupted(stop, as_json, wide)
    return finish(results, as_json, ok=ok or {DeployStatus.OK}, wide=wide)


def fill_wheelhouse(hosts: Sequence[Host], book: Playbook, path: Path, opts: ConnectOptions) -> None:
    """`packages:`: the wheels every host's Python and platform needs, downloaded into the controller's wheelhouse
    where it lacks them (a line on stderr each), before any host is changed; one that cannot be had is bad input
    (exit 2), nothing changed anywhere."""
    if not book.packages:
        return
    wheelhouse_over_inventory(hosts)
    try:
        wheels.prepare(hosts, book.packages, opts, progress_on_stderr(), lockfile.path_for(path))
    except WheelhouseError as exc:
        raise InputError(f"{path}: packages: {exc}; nothing was changed") from None


def deploy_plan(hosts: Sequence[Host], book: Playbook, path: Path, sizes: list[rollout.Amount] | None,
                limit: rollout.Amount) -> list[str]:
    """What the operator is asked about: the playbook, and the batches in the order they will run."""
    plan = [f"playbook: {book.name} ({path})"]
    if book.nodes is not None:
        return [*plan, f"one server over {book.nodes.count} nodes, deployed together"]
    batches = rollout.batches([h.name for h in hosts], sizes)
    canary = rollout.is_canary(sizes, len(batches))
    plan += deploy_plan_batches(batches, canary)
    plan.append(f"stops once more than {rollout.fail_limit(limit, len(hosts))} host(s) failed (--max-fail)"
                + (", or when the canary fails" if canary else ""))
    return plan


def deploy_plan_batches(batches: list[list[str]], canary: bool) -> list[str]:
    """The batches in the order they run, as the go-ahead and the dry run show them."""
    lines = [f"batch {n}{' (canary)' if canary and n == 1 else ''}: {', '.join(batch[:8])}"
             + (f" and {len(batch) - 8} more" if len(batch) > 8 else "") for n, batch in enumerate(batches[:8], 1)]
    return lines + ([f"... {len(batches) - 8} more batches"] if len(batches) > 8 else [])


def rollback(hosts: Sequence[Host], name: str | None, to: str | None, opts: ConnectOptions, as_json: bool,
             router: bool = False, wide: bool = False, serial: str | None = None,
             max_fail: str | None = None, rollback_of: Callable[..., DeployResult] = rollbacks.rollback,
             dry_run: bool = False) -> int:
    """`rollback_of`: what rolls one host back (fleet.deploy.rollback.rollback)."""
    targets.check_to(to)
    sizes, limit = rollout.parse_serial(serial), rollout.parse_max_fail(max_fail)
    datafiles.refuse_broken()  # its start is watched with them: it failed there, the release before it stopped
    if dry_run:
        return _rollback_dry_run(hosts, name, to, opts, as_json, router, wide, sizes, max_fail)
    if to == before_fleet.BEFORE_FLEET:
        if router:
            raise InputError("--router --to before-fleet: not supported; roll the router back to a release")
        unit = load_playbook(name, checked=False)[0].serve.unit if name else None
        say_for = progress_to(as_json, live=len(hosts) == 1)
        return _each_rollback(hosts, lambda h: before_fleet.before_fleet(h, unit, opts, say_for(h)),
                              as_json, wide)
    if name is None:  # each host's release names its playbook: health, port and key come from that one
        if router:
            raise InputError("--router: give --playbook (the playbook whose router section to roll back)")
        if sizes or max_fail is not None:  # in batches, as with --playbook: they were ignored, every host at once
            return _rollout(list(hosts), None, None, opts, {}, as_json, False, sizes, limit, None, None, wide,
                            lambda h, say, _: rollback_of(h, None, opts, to, say))
        say_for = progress_to(as_json, live=len(hosts) == 1)
        return _each_rollback(hosts, lambda h: rollback_of(h, None, opts, to, say_for(h)), as_json, wide)
    book, path = load_playbook(name, checked=False)  # back to what was deployed, even if a check now objects
    if router:  # the playbook's router unit on router.host, not the replicas
        if book.router is None:
            raise InputError(f"--router: playbook {book.name} has no router section")
        on_router = routing.prepare(list(hosts), book, path, opts, {}, host_say(as_json))
        report, stopped = router_rollback.waited(on_router, to, say_now)  # a Ctrl-C: the rollback under way ends first
        print_json(report.to_json()) if as_json else render_router(report, console, wide)
        if stopped:
            sys.stderr.write("interrupted (Ctrl-C): the router's line above says where it is\n")
        return EXIT_INTERRUPTED if stopped else EXIT_OK if report.status == DeployStatus.OK else EXIT_HOST_FAILED
    if book.nodes is not None:  # one server over several hosts: every node back to the same deployment
        if sizes or max_fail is not None:
            raise InputError(f"playbook {book.name} spans {book.nodes.count} nodes: --serial and --max-fail do "
                             "not apply (its nodes are rolled back together)")
        nodes = multinode.MultiNode(hosts, book, path, opts, progress_to(as_json))
        try:
            results = together(hosts, lambda: nodes.rollback(to), say_now, "rolling back",
                               "a rollback that fails puts back the release before")
        except rolling.DeployInterrupted as stop:
            return _interrupted(stop, as_json, wide)
        return finish(results, as_json, ok={DeployStatus.OK})
    if book.router is not None or sizes or max_fail is not None:  # replicas behind a router: rolling, in batches
        secrets = secrets_for(book) if book.router else {}  # the router's env file holds the key: kept as it is
        hooks = routing.prepare(list(hosts), book, path, opts, secrets, host_say(as_json)) if book.router else None
        sizes = sizes or ([rollout.Amount(1)] if hooks else None)

        def back(host: Host, say: Progress, hooks: routing.RouterHooks | None) -> DeployResult:
            out = (lambda conn: hooks.take_out(host, conn, say)) if hooks else None
            return rollback_of(host, book, opts, to, say, before_stop=out)

        return _rollout(list(hosts), book, path, opts, secrets, as_json, False, sizes, limit, None, hooks, wide, back)
    say_for = progress_to(as_json, live=len(hosts) == 1)
    return _each_rollback(hosts, lambda h: rollback_of(h, book, opts, to, say_for(h)), as_json, wide)


def _rollback_dry_run(hosts: Sequence[Host], name: str | None, to: str | None, opts: ConnectOptions, as_json: bool,
                      router: bool, wide: bool, sizes: list[rollout.Amount] | None = None,
                      max_fail: str | None = None) -> int:
    """What each host's rollback would do (fleet.deploy.rollback_plan), nothing changed: a replica behind a router
    says its leave and rejoin; a refusal is that host's failure (exit 1), as the rollback's. A rollback in batches
    (--serial, --max-fail, a router's replicas) says them, and where it would stop (_dry_rollout)."""
    if to == before_fleet.BEFORE_FLEET or router:
        raise InputError(f"--dry-run with {'--to before-fleet' if not router else '--router'}: not supported yet; "
                         "nothing was read or changed")
    book = load_playbook(name, checked=False)[0] if name else None
    if book is not None and book.nodes is not None:
        raise InputError(f"--dry-run: playbook {book.name} spans {book.nodes.count} nodes, whose rollback has no dry "
                         "run yet; nothing was read or changed")

    def leaves(host: Host) -> str | None:
        if book is None or book.router is None:
            return None
        return (f"{host.name} taken out of the router ({book.router.unit} on {book.router.host}) and drained before "
                "the stop; put back into it once it serves (one replica at a time unless --serial says otherwise)")

    def job(h: Host) -> DeployResult:
        return rollback_plan.dry_run(h, book, opts, to, leaves(h))

    batched = sizes or max_fail is not None or (book is not None and book.router is not None)
    if not batched or len(hosts) < 2:
        return _each_rollback(hosts, job, as_json, wide, ok={DeployStatus.DRY_RUN})
    try:
        results = rolling.each_host(hosts, job, say_now, "rolling back", "a rollback that fails puts back the release "
                                    "before")
    except rolling.DeployInterrupted as stop:
        return _interrupted(stop, as_json, wide)
    return _dry_rollout(results, sizes or [rollout.Amount(1)], rollout.parse_max_fail(max_fail), as_json, wide,
                        "rollback")


def draw(result: DeployResult, wide: bool = False) -> None:
    from fleet.cli.deploy_view import render

    render(result, console, wide)


def finish(results: list[DeployResult], as_json: bool, ok: set[DeployStatus], wide: bool = False) -> int:
    print_results(results, as_json, lambda r: draw(r, wide))
    return EXIT_OK if all(r.status in ok for r in results) else EXIT_HOST_FAILED


def _judging(book: Playbook, opts: ConnectOptions, as_json: bool) -> tuple[rolling.JudgeCanary, rolling.Job]:
    """--canary: the window on the hosts (fleet.multihost.canary) and the put-back of a canary it did not pass."""
    traffic = canary_window.SessionTraffic(book, opts, book.canary.rate)
    say = host_say(as_json)

    def judge(canaries: list[Host], baselines: list[Host]) -> canary_window.CanaryResult:
        return canary_window.run(canaries, baselines, book.canary, traffic, book.canary.rate,
                                 lambda m: say(canaries[0].name, prefixed("canary: ", m)))  # Live stays Live

    def back(host: Host, say: Progress, hooks: routing.RouterHooks | None) -> DeployResult:
        out = (lambda conn: hooks.take_out(host, conn, say)) if hooks else None
        # the release before, of this playbook's name (an upgrade edits the playbook it serves)
        return rollbacks.rollback(host, book, opts, None, say, before_stop=out)

    return judge, back


def _rollout(hosts: list[Host], book: Playbook | None, path: Path | None, opts: ConnectOptions, secrets: dict[str, str],
             as_json: bool, force: bool, sizes: list[rollout.Amount] | None, limit: rollout.Amount,
             timeout: float | None, hooks: routing.RouterHooks | None, wide: bool = False,
             job: rolling.Job | None = None, deployer_of: type[Deployer] = Deployer,
             judging: tuple[rolling.JudgeCanary, rolling.Job] | None = None) -> int:
    plan = rolling.plan_batches(hosts, sizes)
    board = Board([(h.name, plan.batch_of[h.name]) for h in hosts], len(plan.groups))
    live: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if not as_json:
        from rich.live import Live

        live = Live(get_renderable=board.table, console=real_console(console), refresh_per_second=4, transient=True)
    with live:
        done = rolling.roll_out(plan, book, path, opts, secrets, force, limit, timeout,
                                progress_to(as_json, board=True), board, hooks, notice=say_now, job=job,
                                deployer_of=deployer_of, judge_canary=judging[0] if judging else None,
                                put_back_canary=judging[1] if judging else None)
    if done.judged is not None and done.results and done.results[0].release:
        saved = done.judged.save(site.find().state / "canary", done.results[0].release)
        if saved:
            sys.stderr.write(f"canary: {done.judged.verdict.summary() if done.judged.verdict else ''}; its samples "
                             f"are in {saved} (fleet.deploy.judge.replay judges them again)\n")
    if done.background and timeout is not None:
        grace = min(timeout, rolling.GRACE_MAX_S)
        sys.stderr.write(f"still deploying after --host-timeout: {', '.join(done.background)}; fleet waits up to "
                         f"{grace:g}s more for those deploys to end on their own budgets (falling back on failure)\n")
        done, left = rolling.settle(done, grace, hooks, path)
        if left:
            sys.stderr.write(f"abandoned: {', '.join(left)}: still deploying when fleet exited; the next deploy or "
                             "rollback there takes over its lock and recovers what it left\n")
            for host in [h for h in hosts if h.name in left]:
                if hooks is not None and path is not None:
                    sys.stderr.write(f"{host.name}: {rolling.put_back(host, path, hooks)}\n")
    if as_json:
        print_json({"hosts": [r.to_json() for r in done.results], "batches": [b.to_json() for b in done.batches],
                    "stopped": done.stopped,
                    "interrupted": done.interrupted, "canary": done.canary,
                    **({"judged": done.judged.to_json()} if done.judged else {}),
                    "max_fail": str(limit), "serial": ",".join(map(str, sizes)) if sizes else None,
                    **({"router": done.router.to_json()} if done.router else {})})
    else:
        from fleet.cli.deploy_view import render_rollout

        render_rollout(done.results, done.batch_of, done.seconds, done.stopped, console, wide, done.canary)
        if done.router:
            render_router(done.router, console, wide)
    sys.stdout.flush()
    if done.interrupted:
        sys.stderr.write("interrupted: no host was started after Ctrl-C; each host's line above says where it is\n")
        return EXIT_INTERRUPTED
    return EXIT_OK if done.ok else EXIT_HOST_FAILED


def _router_dry_run(hooks: routing.RouterHooks, hosts: list[Host], results: list[DeployResult],
                    as_json: bool, wide: bool = False, plan: rollout.DryRollout | None = None) -> int:
    """The replicas' dry runs, their rollout and its stop (it said neither, exit 0), then the router it leaves."""
    plan = plan or _dry_plan(results, [rollout.Amount(1)], rollout.Amount(0))
    after = [DeployResult(r.host, DeployStatus.SKIPPED) if r.host in plan.not_started else r for r in results]
    try:
        report = router_dry.dry_run(hooks, hosts, after)
    except FleetError as exc:
        report = RouterReport(RouterRun.DRY_RUN_FAILED, hooks.host.name, DeployStatus.FAILED, error=str(exc))
    if as_json:
        print_json({"hosts": [r.to_json() for r in results], "rollout": plan.to_json(), "router": report.to_json()})
    else:
        _draw_dry_rollout(results, plan, wide)
        render_router(report, console, wide)
    ok = all(r.status == DeployStatus.DRY_RUN for r in results) and report.status == DeployStatus.DRY_RUN
    return EXIT_OK if ok and not plan.not_started else EXIT_HOST_FAILED


def render_router(report: RouterReport, console: Console, wide: bool = False) -> None:
    """The router's line, its error and diff: folded within the terminal's width, or with wide each line whole."""
    status = report.status
    colour = "green" if status in (*SERVING, DeployStatus.DRY_RUN) else "red"
    workers = " ".join(report.shown_workers())
    port = "" if report.port is None else str(report.port)
    console.print(f"[bold]router[/] {escape(report.host)}:{escape(port)} "
                  f"[{colour}]{status}[/]" + (f" release {escape(report.release)}" if report.release
                                              else "") + f"  workers: {escape(workers)}",
                  highlight=False, soft_wrap=wide)
    if report.error:
        console.print(f"  [red]{escape(report.error)}[/]", soft_wrap=wide)
    if report.unchanged and report.evidence:  # a dry run's: the router kept as it is
        console.print(f"  {escape(report.evidence)}", highlight=False, soft_wrap=wide)
    if report.diff:
        console.print(escape(report.diff), highlight=False, soft_wrap=wide)
