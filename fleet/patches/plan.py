"""Patch planning, pure: what applying or reverting patch sets would do, from a host's state as read in one
round trip (fleet.patches.engine reads and writes; the host side is fleet/host/programs/patch_host.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TypedDict

from fleet.host import facts as factsmod
from fleet.host.service import sha256
from fleet.patches.kept import PackageInfo
from fleet.patches.sets import Edit, PatchSet
from fleet.upstream.versions import in_range

BACKUP_ROOT = "/var/lib/fleet/backups"
APPLICABLE, APPLIED, CANNOT, NOT_APPLICABLE = "applicable", "applied", "cannot-apply", "not-applicable"
NOT_NEEDED = "not-needed"  # meant for this host, but its installed upstream already has the fix
REVERTIBLE, REVERTED, NOTHING = "revertible", "reverted", "nothing-to-revert"


# --- what the read round trip returns ---------------------------------------------------------------


@dataclass
class FileInfo:
    package: str
    file: str
    path: str | None = None
    exists: bool = False
    content: bytes | None = None
    sha256: str | None = None
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    dist: str | None = None
    version: str | None = None
    record_sha256: str | None = None  # the hash pip's RECORD gives this file (the package as installed)
    error: str | None = None


class RunFile(TypedDict, total=False):
    """One file a patch run wrote, as its manifest on the host records it (patch_host.py's apply)."""

    path: str
    package: str
    file: str
    dist: str | None
    version: str | None
    sha_before: str
    sha_after: str
    mode: int
    uid: int
    gid: int


class PatchRun(TypedDict, total=False):
    """A patch run's manifest on the host (BACKUP_ROOT/runs/<run>/manifest.json), as patch_host.py writes it."""

    run: str
    sets: list[str]
    status: str  # applying | applied | failed | reverting | reverted
    created: str
    by: str
    clear_jit_cache: list[str]
    files: list[RunFile]
    cleared: list[str]
    error: str
    reverted_at: str
    reverted_by: str


@dataclass
class HostState:
    """Everything planning needs from a host, as read in one round trip."""

    packages: dict[str, PackageInfo] = field(default_factory=dict)  # import name -> {path, dist, version, error}
    dists: dict[str, str | None] = field(default_factory=dict)  # distribution -> version (None: not installed)
    files: dict[tuple[str, str], FileInfo] = field(default_factory=dict)
    sms: list[int] = field(default_factory=list)
    sm_error: str | None = None
    prebuilt: list[str] = field(default_factory=list)  # AOT / flashinfer-jit-cache modules that beat the sources
    runs: list[PatchRun] = field(default_factory=list)  # manifests, oldest first
    cache_bases: list[str] = field(default_factory=list)


# --- pure planning ----------------------------------------------------------------------------------


@dataclass
class EditPlan:
    set: str
    index: int
    label: str
    package: str
    file: str
    state: str
    expected: int
    found: int = 0
    replaced: int = 0
    reason: str | None = None
    drift: bool = False  # the file is there but its text is not what the edit expects

    @property
    def occurrences(self) -> str:
        return f"find {self.found}/{self.expected}, replace {self.replaced}"


@dataclass
class SetPlan:
    name: str
    state: str
    reason: str | None = None
    edits: list[EditPlan] = field(default_factory=list)
    not_needed: list[str] = field(default_factory=list)  # parts upstream already fixed
    drift: bool = False  # cannot apply only because the files' text (or the version) is not what the set knows


@dataclass
class FileChange:
    package: str
    file: str
    path: str
    before: bytes
    after: bytes
    steps: list[tuple[int, bytes, bytes]]  # (offset, find, replace), in order, each on the result of the last
    info: FileInfo

    @property
    def sha_before(self) -> str:
        return sha256(self.before)

    @property
    def sha_after(self) -> str:
        return sha256(self.after)


@dataclass
class Plan:
    sets: list[SetPlan]
    changes: list[FileChange]
    clear_jit_cache: list[str]
    errors: list[str] = field(default_factory=list)  # host-level reasons not to write (prebuilt JIT cache)

    @property
    def ok(self) -> bool:
        return not self.errors and all(s.state != CANNOT for s in self.sets)

    @property
    def drifted(self) -> bool:
        """Not ok only because of drift: nothing else (a prebuilt cache, a missing file) stands in the way."""
        bad = [s for s in self.sets if s.state == CANNOT]
        return not self.errors and bool(bad) and all(s.drift for s in bad)


@dataclass
class EditCheck:
    state: str
    found: int
    replaced: int
    reason: str | None = None
    offsets: list[int] = field(default_factory=list)  # where `find` starts, when applicable

    def apply(self, content: bytes, edit: Edit) -> tuple[bytes, list[tuple[int, bytes, bytes]]]:
        """The content with every found occurrence replaced, and the steps that do it (last one first)."""
        find, repl = edit.find.encode(), edit.replace.encode()
        steps = [(off, find, repl) for off in sorted(self.offsets, reverse=True)]
        for off, f, r in steps:
            content = content[:off] + r + content[off + len(f):]
        return content, steps


def region(content: bytes, edit: Edit) -> tuple[int, int] | str:
    """(start, end) byte offsets `find` is counted in (an occurrence must start there): the whole file, or
    the lines around the anchor; a reason when the anchor does not occur exactly once."""
    if edit.within is None:
        return 0, len(content)
    anchor = edit.within.anchor.encode()
    n = content.count(anchor)
    if n != 1:
        return (f"anchor {edit.within.anchor!r} found {n} times, expected once "
                f"({'upstream file drifted, or edited by hand' if n == 0 else 'ambiguous'})")
    at = content.index(anchor)
    start = content.rfind(b"\n", 0, at) + 1
    for _ in range(edit.within.before):
        if start == 0:
            break
        start = content.rfind(b"\n", 0, start - 1) + 1
    end = at + len(anchor)
    for _ in range(edit.within.after + 1):
        nl = content.find(b"\n", end)
        if nl < 0:
            end = len(content)
            break
        end = nl + 1
    return start, end


def _offsets(content: bytes, needle: bytes, start: int, end: int) -> list[int]:
    """Where `needle` starts within [start, end) (it may run past end)."""
    out, i = [], content.find(needle, start)
    while 0 <= i < end:
        out.append(i)
        i = content.find(needle, i + len(needle))
    return out


def plan_edit(content: bytes, edit: Edit) -> EditCheck:
    """Whether one edit applies to one file's bytes: occurrences of find and replace in its region."""
    span = region(content, edit)
    if isinstance(span, str):
        return EditCheck(CANNOT, 0, 0, span)
    find, repl = edit.find.encode(), edit.replace.encode()
    found = _offsets(content, find, *span)
    n, r = len(found), len(_offsets(content, repl, *span))
    if n == edit.count:
        return EditCheck(APPLICABLE, n, r, None, found)
    if n == 0 and r >= edit.count:
        return EditCheck(APPLIED, n, r)
    reason = f"found {n} of {edit.count} expected occurrences of find"
    if edit.within is not None:
        reason += f" near {edit.within.anchor!r}"
    if r:
        reason += f" (and {r} of replace: partly edited already?)"
    elif n == 0:
        reason += " (upstream file drifted, or edited by hand)"
    return EditCheck(CANNOT, n, r, reason)


def applies(ps: PatchSet, state: HostState) -> str | None:
    """None when the set is meant for this host, else why not."""
    at = ps.applies_to
    if at.sm is not None or at.arch_families is not None:
        if not state.sms:
            return f"cannot tell the host's SM ({state.sm_error or 'no GPU reported'})"
        for sm in sorted(set(state.sms)):
            if at.sm is not None and sm not in at.sm:
                return f"SM{sm} is not in applies_to.sm {at.sm}"
            fam = factsmod.arch_family(f"{sm // 10}.{sm % 10}")
            if at.arch_families is not None and fam not in at.arch_families:
                return f"SM{sm} ({fam}) is not in applies_to.arch_families {at.arch_families}"
    for dist, spec in at.packages.items():
        version = state.dists.get(dist)
        if version is None:
            return f"{dist} is not installed in the venv"
        if not in_range(version, spec):
            return f"{dist} {version} is outside {spec}"
    return None


def plan(sets: list[PatchSet], state: HostState, allow_prebuilt: bool = False) -> Plan:
    """Check every edit of every set against the file contents read; sets apply in order, on the
    contents the sets before them left. Nothing here does I/O."""
    current: dict[tuple[str, str], bytes] = {}
    steps_of: dict[tuple[str, str], list[tuple[int, bytes, bytes]]] = {}
    set_plans: list[SetPlan] = []
    modules: list[str] = []
    for ps in sets:
        why_not = applies(ps, state)
        if why_not:
            set_plans.append(SetPlan(ps.name, NOT_APPLICABLE if "cannot tell" not in why_not else CANNOT, why_not))
            continue
        sel = ps.select(state.dists)
        if sel.missing:
            set_plans.append(SetPlan(ps.name, CANNOT, "; ".join(sel.missing), not_needed=sel.not_needed,
                                     drift=sel.uncovered and len(sel.missing) == 1))
            continue
        if not sel.edits:
            set_plans.append(SetPlan(ps.name, NOT_NEEDED, "; ".join(sel.not_needed), not_needed=sel.not_needed))
            continue
        staged = dict(current)
        staged_steps = {k: list(v) for k, v in steps_of.items()}
        plans: list[EditPlan] = []
        for i, e in enumerate(sel.edits):
            key = (e.package, e.file)
            ep = partial(EditPlan, ps.name, i, e.name or f"edit {i + 1}", e.package, e.file)
            pkg = state.packages.get(e.package, {})
            info = state.files.get(key)
            if pkg.get("error") or not pkg.get("path"):
                plans.append(ep(CANNOT, e.count, reason=f"package {e.package}: {pkg.get('error') or 'not resolved'}"))
                continue
            if info is None or not info.exists or info.content is None:
                where = info.path if info and info.path else e.file
                plans.append(ep(CANNOT, e.count, reason=f"{where}: {info.error if info and info.error else 'missing'}"))
                continue
            content = staged.get(key, info.content)
            check = plan_edit(content, e)
            plans.append(ep(check.state, e.count, check.found, check.replaced, check.reason, check.state == CANNOT))
            if check.state == APPLICABLE:
                staged[key], steps = check.apply(content, e)
                staged_steps.setdefault(key, []).extend(steps)
        states = {p.state for p in plans}
        if CANNOT in states:
            bad = [p for p in plans if p.state == CANNOT]
            sp = SetPlan(ps.name, CANNOT, f"{len(bad)} of {len(plans)} edits cannot apply", plans, sel.not_needed,
                         drift=all(p.drift for p in bad))
        elif states == {APPLIED}:
            sp = SetPlan(ps.name, APPLIED, None, plans, sel.not_needed)
        else:
            sp = SetPlan(ps.name, APPLICABLE, None, plans, sel.not_needed)
            current, steps_of = staged, staged_steps
            modules += [m for m in ps.post.clear_jit_cache if m not in modules]
        set_plans.append(sp)
    changes = []
    for key, after in current.items():
        info = state.files[key]
        if after != info.content:
            changes.append(FileChange(key[0], key[1], info.path or "", info.content or b"", after,
                                      steps_of.get(key, []), info))
    errors = []
    touches_flashinfer = any(c.package.split(".")[0] == "flashinfer" for c in changes) or modules
    if state.prebuilt and touches_flashinfer and not allow_prebuilt:
        errors.append(f"prebuilt flashinfer JIT modules make source patches ineffective: {', '.join(state.prebuilt)} "
                      f"(uninstall flashinfer-jit-cache / remove them, or pass --allow-prebuilt-jit)")
    return Plan(set_plans, changes, modules, errors)


@dataclass
class FileRevert:
    path: str
    state: str  # revertible | reverted (already pristine) | cannot-apply
    sha_now: str | None
    sha_before: str
    sha_after: str
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    reason: str | None = None


@dataclass
class RevertPlan:
    sets: list[str]
    state: str  # revertible | nothing-to-revert | cannot-apply
    run: str | None = None
    reason: str | None = None
    files: list[FileRevert] = field(default_factory=list)
    clear_jit_cache: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.state != CANNOT


def _why_changed(path: str, now: str | None, f: RunFile, run: PatchRun, runs: list[PatchRun],
                 info: FileInfo | None) -> str:
    if now is None:
        return f"{path}: file is gone since fleet wrote it"
    later = [r for r in runs if r["run"] > run["run"] and r.get("status") == "applied"
             and any(g["path"] == path and g["sha_after"] == now for g in r.get("files", []))]
    if later:
        return (f"{path}: changed since by patch run {later[-1]['run']} ({', '.join(later[-1]['sets'])}): "
                f"revert that first")
    if info is not None and info.version and f.get("version") and info.version != f["version"]:
        return (f"{path}: replaced by a package upgrade ({f.get('dist')} {f['version']} -> {info.version}); "
                f"the patch is gone, nothing to restore")
    if info is not None and info.record_sha256 == now:
        return (f"{path}: replaced by a package reinstall (matches {info.dist} {info.version}'s RECORD, "
                f"e.g. pip install --force-reinstall); nothing to restore")
    return (f"{path}: edited by hand since fleet wrote it (sha256 now {now[:12]}, fleet left "
            f"{f['sha_after'][:12]}): refusing to overwrite")


def plan_revert(sets: list[PatchSet], state: HostState) -> RevertPlan:
    """Which run to undo, and whether every file of it still has the hash fleet left."""
    names = [s.name for s in sets]
    applied = [r for r in state.runs if r.get("status") == "applied" and set(r.get("sets", [])) & set(names)]
    if not applied:
        return RevertPlan(names, NOTHING, reason="no applied patch run of these sets on this host")
    run = applied[-1]
    extra = [s for s in run["sets"] if s not in names]
    if extra:
        together = " ".join(f"--set {s}" for s in run["sets"])
        return RevertPlan(names, CANNOT, run["run"],
                          f"run {run['run']} applied {', '.join(run['sets'])} together: "
                          f"revert them together ({together})")
    applied_sets = {s for r in applied for s in r.get("sets", [])}
    missing = [s for s in names if s not in run["sets"] and s in applied_sets]  # never applied: nothing to undo
    if missing and len(names) > 1:
        return RevertPlan(names, CANNOT, run["run"],
                          f"the latest run {run['run']} has {', '.join(run['sets'])} only; revert {', '.join(missing)} "
                          f"separately")
    by_path = {i.path: i for i in state.files.values() if i.path}
    files: list[FileRevert] = []
    for f in run.get("files", []):
        info = by_path.get(f["path"])
        now = info.sha256 if info and info.exists else None
        fr = partial(FileRevert, f["path"])
        owner = (info.mode, info.uid, info.gid) if info else (None, None, None)
        if now == f["sha_after"]:
            files.append(fr(REVERTIBLE, now, f["sha_before"], f["sha_after"], *owner))
        elif now == f["sha_before"]:
            files.append(fr(REVERTED, now, f["sha_before"], f["sha_after"], *owner, reason="already the original"))
        else:
            files.append(fr(CANNOT, now, f["sha_before"], f["sha_after"], *owner,
                            reason=_why_changed(f["path"], now, f, run, state.runs, info)))
    out = partial(RevertPlan, names, run=run["run"], files=files,
                  clear_jit_cache=list(run.get("clear_jit_cache", [])))
    bad = [f for f in files if f.state == CANNOT]
    if bad:
        return out(CANNOT, reason="; ".join(f.reason or "" for f in bad))
    if all(f.state == REVERTED for f in files):
        return out(REVERTIBLE, reason="files are already the originals; the run is marked reverted")
    return out(REVERTIBLE)


# --- the host side: one Python program run by the venv's interpreter --------------------------------



