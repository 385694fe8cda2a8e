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
- apply and revert hold the host lock (fleet.hostlock); --check reads only.

Round trips per host: check = 1 (read); apply = lock + read + write + unlock.
Pure parts (planning, revert planning) take plain data and are unit-tested without a host.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet import facts as factsmod
from fleet import faulthook
from fleet.errors import FleetError
from fleet.inventory import Host
from fleet.patchsets import Edit, PatchSet, available, in_range, load_sets

BACKUP_ROOT = "/var/lib/fleet/backups"
APPLICABLE, APPLIED, CANNOT, NOT_APPLICABLE = "applicable", "applied", "cannot-apply", "not-applicable"
REVERTIBLE, REVERTED, NOTHING = "revertible", "reverted", "nothing-to-revert"
_MARK = "FLEET-JSON:"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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


@dataclass
class HostState:
    """Everything planning needs from a host, as read in one round trip."""

    packages: dict[str, dict[str, Any]] = field(default_factory=dict)  # import name -> {path, dist, version, error}
    dists: dict[str, str | None] = field(default_factory=dict)  # distribution -> version (None: not installed)
    files: dict[tuple[str, str], FileInfo] = field(default_factory=dict)
    sms: list[int] = field(default_factory=list)
    sm_error: str | None = None
    prebuilt: list[str] = field(default_factory=list)  # AOT / flashinfer-jit-cache modules that beat the sources
    runs: list[dict[str, Any]] = field(default_factory=list)  # manifests, oldest first
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

    @property
    def occurrences(self) -> str:
        return f"find {self.found}/{self.expected}, replace {self.replaced}"


@dataclass
class SetPlan:
    name: str
    state: str
    reason: str | None = None
    edits: list[EditPlan] = field(default_factory=list)


@dataclass
class FileChange:
    package: str
    file: str
    path: str
    before: bytes
    after: bytes
    edits: list[Edit]
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


def plan_edit(content: bytes, edit: Edit) -> tuple[str, int, int, str | None]:
    """(state, occurrences of find, occurrences of replace, reason) for one edit on one file's bytes."""
    find, repl = edit.find.encode(), edit.replace.encode()
    n, r = content.count(find), content.count(repl)
    if n == edit.count:
        return APPLICABLE, n, r, None
    if n == 0 and r >= edit.count:
        return APPLIED, n, r, None
    reason = f"found {n} of {edit.count} expected occurrences of find"
    if r:
        reason += f" (and {r} of replace: partly edited already?)"
    elif n == 0:
        reason += " (upstream file drifted, or edited by hand)"
    return CANNOT, n, r, reason


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
    edits_of: dict[tuple[str, str], list[Edit]] = {}
    set_plans: list[SetPlan] = []
    modules: list[str] = []
    for ps in sets:
        why_not = applies(ps, state)
        if why_not:
            set_plans.append(SetPlan(ps.name, NOT_APPLICABLE if "cannot tell" not in why_not else CANNOT, why_not))
            continue
        staged = dict(current)
        plans: list[EditPlan] = []
        for i, e in enumerate(ps.edits):
            key = (e.package, e.file)
            ep = EditPlan(ps.name, i, ps.edit_label(i), e.package, e.file, CANNOT, e.count)
            plans.append(ep)
            pkg = state.packages.get(e.package, {})
            info = state.files.get(key)
            if pkg.get("error") or not pkg.get("path"):
                ep.reason = f"package {e.package}: {pkg.get('error') or 'not resolved'}"
                continue
            if info is None or not info.exists or info.content is None:
                where = info.path if info and info.path else e.file
                ep.reason = f"{where}: {info.error if info and info.error else 'missing'}"
                continue
            content = staged.get(key, info.content)
            ep.state, ep.found, ep.replaced, ep.reason = plan_edit(content, e)
            if ep.state == APPLICABLE:
                staged[key] = content.replace(e.find.encode(), e.replace.encode())
                edits_of.setdefault(key, []).append(e)
        states = {p.state for p in plans}
        if CANNOT in states:
            bad = [p for p in plans if p.state == CANNOT]
            sp = SetPlan(ps.name, CANNOT, f"{len(bad)} of {len(plans)} edits cannot apply", plans)
        elif states == {APPLIED}:
            sp = SetPlan(ps.name, APPLIED, None, plans)
        else:
            sp = SetPlan(ps.name, APPLICABLE, None, plans)
            current = staged
            modules += [m for m in ps.post.clear_jit_cache if m not in modules]
        set_plans.append(sp)
    changes = []
    for key, after in current.items():
        info = state.files[key]
        if after != info.content:
            changes.append(FileChange(key[0], key[1], info.path or "", info.content or b"", after,
                                      edits_of.get(key, []), info))
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


def _why_changed(path: str, now: str | None, f: dict, run: dict, runs: list[dict], info: FileInfo | None) -> str:
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
    missing = [s for s in names if s not in run["sets"]]
    if missing and len(names) > 1:
        return RevertPlan(names, CANNOT, run["run"],
                          f"the latest run {run['run']} has {', '.join(run['sets'])} only; revert {', '.join(missing)} "
                          f"separately")
    by_path = {i.path: i for i in state.files.values() if i.path}
    out = RevertPlan(names, REVERTIBLE, run["run"], clear_jit_cache=list(run.get("clear_jit_cache", [])))
    for f in run.get("files", []):
        info = by_path.get(f["path"])
        now = info.sha256 if info and info.exists else None
        fr = FileRevert(f["path"], REVERTIBLE, now, f["sha_before"], f["sha_after"],
                        info.mode if info else None, info.uid if info else None, info.gid if info else None)
        if now == f["sha_after"]:
            pass
        elif now == f["sha_before"]:
            fr.state, fr.reason = REVERTED, "already the original"
        else:
            fr.state, fr.reason = CANNOT, _why_changed(f["path"], now, f, run, state.runs, info)
        out.files.append(fr)
    bad = [f for f in out.files if f.state == CANNOT]
    if bad:
        out.state, out.reason = CANNOT, "; ".join(f.reason or "" for f in bad)
    elif all(f.state == REVERTED for f in out.files):
        out.state, out.reason = REVERTIBLE, "files are already the originals; the run is marked reverted"
    return out


# --- the host side: one Python program run by the venv's interpreter --------------------------------

HOST_SCRIPT = r'''
import base64, glob, hashlib, json, os, pwd, shutil, subprocess, sys, time
MARK = "FLEET-JSON:"
def out(obj):
    sys.stdout.write(MARK + json.dumps(obj) + "\n"); sys.stdout.flush()
def sha(b):
    return hashlib.sha256(b).hexdigest()
def dist_of(top):
    import importlib.metadata as md
    try:
        names = md.packages_distributions().get(top) or []
    except Exception:
        names = []
    for n in names:
        try:
            return n, md.distribution(n)
        except Exception:
            pass
    return None, None
def record_sha(d, path):
    if d is None:
        return None
    try:
        for f in d.files or []:
            if f.hash is None or f.hash.mode != "sha256":
                continue
            if os.path.realpath(str(d.locate_file(f))) == os.path.realpath(path):
                raw = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
                return raw.hex()
    except Exception:
        return None
    return None
def cache_bases(unit):
    bases = [os.environ.get("FLASHINFER_WORKSPACE_BASE") or os.path.expanduser("~")]
    if unit:
        try:
            r = subprocess.run(["systemctl", "show", "-p", "Environment", "-p", "User", "--value", unit],
                               capture_output=True, text=True, timeout=10)
            lines = r.stdout.splitlines()
            env = dict(kv.split("=", 1) for kv in " ".join(lines[:1]).split() if "=" in kv)
            user = lines[1].strip() if len(lines) > 1 else ""
            home = pwd.getpwnam(user).pw_dir if user else env.get("HOME", pwd.getpwuid(0).pw_dir)
            bases.append(env.get("FLASHINFER_WORKSPACE_BASE") or env.get("HOME") or home)
        except Exception:
            pass
    return list(dict.fromkeys(b for b in bases if b))
def do_read(req):
    import importlib.util
    import importlib.metadata as md
    res = {"packages": {}, "dists": {}, "files": [], "sms": [], "sm_error": None, "prebuilt": [], "runs": []}
    dists = {}
    for p in req["packages"]:
        try:
            spec = importlib.util.find_spec(p)
        except Exception as e:
            spec = None; err = "%s: %s" % (type(e).__name__, e)
        else:
            err = "not importable by %s" % sys.executable
        if spec is None or not spec.submodule_search_locations:
            res["packages"][p] = {"error": err if spec is None else "is a module, not a package"}
            continue
        path = list(spec.submodule_search_locations)[0]
        dname, d = dist_of(p.split(".")[0])
        dists[p] = d
        res["packages"][p] = {"path": path, "dist": dname, "version": d.version if d else None}
    for name in req["dists"]:
        try:
            res["dists"][name] = md.version(name)
        except Exception:
            res["dists"][name] = None
    for p, rel in req["files"]:
        info = {"package": p, "file": rel}
        pkg = res["packages"].get(p, {})
        if pkg.get("path"):
            path = os.path.join(pkg["path"], rel)
            info["path"] = path
            info["dist"], info["version"] = pkg.get("dist"), pkg.get("version")
            real, top = os.path.realpath(path), os.path.realpath(pkg["path"])
            if os.path.commonpath([real, top]) != top:  # a symlink out of the package: never read or write there
                info["exists"] = False; info["error"] = "resolves outside the package, to %s: refusing" % real
                res["files"].append(info)
                continue
            try:
                data = open(path, "rb").read()
                st = os.stat(path)
                info.update(exists=True, b64=base64.b64encode(data).decode(), sha256=sha(data),
                            mode=st.st_mode & 0o7777, uid=st.st_uid, gid=st.st_gid,
                            record_sha256=record_sha(dists.get(p), path))
            except FileNotFoundError:
                info["exists"] = False; info["error"] = "file missing"
            except OSError as e:
                info["exists"] = False; info["error"] = "cannot read: %s" % (e.strerror or e)
        res["files"].append(info)
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        for line in r.stdout.split("\n"):
            line = line.strip()
            if line:
                major, minor = line.split(".")
                res["sms"].append(int(major) * 10 + int(minor))
        if r.returncode != 0 or not res["sms"]:
            res["sm_error"] = "nvidia-smi exit %d: %s" % (r.returncode, (r.stderr or r.stdout).strip()[:200])
    except Exception as e:
        res["sm_error"] = "nvidia-smi: %s" % e
    fi = res["packages"].get("flashinfer", {}).get("path")
    for m in req["modules"]:
        if fi and os.path.exists(os.path.join(fi, "data", "aot", m, m + ".so")):
            res["prebuilt"].append(os.path.join(fi, "data", "aot", m, m + ".so"))
    jc = importlib.util.find_spec("flashinfer_jit_cache") if req["modules"] else None
    if jc is not None:
        where = list(jc.submodule_search_locations or [jc.origin])[0]
        res["prebuilt"].append("flashinfer-jit-cache package at %s" % where)
    runs = os.path.join(req["root"], "runs")
    for m in sorted(glob.glob(os.path.join(runs, "*", "manifest.json"))):
        try:
            res["runs"].append(json.load(open(m)))
        except Exception:
            pass
    res["cache_bases"] = cache_bases(req.get("unit"))
    out(res)
def fsync_dir(d):
    try:
        fd = os.open(d, os.O_RDONLY); os.fsync(fd); os.close(fd)
    except OSError:
        pass
def atomic_write(path, data, mode, uid, gid):
    d, base = os.path.split(path)
    tmp = os.path.join(d, ".%s.fleet-%d.tmp" % (base, os.getpid()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data); f.flush()
            os.fchmod(f.fileno(), mode)
            if uid is not None and os.geteuid() == 0:
                os.fchown(f.fileno(), uid, gid)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try: os.unlink(tmp)
        except OSError: pass
        raise
    fsync_dir(d)
def probe_writable(path):
    d, base = os.path.split(path)
    tmp = os.path.join(d, ".%s.fleet-probe-%d.tmp" % (base, os.getpid()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd); os.unlink(tmp)
    if not os.access(path, os.W_OK):
        raise PermissionError(13, "no write access (read-only, immutable or permissions)", path)
    open(path, "r+b").close()
def save_object(root, data):
    objs = os.path.join(root, "objects"); os.makedirs(objs, mode=0o700, exist_ok=True)
    h = sha(data); dest = os.path.join(objs, h)
    if not os.path.exists(dest):
        atomic_write(dest, data, 0o600, None, None)
    if sha(open(dest, "rb").read()) != h:
        raise OSError("backup object %s is corrupt" % dest)
    return dest
def write_manifest(path, man):
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    atomic_write(path, (json.dumps(man, indent=1) + "\n").encode(), 0o600, None, None)
def clear_cache(bases, modules):
    gone = []
    for b in bases:
        for m in modules:
            for d in glob.glob(os.path.join(b, ".cache", "flashinfer", "*", "*", "cached_ops", m)):
                shutil.rmtree(d, ignore_errors=True); gone.append(d)
    return gone
def do_apply(req):
    root = req["root"]; files = req["files"]; new = {}
    for f in files:
        p = f["path"]
        try:
            data = open(p, "rb").read()
        except OSError as e:
            return out({"ok": False, "error": "%s: cannot read: %s" % (p, e.strerror or e)})
        if sha(data) != f["sha_before"]:
            return out({"ok": False, "error": "%s: changed since it was read (sha256 %s, expected %s); nothing written"
                        % (p, sha(data)[:12], f["sha_before"][:12])})
        for fd_, rp, n in f["edits"]:
            fd_, rp = base64.b64decode(fd_), base64.b64decode(rp)
            if data.count(fd_) != n:
                return out({"ok": False, "error": "%s: find text count changed; nothing written" % p})
            data = data.replace(fd_, rp)
        if sha(data) != f["sha_after"]:
            return out({"ok": False, "error": "%s: result differs from the planned one; nothing written" % p})
        try:
            probe_writable(p)
        except OSError as e:
            return out({"ok": False, "error": "%s: not writable (%s); nothing written" % (p, e.strerror or e)})
        new[p] = data
    man = {"run": req["run"], "sets": req["sets"], "status": "applying", "created": req["time"], "by": req["by"],
           "clear_jit_cache": req["modules"], "files": []}
    mpath = os.path.join(root, "runs", req["run"], "manifest.json")
    try:
        for f in files:
            save_object(root, open(f["path"], "rb").read())
            st = os.stat(f["path"])
            man["files"].append({k: f[k] for k in ("path", "package", "file", "dist", "version", "sha_before",
                                                   "sha_after")} | {"mode": st.st_mode & 0o7777,
                                                                    "uid": st.st_uid, "gid": st.st_gid})
        write_manifest(mpath, man)
    except OSError as e:
        return out({"ok": False, "error": "cannot back up to %s: %s; nothing written" % (root, e.strerror or e)})
    done = []
    try:
        for rec in man["files"]:
            atomic_write(rec["path"], new[rec["path"]], rec["mode"], rec["uid"], rec["gid"]); done.append(rec)
            if req.get("die_after") == len(done):
                os._exit(137)  # test hook (fleet.faulthook): the writer dies between files
    except OSError as e:
        undo_err = []
        for rec in done:
            try:
                orig = open(os.path.join(root, "objects", rec["sha_before"]), "rb").read()
                atomic_write(rec["path"], orig, rec["mode"], rec["uid"], rec["gid"])
            except OSError as e2:
                undo_err.append("%s: %s" % (rec["path"], e2))
        man["status"] = "failed"; man["error"] = "%s: %s" % (getattr(e, "filename", "?"), e.strerror or e)
        write_manifest(mpath, man)
        msg = "writing %s failed (%s); " % (getattr(e, "filename", "?"), e.strerror or e)
        msg += ("put back %d file(s) already written: nothing changed" % len(done)) if not undo_err else \
               ("COULD NOT PUT BACK: %s" % "; ".join(undo_err))
        return out({"ok": False, "error": msg})
    bad = [r["path"] for r in man["files"] if sha(open(r["path"], "rb").read()) != r["sha_after"]]
    if bad:
        man["status"] = "failed"; write_manifest(mpath, man)
        return out({"ok": False, "error": "verification failed after writing: %s" % ", ".join(bad)})
    man["cleared"] = clear_cache(req["bases"], req["modules"])
    man["status"] = "applied"; write_manifest(mpath, man)
    out({"ok": True, "manifest": mpath, "written": [r["path"] for r in man["files"]], "cleared": man["cleared"]})
def do_revert(req):
    root = req["root"]; mpath = os.path.join(root, "runs", req["run"], "manifest.json")
    man = json.load(open(mpath)); todo = []
    for f in req["files"]:
        p = f["path"]
        try:
            now = sha(open(p, "rb").read())
        except OSError as e:
            return out({"ok": False, "error": "%s: cannot read: %s; nothing restored" % (p, e.strerror or e)})
        if now == f["sha_before"]:
            continue
        if now != f["sha_after"]:
            return out({"ok": False, "error": "%s: changed since it was checked; nothing restored" % p})
        obj = os.path.join(root, "objects", f["sha_before"])
        try:
            orig = open(obj, "rb").read()
        except OSError as e:
            return out({"ok": False, "error": "backup %s: %s; nothing restored" % (obj, e.strerror or e)})
        if sha(orig) != f["sha_before"]:
            return out({"ok": False, "error": "backup %s is corrupt; nothing restored" % obj})
        try:
            probe_writable(p)
        except OSError as e:
            return out({"ok": False, "error": "%s: not writable (%s); nothing restored" % (p, e.strerror or e)})
        st = os.stat(p)
        todo.append((p, orig, st.st_mode & 0o7777, st.st_uid, st.st_gid))
    done = []
    try:
        for p, orig, mode, uid, gid in todo:
            atomic_write(p, orig, mode, uid, gid); done.append(p)
    except OSError as e:
        return out({"ok": False, "error": "restoring %s failed (%s) after %d file(s) restored"
                    % (getattr(e, "filename", "?"), e.strerror or e, len(done))})
    bad = [f["path"] for f in req["files"] if sha(open(f["path"], "rb").read()) != f["sha_before"]]
    if bad:
        return out({"ok": False, "error": "verification failed after restoring: %s" % ", ".join(bad)})
    man["status"] = "reverted"; man["reverted_at"] = req["time"]; man["reverted_by"] = req["by"]
    man["cleared_on_revert"] = clear_cache(req["bases"], man.get("clear_jit_cache", []))
    write_manifest(mpath, man)
    out({"ok": True, "restored": done, "cleared": man["cleared_on_revert"], "manifest": mpath})
def do_cleanup(req):
    gone = []
    for p in req["paths"]:
        d, base = os.path.split(p)
        for t in glob.glob(os.path.join(glob.escape(d), ".%s.fleet-*.tmp" % glob.escape(base))):
            os.unlink(t); gone.append(t)
    out({"ok": True, "removed": gone})
mode = sys.argv[1]
req = json.loads(base64.b64decode(sys.argv[2]))
{"read": do_read, "apply": do_apply, "revert": do_revert, "cleanup": do_cleanup}[mode](req)
'''


def _call(conn, host: Host, mode: str, req: dict, timeout: float = 300) -> dict:
    from fleet import remote

    python = f"{host.venv.rstrip('/')}/bin/python"
    payload = base64.b64encode(json.dumps(req).encode()).decode()
    cmd = " ".join(shlex.quote(a) for a in (python, "-c", HOST_SCRIPT, mode, payload))
    res = remote.run(conn, host, cmd, timeout=timeout)
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK):])
    detail = (res.stderr or res.stdout).strip().splitlines()
    raise FleetError(f"{host.name}: patch {mode} on the host failed (exit {res.exited}) with {python}: "
                     f"{detail[-1][:300] if detail else 'no output'}")


def read_state(conn, host: Host, sets: list[PatchSet]) -> HostState:
    """One round trip: packages, versions, target files with hashes, SMs, prebuilt modules, runs."""
    files = list(dict.fromkeys(f for s in sets for f in s.files()))
    req = {
        "packages": list(dict.fromkeys(p for p, _ in files)),
        "dists": list(dict.fromkeys(d for s in sets for d in s.applies_to.packages)),
        "files": files,
        "modules": list(dict.fromkeys(m for s in sets for m in s.post.clear_jit_cache)),
        "root": BACKUP_ROOT,
        "unit": host.unit,
    }
    raw = _call(conn, host, "read", req)
    st = HostState(packages=raw["packages"], dists=raw["dists"], sms=raw["sms"], sm_error=raw["sm_error"],
                   prebuilt=raw["prebuilt"], runs=raw["runs"], cache_bases=raw.get("cache_bases", []))
    for f in raw["files"]:
        content = base64.b64decode(f["b64"]) if f.get("b64") is not None else None
        st.files[(f["package"], f["file"])] = FileInfo(
            package=f["package"], file=f["file"], path=f.get("path"), exists=bool(f.get("exists")), content=content,
            sha256=f.get("sha256"), mode=f.get("mode"), uid=f.get("uid"), gid=f.get("gid"), dist=f.get("dist"),
            version=f.get("version"), record_sha256=f.get("record_sha256"), error=f.get("error"))
    return st


def _who() -> str:
    from fleet.hostlock import whoami

    return whoami()


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def write_changes(conn, host: Host, sets: list[PatchSet], p: Plan, state: HostState) -> dict:
    run = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    req = {
        "root": BACKUP_ROOT, "run": run, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "by": _who(),
        "sets": [s.name for s in sets if any(sp.name == s.name and sp.state == APPLICABLE for sp in p.sets)],
        "modules": p.clear_jit_cache, "bases": state.cache_bases,
        "files": [{"path": c.path, "package": c.package, "file": c.file, "dist": c.info.dist,
                   "version": c.info.version, "sha_before": c.sha_before, "sha_after": c.sha_after,
                   "edits": [[_b64(e.find), _b64(e.replace), e.count] for e in c.edits]} for c in p.changes],
    }
    if faulthook.armed(faulthook.MID_PATCH):
        req["die_after"] = 1
    try:
        return _call(conn, host, "apply", req)
    finally:
        faulthook.reached(faulthook.MID_PATCH)


def undo_interrupted_runs(conn, host: Host) -> list[str]:
    """Patch runs left "applying" by a writer that died between files: put back, from the run's backups, the
    files it had written (and drop its temp files), and mark the run reverted. One line per run."""
    from fleet import remote

    found = remote.run(conn, host, f"grep -ls '\"status\": \"applying\"' {BACKUP_ROOT}/runs/*/manifest.json")
    if not found.stdout.strip():
        return []  # the common case costs one grep, and needs no venv on the host
    state = read_state(conn, host, load_sets(available()))
    notes = []
    for run in (r for r in state.runs if r.get("status") == "applying"):
        paths = [f["path"] for f in run.get("files", [])]
        _call(conn, host, "cleanup", {"paths": paths})
        req = {"root": BACKUP_ROOT, "run": run["run"], "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "by": _who(), "bases": state.cache_bases,
               "files": [{k: f[k] for k in ("path", "sha_before", "sha_after")} for f in run.get("files", [])]}
        res = _call(conn, host, "revert", req)
        if not res.get("ok"):
            raise FleetError(f"{host.name}: patch run {run['run']} ({', '.join(run['sets'])}) was interrupted "
                             f"half-way and cannot be undone: {res.get('error')}")
        notes.append(f"patch run {run['run']} ({', '.join(run['sets'])}) was interrupted half-way: put back "
                     f"{len(res['restored'])} of its {len(paths)} files from backup")
    return notes


# --- per host ---------------------------------------------------------------------------------------


@dataclass
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

    def to_json(self) -> dict:
        from dataclasses import asdict

        audit, self.audit = self.audit, None
        try:
            out = asdict(self)
        finally:
            self.audit = audit
        out["audit"] = audit.to_json() if audit is not None else None
        return out


def check_host(conn, host: Host, sets: list[PatchSet], allow_prebuilt: bool = False) -> HostResult:
    state = read_state(conn, host, sets)
    p = plan(sets, state, allow_prebuilt)
    return HostResult(host.name, "check", p.ok, p.sets, sms=state.sms, error=_plan_error(host, p))


def _plan_error(host: Host, p: Plan) -> str | None:
    msgs = list(p.errors)
    for sp in p.sets:
        if sp.state == CANNOT:
            bad = [e for e in sp.edits if e.state == CANNOT]
            msgs += [f"set {sp.name}, {e.label} ({e.package}/{e.file}): {e.reason}" for e in bad] or [
                f"set {sp.name}: {sp.reason}"]
    return f"{host.name}: " + "; ".join(msgs) + "; nothing changed" if msgs else None


def _locked(conn, host: Host, purpose: str, lock: bool):
    from contextlib import nullcontext

    from fleet import hostlock

    # A deploy already holds the host's lock and calls in with lock=False.
    return hostlock.held(conn, host, purpose) if lock else nullcontext()


def apply_host(conn, host: Host, sets: list[PatchSet], allow_prebuilt: bool = False, lock: bool = True) -> HostResult:
    with _locked(conn, host, "patch " + " ".join(s.name for s in sets), lock):
        state = read_state(conn, host, sets)
        p = plan(sets, state, allow_prebuilt)
        result = HostResult(host.name, "apply", p.ok, p.sets, sms=state.sms, error=_plan_error(host, p))
        if not p.ok or not p.changes:
            return result
        res = write_changes(conn, host, sets, p, state)
        if not res.get("ok"):
            result.ok, result.error = False, f"{host.name}: {res.get('error')}"
            return result
        result.written, result.cleared, result.manifest = res["written"], res["cleared"], res["manifest"]
        return result


def revert_host(conn, host: Host, sets: list[PatchSet], lock: bool = True) -> HostResult:
    with _locked(conn, host, "patch --revert " + " ".join(s.name for s in sets), lock):
        state = read_state(conn, host, sets)
        rp = plan_revert(sets, state)
        result = HostResult(host.name, "revert", rp.ok, plan(sets, state, allow_prebuilt=True).sets, revert=rp,
                            sms=state.sms)
        if rp.state == CANNOT:
            result.error = f"{host.name}: cannot revert: {rp.reason}; nothing restored"
            return result
        if rp.state == NOTHING:
            still = [s.name for s in result.sets if s.state == APPLIED]
            if still:
                result.ok = False
                result.error = (f"{host.name}: {', '.join(still)} applied but not by fleet (no backup run): "
                                f"cannot revert")
            return result
        req = {"root": BACKUP_ROOT, "run": rp.run, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "by": _who(), "bases": state.cache_bases,
               "files": [{"path": f.path, "sha_before": f.sha_before, "sha_after": f.sha_after} for f in rp.files]}
        res = _call(conn, host, "revert", req)
        if not res.get("ok"):
            result.ok, result.error = False, f"{host.name}: {res.get('error')}"
            return result
        result.written, result.cleared, result.manifest = res["restored"], res["cleared"], res["manifest"]
        return result


def run_hosts(hosts: list[Host], sets: list[PatchSet], action: str, opts=None,
              allow_prebuilt: bool = False, audit: bool = False) -> list[HostResult]:
    """check | apply | revert on every host in parallel; a host that fails gets a result with its error.
    With audit, each result also carries the arch gates that still exclude the host's SM afterwards."""
    from fleet import parallel
    from fleet.connect import open_connection

    def one(host: Host) -> HostResult:
        conn = open_connection(host, opts)
        try:
            if action == "check":
                result = check_host(conn, host, sets, allow_prebuilt)
            else:
                from fleet import hostlock
                from fleet.deploy import record_patch_release

                # One lock over the change and its release record, so no deploy slips in between.
                with hostlock.held(conn, host, f"patch {'--revert ' if action == 'revert' else ''}"
                                               + " ".join(s.name for s in sets)):
                    result = (apply_host(conn, host, sets, allow_prebuilt, lock=False) if action == "apply"
                              else revert_host(conn, host, sets, lock=False))
                    if result.ok and result.written:
                        result.release = record_patch_release(conn, host, action, [s.name for s in sets])
            if audit:
                from fleet import archgate

                try:
                    result.audit = archgate.audit_host(conn, host, sets=sets)
                except FleetError as exc:
                    result.audit_error = str(exc)
            return result
        finally:
            conn.close()

    out = []
    for o in parallel.run_all(hosts, one):
        out.append(o.value if o.ok and o.value is not None else HostResult(o.host.name, action, False, error=o.error))
    return out


# --- output -----------------------------------------------------------------------------------------

_STYLE = {APPLICABLE: "yellow", APPLIED: "green", CANNOT: "bold red", NOT_APPLICABLE: "dim",
          REVERTIBLE: "yellow", REVERTED: "green", NOTHING: "dim"}


def render(results: list[HostResult], console) -> None:
    from rich.table import Table

    for r in results:
        verdict = "[green]ok[/]" if r.ok else "[bold red]FAILED[/]"
        sms = ", ".join(f"SM{s}" for s in sorted(set(r.sms))) or "SM ?"
        t = Table(title=f"{r.host} ({sms}): patch {r.action} {verdict}", title_justify="left")
        for col in ("set", "file", "edit", "state", "occurrences", "note"):
            t.add_column(col, overflow="fold")
        for sp in r.sets:
            if not sp.edits:
                t.add_row(sp.name, "", "", f"[{_STYLE.get(sp.state, '')}]{sp.state}[/]", "", sp.reason or "")
            for e in sp.edits:
                t.add_row(sp.name, f"{e.package}/{e.file}", e.label, f"[{_STYLE.get(e.state, '')}]{e.state}[/]",
                          e.occurrences, e.reason or "")
        if r.revert is not None:
            for f in r.revert.files:
                t.add_row("revert " + (r.revert.run or ""), f.path, "", f"[{_STYLE.get(f.state, '')}]{f.state}[/]",
                          "", f.reason or "")
        console.print(t)
        for w in r.written:
            console.print(f"  {'restored' if r.action == 'revert' else 'wrote'} {w}")
        for c in r.cleared:
            console.print(f"  cleared JIT cache {c}")
        if r.manifest:
            console.print(f"  manifest {r.manifest}")
        if r.action == "apply" and r.ok and not r.written:
            console.print("  nothing to write (already applied, or not applicable)")
        if r.revert is not None and r.revert.state == NOTHING:
            console.print(f"  nothing to revert: {r.revert.reason}")
        if r.error:
            console.print(f"  [bold red]error:[/] {r.error}", soft_wrap=True)
        if r.audit is not None:
            from fleet import archgate

            archgate.render([r.audit], console)
        if r.audit_error:
            console.print(f"  [bold red]audit:[/] {r.audit_error}", soft_wrap=True)


def patch_command(hosts: list[Host], set_names: list[str], check: bool, revert: bool, as_json: bool,
                  opts=None, allow_prebuilt: bool = False, sets_dir: Path | None = None, audit: bool = False) -> int:
    """What `inv patch` does; returns the exit code (0 ok/already applied, 1 cannot apply / host failed)."""
    from fleet import cli, patchsets
    from fleet.errors import InputError

    if check and revert:
        raise InputError("--check and --revert: pick one")
    sets = patchsets.load_sets(set_names, sets_dir or patchsets.DEFAULT_DIR)
    action = "check" if check else "revert" if revert else "apply"
    results = run_hosts(hosts, sets, action, opts, allow_prebuilt, audit)
    if as_json:
        cli.print_json({"action": action, "sets": [s.name for s in sets], "hosts": [r.to_json() for r in results]})
    else:
        render(results, cli.console)
        for r in results:
            if r.release:
                cli.console.print(f"{r.host}: recorded as release {r.release} (`inv rollback` undoes it)")
    return 0 if all(r.ok for r in results) else 1
