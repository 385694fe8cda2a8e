"""fleet's patch engine on the host (fleet/patches/engine.py ships this text as `python -c` over one round trip).

usage: python -c TEXT MODE BASE64_JSON_REQUEST, MODE one of read, apply, revert, cleanup; prints one
line `FLEET-JSON:{...}` with the answer. Runs on the host's own python3 -I -S, the venv (the request's "venv") read as data (venv_site.py).
"""
import base64, glob, hashlib, json, os, pwd, shutil, subprocess, sys
MARK = "FLEET-JSON:"
def out(obj):
    sys.stdout.write(MARK + json.dumps(obj) + "\n"); sys.stdout.flush()
def sha(b):
    return hashlib.sha256(b).hexdigest()
#@include venv_site.py
#@include owner.py
# ruff: noqa: F821
# mypy: disable-error-code="name-defined"
# (find, use_venv, dist_named, dists_of: venv_site.py's; Seen, decide, venv_owner, drop: owner.py's; put in place of the include lines when the
# text is shipped)
def dist_of(top):
    try:
        names = dists_of(top)
    except Exception:
        names = []
    for n in names:
        try:
            d = dist_named(n)
        except Exception:
            d = None
        if d is not None:
            return n, d
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
    res = {"packages": {}, "dists": {}, "files": [], "sms": [], "sm_error": None, "prebuilt": [], "runs": []}  # type: dict
    dists = {}
    for p in req["packages"]:
        try:
            spec = find(p)
        except Exception as e:
            spec = None; err = "%s: %s" % (type(e).__name__, e)
        else:
            err = "not importable by %s" % PYTHON
        if spec is None or not spec.submodule_search_locations:
            res["packages"][p] = {"error": err if spec is None else "is a module, not a package"}
            continue
        path = list(spec.submodule_search_locations)[0]
        dname, d = dist_of(p.split(".")[0])
        dists[p] = d
        res["packages"][p] = {"path": path, "dist": dname, "version": d.version if d else None}
    for name in req["dists"]:
        try:
            res["dists"][name] = dist_named(name).version
        except Exception:
            res["dists"][name] = None
    for p, rel in req["files"]:
        info = {"package": p, "file": rel}  # type: dict
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
    jc = find("flashinfer_jit_cache") if req["modules"] else None
    if jc is not None:
        where = list(jc.submodule_search_locations or [str(jc.origin)])[0]
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
SEEN = Seen()  # the venv and every file written in it this run: one writer for all (owner.py)
def venv_holding(path, asked):
    """The venv whose code `path` is: the nearest folder above it (its real path) with a pyvenv.cfg, `asked` (the
    request's venv) where none or where it is that one. A put-back of a `packages:` release's file (recovery asks
    with the inventory's venv) is decided by the release's own venv, not by one that merely ran beside it."""
    here = os.path.dirname(os.path.realpath(path))
    while True:
        if os.path.isfile(os.path.join(here, "pyvenv.cfg")):
            return asked if asked and os.path.realpath(asked) == here else here
        if here == "/":
            return asked
        here = os.path.dirname(here)
def as_owner(path, fn, venv=True):
    """fn() with the rights of the venv's owner (owner.py: the venv, its python and `path`), or without `venv` of
    the user who may change `path` (a user's cache), where this runs as root: a folder that user swaps for a link
    mid-write then leads nowhere that user could not write anyway. Its OSError (Refused too) raised here."""
    if os.geteuid() != 0:
        return fn()
    v = venv and venv_holding(path, REQ.get("venv"))
    who = venv_owner(v, path, seen=SEEN) if v else decide(paths=(path,))
    if who is None:
        return fn()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r); code = 0
        try:
            drop(who)
            fn()
        except BaseException as e:
            err = [getattr(e, "errno", None), getattr(e, "strerror", None) or "%s: %s" % (type(e).__name__, e),
                   getattr(e, "filename", None)]
            os.write(w, json.dumps(err).encode()); code = 1
        os._exit(code)
    os.close(w); got = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        got += chunk
    os.close(r)
    status = os.waitpid(pid, 0)[1]
    if got or status:
        no, msg, name = json.loads(got) if got else (None, "its writer (uid %d) died, status %d" % (who[0], status), path)
        raise OSError(no, msg, name)
def put(path, data, mode, uid, gid):
    """atomic_write of a file in the venv, as the user who may change it (as_owner)."""
    as_owner(path, lambda: atomic_write(path, data, mode, uid, gid))
def probe_writable(path):
    as_owner(path, lambda: check_writable(path))
def check_writable(path):
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
                try:  # a user's cache, as that user: a folder swapped for a link leads nowhere of root's
                    as_owner(d, lambda d=d: shutil.rmtree(d, ignore_errors=True), venv=False); gone.append(d)
                except OSError:
                    pass
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
        for off, fd_, rp in f["steps"]:
            fd_, rp = base64.b64decode(fd_), base64.b64decode(rp)
            if data[off:off + len(fd_)] != fd_:
                return out({"ok": False, "error": "%s: find text moved; nothing written" % p})
            data = data[:off] + rp + data[off + len(fd_):]
        if sha(data) != f["sha_after"]:
            return out({"ok": False, "error": "%s: result differs from the planned one; nothing written" % p})
        try:
            probe_writable(p)
        except OSError as e:
            return out({"ok": False, "error": "%s: not writable (%s); nothing written" % (p, e.strerror or e)})
        new[p] = data
    man = {"run": req["run"], "sets": req["sets"], "status": "applying", "created": req["time"], "by": req["by"],
           "clear_jit_cache": req["modules"], "files": []}  # type: dict
    mpath = os.path.join(root, "runs", req["run"], "manifest.json")
    try:
        for f in files:
            save_object(root, open(f["path"], "rb").read())
            st = os.stat(f["path"])
            man["files"].append(dict({k: f[k] for k in ("path", "package", "file", "dist", "version", "sha_before",
                                                        "sha_after")}, mode=st.st_mode & 0o7777, uid=st.st_uid,
                                     gid=st.st_gid))  # no `|`: a host's python may be 3.8
        write_manifest(mpath, man)
    except OSError as e:
        return out({"ok": False, "error": "cannot back up to %s: %s; nothing written" % (root, e.strerror or e)})
    done = []
    try:
        for rec in man["files"]:
            put(rec["path"], new[rec["path"]], rec["mode"], rec["uid"], rec["gid"]); done.append(rec)
            if req.get("die_after") == len(done):
                os._exit(137)  # test hook (fleet.faulthook): the writer dies between files
    except OSError as e:
        undo_err = []
        for rec in done:
            try:
                orig = open(os.path.join(root, "objects", rec["sha_before"]), "rb").read()
                put(rec["path"], orig, rec["mode"], rec["uid"], rec["gid"])
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
            cur = open(p, "rb").read()
        except OSError as e:
            return out({"ok": False, "error": "%s: cannot read: %s; nothing restored" % (p, e.strerror or e)})
        now = sha(cur)
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
        todo.append((p, cur, orig, st.st_mode & 0o7777, st.st_uid, st.st_gid))
    was = man.get("status")
    try:  # a writer killed from here on leaves "reverting": the next run's recovery finishes the revert
        man["status"] = "reverting"; write_manifest(mpath, man)
    except OSError as e:
        return out({"ok": False, "error": "cannot record the revert in %s: %s; nothing restored" % (mpath, e.strerror or e)})
    done, failing = [], None  # type: (list, str | None)
    try:
        for p, cur, orig, mode, uid, gid in todo:
            failing = p
            if req.get("fail_at") == len(done) + 1:  # test hook: this write fails as on a full disk
                raise OSError(28, "No space left on device", p)
            put(p, orig, mode, uid, gid); done.append((p, cur, mode, uid, gid))
    except OSError as e:
        undo_err = []
        for p, cur, mode, uid, gid in reversed(done):  # all or nothing: what was restored is patched again
            try:
                put(p, cur, mode, uid, gid)
            except OSError as e2:
                undo_err.append("%s: %s" % (p, e2.strerror or e2))
        msg = "restoring %s failed (%s); " % (failing, e.strerror or e)
        if undo_err:
            msg += "COULD NOT PATCH AGAIN: %s; the next deploy finishes the revert" % "; ".join(undo_err)
        else:
            msg += "patched again the %d file(s) already restored: still %s" % (len(done), was)
            man["status"] = was
        man["revert_error"] = msg
        try:
            write_manifest(mpath, man)
        except OSError:
            pass  # the files say what happened; "reverting" left behind makes the next run finish the revert
        return out({"ok": False, "error": msg})
    bad = [f["path"] for f in req["files"] if sha(open(f["path"], "rb").read()) != f["sha_before"]]
    if bad:
        return out({"ok": False, "error": "verification failed after restoring: %s" % ", ".join(bad)})
    man["status"] = "reverted"; man["reverted_at"] = req["time"]; man["reverted_by"] = req["by"]
    man["cleared_on_revert"] = clear_cache(req["bases"], man.get("clear_jit_cache", []))
    write_manifest(mpath, man)
    out({"ok": True, "restored": [d[0] for d in done], "cleared": man["cleared_on_revert"], "manifest": mpath})
def do_cleanup(req):
    gone = []
    for p in req["paths"]:
        d, base = os.path.split(p)
        for t in glob.glob(os.path.join(glob.escape(d), ".%s.fleet-*.tmp" % glob.escape(base))):
            as_owner(t, lambda t=t: os.unlink(t)); gone.append(t)
    out({"ok": True, "removed": gone})
mode = sys.argv[1]
REQ = req = json.loads(base64.b64decode(sys.argv[2]))
PYTHON = use_venv(req)
{"read": do_read, "apply": do_apply, "revert": do_revert, "cleanup": do_cleanup}[mode](req)
