"""What deploy, rollback and history print for people."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleet.cli import fit, real_console, words
from fleet.cli.board import COLOURS as _COLOURS
from fleet.cli.hosttext import about, escape, visible
from fleet.deploy import bench as benching
from fleet.deploy import judge
from fleet.deploy.bench_record import BenchRecord, Power
from fleet.deploy.results import BenchPoint, DeployResult
from fleet.host.attempts import failed_attempts
from fleet.host.releases import Release, versions_label, versions_of
from fleet.logs.remedies import remedy_for
from fleet.outcomes import DeployStatus, Outcome


def render(result: DeployResult, console: Console, wide: bool = False, error: bool = True) -> None:
    """A host's outcome, its attempts and what to try next: within the terminal's width (sentences folded), or
    with wide every line whole (the diff, each evidence line, each remedy); its error last, unless `error` is
    False (a rollout says each host's error once, below its table)."""
    screen = real_console(console)
    colour = _COLOURS.get(result.status, "white")
    screen.print(f"[bold]{escape(result.host)}[/]: [{colour}]{result.status}[/]"
                 + (f", release {escape(result.release)}" if result.release else "")
                 + (f", rung {escape(str(result.config.get('rung')))}" if result.config.get("rung") else ""),
                 highlight=False, soft_wrap=wide)
    changed = result.upgrade() if result.status == DeployStatus.OK else []  # only a release of this run moves it
    if changed:  # an upgrade reads like one: what the venv held before and now
        screen.print("  versions: " + escape(", ".join(f"{k} {old or '-'} -> {new}" for k, old, new in changed)),
                     highlight=False, soft_wrap=wide)
        before, after = result.bench_before, result.bench_after()
        if before or after:  # and what the bench gate measured of each
            screen.print(f"  bench gate: {_moved(*_points(before, after, 'tok_s'))} tok/s, TTFT "
                         f"{_moved(*_points(before, after, 'ttft_ms'), 'ms')} ms", highlight=False,
                         soft_wrap=wide)
    elif found := versions_found(result):
        screen.print(f"  {escape(found)}", highlight=False, soft_wrap=wide)
    for note in result.notes:
        screen.print(f"  [yellow]note[/]: {escape(note)}", highlight=False, soft_wrap=wide)
    if result.diff is not None:
        screen.print(visible(result.diff or "(no differences)"), markup=False, highlight=False, soft_wrap=wide)
    if result.attempts:
        ascii_only = fit.plain_terminal(screen)
        measured = any(a.bench for a in result.attempts)
        style: dict[str, str] = {Outcome.READY: "green", Outcome.PREFLIGHT: "dim"}
        cols = [fit.Col("#", [(str(i), "") for i in range(1, len(result.attempts) + 1)], right=True),
                fit.Col("rung", [(a.rung, "") for a in result.attempts], cap=24),
                fit.Col("outcome", [(a.outcome, style.get(a.outcome, "red")) for a in result.attempts]),
                *([fit.Col("tok/s", [(_tok(a.bench.result.output_throughput if a.bench else None), "")
                                     for a in result.attempts], right=True)] if measured else []),
                fit.Col("seconds", [(f"{a.seconds:.1f}", "") for a in result.attempts], right=True)]
        fit.emit(screen, fit.table(fit.choose(cols, screen.width, wide, ascii_only), f"{result.host}: attempts"), wide)
        # the evidence is a log line or a sentence: below the table, numbered, folded to the terminal
        fit.emit(screen, notes([(f"{i}.", f"{escape(a.rung)}: {escape(a.evidence)}")
                                for i, a in enumerate(result.attempts, 1)]), wide)
        steps = next_steps(result)
        if steps:
            fit.emit(screen, notes([("-", line) for line in steps]), wide)
    if result.error and error:
        screen.print(f"[red]{escape(result.error)}[/]", soft_wrap=wide)


def notes(items: list[tuple[str, str]]) -> Table:
    """Labelled paragraphs with a hanging indent: each folds to the terminal under its own first line."""
    grid = Table.grid(padding=(0, 1), pad_edge=True)
    grid.add_column(no_wrap=True, justify="right")
    grid.add_column(overflow="fold")
    for label, text in items:
        grid.add_row(label, text)
    return grid


def next_steps(result: DeployResult) -> list[str]:
    """One line per distinct failure of the attempts: the host, the rungs (the step) that failed alike, the class
    found, the remedy (what to try next); what was expected is each outcome's opposite: READY. Rungs refused alike
    share their line (a 2-GPU host refused the 8 rungs of a TP 8 playbook: the same remedy said 8 times)."""
    alike: dict[tuple[str, str], list[str]] = {}
    for a in result.attempts:
        if a.outcome == Outcome.READY:
            continue
        if a.outcome == Outcome.PREFLIGHT and result.status != DeployStatus.FAILED:
            continue  # a rung that did not fit this host, while another served: nothing to do
        remedy = remedy_for(a.outcome, a.evidence, sglang=result.sglang)
        rungs = alike.setdefault((a.outcome, remedy), []) if remedy else []
        if remedy and a.rung not in rungs:
            rungs.append(a.rung)
    lines = []
    for (outcome, remedy), rungs in alike.items():
        named = [escape(r) for r in rungs if r != "-"]  # '-': refused before any rung (the host's packages)
        who = (f" rung {named[0]}" if len(named) == 1 else f" rungs {', '.join(named)}" if named else "")
        lines.append(f"[bold]{result.host}[/]{who}: expected READY, got [red]{outcome}[/]; next: {escape(remedy)}")
    return lines


def _when(created: str) -> str:
    """2026-12-02T14:27:50+00:00 -> 12-02 14:27 (UTC, as fleet records it)."""
    return f"{created[5:10]} {created[11:16]}" if len(created) >= 16 and created[10] == "T" else created


def render_history(host: str, releases: list[Release], current: str | None, console: Console,
                   bench: bool = False, wide: bool = False) -> None:
    """One line per release, ids in full (`--to` needs them); with bench, its tok/s as a bar (a trend); with wide
    every column and value in full (rung, versions, failure, playbook)."""
    screen = real_console(console)
    if not releases:
        screen.print(f"{escape(host)}: no releases (fleet has not deployed here)", highlight=False)
        return
    ascii_only = fit.plain_terminal(screen)
    speeds = [benching.measured(benching.result_of(r.to_json())) or (None, None) for r in releases]
    failed = [_failures(r) for r in releases]
    colour = {"ok": "green", "failed": "red", "rolled_back": "yellow"}
    cols = [fit.Col("release", [(r.id, "bold" if r.id == current else "") for r in releases]),
            fit.Col("", [("<" if ascii_only else "◀", "bold") if r.id == current else ("", "") for r in releases]),
            fit.Col("status", [(r.status, colour.get(r.status, "")) for r in releases]),
            fit.Col("rung", [(r.rung or "-", "") for r in releases], cap=16)]
    books = fit.Col("playbook", [(r.playbook, "") for r in releases], cap=20)
    several = len({r.playbook for r in releases}) > 1  # which release ran which, after what it ran and measured
    # (it came last, left out first: at 80 columns no release said its playbook)
    stacks = [versions_of(r.facts) for r in releases]  # what each release ran: tok/s is read beside it
    if any(stacks):
        cols.append(fit.Col("sglang/flashinfer", [(versions_label(v, short=True) if v else "", "")
                                                  for v in stacks], cap=24))
    if bench:
        top = max((s for s, _ in speeds if s), default=0.0)
        cols.append(fit.Col("tok/s", [(_tok(s), "") for s, _ in speeds], right=True))
        if any(sp is not None for _, sp in speeds):
            cols.append(fit.Col("±", [(f"{sp:,.0f}" if sp is not None else "", "") for _, sp in speeds], right=True))
        cols.append(fit.Col("", [(fit.bar(s, top, 16, ascii_only), "green" if r.id == current else "")
                                 for r, (s, _) in zip(releases, speeds, strict=True)]))
    if several:
        cols.append(dataclasses.replace(books, cap=14))
    if any(r.canary for r in releases):
        verdicts = [_canary(r.canary) for r in releases]
        cols.append(fit.Col("canary", [(v, _CANARY_COLOUR.get(v.split(":")[0].split()[0], "")) if v else ("-", "")
                                       for v in verdicts], cap=28))
    cols += [fit.Col("tries", [(str(len(r.attempts)), "") for r in releases], right=True),
             fit.Col("failure", [(f, "red" if f != "-" else "") for f in failed], cap=30),
             fit.Col("created", [(_when(r.created), "") for r in releases])]
    if not several:
        cols.append(books)
    fit.emit(screen, fit.table(fit.choose(cols, screen.width, wide, ascii_only), f"{host}: releases (newest last)"),
             wide)


def _failures(r: Release) -> str:
    """A release's failed attempts, each named by its rung (the first, and how many more): a rung it fell back from
    or a tune's trial that lost is that attempt's, never the release's, whose rung served."""
    found = failed_attempts(r.attempts)
    if not found:
        return "-"
    return f"{found[0].rung}: {found[0].outcome}" + (f" +{len(found) - 1}" if len(found) > 1 else "")


_CANARY_COLOUR = {"pass": "green", "fail": "red", "inconclusive": "yellow", "unreadable": "red"}


def _canary(recorded: dict[str, object] | None) -> str:
    """A release's canary verdict in a few words (history's cell); none: ''."""
    if not recorded:
        return ""
    try:
        return judge.Verdict.from_json(recorded).summary()
    except ValueError:
        return "unreadable verdict"


def _points(before: BenchPoint | None, after: BenchPoint | None, name: str) -> tuple[float | None, float | None]:
    """The same figure (tok_s or ttft_ms) of the gate before and after, None where there is none."""
    return (getattr(before, name) if before else None), (getattr(after, name) if after else None)


def _tok(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _power(record: BenchRecord | None, short: bool = False) -> str:
    p = record.power if record else None
    if p is None or p.mean_w is None:
        return "-"
    text = f"{p.mean_w:.0f}" + (f"/{p.limit_w:.0f} W" if p.limit_w else " W")
    return text + ((" [yellow]low[/]" if short else " [yellow]underutilised[/]") if p.underutilised else "")


def render_bench(host: str, release: str | None, rung: str | None, record: BenchRecord | None,
                 error: str | None, console: Console, wide: bool = False) -> None:
    """`inv bench`: throughput, latency percentiles, power per GPU against its limit (wide: every line whole)."""
    screen = real_console(console)
    if record is None:
        why = (error or "").removeprefix(f"{host}: ")  # the library's error names its host: once is enough
        screen.print(f"[bold]{escape(host)}[/]: [bold red]failed[/]: {escape(why)}", soft_wrap=wide)
        return
    r, p, s = record.result, record.power or Power(), record.settings
    shape = (f"{s.num_prompts} prompts of {s.input_len}+{s.output_len} tokens, concurrency {s.max_concurrency}, "
             if s else "")
    screen.print(f"[bold]{escape(host)}[/]: release {escape(str(release))}, rung {escape(str(rung))}: "
                 f"[bold]{_tok(r.output_throughput)} tok/s[/]"
                 f" output ({shape}{r.duration_s or 0:.1f}s)"
                 + (" [bold yellow]UNDERUTILISED[/]: mean power "
                    f"{p.mean_w or 0:.0f} W of {p.limit_w or 0:.0f} W per GPU" if p.underutilised else ""),
                 highlight=False, soft_wrap=wide)
    lat = Table(title=escape(f"{host}: latency (ms)"))
    stats = ("mean", "median", "p90", "p95", "p99", "max")
    lat.add_column("")
    for col in stats:
        lat.add_column(col, justify="right")
    for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E")):
        row = r.latency_ms.get(metric)
        if row:
            lat.add_row(label, *(f"{row[k]:.1f}" if k in row else "-" for k in stats))
    fit.emit(screen, lat, wide)
    if p.gpus:
        ascii_only = fit.plain_terminal(screen)
        rows = p.gpus
        share = [100 * g.mean_w / g.limit_w if g.limit_w else None for g in rows]
        cols = [fit.Col("gpu", [(str(g.index), "") for g in rows], right=True),
                fit.Col("mean W", [(f"{g.mean_w:.0f}", "") for g in rows], right=True),
                fit.Col("limit W", [(f"{g.limit_w:.0f}" if g.limit_w else "-", "") for g in rows],
                        right=True),
                fit.Col("% of limit", [(f"{v:.0f}" if v is not None else "-", "") for v in share], right=True),
                fit.Col("", [(fit.bar(v, 100.0, 20, ascii_only), "yellow" if v is not None and v < 50 else "green")
                             for v in share]),
                fit.Col("util %", [(f"{g.mean_util:.0f}" if g.mean_util is not None else "-", "")
                                   for g in rows], right=True),
                fit.Col("max W", [(f"{g.max_w:.0f}", "") for g in rows], right=True)]
        fit.emit(screen, fit.table(fit.choose(cols, screen.width, wide, ascii_only),
                                   f"{host}: GPUs during the run ({p.busy_samples} of {p.samples} "
                                   "samples busy); bars: mean power, of the limit"), wide)
    if p.note:
        screen.print(f"[yellow]{escape(p.note)}[/]", soft_wrap=wide)


def render_tune(result: Any, console: Console, width: int = 20, wide: bool = False) -> None:
    """`inv tune`: one row per rung, its median tok/s, spread and a bar scaled to the fastest; then the
    decisions (which rung beat which, or stayed within noise) and why the others lost, below the table (with
    wide: every rung and outcome whole, bars of `width` cells, each line whole)."""
    screen = real_console(console)
    colour = _COLOURS.get(result.status, "white")
    winner_runs = next((a.bench.runs if a.bench else None for a in result.attempts
                        if a.rung == result.winner and a.outcome == Outcome.READY), None)
    screen.print(f"[bold]{escape(result.host)}[/]: [{colour}]{result.status}[/]"
                 + (f", winner {escape(result.winner)} at {_tok(result.winner_tok_s)} tok/s" if result.winner else "")
                 + (f" ±{winner_runs.spread:,.0f} (median of {len(winner_runs.tok_s)} runs)" if winner_runs else "")
                 + (f", release {escape(result.release)}" if result.release else ""), highlight=False, soft_wrap=wide)
    ascii_only = fit.plain_terminal(screen)
    speeds, spreads, ttfts = [], [], []
    for a in result.attempts:
        m = benching.measured(a.bench)  # the median and spread of its runs where the tuner repeated it
        speeds.append(m[0] if m else None)
        spreads.append(f"±{m[1]:,.0f}" if m and m[1] is not None else "")
        ttft = a.bench.result.stat("ttft", "median") if a.bench else None
        ttfts.append(f"{ttft:.0f}" if ttft is not None else "-")
    top = max((s for s in speeds if s), default=0.0)
    style: dict[str, str] = {Outcome.READY: "green", Outcome.PREFLIGHT: "dim"}
    cols = [fit.Col("#", [(str(i), "") for i in range(1, len(result.attempts) + 1)], right=True),
            fit.Col("rung", [(a.rung, "") for a in result.attempts], cap=20),
            fit.Col("outcome", [(a.outcome, style.get(a.outcome, "red")) for a in result.attempts], cap=16),
            fit.Col("tok/s", [(_tok(s), "") for s in speeds], right=True),
            fit.Col("±", [(s, "") for s in spreads], right=True),
            fit.Col("TTFT", [(t, "") for t in ttfts], right=True),
            fit.Col("W/GPU", [(Text.from_markup(_power(a.bench, short=True)).plain, "") for a in result.attempts])]
    # the bar (after ±) gets what the others leave: 5 to `width` cells, and 2 for the winner's mark
    cells = width if wide else max(5, min(width, screen.width - fit.width_of(fit.choose(cols, 10**6)) - fit.GAP - 2))
    bars = []
    for a, speed in zip(result.attempts, speeds, strict=True):
        won = a.rung == result.winner and a.outcome == Outcome.READY
        bars.append((fit.bar(speed, top, cells, ascii_only) + ((" <" if ascii_only else " ◀") if won else ""),
                     "bold green" if won else ""))
    cols.insert(5, fit.Col("", bars))
    if result.attempts:  # no rung tried (the host not reached): no table, whose title rich folds to one letter a line
        fit.emit(screen, fit.table(fit.choose(cols, screen.width, wide, ascii_only),
                                   f"{result.host}: tune (fingerprint {result.fingerprint}; TTFT median, ms)"), wide)
    for line in getattr(result, "decisions", ()):
        screen.print(escape(line), highlight=False, soft_wrap=wide)
    items = []
    for i, a in enumerate(result.attempts, 1):
        if a.outcome == Outcome.READY:
            continue
        remedy = remedy_for(a.outcome, a.evidence) if a.outcome != Outcome.PREFLIGHT and not a.lost_to else None
        items.append((f"{i}.", f"{escape(a.rung)}: {escape(a.evidence)}" + (f"; next: {escape(remedy)}" if remedy
                                                                             else "")))
    if items:
        fit.emit(screen, notes(items), wide)
    if result.final is not None:
        screen.print(escape(f"started {result.winner} again: {result.final.outcome} ({result.final.seconds:.0f}s)"),
                     highlight=False, soft_wrap=wide)
    if result.error:
        screen.print(f"[red]{escape(result.error)}[/]", soft_wrap=wide)


def versions_found(result: DeployResult) -> str | None:
    """A deploy that did not serve a new release moved nothing: what the host serves and what the run probed,
    as found, never as a transition ('versions as found: serving sglang 0.5.23; in /root/.fleet/venvs/x sglang
    0.5.9; nothing changed'). None where there is nothing to say (served, or nothing probed)."""
    if result.status not in (DeployStatus.FAILED, DeployStatus.ROLLED_BACK) or not result.versions:
        return None
    parts = [f"serving {versions_label(result.versions_before)}"] if result.versions_before else []
    if result.versions != result.versions_before:
        where = f"in {result.venv.path}" if result.venv and result.venv.path else "probed"
        parts.append(f"{where} {versions_label(result.versions)}")
    return "versions as found: " + "; ".join(parts) + ("; nothing changed" if result.refused_at_preflight() else "")


def _versions_moved(r: DeployResult) -> str:
    """'0.5.9/0.6.3 -> 0.5.23/0.7.2' (sglang/flashinfer before and now) where this run's release serves; else
    what serves, as found."""
    if r.status == DeployStatus.OK and r.versions:
        now = versions_label(r.versions, short=True)
        before = versions_label(r.versions_before, short=True) if r.versions_before else None
        return now if before in (None, now) else f"{before} -> {now}"
    found = r.versions_before or r.versions
    return versions_label(found, short=True) if found else "-"


def _gate(r: DeployResult, name: str) -> str:
    """A rollout row's bench figure: before -> after; an unchanged host, not measured again, what it serves (never
    `3,484 -> -`, which reads as a host that stopped serving)."""
    fmt = "tok" if name == "tok_s" else "ms"
    before, after = r.bench_before, r.bench_after()
    if r.status == DeployStatus.UNCHANGED and after is None:
        figure = _points(before, None, name)[0]
        return "-" if figure is None else _moved(figure, figure, fmt).partition(" -> ")[0]
    return _moved(*_points(before, after, name), fmt)


def _moved(before: float | None, after: float | None, fmt: str = "tok") -> str:
    """'3,740 -> 3,810' from the bench gate's figures; one side '-' when it was not measured."""
    def one(v: float | None) -> str:
        return "-" if v is None else (_tok(v) if fmt == "tok" else f"{v:,.0f}")

    if before is None and after is None:
        return "-"
    return f"{one(before)} -> {one(after)}"


def render_rollout(results: list[DeployResult], batch_of: dict[str, int], seconds: dict[str, float],
                   stopped: str | None, console: Console, wide: bool = False, canary: bool = False) -> None:
    """The summary at the end of a rolling deploy: each deployed host's attempts, then one row per host (release
    ids whole, for --to) with its versions and the bench gate's tok/s and TTFT before and after (an upgrade reads
    like one), each host's error below the table, folded (with wide: every value and line whole)."""
    for r in results:
        if r.status != DeployStatus.SKIPPED:
            render(r, console, wide, error=False)  # said once, below the table
    screen = real_console(console)
    cols = [fit.Col("host", [(r.host, "bold") for r in results], cap=24),
            fit.Col("status", [(str(r.unreached or r.status), _COLOURS.get(r.status, "white")) for r in results]),
            fit.Col("release", [(r.release or "-", "") for r in results]),  # whole, before the rest: --to takes it
            fit.Col("batch", [(str(batch_of.get(r.host, "-")), "") for r in results], right=True),
            fit.Col("rung", [(str(r.config.get("rung") or "-"), "") for r in results], cap=16)]
    if any(r.versions for r in results):
        cols.append(fit.Col("sglang/flashinfer", [(_versions_moved(r), "") for r in results], cap=30))
    if any(r.bench_before or r.bench_after() for r in results):
        cols.append(fit.Col("tok/s", [(_gate(r, "tok_s"), "") for r in results], right=True))
        cols.append(fit.Col("TTFT ms", [(_gate(r, "ttft_ms"), "") for r in results], right=True))
    cols.append(fit.Col("seconds", [(f"{seconds[r.host]:.0f}" if r.host in seconds else "-", "") for r in results],
                        right=True))
    fit.emit(screen, fit.table(fit.choose(cols, screen.width, wide, fit.plain_terminal(screen)), "rollout"), wide)
    for r in results:
        if r.error:
            fit.say(screen, Text(visible(about(r.host, r.error), lines=False), style="red"), wide)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    line = ", ".join(f"{n} {status}" for status, n in counts.items())
    batches = words.count(max(batch_of.values(), default=0), "batch", "batches")
    screen.print(f"[bold]{words.count(len(results), 'host')} in {batches}[/]"
                 + (" (batch 1 the canary)" if canary else "") + f": {line}"
                 + (f"; [bold red]stopped[/]: {escape(stopped)}" if stopped else ""), highlight=False, soft_wrap=wide)
