"""What deploy, rollback and history print for people."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from fleet.cli.board import COLOURS as _COLOURS
from fleet.noise import Runs
from fleet.outcomes import DeployStatus, Outcome
from fleet.releases import Release
from fleet.remedies import remedy_for
from fleet.results import DeployResult


def render(result: DeployResult, console: Console) -> None:
    colour = _COLOURS.get(result.status, "white")
    console.print(f"[bold]{result.host}[/]: [{colour}]{result.status}[/]"
                  + (f", release {result.release}" if result.release else "")
                  + (f", rung {result.config.get('rung')}" if result.config.get("rung") else ""))
    if result.diff is not None:
        console.print(result.diff or "(no differences)", markup=False, highlight=False, soft_wrap=True)
    if result.attempts:
        table = Table(title=f"{result.host}: attempts")
        measured = any(a.bench for a in result.attempts)
        for col in ("rung", "outcome", *(("tok/s",) if measured else ()), "evidence", "seconds"):
            table.add_column(col, overflow="fold", justify="right" if col == "tok/s" else "left")
        for a in result.attempts:
            style = "green" if a.outcome == Outcome.READY else ("dim" if a.outcome == Outcome.PREFLIGHT else "red")
            speed = (_tok((a.bench or {}).get("result", {}).get("output_throughput")),) if measured else ()
            table.add_row(a.rung, f"[{style}]{a.outcome}[/]", *speed, escape(a.evidence), f"{a.seconds:.1f}")
        console.print(table)
        for line in next_steps(result):
            console.print(line, soft_wrap=True, highlight=False)
    if result.error:
        console.print(f"[red]{escape(result.error)}[/]", soft_wrap=True)


def next_steps(result: DeployResult) -> list[str]:
    """One line per distinct failure of the attempts: the host, the rung (the step), the class found, the
    remedy (what to try next); what was expected is each outcome's opposite: READY."""
    lines, seen = [], set()
    for a in result.attempts:
        if a.outcome == Outcome.READY or (a.outcome, a.rung) in seen:
            continue
        if a.outcome == Outcome.PREFLIGHT and result.status != DeployStatus.FAILED:
            continue  # a rung that did not fit this host, while another served: nothing to do
        seen.add((a.outcome, a.rung))
        remedy = remedy_for(a.outcome, a.evidence)
        if remedy:
            lines.append(f"[bold]{result.host}[/] rung {escape(a.rung)}: expected READY, got [red]{a.outcome}[/]; "
                         f"next: {escape(remedy)}")
    return lines


def render_history(host: str, releases: list[Release], current: str | None, console: Console) -> None:
    table = Table(title=f"{host}: releases (newest last)")
    for col in ("release", "", "status", "playbook", "rung", "attempts", "created"):
        table.add_column(col)
    for r in releases:
        outcomes = ", ".join(f"{a['rung']}:{a['outcome']}" for a in r.attempts)
        table.add_row(r.id, "current" if r.id == current else "", r.status, r.playbook, r.rung or "-",
                      outcomes, r.created)
    console.print(table)


def _tok(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _power(record: dict[str, Any] | None, short: bool = False) -> str:
    p = (record or {}).get("power") or {}
    if p.get("mean_w") is None:
        return "-"
    text = f"{p['mean_w']:.0f}" + (f"/{p['limit_w']:.0f} W" if p.get("limit_w") else " W")
    return text + ((" [yellow]low[/]" if short else " [yellow]underutilised[/]") if p.get("underutilised") else "")


def render_bench(host: str, release: str | None, rung: str | None, record: dict[str, Any] | None,
                 error: str | None, console: Console) -> None:
    """`inv bench`: throughput, latency percentiles, power per GPU against its limit."""
    if record is None:
        console.print(f"[bold]{host}[/]: [bold red]failed[/] {escape(error or '')}")
        return
    r, p, s = record["result"], record.get("power") or {}, record["settings"]
    console.print(f"[bold]{host}[/]: release {release}, rung {rung}: [bold]{_tok(r['output_throughput'])} tok/s[/]"
                  f" output ({s['num_prompts']} prompts of {s['input_len']}+{s['output_len']} tokens, concurrency "
                  f"{s['max_concurrency']}, {r.get('duration_s') or 0:.1f}s)"
                  + (" [bold yellow]UNDERUTILISED[/]: mean power "
                     f"{p['mean_w']:.0f} W of {p['limit_w']:.0f} W per GPU" if p.get("underutilised") else ""))
    lat = Table(title=f"{host}: latency (ms)")
    stats = ("mean", "median", "p90", "p95", "p99", "max")
    lat.add_column("")
    for col in stats:
        lat.add_column(col, justify="right")
    for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E")):
        row = (r.get("latency_ms") or {}).get(metric)
        if row:
            lat.add_row(label, *(f"{row[k]:.1f}" if k in row else "-" for k in stats))
    console.print(lat)
    if p.get("gpus"):
        gpus = Table(title=f"{host}: GPUs during the run ({p.get('busy_samples')} of {p.get('samples')} samples busy)")
        for col in ("gpu", "mean W", "max W", "limit W", "% of limit", "util %"):
            gpus.add_column(col, justify="right")
        for g in p["gpus"]:
            share = f"{100 * g['mean_w'] / g['limit_w']:.0f}" if g.get("limit_w") else "-"
            gpus.add_row(str(g["index"]), f"{g['mean_w']:.0f}", f"{g['max_w']:.0f}",
                         f"{g['limit_w']:.0f}" if g.get("limit_w") else "-", share,
                         f"{g['mean_util']:.0f}" if g.get("mean_util") is not None else "-")
        console.print(gpus)
    if p.get("note"):
        console.print(f"[yellow]{escape(p['note'])}[/]")


def render_tune(result: Any, console: Console, width: int = 20) -> None:
    """`inv tune`: one row per rung, its median tok/s, spread and a bar scaled to the fastest; then the
    decisions (which rung beat which, or stayed within noise) and why the others lost, below the table."""
    colour = _COLOURS.get(result.status, "white")
    winner_runs = next((Runs.from_json((a.bench or {}).get("runs")) for a in result.attempts
                        if a.rung == result.winner and a.outcome == Outcome.READY), None)
    console.print(f"[bold]{result.host}[/]: [{colour}]{result.status}[/]"
                  + (f", winner {result.winner} at {_tok(result.winner_tok_s)} tok/s" if result.winner else "")
                  + (f" ±{winner_runs.spread:,.0f} (median of {len(winner_runs.tok_s)} runs)" if winner_runs else "")
                  + (f", release {result.release}" if result.release else ""))
    rows = []
    for a in result.attempts:
        runs = Runs.from_json((a.bench or {}).get("runs"))
        speed = runs.median if runs else (a.bench or {}).get("result", {}).get("output_throughput")
        ttft = ((a.bench or {}).get("result", {}).get("latency_ms") or {}).get("ttft", {}).get("median")
        rows.append((a, speed, _tok(speed), f"±{runs.spread:,.0f}" if runs else "",
                     f"{ttft:.0f}" if ttft is not None else "-", _power(a.bench, short=True)))
    top = max((speed for _, speed, *_ in rows if speed), default=0.0)
    # what the other columns need (header or widest cell, padding, borders); the bar gets the rest, 5 to `width`
    cells = [("rung", [a.rung for a, *_ in rows]), ("outcome", [a.outcome for a, *_ in rows]),
             ("tok/s", [r[2] for r in rows]), ("spread", [r[3] for r in rows]), ("TTFT", [r[4] for r in rows]),
             ("W/GPU", [Text.from_markup(r[5]).plain for r in rows])]
    others = sum(max(len(head), *(len(c) for c in col)) for head, col in cells) + 7 * 3 + 1 + 1  # + the ◀
    width = max(5, min(width, console.width - others))
    bar_char = "█" if (console.encoding or "").lower().startswith("utf") else "#"
    table = Table(title=f"{result.host}: tune (fingerprint {result.fingerprint}; TTFT median, ms)")
    for col in ("rung", "outcome", "tok/s", "spread", "", "TTFT", "W/GPU"):
        table.add_column(col, no_wrap=True, justify="right" if col in ("tok/s", "spread", "TTFT") else "left")
    notes = []
    for a, speed, speed_text, spread, ttft, power in rows:
        style = "green" if a.outcome == Outcome.READY else ("dim" if a.outcome == Outcome.PREFLIGHT else "red")
        bar = bar_char * max(1, round(width * speed / top)) if speed and top else ""
        if a.rung == result.winner and a.outcome == Outcome.READY:
            bar = f"[bold green]{bar}[/]" + ("◀" if bar_char == "█" else "<")
        table.add_row(a.rung, f"[{style}]{a.outcome}[/]", speed_text, spread, bar, ttft, power)
        if a.outcome != Outcome.READY:
            remedy = remedy_for(a.outcome, a.evidence) if a.outcome != Outcome.PREFLIGHT else None
            notes.append(f"  {a.rung}: {escape(a.evidence[:200])}" + (f"; next: {escape(remedy)}" if remedy else ""))
    console.print(table)
    for line in getattr(result, "decisions", ()):
        console.print(escape(line), highlight=False)
    for note in notes:
        console.print(note, highlight=False)
    if result.final is not None:
        console.print(f"started {result.winner} again: {result.final.outcome} ({result.final.seconds:.0f}s)")
    if result.error:
        console.print(f"[red]{escape(result.error)}[/]")


def render_rollout(results: list[DeployResult], batch_of: dict[str, int], seconds: dict[str, float],
                   stopped: str | None, console: Console) -> None:
    """The summary at the end of a rolling deploy: each deployed host's attempts, then one row per host."""
    for r in results:
        if r.status != DeployStatus.SKIPPED:
            render(r, console)
    table = Table(title="rollout")
    for col in ("host", "batch", "status", "release", "rung", "seconds", "error"):
        table.add_column(col, overflow="fold")
    for r in results:
        colour = _COLOURS.get(r.status, "white")
        table.add_row(r.host, str(batch_of.get(r.host, "-")), f"[{colour}]{r.status}[/]", r.release or "-",
                      str(r.config.get("rung") or "-"),
                      f"{seconds[r.host]:.0f}" if r.host in seconds else "-", escape(r.error or ""))
    console.print(table)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    line = ", ".join(f"{n} {status}" for status, n in counts.items())
    console.print(f"[bold]{len(results)} hosts in {max(batch_of.values(), default=0)} batches[/]: {line}"
                  + (f"; [bold red]stopped[/]: {escape(stopped)}" if stopped else ""))
