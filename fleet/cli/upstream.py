"""`inv upstream`: fetch the upstream corpus and say what it holds."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.cli import console, print_json, real_console
from fleet.cli.liveline import progress_on_stderr
from fleet.errors import EXIT_OK, FleetError
from fleet.upstream import corpus as upstream
from fleet.upstream import flags as sglang_cli
from fleet.upstream import indexes

if TYPE_CHECKING:
    from rich.console import Console


def command(sglang: str | None, flashinfer: str | None, as_json: bool, write_flags: bool = False,
            wide: bool = False) -> int:
    matrix = upstream.load_matrix()
    wanted = [(d, v) for d, v in (("sglang", sglang), ("flashinfer-python", flashinfer)) if v] or None
    start = time.monotonic()
    say = progress_on_stderr()  # each fetch and where it stands, on stderr, with --json too (stdout: its document)
    try:
        rels = upstream.fetch_all(matrix, wanted, say=say)
    except FleetError as exc:  # --json's stdout is a document on failure too; stderr's line and the code as ever
        if as_json:
            print_json({"cache": str(upstream.cache_dir()), "error": str(exc), "releases": [], "indexed": []})
        raise
    took = time.monotonic() - start
    # every release's site index, built once beside it: `inv classify` told no release places a log among them
    built = indexes.build_missing(progress=say)
    for package in indexes.PACKAGES:  # and their union, so that a log placed among them loads one index
        indexes.union(package, progress=say)
    if write_flags:
        table = sglang_cli.build((v, sglang_cli.flags_of(Path(upstream.require("sglang", v).root)))
                                 for v in matrix.sglang)
        sglang_cli.TABLE.write_text(sglang_cli.dump(table))
        if not as_json:
            console.print(f"wrote {sglang_cli.TABLE}: {len(table.flags)} flags over {len(table.versions)} releases",
                          soft_wrap=wide, markup=False, highlight=False)
    if as_json:
        print_json({"cache": str(upstream.cache_dir()), "seconds": round(took, 1),
                    "releases": [asdict(r) for r in rels],
                    "indexed": [{"package": p, "version": v, "sites": n} for p, v, n in built]})
        return EXIT_OK
    render(rels, took, console, wide)
    return EXIT_OK


def render(rels: list[upstream.UpstreamRelease], took: float, console: Console, wide: bool = False) -> None:
    """One row per release, then the totals: within the terminal's width, or with wide the cache's path and every
    release whole however wide that is."""
    from rich.table import Table

    from fleet.cli import fit  # rich: loaded only where a table is drawn, never on the --json path

    screen = real_console(console)
    t = Table(title=f"upstream corpus in {upstream.cache_dir()}", title_justify="left")
    for col in ("release", "wheel MB", "files kept", "MB kept", "fetched in s"):
        t.add_column(col, justify="left" if col == "release" else "right")
    for r in rels:
        t.add_row(f"{r.dist} {r.version}", f"{r.wheel_bytes / 1e6:.1f}", str(r.files), f"{r.bytes / 1e6:.1f}",
                  f"{r.fetched_s:.1f}")
    fit.emit(screen, t, wide)
    screen.print(f"{len(rels)} releases, {sum(r.wheel_bytes for r in rels) / 1e6:.0f} MB of wheels, "
                 f"{sum(r.bytes for r in rels) / 1e6:.0f} MB kept; {took:.1f} s this run", soft_wrap=wide,
                 highlight=False)
