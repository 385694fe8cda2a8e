"""`inv classify FILE|-`: classify a recorded log, print its events and verdict, exit on what it means."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from fleet.cli import console, print_json
from fleet.cli.liveline import progress_on_stderr
from fleet.errors import InputError
from fleet.logs import whichrelease
from fleet.logs.bysite import SiteClassifier
from fleet.logs.classify import Event, LogVerdict, classify_text
from fleet.logs.releasefit import ReleaseFit
from fleet.logs.rules import RULES_DIR, Severity, load_rules
from fleet.upstream import corpus, indexes, siteindex
from fleet.upstream.flags import default_table
from fleet.upstream.unionindex import PerRelease, Placer
from fleet.upstream.versions import is_version

EXIT_NOT_FATAL = 0  # READY, a warning, or nothing at all
EXIT_FATAL = 1  # the verdict is a fatal class
_COLOURS = {Severity.FATAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "green"}
_MAX_TEXT = 200  # evidence lines can be kilobytes (a dumped server_args); a glance is enough here


def run(file: str, as_json: bool = False, rules_dir: str | None = None, sglang: str | None = None,
        flashinfer: str | None = None, wide: bool = False) -> int:
    """Classify FILE (or stdin for '-'), print the result, return the exit code.

    With --sglang (and --flashinfer), lines resolve to their sites in those releases of the corpus, sites
    classify what no precise rule does, and remedies name flags as that sglang spells them. Told no release, the
    log's own clues (versions, traceback frames, echoed arguments) or its exception lines placed among every
    cached release's sites (indexes built on first need) find it, and the answer names the releases it fits."""
    rules = load_rules(Path(rules_dir) if rules_dir else RULES_DIR)
    text = _read(file)
    for option, version in (("--sglang", sglang), ("--flashinfer", flashinfer)):
        if version is not None and not is_version(version):
            raise InputError(f"{option} {version!r}: not a version (e.g. 0.5.23)")
    found = whichrelease.find(text, rules, sglang, flashinfer, indexes_of=_indexes_of)
    sglang = sglang or whichrelease.used(found, "sglang")
    flashinfer = flashinfer or whichrelease.used(found, "flashinfer-python")
    by_site = _site_classifier(sglang, flashinfer)
    verdict = classify_text(text, rules, by_site)
    if sglang is not None:
        verdict = _spelled(verdict, sglang)
    if as_json:
        print_json({**verdict.to_json(), **({"release": [f.to_json() for f in found]} if found else {})})
    else:
        _print_human(file, verdict, wide, found)
    return EXIT_FATAL if verdict.fatal else EXIT_NOT_FATAL


def _indexes_of(package: str) -> Placer:
    """Every cached release of `package`'s sites in one index, building the releases' indexes and their union
    when missing or stale (on first need, the progress on stderr: the --json answer on stdout stays whole)."""
    say = progress_on_stderr()
    indexes.build_missing(packages=(package,), progress=say)
    found = indexes.union(package, progress=say)
    return found if found is not None else PerRelease({})


def _site_classifier(sglang: str | None, flashinfer: str | None) -> SiteClassifier | None:
    """The sites of the releases named (from the corpus cache; InputError naming the option when absent)."""
    found: list[siteindex.IndexedSite] = []
    for option, package, version in (("--sglang", "sglang", sglang), ("--flashinfer", "flashinfer-python", flashinfer)):
        if version is None:
            continue
        release = corpus.cached(package, version)
        if release is None:
            raise InputError(f"{option} {version}: {package} {version} is not in the upstream cache "
                             f"{corpus.cache_dir()} (fetch it with `inv upstream`)")
        found.extend(siteindex.load_or_build(package, version, corpus.tree(release)))
    return SiteClassifier(siteindex.SiteIndex(found)) if found else None


def _spelled(verdict: LogVerdict, sglang: str) -> LogVerdict:
    """The verdict with each remedy naming flags as sglang `sglang` spells them."""
    table = default_table()

    def fix(event: Event) -> Event:
        return event if event.remedy is None else dataclasses.replace(event, remedy=table.spell(event.remedy, sglang))
    events = tuple(fix(e) for e in verdict.events)
    decided = events[verdict.events.index(verdict.event)] if verdict.event is not None else None
    follows = events[verdict.events.index(verdict.follows)] if verdict.follows is not None else None
    return LogVerdict(verdict.log_class, decided, events, follows)


def _read(file: str) -> str:
    if file == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    path = Path(file)
    try:
        return path.read_bytes().decode("utf-8", errors="replace")  # logs carry stray bytes; never refuse
    except FileNotFoundError:
        raise InputError(f"{file}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{file}: is a directory, not a log file") from None
    except OSError as exc:
        raise InputError(f"{file}: cannot read: {exc.strerror or exc}") from None


def _print_human(file: str, verdict: LogVerdict, wide: bool = False, found: list[ReleaseFit] | None = None) -> None:
    """Each event (its line, class, severity, what it means; the log line; where sglang prints it) folded within
    the terminal's width under its line number, then the verdict; with wide every line whole, nothing clipped."""
    from rich.table import Table
    from rich.text import Text

    from fleet.cli import fit, real_console
    from fleet.cli.hosttext import escape

    out = real_console(console)
    name = "stdin" if file == "-" else file
    if not verdict.events:
        fit.say(out, f"{name}: nothing to report (verdict NONE)", wide)
        for release in found or []:
            fit.say(out, f"{name}: release: {release.describe()}", wide)
        return
    clip = (lambda text: text) if wide else _clip
    if wide:
        for event in verdict.events:
            out.print(_event_line(event), soft_wrap=True)
            out.print(f"      [dim]{escape(event.text, lines=False)}[/]", soft_wrap=True)
            if event.source:
                out.print(f"      [dim]from {escape(event.source, lines=False)}[/]", soft_wrap=True)
    else:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(overflow="fold")
        for event in verdict.events:
            colour = _COLOURS[event.severity]
            grid.add_row(str(event.line), Text.from_markup(f"[{colour}]{event.log_class:<18} {event.severity:<7}[/] "
                                                           f"{escape(event.explanation, lines=False)}"))
            grid.add_row("", Text(clip(_one_line(event.text)), style="dim"))
            if event.source:
                grid.add_row("", Text(f"from {_one_line(event.source)}", style="dim"))
        out.print(grid)
    decided = verdict.event
    assert decided is not None  # events exist, so something decided
    colour = _COLOURS[decided.severity]
    remedies = ", ".join(decided.remedies) or "none known"
    said = (f"{escape(name, lines=False)}: verdict [{colour}]{decided.log_class}[/] ({decided.severity}, line "
            f"{decided.line}): {escape(decided.explanation, lines=False)}; remedies: {remedies}")
    fit.say(out, Text.from_markup(said), wide)
    if verdict.follows is not None:
        after = verdict.follows
        said = f"line {after.line} ({after.log_class}) is a consequence: the cause is line {decided.line}"
        fit.say(out, f"{name}: {said}", wide)
    if decided.source:
        fit.say(out, f"{name}: from: {decided.source}", wide)
    if decided.remedy:
        fit.say(out, f"{name}: next: {decided.remedy}", wide)
    for release in found or []:
        fit.say(out, f"{name}: release: {release.describe()}", wide)


def _one_line(text: str) -> str:
    from fleet.cli.hosttext import visible

    return visible(text, lines=False)


def _event_line(event: Event) -> str:
    from fleet.cli.hosttext import escape

    colour = _COLOURS[event.severity]
    return (f"{event.line:>5} [{colour}]{event.log_class:<18} {event.severity:<7}[/] "
            f"{escape(event.explanation, lines=False)}")


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT - 1] + "…"
