"""Tables that fit the terminal: columns in order of priority, each as wide as its widest cell (up to a cap,
shortened with an ellipsis), added while they fit; a column that must stay whole (an id a user types) is never
capped. No borders: two spaces between columns, as `ls -l` and `kubectl get` print them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from fleet.cli.hosttext import visible

GAP = 2


def plain_terminal(console: Console) -> bool:
    """ASCII only: an encoding other than UTF-8, or the C/POSIX locale (whose terminals often lack the glyphs,
    even where Python itself coerces the encoding to UTF-8)."""
    locale = os.environ.get("LC_ALL") or os.environ.get("LC_CTYPE") or os.environ.get("LANG") or ""
    return not (console.encoding or "").lower().startswith("utf") or locale in ("C", "POSIX")


@dataclass(frozen=True)
class Col:
    header: str
    cells: list[tuple[str, str]] = field(default_factory=list)  # (text, style) per row
    cap: int | None = None  # widest a cell gets unless wide
    right: bool = False
    keep_end: bool = False  # shorten from the left (a path keeps its file name)
    fold: bool = False  # the last column of long text: takes the rest of the line and folds within it


FOLD_MIN = 20  # the narrowest a folding column is given
# The most of one cell --wide shows: more is no value a person reads, and a table pads every row to its widest
# cell, so one huge value from a host (a rung, a playbook name in a manifest) times many rows would fill memory.
WIDE_MAX = 2000


def shorten(text: str, cap: int | None, ascii_only: bool = False, keep_end: bool = False) -> str:
    if cap is None or len(text) <= cap:
        return text
    mark = "~" if ascii_only else "…"
    return mark + text[len(text) - cap + 1:] if keep_end else text[:cap - 1] + mark


def shorten_apart(texts: list[str], cap: int | None, ascii_only: bool = False, keep_end: bool = False) -> list[str]:
    """Each text shortened to cap, values that differ kept apart: where the plain cut makes two alike
    (`llama-pinned-0.5.23` and `llama-pinned-0.5.9` both `llama-pinne…`), the mark moves into the middle, as far
    right as keeps every one apart (`llama-…0.5.23`, `llama-p…0.5.9`)."""
    cut = [shorten(t, cap, ascii_only, keep_end) for t in texts]
    if cap is None or cap < 3 or len(set(cut)) == len(set(texts)):
        return cut
    mark = "~" if ascii_only else "…"
    long = sorted({t for t in texts if len(t) > cap})
    same = len(os.path.commonprefix(long))  # where they part: each keeps its end from the word that holds it
    ends = {t: t[max(t.rfind(c, 0, same) for c in "-_/ ") + 1:] for t in long}
    if all(len(end) <= cap - 2 for end in ends.values()):
        tried = [t if len(t) <= cap else t[:cap - 1 - len(ends[t])] + mark + ends[t] for t in texts]
        if len(set(tried)) == len(set(texts)):
            return tried
    for tail in range(1, cap - 1):
        tried = [t if len(t) <= cap else t[:cap - 1 - tail] + mark + t[len(t) - tail:] for t in texts]
        if len(set(tried)) == len(set(texts)):
            return tried
    return cut


def choose(cols: list[Col], width: int, wide: bool = False, ascii_only: bool = False, grow: bool = False) -> list[Col]:
    """The columns that fit width, in priority order (all of them when wide), their cells shortened to caps; with
    grow, the room left over then given back to shortened cells, in the same order (nothing cut that fits)."""
    chosen: list[Col] = []
    full: list[list[tuple[str, str]]] = []
    used = 0
    for col in cols:
        shown = [(visible(t, lines=False), s) for t, s in col.cells]  # host text: controls shown, not obeyed
        cap = WIDE_MAX if wide else col.cap
        cells = list(zip(shorten_apart([t for t, _ in shown], cap, ascii_only, col.keep_end),
                         [s for _, s in shown], strict=True))
        if not wide and chosen and not any(t for t, _ in cells):
            continue  # nothing to say in it
        need = max([len(col.header), *(len(t) for t, _ in cells)])
        if col.fold:
            need = min(need, max(FOLD_MIN, len(col.header)))
        extra = need + (GAP if chosen else 0)
        if not wide and chosen and used + extra > width:
            continue  # a narrower column further down may still fit
        chosen.append(Col(col.header, cells, col.cap, col.right, col.keep_end, col.fold))
        full.append(shown)
        used += extra
    if grow and not wide:
        return _grow(chosen, full, width, used, ascii_only)
    return chosen


def _grow(chosen: list[Col], full: list[list[tuple[str, str]]], width: int, used: int,
          ascii_only: bool) -> list[Col]:
    """Room left over to the folding column first (the text a reader reads), then to the shortened cells."""
    grown = list(chosen)
    order = [i for i, c in enumerate(chosen) if c.fold] + [i for i, c in enumerate(chosen) if not c.fold]
    for i in order:
        col, shown = chosen[i], full[i]
        have = max([len(col.header), *(len(t) for t, _ in col.cells)])
        if col.fold:
            have = min(have, max(FOLD_MIN, len(col.header)))
        natural = max([len(col.header), *(len(t) for t, _ in shown)])
        if natural <= have or used >= width:
            continue
        more = min(width - used, natural - have)
        if not col.fold:
            grown[i] = replace(col, cells=list(zip(shorten_apart([t for t, _ in shown], have + more, ascii_only,
                                                                 col.keep_end), [s for _, s in shown], strict=True)))
        used += more
    return grown


def width_of(cols: list[Col]) -> int:
    return sum(max([len(c.header), *(len(t) for t, _ in c.cells)]) for c in cols) + GAP * max(len(cols) - 1, 0)


def table(cols: list[Col], title: str | None = None, caption: str | None = None,
          caption_style: str | None = None) -> Table:
    """The columns as a table; `caption`: whole sentences under it, left-justified."""
    out = Table(title=title, box=None, show_edge=False, pad_edge=False, header_style="bold", title_justify="left",
                expand=False, caption=caption, caption_justify="left", caption_style=caption_style)
    for col in cols:
        out.add_column(col.header, justify="right" if col.right else "left", no_wrap=not col.fold,
                       overflow="fold" if col.fold else "ellipsis")
    rows = len(cols[0].cells) if cols else 0
    for i in range(rows):
        out.add_row(*(Text(c.cells[i][0], style=c.cells[i][1]) for c in cols))
    return out


def bar(value: float | None, top: float, cells: int, ascii_only: bool) -> str:
    """value as a bar of up to `cells` characters, scaled to top."""
    if not value or not top or cells < 1:
        return ""
    return ("#" if ascii_only else "█") * max(1, round(cells * value / top))


def show(console: Console, cols: list[Col], title: str | None = None, wide: bool = False) -> None:
    """A table of cols on the console: within its width (columns left out, cells shortened to their caps, the
    fold column folded), or with --wide every column in full at whatever width that takes."""
    ascii_only = plain_terminal(console)
    if wide:
        chosen = choose(cols, 0, wide=True, ascii_only=ascii_only)
        print_wide(console, table(chosen, title), max(width_of(chosen), len(title or "")))
    else:
        console.print(table(choose(cols, console.width, ascii_only=ascii_only, grow=True), title))


def say(console: Console, text: str | Text, wide: bool = False, indent: int = 0) -> None:
    """A line of prose: folded within the console's width (continuation lines indented as the first), or whole
    on one line with --wide (for less -S)."""
    line = Text(visible(text, lines=False)) if isinstance(text, str) else text
    if wide:
        console.print(Text(" " * indent) + line, soft_wrap=True, highlight=False)
    else:
        console.print(Padding(line, (0, 0, 0, indent), expand=False), highlight=False)


def print_wide(console: Console, table_: RenderableType, width: int) -> None:
    """Print at width even where the terminal is narrower (the terminal wraps; `less -S` does not)."""
    saved = console.width
    console.width = max(saved, width)
    try:
        console.print(table_, crop=False)
    finally:
        console.width = saved


UNLIMITED = 1 << 20  # wider than any line fleet prints: what a renderable is measured against with --wide


def measured(console: Console, renderable: RenderableType) -> int:
    """The width a renderable takes with nothing folded or shortened (a table's title and caption included)."""
    width = Measurement.get(console, console.options.update_width(UNLIMITED), renderable).maximum
    if isinstance(renderable, Table):
        for note in (renderable.title, renderable.caption):
            if note is not None:
                text = note if isinstance(note, Text) else console.render_str(str(note))
                width = max(width, *(line.cell_len for line in text.split("\n")))
    return width


def emit(console: Console, renderable: RenderableType, wide: bool = False) -> None:
    """Any renderable (a rich Table, a grid of notes): within the console's width, rich folding or shortening what
    does not fit; or with --wide at its full measured width, nothing folded or shortened."""
    if wide:
        caption = renderable.caption if isinstance(renderable, Table) else None
        if isinstance(renderable, Table) and caption is not None:
            renderable.caption = None  # said under the table, whole: a long sentence never pads out the columns
        width = measured(console, renderable)
        if isinstance(renderable, Table):
            renderable.min_width = width  # a title wider than the columns stays on one line too
        print_wide(console, renderable, width)
        if isinstance(renderable, Table) and caption is not None:
            text = caption if isinstance(caption, Text) else console.render_str(str(caption),
                                                                                style=renderable.caption_style or "")
            print_wide(console, text, max(line.cell_len for line in text.split("\n")))
    elif isinstance(renderable, Table) and renderable.caption is not None:
        # the sentences under a table fold at the terminal's width, not the table's (a narrow table of three failed
        # hosts folded their errors at 66 columns of 200)
        caption, renderable.caption = renderable.caption, None
        console.print(renderable)
        console.print(caption if isinstance(caption, Text) else console.render_str(
            str(caption), style=renderable.caption_style or ""))
    else:
        console.print(renderable)
