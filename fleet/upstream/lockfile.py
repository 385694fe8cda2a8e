"""The lock of a playbook's `packages:`: for each pin set and kind of host, every wheel its venv is built from
(distribution, version, file name, sha256), beside the playbook and reviewed like it, as pip's --require-hashes
and uv's lock are.

    playbooks/<name>.lock      (YAML; <name>.yaml is the playbook)

`ensure(path, pins, target)` is the wheels of that pin set for that host kind: the lock's, each checked against
the wheelhouse's file (a wheel whose sha256 differs is refused in one line naming it; a locked file the
wheelhouse lacks is downloaded from the index and held to the same sha256 before it is kept); where the lock has no
entry yet, pip's resolve (fleet.upstream.resolver), written into the lock (the first deploy, or `inv check
--lock`). `relock` resolves again on purpose and replaces the entries of that pin set. `stale(path, pins)` says
when the lock has entries but none of these pins (the playbook's pins changed since the lock was written).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from fleet.errors import InputError
from fleet.progress import Progress, quiet, ticking
from fleet.upstream import corpus, resolver, wheelhouse
from fleet.upstream.pins import canonical, environment, requirements
from fleet.upstream.wheelhouse import Target, Wheel, WheelhouseError

HEADER = ("# fleet's lock of this playbook's packages: (written by `inv check --lock` or a pin set's first deploy).\n"
          "# Review it like code. A wheel whose sha256 differs from the one here is refused; to take a rebuilt wheel\n"
          "# or new pins on purpose: inv check --lock --playbook NAME, then review and commit the diff.\n")
MAX_LOCK = 4 << 20  # a lock larger than this is not read
NAME = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE | re.ASCII)  # PEP 508's name


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
        entries = [Entry(key({str(k): str(v) for k, v in e["pins"].items()}),
                         Target(str(e["python"]), str(e["machine"]), _opt(e.get("glibc")),
                                _opt(e.get("python_full"))),
                         tuple(Locked(str(w["name"]), str(w["version"]), str(w["file"]), str(w["sha256"]))
                               for w in e["wheels"]))
                   for e in data["locked"]]
    except (yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise _bad(path, f"is not a lock fleet wrote ({type(exc).__name__})") from None
    for e in entries:  # a name is given to pip: '--requirement' would be read as its option
        for name in (*(d for d, _ in e.pins), *(w.name for w in e.wheels)):
            if not NAME.fullmatch(name):
                raise _bad(path, f"locks {wheelhouse.said(name)[:60]!r}, which is no distribution name (PEP 508)")
    return entries


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


class _NoAliases(yaml.SafeLoader):
    """fleet never writes an alias: a lock holding one is not fleet's (and a few of them expand to billions)."""

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("an alias")
        return super().compose_node(parent, index)


def dump(path: Path, entries: list[Entry]) -> None:
    """The lock written atomically (a rename), entries in a stable order: the same lock gives the same bytes."""
    data = {"locked": [{"pins": dict(e.pins), "python": e.target.python, "machine": e.target.machine,
                        "glibc": e.target.glibc, **({"python_full": e.target.full} if e.target.full else {}),
                        "wheels": [{"name": w.name, "version": w.version, "file": w.file, "sha256": w.sha256}
                                   for w in e.wheels]}
                       for e in sorted(entries, key=lambda e: (e.pins, str(e.target), e.target.full or ""))]}
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
    """The entry of these pins for this host kind; one that states no glibc or no full Python version (`inv check
    --lock` before any host was asked, or a lock older than full versions) stands for every glibc, or every
    X.Y.Z, of its Python and machine."""
    mine = [e for e in entries if e.pins == key(pins)]

    def covers(e: Entry) -> bool:
        t = e.target
        return ((t.python, t.machine) == (target.python, target.machine) and t.glibc in (None, target.glibc)
                and t.full in (None, target.full))

    fits = sorted((e for e in mine if covers(e)), key=lambda e: (e.target.glibc is None) + (e.target.full is None))
    return fits[0] if fits else None  # the one that states the most of the host first


def near(entries: list[Entry], pins: dict[str, str], target: Target) -> list[Entry]:
    """The entries of these pins for the host's Python X.Y, machine and glibc that state another full version
    (locked on a host before its `apt upgrade`, say), the newest first."""
    def same_kind(e: Entry) -> bool:
        t = e.target
        return ((t.python, t.machine) == (target.python, target.machine) and t.glibc in (None, target.glibc)
                and t.full is not None and target.full is not None and t.full != target.full)

    return sorted((e for e in entries if e.pins == key(pins) and same_kind(e)),
                  key=lambda e: Version(e.target.full or "0"), reverse=True)


def moved(wheels: list[Wheel], was: str, now: str, machine: str) -> str | None:
    """What of these wheels reads Python `now` otherwise than `was` (full versions), in a few words: a wheel's
    Requires-Python, or a Requires-Dist marker (under each of its extras), that holds for one and not the other;
    None when every one reads them alike (the resolve would be the same: tags depend on X.Y alone)."""
    old, new = environment(was, machine), environment(now, machine)
    for w in wheels:
        try:
            with zipfile.ZipFile(w.path) as zf:
                meta = next((zf.read(n).decode("utf-8", "replace") for n in zf.namelist()
                             if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), "")
        except (OSError, zipfile.BadZipFile):
            return f"{w.filename} cannot be read"
        headers = HeaderParser().parsestr(meta)
        if (needs := headers.get("Requires-Python")) is not None:
            try:
                spec = SpecifierSet(needs)
            except InvalidSpecifier:
                return f"{w.filename} has a Requires-Python no installer reads"
            if spec.contains(was, prereleases=True) != spec.contains(now, prereleases=True):
                return f"{w.filename} requires Python {wheelhouse.said(needs)[:40]}"
        extras = ["", *(headers.get_all("Provides-Extra") or [])]
        for r in requirements(meta):
            if r.marker is not None and any(r.marker.evaluate({**old, "extra": x}) != r.marker.evaluate(
                    {**new, "extra": x}) for x in extras):
                return f"{w.filename} requires {wheelhouse.said(str(r))[:80]}"
    return None


def _sha256(path: Path) -> str | None:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def fetch(w: Locked, lock: Path, target: Target, where: Path, say: Progress = quiet,
          run: wheelhouse.Runner = subprocess.run) -> None:
    """A locked file the wheelhouse lacks, downloaded from the index (pip, for the host) into a private folder and
    renamed in only when it is that file with the lock's sha256; LockError (one line) when it cannot be had or
    its bytes differ (then nothing is left in the wheelhouse)."""
    keep = f"put {w.file} back in {where}, or relock on purpose: inv check --lock --playbook {lock.stem}"
    if (refused := wheelhouse.fetch_refused()) is not None:
        raise LockError(f"{where / w.file}: locked in {lock} but not in the wheelhouse, and {refused} ({keep}); "
                        "nothing was sent")
    say(f"downloading {w.file} (locked in {lock}) for {target} from {corpus.shown_index()} into {where}")
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=where) as tmp:
        try:  # where the download stands is said while it goes on (torch's wheel: minutes)
            with ticking(say, f"download {w.file}", wheelhouse.FETCH_TIMEOUT_S):
                got = wheelhouse.pip_download(f"{w.name}=={w.version}", target, Path(tmp), run)
        except WheelhouseError as exc:
            raise LockError(f"{where / w.file}: locked in {lock} but not in the wheelhouse, and {exc} ({keep}); "
                            "nothing was sent") from None
        mine = Path(tmp) / w.file
        if mine not in got:
            raise LockError(f"{where / w.file}: locked in {lock} but not in the wheelhouse, and the index gave "
                            f"{wheelhouse.said(got[0].name)} instead ({keep}); nothing was sent")
        if (sha := _sha256(mine)) != w.sha256:
            raise LockError(f"{where / w.file}: downloaded from {corpus.shown_index()}, sha256 {str(sha)[:16]}... is "
                            f"not the {w.sha256[:16]}... locked in {lock}: refused, not kept, nothing was sent")
        os.replace(mine, where / w.file)


def verified(entry: Entry, lock: Path, folder: Path | None = None, target: Target | None = None,
             say: Progress = quiet) -> list[Wheel]:
    """The entry's wheels in the wheelhouse, each file's sha256 the lock's; a file the wheelhouse lacks is
    downloaded first for `target`'s host (the entry's where none is given: `fetch`). LockError (one line naming
    the wheel) for the first that cannot be had or differs."""
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
        if not (where / w.file).exists():
            fetch(w, lock, target or entry.target, where, say)
        got = _sha256(where / w.file)
        if got is None:
            raise LockError(f"{where / w.file}: locked in {lock} but cannot be read from the wheelhouse; nothing "
                            "was sent")
        if got != w.sha256:
            raise LockError(f"{where / w.file}: sha256 {got[:16]}... is not the {w.sha256[:16]}... locked in {lock}: "
                            f"refused, nothing was sent (a wheel rebuilt on purpose: inv check --lock --playbook "
                            f"{lock.stem})")
        wheel = Wheel(where / w.file, canonical(w.name), Version(w.version))
        wheel.__dict__["sha256"] = got  # the bytes checked here: what is sent and built must hash to it
        out.append(wheel)
    return out


def ensure(lock: Path, pins: dict[str, str], target: Target, folder: Path | None = None,
           write: bool = True, say: Progress = quiet) -> list[Wheel]:
    """The locked wheels of these pins for that host kind, verified (a locked file the wheelhouse lacks
    downloaded and checked first); resolved (and, with `write`, locked) where the lock has no entry for them
    yet."""
    entries = load(lock)
    if (found := find(entries, pins, target)) is not None:
        wheels = verified(found, lock, folder, target, say)
        wheelhouse.contained(wheels)
        return wheels
    if others := near(entries, pins, target):  # the host's Python moved on within X.Y since it was locked
        why = ""
        for e in others:
            wheels = verified(e, lock, folder, target, say)
            wheelhouse.contained(wheels)
            if not (why := moved(wheels, str(e.target.full), str(target.full), target.machine) or ""):
                say(f"{lock.name}: the entry locked for Python {e.target.full} holds for this host's "
                    f"{target.full} (every wheel's Requires-Python and markers read both alike)")
                return wheels
        raise LockError(f"{lock}: these pins are locked for Python {others[0].target.full}, not this host's "
                        f"{target.full}, and {why}: refused, nothing was sent (to lock {target.full} on purpose: "
                        f"delete that entry from {lock.name}, deploy again, review and commit the diff; README, "
                        f"'Pinned packages and their lock')")
    wheels = resolver.resolve(pins, target, folder)
    wheelhouse.contained(wheels)  # never locked
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
    fresh = []
    for t in kinds:
        wheels = resolver.resolve(pins, t, folder)
        wheelhouse.contained(wheels)  # never locked
        fresh.append(entry_of(wheels, pins, t))
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
