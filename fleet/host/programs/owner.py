# Who may change a venv (or a path): the one rule fleet follows on a host before it runs a venv's code or writes
# there as root. as_owner.py and patch_host.py include it (`#@include owner.py`); both run on the host's own
# python3 -I -S. Every object that leads to the path is looked at with lstat: each folder from / down, each link
# on the way (its maker's) and every folder and link of what it names, the missing part's folders (who may make
# it), and for a venv everything in it and in every folder a link in it, a .pth path line or an editable
# install's finder names, its python's real file, its standard library (pyvenv.cfg read as CPython reads it) and,
# where it includes them, the base's site folders and the user site (venv_reach). A POSIX ACL's named
# users may change what it lets them write, as its owner may. Root alone may change all of them: root. One user
# other than root owns any: that user.
# More than one, or one that its group's other members or anyone may write (a group NSS cannot list in full, as
# LDAP's, is others' but the user's own; a sticky folder only above the venv and what it imports from: there anyone
# may add a file), an editable finder whose tables are no literal, a .pth import line other than setuptools' own, a
# bin/python that is no ELF program, or more than LOOKS objects to look at: Refused,
# errno EPERM, the reason its strerror.
import errno, grp, os, pwd, re, stat, struct
class Refused(PermissionError):
    pass
LOOKS = 200000  # a venv with torch and CUDA wheels has 20-40k; each look costs 3-30 us
class Seen:
    """What the objects looked at so far say: their owners other than root, the first one others may write."""
    def __init__(self):
        self.stats, self.owners, self.open, self.members, self.trees = {}, {}, None, {}, set()
        self.whole = None  # whether NSS lists every user and group member (nss_lists_all), read once
        self.made = None  # a missing path in a sticky folder others may write: anyone may make it
        self.sticky = []  # sticky folders others may write: anyone may add files there (only above a venv excused)
    def look(self, p):
        """lstat of `p` (None when missing), counted once; past LOOKS objects Refused (a link to / is no venv)."""
        if p not in self.stats:
            if len(self.stats) >= LOOKS:
                raise Refused(errno.EPERM, "it leads to more than %d files to look at" % LOOKS, p)
            try:
                st = os.lstat(p)
            except OSError:
                st = None
            self.stats[p] = st
            if st is not None:
                self.count(p, st)
        return self.stats[p]
    def count(self, p, st):
        if st.st_uid != 0:
            self.owners.setdefault(st.st_uid, st.st_gid)
        if stat.S_ISLNK(st.st_mode):
            return  # a link's own bits mean nothing
        if not self.others_may_write(p, st):
            return
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX:
            self.sticky.append(p)  # only an entry's owner may rename it, but anyone may add one: decide() judges
        elif self.open is None:
            self.open = p
    def writable(self):
        """The first object others than its owner may write, a sticky folder within the venv or a folder it imports
        from included (anyone may add a .pth or a module there); None when there is none."""
        if self.open is not None:
            return self.open
        return next((p for p in self.sticky if within(p, self.trees)), None)
    def missing(self, p, folder):
        """`p` is missing from `folder`: whoever may write there may make it (a sticky one's too)."""
        st = self.stats.get(folder)
        if self.made is None and st is not None and stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and \
                self.others_may_write(folder, st):
            self.made = p
    def others_may_write(self, p, st):
        """Whether others than `p`'s owner may write it (its group's other members, anyone, an ACL's); an ACL's
        named users counted as owners."""
        users: set = set()
        groups: set = set()
        if st.st_mode & stat.S_IWGRP:  # with an ACL the group bits are its mask: its entries say who
            if not acl_writers(p, "system.posix_acl_access", st.st_gid, users, groups):
                groups.add(st.st_gid)
        if stat.S_ISDIR(st.st_mode):  # a default ACL: what is made here (a patched file) others may write
            acl_writers(p, "system.posix_acl_default", st.st_gid, users, groups)
        for uid in users - {0}:
            self.owners.setdefault(uid, st.st_gid)
        return bool(st.st_mode & stat.S_IWOTH) or any(not self.alone(gid, st.st_uid) for gid in groups)
    def alone(self, gid, uid):
        """Whether the group has no member but `uid`: none listed (by name on any group line of that gid, as
        initgroups reads them all, or by their own group) and the lists whole (NSS: files alone), or none listed and
        it is that user's own group (a member there is the admin's doing). LDAP, SSSD or NIS users getpwall cannot
        list: another group is not taken for empty."""
        if gid not in self.members:
            found = {pw.pw_uid for pw in pwd.getpwall() if pw.pw_gid == gid}
            for name in (m for g in grp.getgrall() if g.gr_gid == gid for m in g.gr_mem):  # every line of that gid
                try:
                    found.add(pwd.getpwnam(name).pw_uid)
                except KeyError:
                    found.add(-1)  # a member with no passwd entry: someone else
            self.members[gid] = found
        if not self.members[gid] <= {uid}:
            return False
        if self.whole is None:
            self.whole = nss_lists_all()
        return self.whole or gid == primary_gid(uid)
def nss_lists_all(conf="/etc/nsswitch.conf"):
    """Whether getpwall and getgrgid list every user and every group's members: the passwd and group databases
    read from files (and systemd's, which lists its own) alone; a missing or unreadable conf: not known."""
    try:
        with open(conf, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    sources = {}
    for line in text.splitlines():
        db, _, rest = re.sub(r"#.*|\[[^]]*\]", " ", line).partition(":")
        sources[db.strip()] = rest.split()
    return all(sources.get(db) and set(sources[db]) <= {"files", "systemd"} for db in ("passwd", "group"))
def primary_gid(uid):
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return None
def acl_writers(p, name, gid, users, groups):
    """Whether `p` has the POSIX ACL `name` (its xattr); the uids and gids it lets write (past its mask) added."""
    try:
        raw = os.getxattr(p, name, follow_symlinks=False)
    except OSError:
        return False
    entries = [struct.unpack_from("<HHI", raw, at) for at in range(4, len(raw) - 7, 8)]
    if not any(perm & 2 for tag, perm, _ in entries if tag == 0x10) and any(tag == 0x10 for tag, _, _ in entries):
        return True  # a mask without write: no named entry nor the group may write
    for tag, perm, who in entries:
        if perm & 2 and tag == 2:
            users.add(who)
        elif perm & 2 and tag in (4, 8):
            groups.add(gid if tag == 4 else who)
    return True
def lead(path, seen, hops=None):
    """The real path `path` leads to, every object on the way looked at; None where a part is missing (its
    folders counted: whoever may write there may make it) or the links loop."""
    hops = hops if hops is not None else [0]
    full = path if path.startswith("/") else os.path.join(os.getcwd(), path)  # no normpath: a/link/.. is not a
    cur, parts = "/", [x for x in full.split("/") if x and x != "."]
    seen.look("/")
    for i, name in enumerate(parts):
        if name == "..":
            cur = os.path.dirname(cur); continue
        nxt = os.path.join(cur, name)
        st = seen.look(nxt)
        if st is None:
            seen.missing(nxt, cur)
            return None
        if stat.S_ISLNK(st.st_mode):
            hops[0] += 1
            try:
                target = os.readlink(nxt)
            except OSError:
                return None
            if hops[0] > 40:
                return None
            cur = lead(os.path.join(cur, target), seen, hops)
            if cur is None:
                return None
        else:
            cur = nxt
    return cur
def tree(top, seen, site=True):
    """Everything below `top` looked at; what its links and (`site`: python reads them there) its .pth files' path
    lines name, for the caller to lead through and walk (a folder they name is on sys.path or in a package as much
    as the venv's own)."""
    more = []
    for here, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(here, name)
            st = seen.look(p)
            if st is not None and stat.S_ISLNK(st.st_mode):
                more.append(p)
            elif not site:
                continue
            elif st is not None and stat.S_ISREG(st.st_mode) and name.endswith(".pth"):
                more += pth_paths(here, p)
            elif st is not None and stat.S_ISREG(st.st_mode) and name.startswith("__editable__") and \
                    name.endswith("_finder.py"):
                more += finder_paths(p)
    return more
def lines_of(p, follow=False):
    try:
        fd = os.open(p, os.O_RDONLY | (0 if follow else os.O_NOFOLLOW) | os.O_NONBLOCK)  # swapped for a fifo: no hang
        with os.fdopen(fd, "rb") as f:
            text = f.read(1 << 22).decode("utf-8", "surrogateescape")
        return re.split(r"\r\n|\r|\n", text)  # site's lines: str.splitlines() also splits at \x0c, \x85 ...
    except (OSError, ValueError):
        return []
def pth_paths(folder, p):
    """The folders a .pth file's path lines name (site.addpackage's reading: not `#`, not `import`); Refused where an
    import line (site exec()s it) is none whose whole effect the rule knows."""
    lines = [x for x in lines_of(p) if x.strip() and not x.startswith("#")]
    for x in lines:
        if x.startswith(("import ", "import\t")) and not understood(x.strip(), folder):
            raise Refused(errno.EPERM, "%s runs code whose effect fleet cannot read (an import line)" % p, p)
    return [os.path.join(folder, x.rstrip()) for x in lines if not x.startswith(("import ", "import\t"))]
SHIM = "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, '%s') == 'local'; " \
    "enabled and __import__('_distutils_hack').add_shim();"
NSPKG = ("import sys, types, os;has_mfs = sys.version_info > (3, 5);p = os.path.join(sys._getframe(1).f_locals["
         "'sitedir'], *%r);importlib = has_mfs and __import__('importlib.util');has_mfs and __import__("
         "'importlib.machinery');m = has_mfs and sys.modules.setdefault(%r, importlib.util.module_from_spec("
         "importlib.machinery.PathFinder.find_spec(%r, [os.path.dirname(p)])));m = m or sys.modules.setdefault(%r, "
         "types.ModuleType(%r));mp = (m or []) and m.__dict__.setdefault('__path__',[]);(p not in mp) and mp.append(p)")
def understood(line, folder):
    """Whether a .pth import line is one of setuptools' whose whole effect is known: the distutils shim (its module
    on the walked path), an editable install's finder (its tables read: finder_paths), a namespace package's
    -nspkg.pth (a folder of the site folder, walked); or virtualenv's (and older uv's) `import _virtualenv`, its
    module in the same walked folder."""
    if line in (SHIM % "local", SHIM % "stdlib") or re.fullmatch(r"import (__editable___\w+_finder); \1\.install\(\)", line):
        return True
    if line == "import _virtualenv":
        return os.path.isfile(os.path.join(folder, "_virtualenv.py"))
    m = re.search(r"sys\.modules\.setdefault\('([\w.]+)'", line)
    if m is None:
        return False
    pkg = m.group(1)
    parent, _, child = pkg.rpartition(".")
    ours = NSPKG % ((tuple(pkg.split(".")),) + (pkg,) * 4)
    return line.rstrip(";") in (ours, ours + ";m and setattr(sys.modules[%r], %r, m)" % (parent, child))
def finder_paths(p):
    """The folders a setuptools editable finder (its .pth only imports it) maps packages to: MAPPING, NAMESPACES."""
    import ast
    found = []
    for x in lines_of(p):
        if x.startswith(("MAPPING", "NAMESPACES")) and "=" in x:
            try:
                table = ast.literal_eval(x.split("=", 1)[1].strip())
            except (TypeError, ValueError, SyntaxError, MemoryError, RecursionError):
                raise Refused(errno.EPERM, "%s names its packages' folders in no literal fleet can read" % p, p)
            for v in (table.values() if isinstance(table, dict) else ()):
                found += [y for y in (v if isinstance(v, list) else [v]) if isinstance(y, str) and y.startswith("/")]
    return found
def within(path, tops):
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)
def decide(paths=(), trees=(), seen=None, plain=()):
    """(uid, gid, name, home) of the one user other than root who may change any of `paths` (or anything in
    `trees` and `plain`), None where root alone may; Refused where others may too. name None for a uid with no
    passwd entry (gid then the one its objects carry where no group has it, else 65534; home /). With `seen`, what
    it saw before counts too (one writer a run). `plain` trees are no site folders: their .pth files are no code
    (python reads them in site folders only; a library folder may hold python's dist-packages below it)."""
    seen = seen if seen is not None else Seen()
    for p in paths:
        lead(p, seen)
    todo = [(t, False) for t in plain] + [(t, True) for t in trees]  # site trees first: their .pth files read
    walked = {True: seen.trees, False: set()}
    while todo:
        top, site = todo.pop()
        real = lead(top, seen)
        if real is not None and not within(real, walked[site] | seen.trees) and os.path.isdir(real):
            walked[site].add(real)
            todo += [(more, site) for more in tree(real, seen, site)]
    opened = seen.writable()
    if opened is not None:
        raise Refused(errno.EPERM, "%s is writable by others than its owner" % opened, opened)
    if seen.made is not None:
        raise Refused(errno.EPERM, "%s is missing where others than its owner may make it" % seen.made, seen.made)
    if len(seen.owners) > 1:
        names = sorted(name_of(uid) for uid in seen.owners)
        raise Refused(errno.EPERM, "it is owned by %s, not one user" % ",".join(names), None)
    for uid, gid in seen.owners.items():
        try:
            pw = pwd.getpwuid(uid)
        except KeyError:  # in no group: its objects' gid only where that is no group's (built elsewhere)
            try:
                grp.getgrgid(gid)
                gid = 65534  # the overflow group: never a group of others' (root's) it happens to carry
            except KeyError:
                pass
            return uid, gid, None, "/"
        return uid, pw.pw_gid, pw.pw_name, pw.pw_dir or "/"
    return None
def name_of(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
def drop(who):
    """The rights of `who` (decide()'s) for good, as runuser and su give a user's: its uid, its gid, and its groups
    (initgroups: every group that lists it, through NSS); a uid with no passwd entry: none but its gid."""
    uid, gid, name, _ = who
    if name is not None:
        os.initgroups(name, gid)
    else:
        os.setgroups([])
    os.setgid(gid); os.setuid(uid)
def venv_cfg(venv):
    """pyvenv.cfg's (key, value) pairs as the interpreter reads them (getpath, site.venv): bin/pyvenv.cfg, beside the
    executable, else the venv's; keys stripped and lowered. None where neither is there (no venv: a plain python)."""
    for p in (os.path.join(venv, "bin", "pyvenv.cfg"), os.path.join(venv, "pyvenv.cfg")):
        if os.path.isfile(p):
            return [(k.strip().lower(), v.strip()) for k, eq, v in (x.partition("=") for x in lines_of(p, True)) if eq]
    return None
def base_of(venv, cfg):
    """(homes, folders looked in, stdlib folders, python3.X names): where the venv's python takes its standard library
    from, as getpath searches: up from pyvenv.cfg's first `home` (a copied python finds it only so), else from
    bin/python's real folder, to the first with lib/python3.X/os.py (prefix) and the first with its lib-dynload
    (exec_prefix), for the venv's lib/python3.X names. Every folder looked in counts: whoever may make a
    lib/python3.X/os.py there decides what runs."""
    homes = [v for k, v in cfg or () if k == "home"][:1]
    start = homes[0] if homes else os.path.dirname(os.path.realpath(os.path.join(venv, "bin", "python")))
    try:
        names = [n for n in os.listdir(os.path.join(venv, "lib")) if n.startswith("python3")]
    except OSError:
        names = []
    real = os.path.basename(os.path.realpath(os.path.join(venv, "bin", "python")))
    names = names or ([real] if re.fullmatch(r"python3\.\d+", real) else [])  # no lib/python3.X: its real file's
    looked, libs = [], []
    for landmark, test in (("os.py", os.path.isfile), ("lib-dynload", os.path.isdir)):
        cur = start if start.startswith("/") else "/" + start
        while True:
            looked += [os.path.join(cur, "lib", n, landmark) for n in names]
            if cur == "/" or any(test(os.path.join(cur, "lib", n, landmark)) for n in names):
                break
            cur = os.path.dirname(cur.rstrip("/")) or "/"
        libs += [os.path.join(cur, "lib", n) for n in names]
    return homes, looked, libs, names
def venv_reach(venv):
    """(paths, trees, whether the user site counts) a venv's python may run code from: its python, pyvenv.cfg's
    home, the standard library getpath finds (base_of), and where include-system-site-packages is not "false"
    (site.venv's reading; no pyvenv.cfg: a plain python) the base's site-packages and dist-packages folders and the
    user site (PYTHONUSERBASE or ~/.local). A venv with no bin/python reaches nothing beyond itself; one whose
    bin/python is no ELF program (a script) is Refused."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.lexists(python):
        return [python], [], False
    if not is_elf(python):
        raise Refused(errno.EPERM, "%s is no ELF program (what a script's #! line runs is not looked at)" % python,
                      python)
    cfg = venv_cfg(venv)
    homes, looked, libs, names = base_of(venv, cfg)
    paths = [python, *homes, *looked]
    paths += [os.path.join(os.path.dirname(lib), "python3%s.zip" % lib.rpartition(".")[2]) for lib in libs[:1]]
    trees = list(libs)
    system = ([v.lower() for k, v in cfg or () if k == "include-system-site-packages"] or ["true"])[-1] == "true"
    if system:
        for prefix in {os.path.dirname(os.path.dirname(lib)) for lib in libs}:
            for lib in ("lib", "lib64"):
                for n in names:
                    trees += [os.path.join(prefix, lib, n, "site-packages"), os.path.join(prefix, lib, n, "dist-packages"),
                              os.path.join(prefix, "local", lib, n, "dist-packages")]
                trees.append(os.path.join(prefix, lib, "python3", "dist-packages"))
        trees += user_sites(os.environ.get("HOME") or "/", names)
    return paths, trees, system
def is_elf(p):
    """Whether the file `p` leads to starts as an ELF program does (a missing one: nothing runs, nothing to refuse)."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return not os.path.exists(p)
    try:
        return os.read(fd, 4) == b"\x7fELF"
    except OSError:  # a folder (EISDIR), a file it cannot read: no program the rule can tell is one
        return False
    finally:
        os.close(fd)
def user_sites(home, names):
    base = os.environ.get("PYTHONUSERBASE") or os.path.join(home, ".local")
    return [os.path.join(base, "lib", n, "site-packages") for n in names]
def venv_owner(venv, *more, seen=None, also=()):
    """decide() for a venv: everything in it, what venv_reach names, `more` (a file fleet writes there) and the
    trees `also` names (what else its python is told to load: a unit's PYTHONPATH, LD_PRELOAD); where the user
    site counts, the one of the owner it runs as (their HOME) too."""
    seen = seen if seen is not None else Seen()
    paths, trees, user_site = venv_reach(venv)
    who = decide(paths=tuple(paths) + more, trees=(venv, *trees), seen=seen, plain=also)
    if who is not None and user_site:
        who = decide(trees=user_sites(who[3], base_of(venv, venv_cfg(venv))[3]), seen=seen)
    return who
