# Who may change a venv (or a path): the one rule fleet follows on a host before it runs a venv's code or writes
# there as root. as_owner.py and patch_host.py include it (`#@include owner.py`); both run on the host's own
# python3 -I -S. Every object that leads to the path is looked at with lstat: each folder from / down, each link
# on the way (its maker's) and every folder and link of what it names, the missing part's folders (who may make
# it), and for a venv everything in it and its python's real file. Root alone may change all of them: root. One
# user other than root owns any: that user. More than one, or one that its group's other members or anyone may
# write (not a sticky folder): Refused, errno EPERM, the reason its strerror.
import errno, grp, os, pwd, stat
class Refused(PermissionError):
    pass
class Seen:
    """What the objects looked at so far say: their owners other than root, the first one others may write."""
    def __init__(self):
        self.stats, self.owners, self.open, self.members, self.trees = {}, {}, None, {}, set()
    def look(self, p):
        """lstat of `p` (None when missing), counted once."""
        if p not in self.stats:
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
        if stat.S_ISLNK(st.st_mode) or (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
            return  # a link's own bits mean nothing; in a sticky folder only an entry's owner may rename it
        others = st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and not self.alone(st.st_gid, st.st_uid))
        if others and self.open is None:
            self.open = p
    def alone(self, gid, uid):
        """Whether the group has no member but `uid` (its members by name and by their own group)."""
        if gid not in self.members:
            found = {pw.pw_uid for pw in pwd.getpwall() if pw.pw_gid == gid}
            try:
                for name in grp.getgrgid(gid).gr_mem:
                    try:
                        found.add(pwd.getpwnam(name).pw_uid)
                    except KeyError:
                        found.add(-1)  # a member with no passwd entry: someone else
            except KeyError:
                pass
            self.members[gid] = found
        return self.members[gid] <= {uid}
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
def tree(top, seen):
    """Everything below `top` looked at, links not followed in the walk but led through (what they name counts)."""
    for here, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(here, name)
            st = seen.look(p)
            if st is not None and stat.S_ISLNK(st.st_mode):
                lead(p, seen)
def decide(paths=(), trees=(), seen=None):
    """(uid, gid, name, home) of the one user other than root who may change any of `paths` (or anything in
    `trees`), None where root alone may; Refused where others may too. name None for a uid with no passwd entry
    (gid then the one its objects carry, home /). With `seen`, what it saw before counts too (one writer a run)."""
    seen = seen if seen is not None else Seen()
    for p in paths:
        lead(p, seen)
    for t in trees:
        real = lead(t, seen)
        if real is not None and real not in seen.trees and os.path.isdir(real):
            seen.trees.add(real)
            tree(real, seen)
    if seen.open is not None:
        raise Refused(errno.EPERM, "%s is writable by others than its owner" % seen.open, seen.open)
    if len(seen.owners) > 1:
        names = sorted(name_of(uid) for uid in seen.owners)
        raise Refused(errno.EPERM, "it is owned by %s, not one user" % ",".join(names), None)
    for uid, gid in seen.owners.items():
        try:
            pw = pwd.getpwuid(uid)
        except KeyError:
            return uid, gid, None, "/"
        return uid, pw.pw_gid, pw.pw_name, pw.pw_dir or "/"
    return None
def name_of(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
def venv_owner(venv, *more, seen=None):
    """decide() for a venv: everything in it, its python's real file, and `more` (a file fleet writes there)."""
    return decide(paths=(os.path.join(venv, "bin", "python"),) + more, trees=(venv,), seen=seen)
