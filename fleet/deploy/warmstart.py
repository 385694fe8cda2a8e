"""Warm starts (issue 49): before a server starts, the caches the controller's store holds for this host's key
are put in place; after it serves, the store gets this host's caches when it has none of its key. A start that
fails with a placed cache is retried once without it (fleet.deploy.attempt). The key: fleet.deploy.cachekey;
the folders: each release's own (fleet.upstream.caches, playbooks/upstream/caches.yaml)."""

from __future__ import annotations

import hashlib
import io
import posixpath
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field

from fabric import Connection

from fleet.deploy.cachekey import CacheKey, NoKey, key_for, patch_digest
from fleet.deploy.cachestore import CacheStore, Entry
from fleet.host import kcache
from fleet.host.facts import HostFacts
from fleet.inventory import Host
from fleet.logs.warmphases import NONE, Expect, PhaseTimes
from fleet.patches.sets import load_sets
from fleet.progress import ticking
from fleet.upstream import caches
from fleet.upstream.versions import in_range

Say = Callable[[str], None]
PLAIN = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE)  # no sparse file, no link, no device


def archs(sm: int, flashinfer: str) -> str:
    """flashinfer's workspace folder for one SM: a major of 9 or more gets `a`; from 0.6.7 SM 12.0 is `0f`
    (docs/FACTS.md section 3, "Arch suffixes")."""
    major, minor = divmod(sm, 10)
    if major == 12 and minor == 0 and in_range(flashinfer, ">=0.6.7"):
        return "120f"
    return f"{sm}a" if major >= 9 else str(sm)


def folders(facts: HostFacts, env: dict[str, str], user: str, home: str) -> list[str]:
    """The cache folders the host's release uses with this environment, run as `user` whose passwd home is `home`
    (kcache.home) (empty: versions unknown)."""
    pk = facts.packages
    sglang = pk["sglang"].version if "sglang" in pk else None
    flashinfer = pk["flashinfer-python"].version if "flashinfer-python" in pk else None
    sm = facts.gpus[0].sm if facts.gpus else None
    if not sglang or not flashinfer or sm is None:
        return []
    places = caches.HostPlaces(home=home_of(env, home), tmp=PRIVATE_TMP, user=user, flashinfer=flashinfer,
                               archs=archs(sm, flashinfer), sm=str(sm))
    where = {str(spec.folder(env, places)) for spec in caches.for_release(sglang)}
    return sorted(f for f in where if not f.startswith(PRIVATE_TMP + "/"))


PRIVATE_TMP = "/.fleet-private-tmp"  # the unit's /tmp (PrivateTmp=yes): its own, never the host's /tmp


def home_of(env: dict[str, str], home: str) -> str:
    """The server's HOME: the unit's environment's, else its account's (`home`, systemd's User= sets it)."""
    return env.get("HOME") or home


def too_broad(where: list[str], env: dict[str, str], home: str, venv: str) -> str | None:
    """The first cache folder that is /, one level deep (/data), the home or a shared cache root (~/.cache), or
    holds the home, the venv or another cache folder (a cache variable set to $HOME or ~/.cache: placing it would
    swap ~/.ssh or the models out); None when there is none."""
    keep = [home_of(env, home).rstrip("/"), venv.rstrip("/")]
    folders = [f.rstrip("/") for f in where]
    for f in folders:
        holds = [k for k in keep + folders if k == f or k.startswith(f + "/")]
        if f.count("/") < 2 or posixpath.basename(f) in SHARED or holds != [f]:
            return f or "/"
    return None


SHARED = (".cache", ".local", ".config")  # the XDG roots every program of the user shares


@dataclass
class WarmStart:
    """One host's warm start for one planned server."""

    store: CacheStore
    key: CacheKey
    folders: list[str]
    venv: str  # the server's: kcache.py never swaps it (it runs on the host's own python, never the venv's)
    placed: list[str] = field(default_factory=list)
    failed_with_cache: bool = False  # a start with the placed caches failed: the stored entry is suspect
    modules: dict[str, str] = field(default_factory=dict)  # the placed compiled modules' sha256, by path
    user: str = ""  # the server's user: kcache.py works in its folders as it (fleet.host.kcache._as)
    expect: Expect = field(default_factory=Expect.cold_start)  # what the start's phases should show (placed: warm)

    @classmethod
    def of(cls, store: CacheStore, facts: HostFacts, patches: list[str], argv: list[str], env: dict[str, str],
           venv: str, user: str, home: str) -> WarmStart | NoKey:
        """`home`: the passwd home of `user` on the host (kcache.home)."""
        versions: dict[str, str | None] = {n: p.version for n, p in facts.packages.items()}
        digests = tuple((p.name, patch_digest(p, versions)) for p in load_sets(patches)) if patches else ()
        where = folders(facts, env, user, home)
        key = key_for(facts, digests, argv, env, venv, folders=where, user=user)
        if isinstance(key, NoKey):
            return key
        if not where:
            return NoKey("the release's cache folders are unknown")
        broad = too_broad(where, env, home, venv)
        if broad:
            return NoKey(f"cache folder {broad} is no folder of one cache (the home, a shared one, or holding the "
                         "venv or another cache folder: check the cache variables)")
        return cls(store, key, where, venv.rstrip("/") or "/", user=user)

    def needed_by(self, host: Host, release: str, say: Say) -> None:
        """The release starts under this key: its entry is kept while the release is (recorded before the store is
        read or written, so no prune after another host's deploy drops it meanwhile)."""
        try:
            self.store.needs.started(host.name, release, self.key.digest)
        except OSError as exc:  # the controller's disk: the start goes on, its entry may be pruned sooner
            say(f"could not record that release {release} needs the caches of key {self.key.digest[:12]}: {exc}")

    def before_start(self, conn: Connection, host: Host, say: Say) -> None:
        """The store's caches of this key in place, or nothing changed (said why)."""
        got = self.store.get(self.key)
        if got is None:
            self._cold(conn, host, f"no caches stored for key {self.key.digest[:12]}", say)
            return
        if not isinstance(got, Entry):
            self._cold(conn, host, f"the stored caches were dropped: {got.reason}", say)
            return
        say(f"warm start: placing the caches of {got.host} ({len(got.data) / 2**20:.1f} MiB; budget "
            f"{kcache.TIMEOUT_S:.0f}s)")  # up to the store's 2 GiB through the link: never a quiet wait
        with ticking(say, "cache place", kcache.TIMEOUT_S):
            placed = kcache.place(conn, host, self.venv, got.data, got.sha256, self.folders, self.user)
        if isinstance(placed, kcache.HostRefused) and placed.unknown:
            self._unknown(conn, host, placed.reason, got, say)
            return
        if isinstance(placed, kcache.HostRefused) and placed.bad_entry:  # every host would: this host's replace it
            self.store.drop(self.key, f"a host refused it: {placed.reason}")
            self._cold(conn, host, f"the host refused the caches (dropped from the store): {placed.reason}", say)
            return
        if isinstance(placed, kcache.HostRefused):
            self._cold(conn, host, f"the host refused the caches: {placed.reason}", say)
            return
        self.placed, self.modules = placed, modules_in(got.data)
        self.expect = Expect.placed(got.host, got.phases)
        say(f"warm start: caches of {got.host} placed ({len(placed)} folders, key {self.key.digest[:12]})")

    def _cold(self, conn: Connection, host: Host, why: str, say: Say) -> None:
        """Nothing placed for this start: what an earlier place left and no start served with (a controller that
        died, a place past its deadline) removed, or, where that fails, the folders count as placed (a start
        that fails is retried without them)."""
        gone = kcache.unproven(conn, host, self.venv, self.user)
        if isinstance(gone, kcache.HostRefused):
            self.placed = list(self.folders)
            say(f"cold start: {why}; caches an earlier place left may be in place ({gone.reason})")
            return
        left = f" (removed {len(gone)} folders an earlier place left unproven)" if gone else ""
        say(f"cold start: {why}{left}")

    def _unknown(self, conn: Connection, host: Host, reason: str, got: Entry, say: Say) -> None:
        """Placing gave no answer (or not the program's): the folders cleared, so the host starts cold; where that
        fails too, the caches count as placed (a start that fails with them is retried without them)."""
        why = self._clear(conn, host, self.folders)
        if why is None:
            say(f"cold start: placing the caches gave no answer ({reason}); the cache folders were cleared")
            return
        self.placed, self.expect = list(self.folders), Expect.placed(got.host, got.phases)
        say(f"placing the caches gave no answer ({reason}) and clearing them failed ({why}): they may be in place")

    def _clear(self, conn: Connection, host: Host, folders: list[str]) -> str | None:
        """The folders removed, tried twice (a lost answer or a passing failure); why not, or None."""
        why = kcache.clear(conn, host, self.venv, folders, self.user)
        return None if why is None else kcache.clear(conn, host, self.venv, folders, self.user)

    def without_cache(self, conn: Connection, host: Host, say: Say) -> bool:
        """After a failed start with placed caches: those folders removed (True: retry cold)."""
        if not self.placed:
            return False
        why = self._clear(conn, host, self.placed)
        self.placed, self.failed_with_cache, self.expect = [], True, Expect.cold_start()
        if why:
            say(f"could not remove the placed caches: {why}")
            return False
        say("the start failed with placed caches: starting again without them")
        return True

    def check_used(self, conn: Connection, host: Host, say: Say) -> None:
        """After a start with placed caches served: were the placed modules used, or rebuilt? (Reading them back
        also proves them: a later put-back of a release leaves them in place.)"""
        if not self.placed:
            return
        now = kcache.modules(conn, host, self.venv, self.placed, self.user)  # and the caches proven (kcache.PLACED)
        if isinstance(now, kcache.HostRefused):
            say(f"could not read the modules back: {now.reason}")
        elif self.modules:
            say(judge_modules(self.modules, now))

    def after_serving(self, conn: Connection, host: Host, say: Say, phases: PhaseTimes = NONE) -> None:
        """This host's caches into the store, when it holds none of this key (or one that failed a start that
        served without it: replaced), with `phases`, those of the start that served (a cold one: one with caches
        placed stores none)."""
        if self.failed_with_cache:
            self.store.drop(self.key, "a start failed with it and served without it")
            say("the stored caches failed a start that served without them: replaced by this host's")
        elif self.store.has(self.key):
            return
        say(f"collecting this host's caches for key {self.key.digest[:12]} (budget {kcache.TIMEOUT_S:.0f}s)")
        with ticking(say, "cache collect", kcache.TIMEOUT_S):
            data = kcache.collect(conn, host, self.venv, self.folders, self.store.limit, self.user)
        if isinstance(data, kcache.HostRefused):
            say(f"caches not collected: {data.reason}")
            return
        why = not_whole(data, self.folders)
        if why:  # stored, it would be every later host's (each refusing it) until pruned
            say(f"caches not stored: {why}")
            return
        try:
            stored = self.store.put(self.key, data, host.name, phases)
        except OSError as exc:  # the controller's disk: the host serves all the same
            say(f"caches not stored: {exc}")
            return
        if isinstance(stored, Entry):
            say(f"caches collected for key {self.key.digest[:12]} ({len(data)} bytes)")
        else:
            say(f"caches not stored: {stored.reason}")


def not_whole(tar: bytes, folders: list[str]) -> str | None:
    """Why a collected answer is no tar of the cache folders to store (not a whole tar, a member that is no
    plain file or folder inside them, nothing in it); None when it is one."""
    try:
        with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as t:
            members = t.getmembers()
    except (tarfile.TarError, EOFError) as exc:
        return f"the host's answer is not a whole tar ({exc})"
    inside = tuple(f.strip("/") for f in folders)
    files = {posixpath.normpath(m.name) for m in members if m.type != tarfile.DIRTYPE}
    seen: set[str] = set()
    for m in members:  # what every host's place refuses (fleet/host/programs/kcache.py, _not_plain)
        inner = ".." not in m.name.split("/") and any(m.name == f or m.name.startswith(f + "/") for f in inside)
        if m.type not in PLAIN or m.sparse is not None or not inner:
            return f"the host's tar holds {m.name[:80]!r}, no plain file inside the cache folders"
        path = posixpath.normpath(m.name)
        if m.type != tarfile.DIRTYPE and path in inside:
            return f"the host's tar holds a file named as the cache folder {m.name[:80]!r}"
        if path in seen or any(p in files for p in _parents(path)):  # not writable as named
            return f"the host's tar names {m.name[:80]!r} twice or inside a file"
        seen.add(path)
    return None if members else "the cache folders are empty"


def _parents(path: str) -> list[str]:
    out = []
    while (path := posixpath.dirname(path)) not in ("", "/"):
        out.append(path)
    return out


def modules_in(tar: bytes) -> dict[str, str]:
    """The sha256 of every compiled module (.so) in a collected tar, by absolute path."""
    out = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as t:
            for m in t.getmembers():
                f = t.extractfile(m) if m.type in PLAIN and m.sparse is None and m.name.endswith(".so") else None
                if f is not None:  # read in blocks: a member's size is what its header says
                    digest = hashlib.sha256()
                    while block := f.read(1 << 20):
                        digest.update(block)
                    out["/" + m.name] = digest.hexdigest()
    except (tarfile.TarError, EOFError):
        return {}
    return out


def judge_modules(placed: dict[str, str], now: dict[str, str]) -> str:
    """What a warm start did with the modules placed: used as placed, or rebuilt (the release saw a changed
    source, flag or mtime that the key does not hold) or removed."""
    rebuilt = sorted(p for p, d in placed.items() if now.get(p) != d)
    if not rebuilt:
        return f"warm start: the {len(placed)} placed modules were used as placed (no JIT build)"
    names = ", ".join(p.rsplit("/", 1)[-1] for p in rebuilt[:3]) + (" ..." if len(rebuilt) > 3 else "")
    return (f"warm start: {len(rebuilt)} of {len(placed)} placed modules were rebuilt by the release ({names}): "
            "something the cache key does not hold differs (a source's mtime, a flag)")
