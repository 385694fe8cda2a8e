"""The deploy, rollback and history commands: load inputs (bad input fails before any host is touched),
run per host, print, and choose the exit code."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from fleet import deploy as deploying
from fleet import deploy_view, logrules, parallel, patchsets, playbook
from fleet.cli import console, print_json
from fleet.connect import ConnectOptions
from fleet.errors import EXIT_HOST_FAILED, EXIT_OK, InputError
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
           force: bool) -> int:
    book, path = load_playbook(name)
    secrets = secrets_for(book)
    out = _progress_console(as_json)

    def one(host: Host) -> deploying.DeployResult:
        say = lambda m: out.print(f"[dim]{host.name}[/] {escape(m)}", highlight=False, soft_wrap=True)  # noqa: E731
        return deploying.Deployer(host, book, path, opts, say, secrets).run(dry_run=dry_run, force=force)

    results = _collect(parallel.run_all(hosts, one), "failed")
    return _finish(results, as_json, ok={"ok", "unchanged", "dry-run"})


def rollback(hosts: Sequence[Host], name: str, to: str | None, opts: ConnectOptions, as_json: bool) -> int:
    book, _ = load_playbook(name)
    out = _progress_console(as_json)

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
