"""The deploy, rollback and history commands: load inputs (bad input fails before any host is touched),
run per host, print, and choose the exit code."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape

from fleet import deploy as deploying
from fleet import deploy_view, fingerprint, logrules, parallel, patchsets, playbook, rollout
from fleet.cli import console, err_console, print_json
from fleet.connect import ConnectOptions
from fleet.errors import EXIT_HOST_FAILED, EXIT_OK, FleetError, InputError
from fleet.facts import HostFacts
from fleet.inventory import Host
from fleet.render import API_KEY_VAR


def load_playbook(name: str) -> tuple[playbook.Playbook, Path]:
    path = playbook.resolve(name)
    classes = {c.value for c in logrules.LogClass}
    return playbook.load(path, known_classes=classes, known_patches=set(patchsets.available())), path


def secrets_for(book: playbook.Playbook) -> dict[str, str]:
    """Resolve secret references locally; values never reach the output."""
    ref = book.serve.api_key
    if ref is None:
        return {}
    if ref.env:
        value = os.environ.get(ref.env)
        if not value:
            raise InputError(f"playbook {book.name}: serve.api_key.env: ${ref.env} is not set")
    else:
        try:
            value = Path(ref.file).expanduser().read_text().strip()
        except OSError as exc:
            raise InputError(f"playbook {book.name}: serve.api_key.file: {exc.strerror}: {ref.file}") from None
    return {API_KEY_VAR: value}


def _progress_console(as_json: bool) -> Console:
    # With --json, stdout carries only the JSON document; live progress goes to stderr.
    return Console(stderr=True, highlight=False) if as_json else console


def deploy(hosts: Sequence[Host], name: str, opts: ConnectOptions, as_json: bool, dry_run: bool,
           force: bool, serial: str | None = None, max_fail: str | None = None,
           host_timeout: str | float | None = None) -> int:
    # every flag and the playbook are checked before any host is contacted (bad input: exit 2)
    sizes = rollout.parse_serial(serial)
    limit = rollout.parse_max_fail(max_fail)
    timeout = rollout.parse_timeout(host_timeout)
    book, path = load_playbook(name)
    secrets = secrets_for(book)
    out = _progress_console(as_json)
    if book.nodes is not None:  # one server over several hosts: deployed together, not rolled out
        from fleet import multinode

        return multinode.deploy_command(hosts, book, path, opts, secrets, as_json, dry_run, force,
                                        bool(sizes or max_fail is not None or timeout), out)
    hooks = None
    if book.router is not None:  # data-parallel replicas behind sglang's router (fleet.router)
        from fleet import router as routing

        hooks = routing.prepare(list(hosts), book, path, opts, secrets, out)
    if not dry_run and (hooks or len(hosts) > 1 or sizes or max_fail is not None or timeout):
        return _rollout(list(hosts), book, path, opts, secrets, as_json, force, sizes, limit, timeout, hooks)

    def one(host: Host) -> deploying.DeployResult:
        say = lambda m: out.print(f"[dim]{host.name}[/] {escape(m)}", highlight=False, soft_wrap=True)  # noqa: E731
        return deploying.Deployer(host, book, path, opts, say, secrets).run(dry_run=dry_run, force=force)

    results = _collect(parallel.run_all(hosts, one), "failed")
    if hooks:
        return routing.finish_dry_run(hooks, list(hosts), results, as_json)
    return _finish(results, as_json, ok={"ok", "unchanged", "dry-run"})


def rollback(hosts: Sequence[Host], name: str, to: str | None, opts: ConnectOptions, as_json: bool,
             router: bool = False) -> int:
    book, path = load_playbook(name)
    out = _progress_console(as_json)
    if router:  # the playbook's router unit on router.host, not the replicas
        from fleet import router as routing

        if book.router is None:
            raise InputError(f"--router: playbook {book.name} has no router section")
        report = routing.rollback(routing.prepare(list(hosts), book, path, opts, {}, out), to)
        if as_json:
            print_json(report)
        else:
            routing.render(report, console)
        return EXIT_OK if report["status"] == "ok" else EXIT_HOST_FAILED

    if book.nodes is not None:  # one server over several hosts: every node back to the same deployment
        from fleet import multinode

        return multinode.rollback_command(list(hosts), book, path, opts, to, as_json, out)

    def one(host: Host) -> deploying.DeployResult:
        say = lambda m: out.print(f"[dim]{host.name}[/] {escape(m)}", soft_wrap=True)  # noqa: E731
        return deploying.rollback(host, book, opts, to, say)

    return _finish(_collect(parallel.run_all(hosts, one), "failed"), as_json, ok={"ok"})


def history(hosts: Sequence[Host], opts: ConnectOptions, as_json: bool) -> int:
    outcomes = parallel.run_all(hosts, lambda h: deploying.history(h, opts))
    if as_json:
        print_json({"hosts": [{"host": o.host.name, "ok": o.ok, "error": o.error,
                               "current": o.value[1] if o.value else None,
                               "releases": [r.to_json() for r in o.value[0]] if o.value else []}
                              for o in outcomes]})
    else:
        for o in outcomes:
            if o.value:
                deploy_view.render_history(o.host.name, o.value[0], o.value[1], console)
            else:
                console.print(f"[red]{o.error}[/]")
    return EXIT_OK if all(o.ok for o in outcomes) else EXIT_HOST_FAILED


def _collect(outcomes, status: str) -> list[deploying.DeployResult]:
    return [o.value if o.ok and o.value else deploying.DeployResult(o.host.name, status, error=o.error)
            for o in outcomes]


def _finish(results: list[deploying.DeployResult], as_json: bool, ok: set[str]) -> int:
    if as_json:
        data = [r.to_json() for r in results]
        print_json(data[0] if len(data) == 1 else {"hosts": data})
    else:
        for r in results:
            deploy_view.render(r, console)
    sys.stdout.flush()
    return EXIT_OK if all(r.status in ok for r in results) else EXIT_HOST_FAILED


# ---------------------------------------------------------------------- rolling deploys

_OK = {"ok", "unchanged"}


class _Learning(deploying.Deployer):
    """A Deployer that keeps the facts it probed, so a host that served can teach its fingerprint."""

    facts: HostFacts | None = None

    def eligible(self, facts: HostFacts):
        self.facts = facts
        return super().eligible(facts)


def _rollout(hosts: list[Host], book: playbook.Playbook, path: Path, opts: ConnectOptions, secrets: dict[str, str],
             as_json: bool, force: bool, sizes: list[rollout.Amount] | None, limit: rollout.Amount,
             timeout: float | None, hooks: Any = None) -> int:
    """Batches one after the other, each in parallel on a bounded pool; a batch ends before the next starts,
    and the rollout stops once more hosts failed than --max-fail allows (the rest are `skipped`).
    `hooks` (fleet.router.RouterHooks) make each host a replica behind sglang's router."""
    groups = rollout.batches(hosts, sizes)
    batch_of = {h.name: i for i, group in enumerate(groups, 1) for h in group}
    board = deploy_view.Board([(h.name, batch_of[h.name]) for h in hosts], len(groups))
    out = _progress_console(as_json)
    results: dict[str, deploying.DeployResult] = {}
    seconds: dict[str, float] = {}
    began: dict[str, float] = {}
    batches: list[dict[str, Any]] = []
    background: list[str] = []
    failed, stopped = 0, None

    def one(host: Host) -> deploying.DeployResult:
        began[host.name] = time.monotonic()
        board.update(host.name, "deploying", "connecting")

        def say(message: str) -> None:
            board.update(host.name, note=message)
            out.print(f"[dim]{host.name}[/] {escape(message)}", highlight=False, soft_wrap=True)

        make = hooks.deployer if hooks else _Learning
        deployer = make(host, book, path, opts, say, secrets)
        try:
            result = deployer.run(force=force)
        except FleetError as exc:
            return deploying.DeployResult(host.name, "failed", error=str(exc))
        except Exception as exc:  # one host's surprise must not hide the others
            return deploying.DeployResult(host.name, "failed", error=f"{host.name}: {type(exc).__name__}: {exc}")
        rung = result.config.get("rung")
        if result.status == "ok" and deployer.facts is not None and rung:
            try:
                k = fingerprint.learn(book, deployer.facts, book.rung(rung), host.name, result.release or "",
                                      [a.to_json() for a in result.attempts])
                say(f"remembered rung {rung} as known-good for fingerprint {k}")
            except (OSError, KeyError, ValueError) as exc:
                say(f"could not remember the known-good rung: {exc}")
        return result

    def finish(host: Host, result: deploying.DeployResult) -> None:
        if hooks:  # back into the router once healthy, before the next batch starts
            result = hooks.after(host, result)
        results[host.name] = result
        seconds[host.name] = time.monotonic() - began.get(host.name, time.monotonic())
        note = result.error or (f"rung {result.config.get('rung')}, release {result.release}"
                                if result.config.get("rung") else "")
        board.update(host.name, result.status, note)

    if hooks:
        hooks.start()
    pool = ThreadPoolExecutor(max_workers=max(1, min(parallel.MAX_WORKERS, max(len(g) for g in groups))))
    live = (contextlib.nullcontext() if as_json else
            Live(get_renderable=board.table, console=console, refresh_per_second=4, transient=True))
    try:
        with live:
            for i, group in enumerate(groups, 1):
                names = [h.name for h in group]
                if stopped:
                    for h in group:
                        results[h.name] = deploying.DeployResult(h.name, "skipped",
                                                                 error=f"{h.name}: not started: {stopped}")
                        board.update(h.name, "skipped", "not started")
                    batches.append({"batch": i, "hosts": names, "status": "skipped"})
                    continue
                board.headline = f"batch {i} of {len(groups)}: {', '.join(names)}"
                start, started = time.monotonic(), _now()
                futures: dict[Future, Host] = {pool.submit(one, h): h for h in group}
                pending = set(futures)
                while pending:
                    done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                    for f in done:
                        finish(futures[f], f.result())
                    if timeout is None:
                        continue
                    for f in list(pending):
                        h = futures[f]
                        if h.name in began and time.monotonic() - began[h.name] > timeout:
                            pending.discard(f)
                            background.append(h.name)
                            finish(h, deploying.DeployResult(
                                h.name, "failed", error=f"{h.name}: timed out after {timeout:g}s (--host-timeout); "
                                "its deploy goes on in the background until it ends on its own budgets"))
                bad = [n for n in names if results[n].status not in _OK]
                failed += len(bad)
                batches.append({"batch": i, "hosts": names, "status": "failed" if bad else "ok", "failed": bad,
                                "started": started, "finished": _now(), "seconds": round(time.monotonic() - start, 1)})
                if rollout.should_stop(failed, limit, len(hosts)):
                    stopped = f"{rollout.stop_reason(failed, limit, len(hosts))} after batch {i} of {len(groups)}"
    finally:
        pool.shutdown(wait=False)
    ordered = [results[h.name] for h in hosts]
    router = hooks.finish(hosts, ordered) if hooks else None
    if as_json:
        print_json({"hosts": [r.to_json() for r in ordered], "batches": batches, "stopped": stopped,
                    "max_fail": str(limit), "serial": ",".join(map(str, sizes)) if sizes else None,
                    **({"router": router} if router else {})})
    else:
        deploy_view.render_rollout(ordered, batch_of, seconds, stopped, console)
        if router:
            from fleet import router as routing

            routing.render(router, console)
    sys.stdout.flush()
    if background:
        err_console.print(f"still deploying after --host-timeout: {', '.join(background)}; fleet waits for "
                          "those deploys to end (each on its own budgets, rolling back on failure) before it exits")
    router_ok = router is None or router["status"] in _OK
    return EXIT_OK if router_ok and all(r.status in _OK for r in ordered) else EXIT_HOST_FAILED


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
