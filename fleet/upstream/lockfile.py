"""The lock of a playbook's `packages:`: for each pin set and kind of host, every wheel its venv is built from
(distribution, version, file name, sha256), beside the playbook and reviewed like it, as pip's --require-hashes
and uv's lock are.

    playbooks/<name>.lock      (YAML; <name>.yaml is the playbook)

`ensure(path, pins, target)` is the wheels of that pin set for that host kind: the lock's, each checked against
the wheelhouse's file (a wheel whose sha256 differs is refused in one line naming it); where the lock has no
entry yet, pip's resolve (fleet.upstream.resolver), written into the lock (the first deploy, or `inv check
--lock`). `relock` resolves again on purpose and replaces the entries of that pin set. `stale(path, pins)` says
when the lock has entries but none of these pins (the playbook's pins changed since the lock was written).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from fleet.errors import InputError
from fleet.upstream import corpus, resolver, wheelhouse
from fleet.upstream.pins import canonical
from fleet.upstream.wheelhouse import Target, Wheel, WheelhouseError

HEADER = ("# fleet's lock of this playbook's packages: (written by `inv check --lock` or a pin set's first deploy).\n"
          "# Review it like code. A wheel whose sha256 differs from the one here is refused; to take a rebuilt wheel\n"
          "# or new pins on purpose: inv check --lock --playbook NAME, then review and commit the diff.\n")
MAX_LOCK = 4 << 20  # a lock larger than this is not read


class LockError(WheelhouseError):
    """The wheelhouse does not hold what the lock says (or the lock cannot be read): nothing was sent."""


@dataclass(frozen=True)
class Locked:
    """One wheel of a locked pin set."""

    name: str
    version: str
    file: str
    sha256: str


@dataclass(frozen=True)
class Entry:
    pins: tuple[tuple[str, str], ...]  # sorted (canonical name, version)
    target: Target
    wheels: tuple[Locked, ...]


def path_for(playbook: Path) -> Path:
    """playbooks/sglang.yaml -> playbooks/sglang.lock."""
    return playbook.with_suffix(".lock")


def key(pins: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((canonical(d), v) for d, v in pins.items()))


def _bad(path: Path, why: str) -> LockError:
    return LockError(f"{path}: {why} (write it again: inv check --lock --playbook {path.stem})")


def load(path: Path) -> list[Entry]:
    """The lock's entries ([] when there is no lock); LockError naming the file when it is not one."""
    try:
        with path.open("rb") as f:
            text = f.read(MAX_LOCK + 1)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise _bad(path, f"cannot be read: {exc.strerror or exc}") from None
    if len(text) > MAX_LOCK:
        raise _bad(path, f"is larger than {MAX_LOCK} bytes")
    try:
        data = yaml.load(text, Loader=_NoAliases) or {}
        return [Entry(key({str(k): str(v) for k, v in e["pins"].items()}),
                      Target(str(e["python"]), str(e["machine"]), None if e.get("glibc") is None else str(e["glibc"])),
                      tuple(Locked(str(w["name"]), str(w["version"]), str(w["file"]), str(w["sha256"]))
                            for w in e["wheels"]))
                for e in data["locked"]]
    except (yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise _bad(path, f"is not a lock fleet wrote ({type(exc).__name__})") from None


class _NoAliases(yaml.SafeLoader):
    """fleet never writes an alias: a lock holding one is not fleet's (and a few of them expand to billions)."""

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("an alias")
        return super().compose_node(parent, index)


def dump(path: Path, entries: list[Entry]) -> None:
    """The lock written atomically (a rename), entries in a stable order: the same lock gives the same bytes."""
    data = {"locked": [{"pins": dict(e.pins), "python": e.target.python, "machine": e.target.machine,
                        "glibc": e.target.glibc,
                        "wheels": [{"name": w.name, "version": w.version, "file": w.file, "sha256": w.sha256}
                                   for w in e.wheels]}
                       for e in sorted(entries, key=lambda e: (e.pins, str(e.target)))]}
    text = HEADER + yaml.safe_dump(data, sort_keys=False, width=200)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def entry_of(wheels: list[Wheel], pins: dict[str, str], target: Target) -> Entry:
    return Entry(key(pins), target, tuple(Locked(w.name, str(w.version), w.filename, w.sha256) for w in wheels))


def find(entries: list[Entry], pins: dict[str, str], target: Target) -> Entry | None:
    """The entry of these pins for this host kind; one that states no glibc (`inv check --lock` before any host
    was asked) stands for every glibc of its Python and machine."""
    mine = [e for e in entries if e.pins == key(pins)]
    return (next((e for e in mine if e.target == target), None)
            or next((e for e in mine if e.target.glibc is None
                     and (e.target.python, e.target.machine) == (target.python, target.machine)), None))


def _sha256(path: Path) -> str | None:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def verified(entry: Entry, lock: Path, folder: Path | None = None) -> list[Wheel]:
    """The entry's wheels in the wheelhouse, each file's sha256 the lock's; LockError (one line naming the wheel)
    for the first that is missing or differs."""
    where = folder or wheelhouse.wheelhouse_dir()
    out = []
    for w in entry.wheels:
        try:  # the file name says what it holds: the entry's name and version must be its own
            named, version, _, _ = parse_wheel_filename(w.file)
            fits = "/" not in w.file and named == canonicalize_name(w.name) and version == Version(w.version)
        except (InvalidWheelFilename, InvalidVersion, ValueError):
            fits = False
        if not fits:
            raise _bad(lock, f"names {w.file[:80]!r} for {w.name[:40]} {w.version[:20]}, not that wheel's file name")
        got = _sha256(where / w.file)
        if got is None:
            raise LockError(f"{where / w.file}: locked in {lock} but not in the wheelhouse (put it back, or relock "
                            f"on purpose: inv check --lock --playbook {lock.stem}); nothing was sent")
        if got != w.sha256:
            raise LockError(f"{where / w.file}: sha256 {got[:16]}... is not the {w.sha256[:16]}... locked in {lock}: "
                            f"refused, nothing was sent (a wheel rebuilt on purpose: inv check --lock --playbook "
                            f"{lock.stem})")
        wheel = Wheel(where / w.file, canonical(w.name), Version(w.version))
        wheel.__dict__["sha256"] = got  # the bytes checked here: what is sent and built must hash to it
        out.append(wheel)
    return out


def ensure(lock: Path, pins: dict[str, str], target: Target, folder: Path | None = None,
           write: bool = True) -> list[Wheel]:
    """The locked wheels of these pins for that host kind, verified; resolved (and, with `write`, locked) where
    the lock has no entry for them yet."""
    entries = load(lock)
    if (found := find(entries, pins, target)) is not None:
        return verified(found, lock, folder)
    wheels = resolver.resolve(pins, target, folder)
    locked = {w.file: w.sha256 for e in entries for w in e.wheels}
    for w in wheels:  # a file another host kind locked: the same bytes, or a tampered wheel
        if locked.get(w.filename, w.sha256) != w.sha256:
            raise LockError(f"{w.path}: sha256 {w.sha256[:16]}... is not the {locked[w.filename][:16]}... locked in "
                            f"{lock} for another kind of host: refused, nothing was sent (a wheel rebuilt on purpose: "
                            f"inv check --lock --playbook {lock.stem})")
    if write:
        dump(lock, [*entries, entry_of(wheels, pins, target)])
    return wheels


def relock(lock: Path, pins: dict[str, str], targets: list[Target], folder: Path | None = None) -> list[Entry]:
    """Resolve the pins again for each target and replace their entries (on purpose: `inv check --lock`); the
    entries of other pin sets stay. Targets: those given, else the ones the lock knows, else the corpus's."""
    entries = load(lock)
    kinds = targets or sorted({e.target for e in entries}, key=str) or [default_target()]
    fresh = [entry_of(resolver.resolve(pins, t, folder), pins, t) for t in kinds]
    kept = [e for e in entries if e.pins != key(pins) or e.target not in kinds]
    dump(lock, [*kept, *fresh])
    return fresh


def default_target() -> Target:
    """The hosts the upstream matrix is for (playbooks/upstream/matrix.yaml: its CPython, on x86_64)."""
    return Target(corpus.load_matrix().python)


def stale(lock: Path, pins: dict[str, str]) -> str | None:
    """Why the lock no longer matches the pins (it has entries, none of them these pins); None when it does or
    there is no lock. InputError when it cannot be read."""
    try:
        entries = load(lock)
    except LockError as exc:
        raise InputError(str(exc)) from None
    if not entries or any(e.pins == key(pins) for e in entries):
        return None
    return (f"{lock} locks other pins than packages: (the first deploy of these locks them; on purpose now: "
            f"inv check --lock --playbook {lock.stem})")
