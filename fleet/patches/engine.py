"""The patch engine: check, apply and revert patch sets (playbooks/patches/*.yaml) on hosts.

Guarantees (issue 6):
- all or nothing: every edit of every set is checked (on the contents read from the host) before any
  file is written; the host re-checks each file's sha256 before it writes, and a write that fails
  half-way puts back the files already written;
- idempotent: an edit whose `find` text is gone and whose `replace` text is present is "applied";
  applying twice writes nothing the second time;
- atomic and reversible: each original is kept once, content-addressed, under BACKUP_ROOT/objects;
  every apply is a run, BACKUP_ROOT/runs/<run>/manifest.json, with each file's sha256 before and
  after; files are written to a temp file in their folder and renamed over it, mode and owner kept;
  revert restores the originals only where the file still has the hash fleet left (else it says
  what changed it: a later run, a package reinstall/upgrade, or a hand edit);
- apply and revert hold the host lock (fleet.host.lock); --check reads only.

Round trips per host: check = 1 (read); apply = lock + read + write + unlock.
Planning (fleet.patches.plan) is pure; this module is the host I/O around it.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypedDict, cast

from fabric import Connection

from fleet import faulthook
from fleet.errors import FleetError
from fleet.host import leftovers
from fleet.host import lock as hostlock
from fleet.host.service import run_system_python
from fleet.inventory import Host
from fleet.patches.kept import PackageInfo
from fleet.patches.plan import (
    APPLICABLE,
    APPLIED,
    BACKUP_ROOT,
    CANNOT,
    NOTHING,
    FileInfo,
    HostState,
    PatchRun,
    Plan,
    RevertPlan,
    SetPlan,
    plan,
    plan_revert,
)
from fleet.patches.sets import PatchSet, available, load_sets
from fleet.yamlfile import JsonObject

_MARK = "FLEET-JSON:"
ANSWER_MAX = 32 << 20  # patch_host.py's answer carries the target files themselves (base64)


class FileAnswer(TypedDict, total=False):
    """One target file as patch_host.py's `read` found it (its contents base64, where it exists)."""

    package: str
    file: str
    path: str | None
    exists: bool
    b64: str | None
    sha256: str | None
    mode: int | None
    uid: int | None
    gid: int | None
    dist: str | None
    version: str | None
    record_sha256: str | None
    error: str | None


class ReadAnswer(TypedDict, total=False):
    """patch_host.py's `read`: packages, versions, target files, SMs, prebuilt modules, runs."""

    packages: dict[str, PackageInfo]
    dists: dict[str, str | None]
    files: list[FileAnswer]
    sms: list[int]
    sm_error: str | None
    prebuilt: list[str]
    runs: list[PatchRun]
    cache_bases: list[str]


class Answer(TypedDict, total=False):
    """patch_host.py's `apply`, `revert` and `cleanup`: ok, or the error; what was written or restored."""

    ok: bool
    error: str
    manifest: str
    written: list[str]
    restored: list[str]
    cleared: list[str]


PATCH_S = 300.0  # one call of the host's patch program


def _call(conn: Connection, host: Host, mode: str, req: JsonObject, timeout: float = PATCH_S) -> JsonObject:
    payload = base64.b64encode(json.dumps({**req, "venv": host.venv}).encode()).decode()
    res = run_system_python(conn, host, "patch_host.py", mode, payload, timeout=timeout, max_output=ANSWER_MAX)
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(_MARK):
            answer: JsonObject = json.loads(line[len(_MARK):])
            return answer
    detail = (res.stderr or res.stdout).strip().splitlines()
    raise FleetError(f"{host.name}: patch {mode} on the host failed (exit {res.exited}) for {host.venv}: "
                     f"{detail[-1][:300] if detail else 'no output'}")


def read_state(conn: Connection, host: Host, sets: list[PatchSet]) -> HostState:
    """One round trip: packages, versions, target files with hashes, SMs, prebuilt modules, runs."""
    files = list(dict.fromkeys(f for s in sets for f in s.files()))
    req: JsonObject = {
        "packages": list(dict.fromkeys(p for p, _ in files)),
        "dists": list(dict.fromkeys(d for s in sets for d in [*s.applies_to.packages, *s.dists()])),
        "files": files,
        "modules": list(dict.fromkeys(m for s in sets for m in s.post.clear_jit_cache)),
        "root": BACKUP_ROOT,
        "unit": host.unit,
    }
    raw = cast(ReadAnswer, _call(conn, host, "read", req))  # as patch_host.py writes it
    st = HostState(packages=raw["packages"], dists=raw["dists"], sms=raw["sms"], sm_error=raw["sm_error"],
                   prebuilt=raw["prebuilt"], runs=raw["runs"], cache_bases=raw.get("cache_bases", []))
    for f in raw["files"]:
        content = base64.b64decode(b64) if (b64 := f.get("b64")) is not None else None
        st.files[(f["package"], f["file"])] = FileInfo(
            package=f["package"], file=f["file"], path=f.get("path"), exists=bool(f.get("exists")), content=content,
            sha256=f.get("sha256"), mode=f.get("mode"), uid=f.get("uid"), gid=f.get("gid"), dist=f.get("dist"),
            version=f.get("version"), record_sha256=f.get("record_sha256"), error=f.get("error"))
    return st


def _who() -> str:
    return hostlock.whoami()


def _b64b(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _change(conn: Connection, host: Host, mode: str, req: JsonObject) -> Answer:
    return cast(Answer, _call(conn, host, mode, req))  # as patch_host.py writes it


def write_changes(conn: Connection, host: Host, sets: list[PatchSet], p: Plan, state: HostState) -> Answer:
    run = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    req: JsonObject = {
        "root": BACKUP_ROOT, "run": run, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "by": _who(),
        "sets": [s.name for s in sets if any(sp.name == s.name and sp.state == APPLICABLE for sp in p.sets)],
        "modules": p.clear_jit_cache, "bases": state.cache_bases,
        "files": [{"path": c.path, "package": c.package, "file": c.file, "dist": c.info.dist,
                   "version": c.info.version, "sha_before": c.sha_before, "sha_after": c.sha_after,
                   "steps": [[off, _b64b(f), _b64b(r)] for off, f, r in c.steps]} for c in p.changes],
    }
    if faulthook.armed(faulthook.MID_PATCH):
        req["die_after"] = 1
    try:
        return _change(conn, host, "apply", req)
    finally:
        faulthook.reached(faulthook.MID_PATCH)


def undo_interrupted_runs(conn: Connection, host: Host) -> list[str]:
    """Patch runs left "applying" (a writer that died between files) or "reverting" (a revert that died, or could
    not patch again what it had restored): put back, from the run's backups, the files it had written (and drop
    its temp files), and mark the run reverted. One line per run."""
    if not leftovers.patch_runs_open(conn, host, BACKUP_ROOT):
        return []  # the common case costs one grep, and needs no venv on the host
    state = read_state(conn, host, load_sets(available()))
    notes = []
    for run in (r for r in state.runs if r.get("status") in ("applying", "reverting")):
        paths = [f["path"] for f in run.get("files", [])]
        _change(conn, host, "cleanup", {"paths": paths})
        req: JsonObject = {
            "root": BACKUP_ROOT, "run": run["run"], "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "by": _who(), "bases": state.cache_bases,
            "files": [{"path": f["path"], "sha_before": f["sha_before"], "sha_after": f["sha_after"]}
                      for f in run.get("files", [])]}
        res = _change(conn, host, "revert", req)
        if not res.get("ok"):
            raise FleetError(f"{host.name}: patch run {run['run']} ({', '.join(run['sets'])}) was interrupted "
                             f"half-way and cannot be undone: {res.get('error')}")
        notes.append(f"patch run {run['run']} ({', '.join(run['sets'])}) was interrupted half-way: put back "
                     f"{len(res['restored'])} of its {len(paths)} files from backup")
    return notes


# --- per host ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostResult:
    host: str
    action: str  # check | apply | revert
    ok: bool
    sets: list[SetPlan] = field(default_factory=list)
    revert: RevertPlan | None = None
    written: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)
    manifest: str | None = None
    sms: list[int] = field(default_factory=list)
    error: str | None = None
    audit: Any = None  # archgate.AuditResult when asked for
    audit_error: str | None = None
    release: str | None = None  # the release a standalone apply/revert was recorded as
    drift: bool = False  # refused only because files' text is not what the sets expect; nothing written
    recovered: list[str] = field(default_factory=list)  # what a dead run left, closed first (`inv patch`)

    def to_json(self) -> JsonObject:
        out = asdict(replace(self, audit=None))
        out["audit"] = self.audit.to_json() if self.audit is not None else None
        return out


def check_host(conn: Connection, host: Host, sets: list[PatchSet], allow_prebuilt: bool = False) -> HostResult:
    state = read_state(conn, host, sets)
    p = plan(sets, state, allow_prebuilt)
    return HostResult(host.name, "check", p.ok, p.sets, sms=state.sms, error=_plan_error(host, p), drift=p.drifted)


def _plan_error(host: Host, p: Plan) -> str | None:
    msgs = list(p.errors)
    for sp in p.sets:
        if sp.state == CANNOT:
            bad = [e for e in sp.edits if e.state == CANNOT]
            msgs += [f"set {sp.name}, {e.label} ({e.package}/{e.file}): {e.reason}" for e in bad] or [
                f"set {sp.name}: {sp.reason}"]
    return f"{host.name}: " + "; ".join(msgs) + "; nothing changed" if msgs else None


def apply_host(conn: Connection, host: Host, sets: list[PatchSet], allow_prebuilt: bool = False) -> HostResult:
    """Under the caller's host run (fleet.deploy.hostrun holds the lock)."""
    state = read_state(conn, host, sets)
    p = plan(sets, state, allow_prebuilt)
    result = HostResult(host.name, "apply", p.ok, p.sets, sms=state.sms, error=_plan_error(host, p),
                        drift=p.drifted)
    if not p.ok or not p.changes:
        return result
    res = write_changes(conn, host, sets, p, state)
    if not res.get("ok"):
        return replace(result, ok=False, error=f"{host.name}: {res.get('error')}")
    return replace(result, written=res["written"], cleared=res["cleared"], manifest=res["manifest"])


def revert_host(conn: Connection, host: Host, sets: list[PatchSet]) -> HostResult:
    """Under the caller's host run (fleet.deploy.hostrun holds the lock)."""
    state = read_state(conn, host, sets)
    rp = plan_revert(sets, state)
    result = HostResult(host.name, "revert", rp.ok, plan(sets, state, allow_prebuilt=True).sets, revert=rp,
                        sms=state.sms)
    if rp.state == CANNOT:
        return replace(result, error=f"{host.name}: cannot revert: {rp.reason}; nothing restored")
    if rp.state == NOTHING:
        still = [s.name for s in result.sets if s.state == APPLIED]
        if still:
            return replace(result, ok=False, error=(f"{host.name}: {', '.join(still)} applied but not by fleet "
                                                    "(no backup run): cannot revert"))
        return result
    req: JsonObject = {
        "root": BACKUP_ROOT, "run": rp.run, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "by": _who(), "bases": state.cache_bases,
        "files": [{"path": f.path, "sha_before": f.sha_before, "sha_after": f.sha_after} for f in rp.files]}
    res = _change(conn, host, "revert", req)
    if not res.get("ok"):
        return replace(result, ok=False, error=f"{host.name}: {res.get('error')}")
    return replace(result, written=res["restored"], cleared=res["cleared"], manifest=res["manifest"])


