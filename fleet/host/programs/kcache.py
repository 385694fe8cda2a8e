"""fleet's compile and tune caches on a host (issue 49; fleet.host.kcache drives it). Standard library only.

    kcache.py collect LIMIT FOLDER...   stdout: a tar of the folders that exist (regular files and folders only,
                                        names without the leading /); exit 3 and one line on stderr when they
                                        hold more than LIMIT bytes (nothing written)
    kcache.py place SHA256 FOLDER...    stdin: such a tar. Refused (exit 4, nothing changed) unless its sha256 is
                                        SHA256 and every member is a plain file or folder inside one of the
                                        FOLDERs; then every folder is built beside itself, and only then each is
                                        renamed into place (what stood there moved aside first, then removed). A
                                        failure leaves every folder as it stood, nothing built beside it.
                                        stdout: the folders placed, one a line
    kcache.py clear FOLDER...           each folder renamed aside, then removed (a start that failed with a
                                        placed cache starts again without it)
    kcache.py modules FOLDER...         stdout: `SHA256 PATH` of every .so in the folders (were placed modules
                                        used as placed, or rebuilt?)

--mark=PATH (first, before the verb's arguments): place adds the folders it fills to PATH (one a line, written
whole) before it swaps any; clear and modules (a start that served with them) remove PATH: what a put-back of a
release finds there was placed and never proven, and is removed before that release starts (fleet.host.kcache).

place and clear first remove what an earlier run whose process is gone (a lost link, a controller killed) left
beside the folders: its spool, its half-built and set-aside folders; and they ignore SIGHUP, so a link lost
while they run lets them finish (or undo) rather than stop half-way.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sys
import tarfile

ASIDE = ".fleet-kcache-"


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
    """stdin into a temporary file beside the first folder (never all in memory); its sha256 checked after."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)


def place(want: str, folders: list[str]) -> None:
    spooled = _spool_path(folders)
    try:
        _spool(spooled)
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
    for m in members:
        if not (m.isfile() or m.isdir()) or _inside(m.name, folders) is None:
            _fail(4, f"refused: {m.name!r} is no plain file inside the cache folders")
    built: list[tuple[str, str]] = []  # (new, folder): every folder built beside itself before any is swapped
    try:
        for folder in folders:
            mine = [m for m in members if _inside(m.name, [folder]) == folder]
            if mine:
                new = f"{folder.rstrip('/')}{ASIDE}new-{os.getpid()}"
                built.append((new, folder))
                _build(tar, mine, new, folder)
        if MARK[0] and built:
            _mark([f for _, f in built])
        _swap_all(built)
    except BaseException:
        for new, _ in built:
            _remove(new)
        raise
    sys.stdout.write("".join(f + "\n" for _, f in built))


MARK = [""]  # --mark=PATH


def _mark(folders: list[str]) -> None:
    """The folders about to be filled, added to the mark, written whole (beside it, fsynced, renamed over)."""
    path = MARK[0]
    try:
        with open(path) as f:
            had = [line.rstrip("\n") for line in f if line.strip()]
    except FileNotFoundError:
        had = []
    tmp = f"{path}{ASIDE}{os.getpid()}"
    try:
        with open(tmp, "w") as out:
            out.write("".join(f + "\n" for f in dict.fromkeys([*had, *folders])))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _unmark() -> None:
    if MARK[0] and os.path.lexists(MARK[0]):
        os.unlink(MARK[0])


def _build(tar: tarfile.TarFile, mine: list[tarfile.TarInfo], new: str, folder: str) -> None:
    os.makedirs(os.path.dirname(folder.rstrip("/")) or "/", exist_ok=True)
    _remove(new)
    os.makedirs(new)
    for m in mine:
        rel = os.path.relpath("/" + m.name, folder)
        dest = os.path.normpath(os.path.join(new, rel))
        if m.isdir():
            os.makedirs(dest, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        src = tar.extractfile(m)
        assert src is not None
        with open(dest, "wb") as out:
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
    for folder in folders:
        if os.path.isdir(folder) and not os.path.islink(folder):
            old = f"{folder.rstrip('/')}{ASIDE}old-{os.getpid()}"
            os.rename(folder, old)
            shutil.rmtree(old, ignore_errors=True)
    _unmark()


def modules(folders: list[str]) -> None:
    for folder in folders:
        if os.path.isdir(folder):
            for path, is_dir in _files(folder):
                if not is_dir and path.endswith(".so"):
                    sys.stdout.write(f"{_sha256(path)} {path}\n")
    _unmark()


def main(argv: list[str]) -> None:
    if argv and argv[0].startswith("--mark="):
        MARK[0], argv = argv[0].removeprefix("--mark="), argv[1:]
        if not MARK[0].startswith("/") or ".." in MARK[0].split("/"):
            _fail(2, "the mark is an absolute path without '..'")
    if len(argv) < 2 or argv[0] not in ("collect", "place", "clear", "modules"):
        _fail(2, "usage: kcache.py collect LIMIT FOLDER... | place SHA256 FOLDER... | clear|modules FOLDER...")
    verb, rest = argv[0], argv[1:]
    folders = rest[1:] if verb in ("collect", "place") else rest
    if any(not f.startswith("/") or ".." in f.split("/") or f.rstrip("/") == "" for f in folders):
        _fail(2, "cache folders are absolute, without '..', and not /")
    if verb in ("place", "clear"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a lost link: finish (or undo), never stop half-way
        stale(folders)
    if verb == "collect":
        collect(int(rest[0]), folders)
    elif verb == "place":
        place(rest[0], folders)
    elif verb == "modules":
        modules(folders)
    else:
        clear(folders)


if __name__ == "__main__":
    main(sys.argv[1:])
