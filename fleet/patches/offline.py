"""Patch plans and audits against upstream releases, with no host: what a planned upgrade does.

`inv audit --sglang 0.5.23 --flashinfer 0.7.4 --sm 120` and `inv patch --check --against
sglang==0.5.23,flashinfer-python==0.7.4` read the real released files from the upstream corpus
(fleet.upstream.corpus; a release not yet cached is fetched with pip) and run the same planning and gate evaluation
a host's files get.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fleet.errors import InputError
from fleet.host.service import sha256
from fleet.patches import audit as archgate
from fleet.patches import plan as patchplan
from fleet.patches.kept import PackageInfo
from fleet.patches.sets import PatchSet
from fleet.progress import Progress, quiet
from fleet.upstream import corpus as upstream
from fleet.upstream.versions import version_key

DISTS = {"sglang": "sglang", "flashinfer-python": "flashinfer", "flashinfer": "flashinfer"}
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([0-9][0-9A-Za-z.+-]*)\s*$")


def parse_against(spec: str) -> dict[str, str]:
    """'sglang==0.5.23,flashinfer-python==0.7.4' -> {dist: version}; InputError names the bad part."""
    out: dict[str, str] = {}
    for part in spec.split(","):
        m = _PIN.match(part)
        name = m.group(1).lower().replace("_", "-") if m else ""
        if not m or name not in DISTS:
            raise InputError(f"--against {part.strip()!r}: use sglang==X and/or flashinfer-python==Y, "
                             f"comma-separated")
        version_key(m.group(2))
        out["flashinfer-python" if name.startswith("flashinfer") else name] = m.group(2)
    return out


def releases(versions: dict[str, str], fetch: bool | str = True,
             say: Progress = quiet) -> dict[str, upstream.UpstreamRelease]:
    """The corpus releases of these versions (import name -> release), fetched when missing and allowed: each
    fetch is said first (it reaches the package index); without fetch a missing one is InputError, naming what
    forbids the fetch (`fetch`: False for --offline, else the words for a site's `offline: true`)."""
    matrix = upstream.load_matrix()
    out = {}
    for dist, version in versions.items():
        have = upstream.cached(dist, version)
        if have is None and fetch is not True:
            raise InputError(f"{dist} {version} is not in the upstream cache {upstream.cache_dir()} and "
                             f"{fetch or '--offline'} forbids fetching it: run `inv upstream --{DISTS[dist]} "
                             f"{version}` where {upstream.shown_index()} is reachable")
        if have is None:
            say(f"fetching {dist}=={version} from {upstream.shown_index()} (not in the cache "
                f"{upstream.cache_dir()}; --offline refuses instead)")
            have = upstream.fetch(dist, version, matrix, say=say)  # and where it stands while it goes on
            say(f"fetched {dist}=={version}: {have.files} files in {have.fetched_s:.0f} s")
        out[DISTS[dist]] = have
    return out


def _file_info(found: upstream.UpstreamRelease | None, package: str, file: str) -> patchplan.FileInfo:
    """What a host with the release `found` (None: not among those given) would report of one file."""
    if found is None:
        return patchplan.FileInfo(package, file, error=f"{package} is not among the releases given")
    path = found.package(package.split(".")[0]) / file
    content = path.read_bytes() if path.is_file() else None
    return patchplan.FileInfo(package, file, str(path), content is not None, content,
                              sha256(content) if content is not None else None, dist=found.dist,
                              version=found.version)


def state(versions: dict[str, str], sets: list[PatchSet], sm: int, fetch: bool | str = True,
          say: Progress = quiet) -> patchplan.HostState:
    """A HostState as a host with exactly these releases (and GPUs of `sm`) would report it."""
    rels = releases(versions, fetch, say)
    st = patchplan.HostState(sms=[sm], dists={d: v for d, v in versions.items()})
    for name, rel in rels.items():
        st.packages[name] = {"path": str(rel.package()), "dist": rel.dist, "version": rel.version}
    for ps in sets:
        for package, file in ps.files():
            st.files[(package, file)] = _file_info(rels.get(package.split(".")[0]), package, file)
    return st


def check(sets: list[PatchSet], versions: dict[str, str], sm: int, fetch: bool | str = True,
          say: Progress = quiet) -> patchplan.Plan:
    """The sets planned on these releases; InputError when a set picks its edits by a release not given."""
    for ps in sets:
        for dist in [*ps.dists(), *ps.applies_to.packages]:
            if dist not in versions:
                raise InputError(f"--against: set {ps.name} depends on the {dist} release: add {dist}==VERSION")
    return patchplan.plan(sets, state(versions, sets, sm, fetch, say), allow_prebuilt=True)


@dataclass
class OfflineAudit:
    versions: dict[str, str]
    result: archgate.AuditResult


def scan_tree(rels: dict[str, upstream.UpstreamRelease], scope: dict[str, list[str]]
              ) -> dict[str, archgate.ScannedFile]:
    files: dict[str, archgate.ScannedFile] = {}
    for package, patterns in scope.items():
        rel = rels.get(package)
        if rel is None:
            continue
        root = rel.package(package)
        paths: set[Path] = set()
        for pat in patterns:
            paths.update(p for p in root.glob(pat) if p.is_file())
        for path in sorted(paths):
            name = f"{package}/{path.relative_to(root)}"
            item = archgate.scan_text(name, path.read_text(encoding="utf-8", errors="replace"))
            if item["lines"]:
                files[name] = item
    return files


def audit(versions: dict[str, str], sm: int, sets: list[PatchSet] | None = None, full: bool = False,
          fetch: bool | str = True, say: Progress = quiet) -> OfflineAudit:
    """The audit of these releases for `sm`, as a host with them installed would get it."""
    if not versions:
        raise InputError("--sglang / --flashinfer: name at least one release to audit")
    rels = releases(versions, fetch, say)
    scope = archgate.scope_for(list(rels), full)
    gates = archgate.evaluate(scan_tree(rels, scope), sm)
    packages: dict[str, PackageInfo] = {name: {"path": str(r.package()), "dist": r.dist, "version": r.version}
                                        for name, r in rels.items()}
    gates = archgate.mark_kept(gates, sm, packages)
    if sets and any(g.excludes for g in gates):
        archgate.lift(gates, state(versions, sets, sm, fetch, say), sets, sm)
    label = ", ".join(f"{d} {v}" for d, v in versions.items())
    return OfflineAudit(versions, archgate.AuditResult(label, sm, gates, packages))
