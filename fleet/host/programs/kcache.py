"""fleet's compile and tune caches on a host (issue 49; fleet.host.kcache drives it). Standard library only.

    kcache.py collect LIMIT FOLDER...   stdout: a tar of the folders that exist (regular files and folders only,
                                        names without the leading /); exit 3 and one line on stderr when they
                                        hold more than LIMIT bytes (nothing written)
    kcache.py place SHA256 FOLDER...    stdin: such a tar. Refused (exit 4, nothing changed: the tar is bad)
                                        unless its sha256 is SHA256 and every member is a plain file or folder
                                        inside one of the FOLDERs (no sparse file, no link, no file named as a
                                        folder, no path named twice, no more bytes than the tar holds); then
                                        every folder is built beside itself, and only then each is renamed
                                        into place (what stood there moved aside first, then removed). A build that fails leaves every
                                        folder as it stood, nothing built beside it (exit 5: not placed here).
                                        stdout: the folders placed, one a line
    kcache.py clear FOLDER...           each folder renamed aside, then removed (a start that failed with a
                                        placed cache starts again without it)
    kcache.py modules FOLDER...         stdout: `SHA256 PATH` of every .so in the folders (were placed modules
                                        used as placed, or rebuilt?)
    kcache.py unproven                  the folders the mark names (placed, no start served with them)
                                        removed, then the mark; stdout: those removed (a start with no cache
                                        placed for it never starts on what a dead or refused run left)

--mark=PATH (first, before the verb's arguments): place first removes the folders PATH names (an earlier place's,
never proven: as unproven does), then appends the folders it fills to PATH (whole lines, fsynced) before it swaps
any; clear and modules (a start that served with them) empty PATH: what a put-back of a release finds there was
placed and never proven, and is removed before that release starts (fleet.host.kcache).

--user=NAME (the unit's User=): run as root, the program opens the mark and takes its lock as root, then drops to
that user (its uid, gid and groups; exit 2 when there is no such user) before it touches any cache folder: the
folders are that user's, and nothing a process of that user does in them (a link, a folder swapped between a
check and its use, a planted file) leads this program to write, remove or read what that user could not. What
it makes is that user's because that user makes it. Without --user (or --user=root) it stays root. It always
runs on the host's own python3 -I -S (fleet.host.kcache.command), never on a venv's python. Either way, first
(as root) collect, place and clear refuse (exit 5) a folder whose path passes through a link root does not
own (a clear refusal: a link made after that check meets the user, never root), and unproven removes only folders
whose path holds no link (the mark names real paths).

collect, place and clear refuse (exit 5) a folder one level deep, a home, the venv, a shared cache root (~/.cache),
or one that holds one of them, model weights (huggingface, hub, *.safetensors) or another of the folders (a cache
variable set to $HOME or ~/.cache must never swap ~/.ssh or the models out). --venv=PATH (first, with --mark and
--user) names the venv the server runs.

place, clear and unproven run one at a time on a host: each holds PATH.lock (flock) to its end, and waits for it
at most LOCK_WAIT_S (then exit 5, nothing changed): a place whose answer came too late to the controller (its
deadline) finishes or undoes before the clear that follows it runs, never after.

place and clear first remove what an earlier run whose process is gone (a lost link, a controller killed) left
beside the folders: its spool, its half-built and set-aside folders; and they ignore SIGHUP, so a link lost
while they run lets them finish (or undo) rather than stop half-way.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pwd
import shutil
import signal
import sys
import tarfile
import time

#@include owner.py
# (drop: owner.py's, the one privilege drop fleet makes on a host, put in place of the include line when shipped)

ASIDE = ".fleet-kcache-"
LOCK_WAIT_S = 240.0  # under the controller's 300 s deadline (fleet.host.kcache.TIMEOUT_S)


def _fail(code: int, message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.exit(code)


def _files(folder: str):
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d)) and ASIDE not in d]
        yield root, True
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                yield path, False


def collect(limit: int, folders: list[str]) -> None:
    found = [(p, d) for f in folders if os.path.isdir(f) and not os.path.islink(f) for p, d in _files(f)]
    size = sum(os.path.getsize(p) for p, d in found if not d)
    if size > limit:
        _fail(3, f"the caches hold {size} bytes, more than the {limit} allowed")
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # streamed
        for path, _ in found:
            # a second link to a file goes as a plain file too (place takes plain files only)
            tar.inodes.clear()  # type: ignore[attr-defined]
            tar.add(path, arcname=path.lstrip("/"), recursive=False)


def _inside(name: str, folders: list[str]) -> str | None:
    path = "/" + name
    if name.startswith("/") or ".." in name.split("/"):
        return None
    return next((f for f in folders if path == f or path.startswith(f.rstrip("/") + "/")), None)


def _spool_path(folders: list[str]) -> str:
    parent = os.path.dirname(folders[0].rstrip("/")) or "/"
    return os.path.join(parent, f"{ASIDE}in-{os.getpid()}")


def _spool(path: str) -> None:
    """stdin into a temporary file beside the first folder (never all in memory); its sha256 checked after. The
    folder is the server's user's: whatever stands under the spool's name is removed, never written through (a
    link planted there), and the file made new (exit 5 when something took the name again meanwhile)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        _fail(5, f"not placed: {path} was made again by another process meanwhile")
    with open(fd, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)


def place(want: str, folders: list[str]) -> None:
    if MARK[0]:  # what an earlier place left unproven goes first: the start never runs on a folder this one skips
        unproven()
    spooled = _spool_path(folders)
    try:
        try:
            _spool(spooled)
        except OSError as exc:  # nothing built yet (a parent this user may not make: nor may its server)
            _fail(5, f"not placed: {exc}")
        _place_from(spooled, want, folders)
    finally:
        if os.path.lexists(spooled):
            os.unlink(spooled)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


def stale(folders: list[str]) -> None:
    """What a run whose process is gone left beside the folders removed: its spool, its half-built (new) and
    set-aside (old) folders. A folder a dead run had set aside and not replaced stays missing: a cold start."""
    for folder in folders:
        parent, base = os.path.split(folder.rstrip("/"))
        try:
            names = os.listdir(parent or "/")
        except OSError:
            continue
        for name in names:
            for prefix in (f"{base}{ASIDE}new-", f"{base}{ASIDE}old-", f"{ASIDE}in-"):
                pid = name[len(prefix):] if name.startswith(prefix) else ""
                if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                    _remove(os.path.join(parent or "/", name))


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _place_from(spooled: str, want: str, folders: list[str]) -> None:
    if _sha256(spooled) != want:
        _fail(4, "refused: the cache's sha256 is not the one the store recorded (truncated or altered)")
    try:
        tar = tarfile.open(spooled, mode="r:")
        members = tar.getmembers()
    except (tarfile.TarError, EOFError) as exc:
        _fail(4, f"refused: not a whole tar ({exc})")
    why = _not_plain(members, folders, os.path.getsize(spooled))
    if why:
        _fail(4, f"refused: {why}")
    built: list[tuple[str, str]] = []  # (new, folder): every folder built beside itself before any is swapped
    given: list[str] = []  # the folders as named (a link to a folder: the folder it names is built and swapped)
    try:
        try:
            for folder in folders:
                mine = [m for m in members if _inside(m.name, [folder]) == folder]
                if mine:
                    at = _real(folder)
                    new = f"{at}{ASIDE}new-{os.getpid()}"
                    built.append((new, at))
                    given.append(folder)
                    _build(tar, mine, new, folder)
        except OSError as exc:  # nothing swapped yet: every folder as it stood
            for new, _ in built:
                _remove(new)
            _fail(5, f"not placed: {exc}")
        if MARK[0] and built:
            _mark([f for _, f in built])
        _swap_all(built)
    except BaseException:
        for new, _ in built:
            _remove(new)
        raise
    sys.stdout.write("".join(f + "\n" for f in given))


def _real(folder: str) -> str:
    """Where a cache folder is: the folder a link names (a cache moved to another disk stays a link)."""
    return os.path.realpath(folder) if os.path.islink(folder) else folder.rstrip("/")


MARK = [""]  # --mark=PATH
MARK_FD = [-1]  # the mark, opened as root before the privileges were dropped
USER = [""]  # --user=NAME
VENV = [""]  # --venv=PATH: the server's venv, never swapped nor removed
PLAIN = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE)


def _not_plain(members: list[tarfile.TarInfo], folders: list[str], stored: int) -> str | None:
    """Why the members are no cache to place: one that is no plain file or folder inside the folders (a sparse
    file, a link, a device), a file named as a cache folder or holding another member, or files that would
    write more bytes than the tar stores, a path named twice; None when they are one."""
    files = {os.path.normpath("/" + m.name) for m in members if m.type != tarfile.DIRTYPE}
    seen = set()
    for m in members:
        if m.type not in PLAIN or m.sparse is not None or _inside(m.name, folders) is None:
            return f"{m.name!r} is no plain file inside the cache folders"
        path = os.path.normpath("/" + m.name)
        if m.type != tarfile.DIRTYPE and path in {os.path.normpath(f) for f in folders}:
            return f"{m.name!r} is a file named as a cache folder"
        if path in seen:  # collect names each path once: a folder and a file of one name can't both be written
            return f"{m.name!r} is named twice"
        seen.add(path)
        parent = os.path.dirname(path)
        while parent not in ("/", ""):
            if parent in files:
                return f"{m.name!r} is inside {parent!r}, a file"
            parent = os.path.dirname(parent)
    if sum(m.size for m in members if m.type != tarfile.DIRTYPE) > stored:
        return "its files would write more bytes than the tar holds"
    return None


def _open_mark(create: bool) -> None:
    """The mark opened (made, for place) while this process is still root: the server's user it then runs as can
    write it through MARK_FD, never by its path. No folder for it (or no mark, but for place): no fd."""
    flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
    try:
        MARK_FD[0] = os.open(MARK[0], flags, 0o600)
    except FileNotFoundError:
        MARK_FD[0] = -1


def _marked() -> list[str]:
    """The folders the mark names: its whole lines (one cut short by a crash names nothing)."""
    if MARK_FD[0] < 0:
        return []
    with open(os.dup(MARK_FD[0]), "rb") as f:
        f.seek(0)
        text = f.read().decode("utf-8", "replace")
    return list(dict.fromkeys(line for line in text.split("\n")[:-1] if line.strip()))


def _mark(folders: list[str]) -> None:
    """The folders about to be filled, added to the mark (appended whole lines, fsynced)."""
    if MARK_FD[0] < 0:
        _fail(5, f"not placed: no folder for the mark {MARK[0]}")
    had = _marked()
    os.write(MARK_FD[0], "".join(f + "\n" for f in dict.fromkeys(folders) if f not in had).encode())
    os.fsync(MARK_FD[0])


def _unmark() -> None:
    """The mark emptied (an empty mark names nothing; the server's user this may run as can't remove it)."""
    if MARK_FD[0] >= 0:
        os.ftruncate(MARK_FD[0], 0)
        os.fsync(MARK_FD[0])


def _build(tar: tarfile.TarFile, mine: list[tarfile.TarInfo], new: str, folder: str) -> None:
    os.makedirs(os.path.dirname(folder.rstrip("/")) or "/", exist_ok=True)
    _remove(new)
    os.makedirs(new)
    _fill(tar, mine, new, folder)


def _fill(tar: tarfile.TarFile, mine: list[tarfile.TarInfo], new: str, folder: str) -> None:
    for m in mine:
        rel = os.path.relpath("/" + m.name, folder)
        dest = os.path.normpath(os.path.join(new, rel))
        if m.isdir():
            os.makedirs(dest, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        src = tar.extractfile(m)
        assert src is not None
        with open(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb") as out:
            shutil.copyfileobj(src, out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(dest, m.mode & 0o755)
        os.utime(dest, (m.mtime, m.mtime))  # as built: ninja compares mtimes with its deps log


def _swap_all(built: list[tuple[str, str]]) -> None:
    """Each built folder renamed into place, what stood there set aside; a rename that fails puts every folder
    swapped so far back as it stood. Then what was set aside is removed."""
    swapped: list[tuple[str, str | None]] = []  # (folder, where what stood there was set aside)
    try:
        for new, folder in built:
            old = f"{folder.rstrip('/')}{ASIDE}old-{os.getpid()}" if os.path.lexists(folder) else None
            if old is not None:
                os.rename(folder, old)
            try:
                os.rename(new, folder)
            except BaseException:
                if old is not None:
                    os.rename(old, folder)
                raise
            swapped.append((folder, old))
    except BaseException:
        for folder, old in reversed(swapped):
            os.rename(folder, f"{folder.rstrip('/')}{ASIDE}new-{os.getpid()}")  # removed by the caller
            if old is not None:
                os.rename(old, folder)
        raise
    for _, old in swapped:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def clear(folders: list[str]) -> None:
    for folder in map(_real, folders):
        if os.path.isdir(folder) and not os.path.islink(folder):
            old = f"{folder.rstrip('/')}{ASIDE}old-{os.getpid()}"
            os.rename(folder, old)
            shutil.rmtree(old, ignore_errors=True)
    _unmark()


def unproven() -> list[str]:
    """The folders the mark names removed, then the mark; those removed."""
    named = _marked()
    gone = [f for f in named if _sound(f) and os.path.realpath(f) == f and not _broad(f, named) and os.path.isdir(f)]
    clear(gone)
    return gone


def _sound(folder: str) -> bool:
    return folder.startswith("/") and ".." not in folder.split("/") and folder.rstrip("/") != ""


def _lock() -> None:
    """The lock beside the mark, held until this process ends; exit 5 when another run holds it too long."""
    try:
        fd = os.open(MARK[0] + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except FileNotFoundError:  # no folder for the mark: no run has one, nor marked anything
        return
    end = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > end:
                _fail(5, f"not changed: another kcache run on this host held {MARK[0]}.lock for {LOCK_WAIT_S:g}s")
            time.sleep(0.1)


def modules(folders: list[str]) -> None:
    for folder in folders:
        if os.path.isdir(folder):
            for path, is_dir in _files(folder):
                if not is_dir and path.endswith(".so"):
                    sys.stdout.write(f"{_sha256(path)} {path}\n")
    _unmark()


HOME_MARKS = (".ssh", ".bashrc", ".profile", "pyvenv.cfg", "huggingface", "hub")  # a home, a venv, the models
SHARED = (".cache", ".local", ".config")  # the XDG roots every program of a user shares


def _broad(folder: str, folders: list[str]) -> bool:
    """A folder fleet must never swap out nor remove whole: one level deep (/data), a user's home, the venv, a
    shared cache root (~/.cache), or one that holds any of them, the models or another of the cache folders."""
    f = os.path.realpath(folder)  # a link to a home is a home
    venv = os.path.realpath(VENV[0]) if VENV[0].startswith("/") else ""
    homes = {os.path.expanduser("~"), VENV[0], venv, *(pw.pw_dir for pw in pwd.getpwall())}
    if f.count("/") < 2 or os.path.basename(f) in SHARED:
        return True
    if any(h.rstrip("/") == f or h.startswith(f + "/") for h in homes if h.startswith("/")):
        return True
    if any(os.path.realpath(g).startswith(f + "/") for g in folders):
        return True
    try:
        models = any(n.endswith((".safetensors", ".gguf")) for n in os.listdir(f))
    except OSError:
        models = False
    return models or any(os.path.lexists(os.path.join(f, mark)) for mark in HOME_MARKS)


def _foreign_link(folder: str) -> str | None:
    """Run as root: the first link on the folder's path (it or a folder above it) that root does not own (the
    server's user's: it could lead root's rename and removal to any folder, and give that folder to the user);
    None when there is none, or not run as root (a user can only do what that user may)."""
    if os.geteuid() != 0:
        return None
    path = ""
    for part in folder.strip("/").split("/"):
        path += "/" + part
        try:
            st = os.lstat(path)
        except OSError:
            return None  # nothing further exists: no link below
        if os.path.islink(path) and st.st_uid != 0:
            return path
    return None


def _drop() -> None:
    """Run as root for a server's user (--user, not root): from here on this process is that user (its uid, gid and
    groups: owner.py's drop, as the venv's code and the patch engine take them), so nothing done in its folders reaches what it could not reach itself: a link it made, a folder it
    swapped between a check and its use, a file it planted. Exit 2 when there is no such user."""
    if os.geteuid() != 0 or not USER[0]:
        return
    try:
        pw = pwd.getpwnam(USER[0])
    except KeyError:
        _fail(2, f"no user {USER[0]!r} on this host")
    if pw.pw_uid == 0:
        return
    drop((pw.pw_uid, pw.pw_gid, pw.pw_name, pw.pw_dir))  # type: ignore[name-defined]  # noqa: F821
    if os.geteuid() != pw.pw_uid or os.getegid() != pw.pw_gid:
        _fail(5, f"not changed: could not run as {USER[0]}")


def main(argv: list[str]) -> None:
    given = {"--mark": MARK, "--user": USER, "--venv": VENV}
    while argv and argv[0].partition("=")[0] in given and "=" in argv[0]:
        option, _, value = argv[0].partition("=")
        given[option][0], argv = value, argv[1:]
    if MARK[0] and (not MARK[0].startswith("/") or ".." in MARK[0].split("/")):
        _fail(2, "the mark is an absolute path without '..'")
    if argv[:1] == ["unproven"] and MARK[0]:
        verb, rest = "unproven", []
    elif len(argv) < 2 or argv[0] not in ("collect", "place", "clear", "modules"):
        _fail(2, "usage: kcache.py collect LIMIT FOLDER... | place SHA256 FOLDER... | clear|modules FOLDER... | "
                 "--mark=PATH unproven")
    else:
        verb, rest = argv[0], argv[1:]
    folders = rest[1:] if verb in ("collect", "place") else rest
    if not all(map(_sound, folders)):
        _fail(2, "cache folders are absolute, without '..', and not /")
    if verb in ("place", "clear", "unproven"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a lost link: finish (or undo), never stop half-way
    if MARK[0] and verb != "collect":  # root's, in root's folder: opened (and locked) before the drop
        if verb != "modules":
            _lock()
        _open_mark(create=verb == "place")
    broad = next((f for f in folders if verb != "modules" and _broad(f, folders)), None)
    if broad:
        _fail(5, f"refused: {broad} is no cache folder (a home, the venv, or a folder holding one)")
    link = next((x for f in folders if verb != "modules" and (x := _foreign_link(f))), None)
    if link:  # a clear refusal; a link made after this check meets _drop's user, never root
        _fail(5, f"refused: {link} is a link root does not own (it could lead fleet out of the cache folders)")
    _drop()
    if verb in ("place", "clear", "unproven"):
        stale(folders)
    if verb == "collect":
        collect(int(rest[0]), folders)
    elif verb == "place":
        place(rest[0], folders)
    elif verb == "modules":
        modules(folders)
    elif verb == "unproven":
        sys.stdout.write("".join(f + "\n" for f in unproven()))
    else:
        clear(folders)


if __name__ == "__main__":
    main(sys.argv[1:])
