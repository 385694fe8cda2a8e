"""`inv bench` and `inv tune`: questions asked at the terminal, progress, the results drawn, the exit code."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace

from fleet import site
from fleet.cli import console, err_console, pareto_chart, print_results
from fleet.cli.deploy import fill_wheelhouse, progress_to
from fleet.deploy.inputs import check_units, load_playbook, secrets_for
from fleet.errors import EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK, InputError
from fleet.inventory import Host
from fleet.logs import datafiles
from fleet.multihost import bench, slotune, tune
from fleet.outcomes import DeployStatus
from fleet.ssh.connect import ConnectOptions


def bench_command(hosts: Sequence[Host], name: str | None, opts: ConnectOptions, as_json: bool,
                  wide: bool = False) -> int:
    def draw(r: bench.BenchOutcome) -> None:
        from fleet.cli.deploy_view import render_bench

        render_bench(r.host, r.release, r.rung, r.record, r.error, console, wide)

    try:
        results = bench.bench_hosts(hosts, name, opts, progress_to(as_json, live=len(hosts) == 1))
    except bench.BenchInterrupted as stop:  # what was measured is shown, and where each host stands
        print_results(stop.results, as_json, draw)
        sys.stderr.write("interrupted: no host was started after Ctrl-C; each host's line above says where it is\n")
        return EXIT_INTERRUPTED
    print_results(results, as_json, draw)
    return EXIT_OK if all(r.ok for r in results) else EXIT_HOST_FAILED


def tune_command(hosts: Sequence[Host], name: str, opts: ConnectOptions, as_json: bool, yes: bool,
                 runs: int | None = None, wide: bool = False) -> int:
    """runs: already checked as a number by the task (fleet.cli.tasking.NUMBERS)."""
    book, path = load_playbook(name)
    datafiles.refuse_broken()  # its starts are watched with them
    count = runs
    secrets = secrets_for(book)
    check_units(book, hosts)
    def confirm(question: str) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            raise InputError(f"{question.rsplit(' Go ahead?', 1)[0]} Not asking without a terminal: "
                             "pass --yes to go ahead")
        from fleet.cli.hosttext import escape

        out = err_console if as_json else console
        try:
            return out.input(f"{escape(question)} [y/N] ").strip().lower() in ("y", "yes")
        except (EOFError, OSError):  # Ctrl-D, or the terminal hung up while it asked: no answer
            return False

    def draw(r: tune.TuneResult) -> None:
        from fleet.cli.deploy_view import render_tune

        render_tune(r, console, wide=wide)

    fill_wheelhouse(hosts, book, path, opts)  # packages: every rung's venv can be built (exit 2 otherwise)
    results = tune.tune_hosts(hosts, book, path, opts, secrets, progress_to(as_json, live=len(hosts) == 1),
                              confirm, count)
    print_results(results, as_json, draw)
    return EXIT_OK if all(r.status in (DeployStatus.OK, DeployStatus.UNCHANGED) for r in results) else EXIT_HOST_FAILED


def slo_tune_command(hosts: Sequence[Host], name: str, opts: ConnectOptions, as_json: bool, yes: bool,
                     settings: slotune.SloSettings, wide: bool = False) -> int:
    """`inv tune --slo`: the same questions and exit codes as a ladder tune; each trial and the winner's rung."""
    book, path = load_playbook(name)
    datafiles.refuse_broken()  # its starts are watched with them
    secrets = secrets_for(book)
    check_units(book, hosts)

    def confirm(question: str) -> bool:
        if yes:
            return True
        raise InputError(f"{question.rsplit(' Go ahead?', 1)[0]} Pass --yes to go ahead")

    def draw(r: tune.TuneResult) -> None:
        from fleet.cli.hosttext import escape

        console.print(f"{escape(r.host)}: {r.status}" + (f" ({escape(r.error)})" if r.error else ""))
        if isinstance(r, slotune.SloTuneResult):
            for reason in r.ruled_out:
                console.print(f"  ruled out: {escape(reason)}")
            if r.resumed:
                console.print(f"  resumed: {r.resumed} trials measured by the interrupted search before")
            for t in r.trials:
                kept = f"{t.rate:.3g} req/s kept" if t.rate is not None else "none kept"
                how = "full search" if t.full else "short probe"
                said = f"{kept} ({how})" if t.outcome == "READY" else ""
                console.print(f"  {escape(t.name)}: {escape(str(t.outcome))} {said}; {escape(t.why)}")
            if r.stopped:
                console.print(f"  search stopped: {escape(r.stopped)}")
            if r.comparison:
                console.print(f"  finalists: {escape(r.comparison)}")
            if r.front:
                console.print("  Pareto front within the promise (output tok/s per GPU against tok/s per user):")
                for line in pareto_chart.chart(r.served, r.front, min(console.width, 100) - 2):
                    console.print(f"  {line}", markup=False, highlight=False)
                for p in r.front:
                    console.print(f"    {escape(p.trial)}: {p.per_gpu:.4g} tok/s per GPU at {p.per_user:.4g} tok/s "
                                  f"per user ({p.rate:.3g} req/s)", highlight=False)
            if r.picture:
                console.print(f"  picture: {escape(r.picture)}")
            if r.rung_yaml:
                console.print(f"winner within {escape(r.slo)}, as a rung for the playbook's ladder:")
                console.print(escape(r.rung_yaml), end="")

    fill_wheelhouse(hosts, book, path, opts)
    results = tune.tune_hosts(hosts, book, path, opts, secrets, progress_to(as_json), confirm,
                              tuner=slotune.SloTuner.with_settings(settings))
    results = [with_picture(r) for r in results]
    print_results(results, as_json, draw)
    return EXIT_OK if all(r.status == DeployStatus.OK for r in results) else EXIT_HOST_FAILED


def with_picture(r: tune.TuneResult) -> tune.TuneResult:
    """An SLO tune's Pareto front drawn as an SVG on the controller, its path in the result."""
    if not (isinstance(r, slotune.SloTuneResult) and r.served):
        return r
    picture = site.find().state / "tune" / f"{r.host}-pareto.svg"
    picture.parent.mkdir(parents=True, exist_ok=True)
    picture.write_text(pareto_chart.svg(r.served, r.front, f"{r.host}: inv tune --slo {r.slo}"))
    return replace(r, picture=str(picture))


def slo_settings(text: str | None, budget: int | None, requests: int | None,
                 pairs: int | None = None) -> slotune.SloSettings | None:
    """--slo and its numbers (None: a ladder tune); --budget, --requests or --pairs without --slo is bad input."""
    if text is None:
        if budget is not None or requests is not None or pairs is not None:
            raise InputError("--budget, --requests and --pairs go with --slo")
        return None
    from fleet.deploy import replicates, slo

    return slotune.SloSettings(slo.parse(text), text, budget=budget or 6, requests=requests or slo.DEFAULT_REQUESTS,
                               pairs=replicates.PAIRS if pairs is None else pairs)
