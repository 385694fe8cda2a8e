"""The controller's wheelhouse: the wheels a playbook's `packages:` installs on hosts that have no package index.

    ~/.cache/fleet/wheelhouse/*.whl        (FLEET_WHEELHOUSE elsewhere; filled by `pip download`, or by hand)

`missing(pins)` says which pins have no wheel there (bad input: one line each, before any host is contacted);
`digest(pins, python)` names the venv: one venv per package set and Python. Which wheels a venv of the pins
needs is pip's answer (fleet.upstream.resolver), which also downloads what it lacks (`download_command`: `pip
download --no-deps --only-binary :all:`, as fleet.upstream.corpus fetches releases), one requirement at a time;
`MissingWheel` names the one it could not get and how to provide it.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from packaging import tags
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from fleet.errors import FleetError
from fleet.secretref import without_userinfo
from fleet.upstream import corpus
from fleet.upstream.pins import canonical

NO_WHEEL = "no wheel of"  # how missing() begins its lines
MAX_FETCHES = 400  # requirements one fill() downloads at most (torch's closure is about 30)
FETCH_TIMEOUT_S = 1800  # one pip download (torch's wheel is about 900 MB)
ASSUMED_GLIBC = 17  # a host that did not say its glibc: manylinux2014's (manylinux_2_17), no newer
OLDEST_GLIBC = 5  # manylinux1 = manylinux_2_5 (PEP 600): the oldest manylinux there is
NEWEST_GLIBC = 60  # a host's glibc is its word: no more platform tags than this are made of it
LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}  # PEP 600's aliases, by glibc 2.N
_MANYLINUX = re.compile(r"manylinux(?:_2_(\d+)|(2014|2010|1))_(\w+)")  # PEP 600's and the legacy names


def _glibc_needed(platform: str, machine: str) -> int | None:
    """The glibc 2.N a manylinux platform tag of that machine needs; None for any other tag."""
    m = _MANYLINUX.fullmatch(platform)
    if not m or m[3] != machine:
        return None
    return int(m[1]) if m[1] else {v: k for k, v in LEGACY_MANYLINUX.items()}[f"manylinux{m[2]}"]


class WheelhouseError(FleetError):
    """The wheelhouse cannot give a venv what it needs."""


class UnfitWheel(WheelhouseError):
    """The index has the version asked for, but pip brought no wheel of it that the host installs."""


class MissingWheel(WheelhouseError):
    """No wheel in the wheelhouse meets one requirement (`requirement`, e.g. 'torch==2.9.1')."""

    def __init__(self, message: str, requirement: str):
        super().__init__(message)
        self.requirement = requirement


@dataclass(frozen=True)
class Target:
    """What a host installs: CPython `python` ('3.11') on `machine`, glibc `glibc` ('2.36') where it said, its full
    version `full` ('3.11.2': markers' python_full_version, Requires-Python) where it said."""

    python: str
    machine: str = "x86_64"
    glibc: str | None = None
    full: str | None = None

    @property
    def full_version(self) -> str:
        """The host's Python as markers and Requires-Python read it: its own word, else X.Y.0 (pip's reading of
        --python-version X.Y) where no host was asked."""
        return self.full or f"{self.python}.0"

    def platforms(self) -> list[str]:
        """pip's --platform values for this host, newest first: manylinux_2_N down to manylinux_2_5 with PEP 600's
        legacy names beside theirs (manylinux2014, manylinux2010, manylinux1), and linux. A glibc host is never
        given musllinux (those wheels are for musl hosts)."""
        minor = min(int(self.glibc.split(".")[1]), NEWEST_GLIBC) if self.glibc else ASSUMED_GLIBC
        out = []
        for m in range(minor, OLDEST_GLIBC - 1, -1):
            out.append(f"manylinux_2_{m}_{self.machine}")
            if m in LEGACY_MANYLINUX:
                out.append(f"{LEGACY_MANYLINUX[m]}_{self.machine}")
        return [*out, f"linux_{self.machine}"]

    @cached_property
    def tags(self) -> frozenset[str]:
        """Every wheel tag this host can install (packaging.tags, for its interpreter and platforms)."""
        version = tuple(int(p) for p in self.python.split("."))
        interpreter = "cp" + "".join(map(str, version))
        return frozenset(str(t) for t in (*tags.cpython_tags(version, platforms=self.platforms()),
                                          *tags.compatible_tags(version, interpreter, self.platforms())))

    def fits(self, filename: str) -> bool:
        try:
            return any(str(t) in self.tags for t in parse_wheel_filename(filename)[3])
        except InvalidWheelFilename:
            return False

    def why_not(self, filename: str) -> str | None:
        """Why this host cannot install the wheel of that file name, in a few words; None when it can."""
        if self.fits(filename):
            return None
        try:
            found = parse_wheel_filename(filename)[3]
        except InvalidWheelFilename:
            return "that is not a wheel's file name"
        plats = sorted({t.platform for t in found})
        if not {*plats} & {*self.platforms(), "any"}:
            if all(p.startswith("musllinux_") for p in plats):
                return f"{plats[0]} is for musl hosts, not glibc ones"
            needs = [n for p in plats if (n := _glibc_needed(p, self.machine)) is not None]
            if needs:
                return f"{plats[0]} needs glibc 2.{min(needs)}"
            return f"it is for {', '.join(plats)}"
        return f"it is for {', '.join(sorted({f'{t.interpreter}-{t.abi}' for t in found}))}"

    def host(self) -> str:
        """'a glibc 2.36 x86_64 host with CPython 3.11'."""
        return f"a {f'glibc {self.glibc} ' if self.glibc else ''}{self.machine} host with CPython {self.python}"

    def __str__(self) -> str:
        return f"CPython {self.python} on {self.machine}" + (f" (glibc {self.glibc})" if self.glibc else "")


def wheelhouse_dir() -> Path:
    return Path(os.environ.get("FLEET_WHEELHOUSE") or "~/.cache/fleet/wheelhouse").expanduser()


@dataclass(frozen=True)
class Wheel:
    path: Path
    name: str  # canonical distribution name
    version: Version

    @property
    def filename(self) -> str:
        return self.path.name

    @cached_property
    def sha256(self) -> str:
        h = hashlib.sha256()
        with self.path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()


def scan(folder: Path) -> list[Wheel]:
    """The wheels in folder, by their file names (a file whose name is not a wheel's is passed over)."""
    out = []
    for path in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
        try:
            name, version, _build, _tags = parse_wheel_filename(path.name)
        except InvalidWheelFilename:
            continue
        if path.is_file():
            out.append(Wheel(path, str(name), version))
    return out


def _pick(wheels: list[Wheel], name: str, spec: SpecifierSet, target: Target | None = None) -> Wheel | None:
    """The newest wheel of `name` that spec allows (as pip: a local label meets its release) and, given a target,
    that host can install."""
    fits = [w for w in wheels if w.name == name and spec.contains(w.version, prereleases=True)
            and (target is None or target.fits(w.filename))]
    return max(fits, key=lambda w: w.version) if fits else None


def missing(pins: dict[str, str], folder: Path | None = None) -> list[tuple[str, str]]:
    """(pinned distribution, one line) for each pin with no wheel in the wheelhouse."""
    where = folder or wheelhouse_dir()
    wheels = scan(where)
    return [(dist, f"{NO_WHEEL} {dist} {version} in the wheelhouse {where} (fleet installs only from it: "
                   f"pip download --no-deps {dist}=={version} -d {where}, or FLEET_WHEELHOUSE=a folder with it)")
            for dist, version in pins.items() if _pick(wheels, canonical(dist), SpecifierSet(f"=={version}")) is None]


def digest(pins: dict[str, str], python: str, wheels: Sequence[str] = ()) -> str:
    """The venv's name: the same pins on the same Python from the same wheels (their sha256) give the same venv;
    a wheel rebuilt under the same version makes another."""
    key = json.dumps({"python": python, "pins": sorted((canonical(d), v) for d, v in pins.items()),
                      "wheels": sorted(wheels)})
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def fetch_refused() -> str | None:
    """Why fleet may not ask the package index here: under FLEET_SANDBOX_ONLY only file:// indexes, the extra
    ones too (tests and demos never reach the network); None when it may."""
    if os.environ.get("FLEET_SANDBOX_ONLY") != "1":
        return None
    if not all(u.startswith("file:") for u in (corpus.index_url(), *corpus.extra_index_urls())):
        return (f"FLEET_SANDBOX_ONLY=1 allows no index but a file:// one (PIP_INDEX_URL is "
                f"{without_userinfo(corpus.index_url())}"
                + "".join(f", PIP_EXTRA_INDEX_URL {without_userinfo(u)}" for u in corpus.extra_index_urls()) + ")")
    return None


def download_command(requirement: str, target: Target, dest: Path | str) -> list[str]:
    """pip download of one requirement's wheel for the target host, never its dependencies (fill follows them).
    No index on it: pip reads the index from its environment (corpus.pip_env), where `ps` does not show it. `--`
    before the requirement: one that begins with '-' is never read as pip's option."""
    abi = "cp" + target.python.replace(".", "")
    return ["pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", target.full or target.python,
            "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none",
            *(a for p in target.platforms() for a in ("--platform", p)),
            "--disable-pip-version-check", "--no-input", "-q", "-d", str(dest), "--", requirement]


def _meets(filename: str, requirement: Requirement) -> bool:
    name, version = parse_wheel_filename(filename)[:2]
    return name == canonicalize_name(requirement.name) and requirement.specifier.contains(version, prereleases=True)


Runner = Callable[..., subprocess.CompletedProcess[str]]  # how pip is run: subprocess.run (tests: a fake pip)


def download(requirement: str, target: Target, where: Path, run: Runner = subprocess.run) -> list[str]:
    """The wheel pip downloads into a private folder beside the wheelhouse, then renamed in: a wheel cut off
    half-way never lies in the wheelhouse under its name. A wheel the host cannot install (pip's tags are not
    fleet's), or not of the requirement, is not taken: WheelhouseError naming it and why."""
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=where) as tmp:
        got = pip_download(requirement, target, Path(tmp), run)
        wanted = Requirement(requirement)
        taken = [w for w in got if target.fits(w.name) and _meets(w.name, wanted)]
        if not taken:
            first = got[0].name
            unfit = target.why_not(first)
            raise UnfitWheel(f"pip downloaded {said(first)}, which {target.host()} cannot install ({said(unfit)})"
                             if unfit else f"pip downloaded {said(first)}, which is not {requirement}")
        for wheel in taken:
            os.replace(wheel, where / wheel.name)
    return [w.name for w in taken]


def pip_download(requirement: str, target: Target, tmp: Path, run: Runner = subprocess.run) -> list[Path]:
    """The wheels pip downloads of one requirement for the target host into `tmp` (a private folder);
    WheelhouseError (one line, pip's last) when it fails or brings none."""
    cmd = [sys.executable, "-m", *download_command(requirement, target, tmp)]
    try:
        res = run(cmd, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S,
                  stdin=subprocess.DEVNULL, env=corpus.pip_env())
    except subprocess.TimeoutExpired:
        raise WheelhouseError(f"pip download {requirement} took more than {FETCH_TIMEOUT_S}s") from None
    got = sorted(tmp.glob("*.whl"))
    if res.returncode != 0 or not got:
        lines = [ln.strip() for ln in (res.stderr or res.stdout).splitlines() if ln.strip()]
        raise WheelhouseError(f"pip download {requirement} from {corpus.shown_index()} failed (exit "
                              f"{res.returncode}): {said(lines[-1] if lines else 'no wheel')}")
    return got


def said(text: str) -> str:
    """Text from pip or an index as fleet repeats it: no URL's password (masked before it is cut: a URL cut
    before its '@' would show its password), printable, at most 300 characters."""
    return "".join(c if c.isprintable() else "?" for c in without_userinfo(text))[:300]


def outside(member: str) -> bool:
    """Whether a wheel's member name would be written outside the folder it unpacks into (pure): absolute, with a
    '..' part, a backslash or a drive (read as a path by some installer), or a NUL."""
    parts = member.split("/")
    return (member.startswith("/") or "\\" in member or "\0" in member or ".." in parts
            or (len(member) > 1 and member[1] == ":"))


def stray(path: Path) -> str | None:
    """Why the wheel at `path` would write outside the venv it is installed into, in a few words: a member named
    outside it, a link, or a local header whose name is not its directory's (installers read either); None when
    it would not. WheelhouseError when it cannot be read as a zip."""
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                # zipfile cuts a name at its NUL (`filename`); installers may read the whole (`orig_filename`)
                if outside(info.filename) or outside(info.orig_filename):
                    return f"holds {said(info.orig_filename)[:120]!r}, a path outside the venv"
                if stat.S_ISLNK(info.external_attr >> 16):
                    return f"holds {said(info.filename)[:120]!r} as a symbolic link"
                try:
                    with zf.open(info):  # zipfile compares the local header's name with the directory's
                        pass
                except zipfile.BadZipFile as exc:
                    return f"names {said(info.filename)[:120]!r} otherwise in its local header ({said(str(exc))})"
            return misnamed(zf, path.name)
    except (OSError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
        raise WheelhouseError(f"{path}: cannot be read as a wheel ({said(str(exc))}): refused, nothing was sent"
                              ) from None
    return None


def misnamed(zf: zipfile.ZipFile, filename: str) -> str | None:
    """Why a wheel's own .dist-info would make an installer write elsewhere than its file name says, in a few
    words: not one .dist-info folder, one of another distribution or version than the file name's (pip refuses
    it only on the host), or a console or GUI script named as a path (its launcher is written in the venv's bin/
    under that name); None when it is the wheel its name says."""
    try:
        name, version = parse_wheel_filename(filename)[:2]
    except InvalidWheelFilename:
        return "has no wheel's file name"
    folders = sorted({i.filename.split("/", 1)[0] for i in zf.infolist()
                      if i.filename.split("/", 1)[0].endswith(".dist-info")})
    if len(folders) != 1:
        return f"holds {len(folders)} .dist-info folders, not one"
    stem = folders[0].removesuffix(".dist-info")
    own, _, said_version = stem.rpartition("-")
    try:
        same = canonicalize_name(own) == name and Version(said_version) == version
    except ValueError:
        same = False
    if not same:
        return f"holds {said(folders[0])[:120]!r}, which is not {name} {version} as its file name says"
    try:
        text = zf.read(f"{folders[0]}/entry_points.txt").decode("utf-8", "replace")
    except KeyError:
        return None
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.Error:
        return "has an entry_points.txt no installer reads"
    for section in ("console_scripts", "gui_scripts"):
        for script in parser.options(section) if parser.has_section(section) else ():
            if "/" in script or "\\" in script or ".." in script or "\0" in script:
                return f"names the script {said(script)[:120]!r} in entry_points.txt, a path outside the venv's bin/"
    return None


def contained(wheels: Sequence[Wheel]) -> None:
    """Each wheel writes only inside the venv it is installed into; WheelhouseError (one line naming the wheel and
    why) for the first that does not: refused on the controller, before any host is touched. On a host, pip
    refuses such a wheel only once it was sent; uv 0.13.9 built and served the venv, leaving ../outside.py out
    without a word (sandbox sbx3: no outside.py anywhere on the host), so the venv was not the wheel."""
    for w in wheels:
        if (why := stray(w.path)) is not None:
            raise WheelhouseError(f"{w.path}: {why}: refused, nothing was sent")


def unpacked_size(wheels: Sequence[Wheel]) -> int:
    """Bytes the wheels take once installed (their files' sizes as their zip directories say; unreadable: 0)."""
    total = 0
    for w in wheels:
        try:
            with zipfile.ZipFile(w.path) as zf:
                total += sum(i.file_size for i in zf.infolist())
        except (OSError, zipfile.BadZipFile):
            continue
    return total
