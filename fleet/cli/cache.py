"""`inv cache`: the controller's store of compile and tune caches (fleet.deploy.cachestore), each entry with its
key, size, when it was last used and which kept releases need it; `--prune` drops on purpose what a deploy's
prune would (entries no kept release needs, then the least recently used beyond the store's bound), `--dry-run`
says what would go. No host is contacted."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import UTC, datetime

from fleet.cli import console, print_json
from fleet.deploy.cacheneeds import Need
from fleet.deploy.cachestore import CacheStore, Stored
from fleet.errors import EXIT_OK, InputError


@dataclass(frozen=True)
class Row:
    entry: Stored
    needed_by: tuple[Need, ...] | None  # None: needs.json is not fleet's (unknown)
    goes: str | None = None  # why --prune drops it (None: kept)

    def to_json(self) -> dict[str, object]:
        e = self.entry
        return {"digest": e.digest, "key": e.key.to_json() if e.key else None, "size": e.size, "used": _iso(e.used),
                "given_by": e.host, "needed_by": None if self.needed_by is None else
                [{"host": n.host, "release": n.release} for n in self.needed_by], "pruned": self.goes}


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def rows(store: CacheStore) -> tuple[list[Row], bool]:
    """Every entry with the releases that need it, newest use first; and whether needs.json is fleet's."""
    needs = store.needs.read()
    out = [Row(e, None if needs is None else tuple(n for n in needs if n.digest == e.digest))
           for e in reversed(store.entries())]
    return out, needs is not None


def plan(store: CacheStore) -> tuple[list[Row], bool]:
    """rows(), each with why --prune drops it: no kept release needs it, then the least recently used beyond the
    bound."""
    listed, known = rows(store)
    unneeded = {r.entry.digest for r in listed if known and not r.needed_by}
    over = {e.digest for e in store.over_bound(without=unneeded)}
    return [Row(r.entry, r.needed_by, "no release kept needs it" if r.entry.digest in unneeded
                else "over the store's bound" if r.entry.digest in over else None) for r in listed], known


def command(prune: bool, dry_run: bool, as_json: bool, wide: bool) -> int:
    if dry_run and not prune:
        raise InputError("--dry-run says what --prune would drop: add --prune")
    store = CacheStore.of_site()
    listed, known = plan(store) if prune else rows(store)
    gone = [r for r in listed if r.goes]
    if not dry_run:
        store.drop_all([r.entry for r in gone], "pruned on purpose")
    held = [r for r in listed if dry_run or not r.goes]
    size = sum(r.entry.size for r in held)
    if as_json:
        print_json({"store": str(store.root), "bound": store.total, "entries_held": len(held), "bytes_held": size,
                    "needs_known": known, "dry_run": dry_run, "entries": [r.to_json() for r in listed]})
        return EXIT_OK
    if not known:
        sys.stderr.write(f"fleet: {store.needs.path} is not fleet's: which releases need an entry is unknown, "
                         "so none is dropped for want of one\n")
    if not listed:
        sys.stdout.write(f"no caches stored ({store.root})\n")
        return EXIT_OK
    verb = "would drop" if dry_run else "dropped"
    title = (f"{len(held)} entries, {_size(size)} of the {_size(store.total)} bound ({store.root})"
             + (f"; {verb} {len(gone)} ({_size(sum(r.entry.size for r in gone))})" if prune else ""))
    _table(listed, title, wide)
    return EXIT_OK


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _needed(r: Row) -> str:
    if r.needed_by is None:
        return "unknown"
    return ", ".join(f"{n.host} {n.release}" for n in r.needed_by) or "none"


def _cells(r: Row) -> list[str]:
    e, key = r.entry, r.entry.key
    if key is None:
        gpu, stack, patches = "unreadable key", "?", "?"
    else:
        versions = dict(key.packages)
        gpu, stack = f"SM{key.sm} {key.gpu}", f"{versions.get('sglang', '?')}/{versions.get('flashinfer-python', '?')}"
        patches = ", ".join(name for name, _ in key.patches) or "-"
    return [e.digest[:12], gpu, stack, patches, _size(e.size), _iso(e.used).replace("+00:00", "Z"), e.host or "?",
            _needed(r), r.goes or ""]


def _table(listed: list[Row], title: str, wide: bool) -> None:
    from fleet.cli import fit, real_console

    screen = real_console(console)
    data = [_cells(r) for r in listed]
    heads = (("key", None, False), ("gpu", 28, False), ("sglang/flashinfer", 20, False), ("patches", 30, False),
             ("size", None, True), ("last used", None, False), ("given by", 16, False), ("needed by", 60, False),
             ("pruned", None, False))
    cols = [fit.Col(h, [(d[i], "") for d in data], cap, right) for i, (h, cap, right) in enumerate(heads)]
    if wide:
        fit.show(screen, cols, title, wide=True)
        return
    order = [0, 8, 4, 7, 5, 1, 2, 3, 6]  # what an operator needs first when the terminal is narrow
    chosen = {c.header for c in fit.choose([cols[i] for i in order], screen.width,
                                           ascii_only=fit.plain_terminal(screen))}
    screen.print(fit.table([c for c in fit.choose(cols, 10**6, ascii_only=fit.plain_terminal(screen))
                            if c.header in chosen], title))
