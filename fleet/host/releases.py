"""Releases on the host: every deploy is one, kept under /var/lib/fleet/releases/<id>/ so it can be rolled back.

    /var/lib/fleet/releases/<id>/manifest.json   config, facts summary, sha256 of what was written, outcome
    /var/lib/fleet/releases/<id>/files/...       the unit and env file exactly as installed (env 0600)
    /var/lib/fleet/releases/<id>/events.jsonl    the deploy's event log, one JSON object per line
    /var/lib/fleet/current -> releases/<id>      the last known-good release (swapped atomically)
    /var/lib/fleet/before-fleet/                 the unit and env file as fleet found them at its first write
                                                 (or none): `inv rollback --to before-fleet` (fleet.host.found_files)
    /var/lib/fleet/rollback.json                 while `inv rollback` changes the host (its target, from where)
"""

from __future__ import annotations

import builtins
import json
import posixpath
import re
import secrets
import shlex
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NotRequired, Protocol, TypedDict

from fabric import Connection

from fleet import faulthook, fields
from fleet.errors import FleetError
from fleet.host import service
from fleet.host.facts import STACK, VERSION_SHAPE
from fleet.host.render import LAUNCHER, env_file, key_file, unit_file
from fleet.inventory import Host
from fleet.outcomes import ReleaseStatus
from fleet.ssh.remote import ConnectionLost
from fleet.upstream.versions import is_version
from fleet.yamlfile import JsonObject

ROOT = "/var/lib/fleet"
CURRENT_TEMP = ".current."  # ROOT/.current.HEX: mark_current's new link before its rename over `current`
RELEASES = f"{ROOT}/releases"
CURRENT = f"{ROOT}/current"
ROUTER_ROOT = f"{ROOT}/router"  # a router's releases (fleet.multihost.router), beside the host's own
BEFORE_FLEET = f"{ROOT}/before-fleet"
ROLLBACK_MARK = f"{ROOT}/rollback.json"  # a rollback under way (fleet.deploy.recovery finishes a dead one)
# units a run stopped outside a release (a GPU reset, a reboot): the next run under the lock starts them again
STOPPED_MARK = f"{ROOT}/stopped.json"
MANAGED_MARK = b"# Managed by fleet"  # the first line of every unit and env file fleet writes


_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,63}")  # new_id()'s, and room for older or hand-made ones
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MODE = re.compile(r"0o[0-7]{1,4}")
# the folders of every file a release may install (unit, env, key, launcher): a manifest naming another is refused
MANAGED_DIRS = frozenset(posixpath.dirname(p) for p in (unit_file("u"), env_file("u"), key_file("u"), LAUNCHER))


class ReleaseDamaged(FleetError):
    """A release id or manifest from the host is not one fleet wrote: nothing in it is used."""


def release_id(v: object) -> str:
    """A release id as a host reports it (a folder name, a manifest's id, `current`'s target), checked before
    the controller puts it in a path: ValueError otherwise."""
    if not isinstance(v, str) or not _ID.fullmatch(v) or ".." in v:
        raise ValueError(f"not a release id: {str(v)[:60]!r}")
    return v


def _manifest(data: object, rid: str) -> JsonObject:
    """A release manifest's fields, each of the type fleet writes; its id the folder's, its playbook a plain
    name, its files absolute paths in MANAGED_DIRS (or their 'before:' copies) with a sha256 and a mode."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if release_id(data.get("id")) != rid:
        raise ValueError(f"its id {str(data.get('id'))[:60]!r} is not its folder's")
    book = data.get("playbook")
    fields.name(book if isinstance(book, str) else "")
    kinds: dict[str, type | tuple[type, ...]] = {
             "host": str, "playbook_sha256": str, "created": str, "status": str, "rung": (str, type(None)),
             "config": dict, "facts": dict, "files": dict, "patches": dict, "attempts": list,
             "finished": (str, type(None)), "bench": (dict, type(None)), "canary": (dict, type(None)),
             "cache_key": (str, type(None))}
    for key, kind in kinds.items():
        if key in data and not isinstance(data[key], kind):
            raise ValueError(f"{key} is a {type(data[key]).__name__}")
    if isinstance(data.get("cache_key"), str) and not _SHA256.fullmatch(data["cache_key"]):
        raise ValueError("cache_key is no sha256")
    if "nodes" in (data.get("config") or {}):
        _nodes(data["config"]["nodes"])
    for path, meta in (data.get("files") or {}).items():
        real = path.removeprefix("before:")
        fields.abs_path(real)
        if posixpath.dirname(real) not in MANAGED_DIRS:
            raise ValueError(f"file {real[:80]!r} is not one fleet installs")
        if not isinstance(meta, dict) or not _SHA256.fullmatch(str(meta.get("sha256"))) or not \
                _MODE.fullmatch(str(meta.get("mode", "0o600"))):
            raise ValueError(f"file {real[:80]!r}: no sha256 and mode as fleet records them")
    return data


def _nodes(nodes: object) -> None:
    """A multi-node release's `config.nodes` as fleet writes it (count, rank, hosts): anything else is a damaged
    manifest, never read as a node (recovery would leave the unit stopped) nor as a single host."""
    if not isinstance(nodes, dict):
        raise ValueError(f"config.nodes is a {type(nodes).__name__}")
    count, rank, hosts = nodes.get("count"), nodes.get("rank"), nodes.get("hosts", [])
    if type(count) is not int or not 2 <= count <= 64 or type(rank) is not int or not 0 <= rank < count:
        raise ValueError("config.nodes: no node count (2 to 64) with a rank below it")
    if not isinstance(hosts, list) or len(hosts) > count or not all(isinstance(h, str) for h in hosts):
        raise ValueError("config.nodes.hosts is not a list of at most `count` host names")


def now(timespec: str = "seconds") -> str:
    """The time as releases and events record it (UTC, ISO 8601)."""
    return datetime.now(UTC).isoformat(timespec=timespec)


def new_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


def file_key(path: str) -> str:
    """Where an installed file's copy lives inside a release (its absolute path, flattened)."""
    return path.strip("/").replace("/", "__")


class FileMeta(TypedDict):
    """What a release records of a file it installed (or of its `before:` copy, which has no mode)."""

    sha256: str
    mode: NotRequired[str]  # oct(mode): '0o600'; the env file's when absent


@dataclass
class Release:
    id: str
    host: str
    playbook: str
    playbook_sha256: str
    created: str
    status: str = ReleaseStatus.IN_PROGRESS
    rung: str | None = None
    config: JsonObject = field(default_factory=dict)
    facts: JsonObject = field(default_factory=dict)  # fleet.deploy.ladder.facts_summary
    files: dict[str, FileMeta] = field(default_factory=dict)  # path -> {sha256, mode}
    patches: JsonObject = field(default_factory=dict)  # set names applied and file hashes after
    attempts: list[JsonObject] = field(default_factory=list)  # each Attempt's to_json
    finished: str | None = None
    bench: JsonObject | None = None  # the latest `inv bench` result on this release (a BenchRecord's to_json)
    canary: JsonObject | None = None  # the canary's verdict on this release (fleet.deploy.judge.Verdict)
    committing: bool = False  # saved ok, `current` not yet swapped to it (fleet.deploy.recovery finishes that)
    cache_key: str | None = None  # the digest of the warm start's key its server started under (issue 49)

    @property
    def dir(self) -> str:
        return f"{RELEASES}/{self.id}"

    def patch_sets(self) -> list[str]:
        """The patch sets its config names, in order (what putting it back applies again)."""
        sets = self.config.get("patches", [])
        return [str(s) for s in sets] if isinstance(sets, list) else []

    def patched_files(self) -> dict[str, str]:
        """The sha256 of each file its patch sets left, as it recorded them (path -> sha256)."""
        files = self.patches.get("files")
        return {str(p): str(h) for p, h in files.items()} if isinstance(files, dict) else {}

    def served(self, rung: str, config: JsonObject) -> None:
        """It served on `rung` with `config`: ok and finished now; `current` is about to move to it (committing)."""
        self.status, self.rung, self.config, self.finished = ReleaseStatus.OK, rung, config, now()
        self.committing = True

    def settled(self) -> None:
        """No longer being made current: `current` names it, or the run that made it ended otherwise."""
        self.committing = False

    def ended(self, status: str) -> None:
        """Its run ended as `status` now (failed; interrupted, as the next run's recovery found it)."""
        self.status, self.finished = status, now()

    def found_as(self, status: str) -> None:
        """Its run finished, and a later run found it to be `status` (when it finished stays as recorded)."""
        self.status = status

    def judged(self, verdict: JsonObject) -> None:
        """The canary's verdict on it (fleet.deploy.judge.Verdict's to_json)."""
        self.canary = verdict

    def runs_in(self, venv: str) -> None:
        """Its own venv (a release of `packages:` pins), kept with its facts (fleet.host.venvs.recorded)."""
        self.facts["venv"] = venv

    def keyed(self, digest: str | None) -> None:
        """The warm start key its latest attempt started under (None: none; fleet.deploy.cacheneeds)."""
        self.cache_key = digest

    def patched(self, sets: list[str], files: dict[str, str]) -> None:
        """The patch sets it applies, and the sha256 of each file they left (path -> sha256)."""
        self.patches = {"sets": sets, "files": files}

    def tried(self, attempts: list[JsonObject]) -> None:
        """Every attempt of its run, as --json writes them (each fleet.deploy.results.Attempt.to_json)."""
        self.attempts = attempts

    def add_attempt(self, attempt: JsonObject) -> None:
        """One attempt as --json writes it (fleet.deploy.results.Attempt.to_json)."""
        self.attempts.append(attempt)

    def to_json(self) -> JsonObject:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Release:  # a manifest _manifest checked, or one fleet wrote
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a host or playbook name a release may print


def versions_of(facts: Any) -> dict[str, str]:
    """The versions a release recorded (its facts' `versions`), in STACK's order (pure; a manifest is what
    the host sent: only known names with a version's shape are kept)."""
    found = facts.get("versions") if isinstance(facts, dict) else None
    if not isinstance(found, dict):
        return {}
    return {k: found[k] for k in STACK if isinstance(found.get(k), str) and VERSION_SHAPE.fullmatch(found[k])}


def versions_label(versions: dict[str, str], short: bool = False) -> str:
    """'sglang 0.5.9, flashinfer 0.6.3' (short: '0.5.9/0.6.3'); '-' when neither was recorded."""
    sg, fi = versions.get("sglang"), versions.get("flashinfer-python")
    if not sg and not fi:
        return "-"
    if short:
        return f"{sg or '?'}/{fi or '?'}"
    return ", ".join(f"{name} {v}" for name, v in (("sglang", sg), ("flashinfer", fi)) if v)


def stack_drift(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """'sglang 0.5.9 -> 0.5.23' for each of the stack a release recorded that the host has otherwise now (pure;
    a release that recorded nothing, or a host that could not be read, says nothing)."""
    if not now:
        return []
    return [f"{k} {v} -> {now.get(k, 'none')}" for k, v in recorded.items() if now.get(k) != v]


def recorded_sglang(facts: object) -> str | None:
    """The sglang version a release's host was probed with (its recorded `versions`); None when not recorded
    (an older fleet) or not version-shaped (what a host's manifest holds is data: a hostile one must not reach
    the corpus's paths)."""
    version = versions_of(facts).get("sglang")
    return version if version and is_version(version) else None


def recorded_flashinfer(facts: object) -> str | None:
    """The flashinfer-python version a release's host was probed with; None when not recorded or not
    version-shaped (see recorded_sglang)."""
    version = versions_of(facts).get("flashinfer-python")
    return version if version and is_version(version) else None


def node_of(release: Release | None) -> str | None:
    """'node R of N of the multi-node deployment of P (a, b)' where `release` is one node's part of a
    multi-node server; None otherwise (pure; what the host sent is printed only in a name's shape)."""
    nodes = release.config.get("nodes") if release is not None else None
    if release is None or not isinstance(nodes, dict):
        return None
    count, rank, hosts = nodes.get("count"), nodes.get("rank"), nodes.get("hosts")
    if type(count) is not int or count < 2:
        return None
    names = [h for h in hosts[:64] if isinstance(h, str) and _NAME.fullmatch(h)] if isinstance(hosts, list) else []
    book = release.playbook if isinstance(release.playbook, str) and _NAME.fullmatch(release.playbook) else "?"
    where = f"node {rank if type(rank) is int else '?'} of {count} of the multi-node deployment of {book}"
    return where + (f" ({', '.join(names)})" if names else "")
def parse_events(data: bytes) -> tuple[list[JsonObject], int]:
    """events.jsonl -> (its events, how many lines were skipped as torn or not an event). Pure."""
    events: list[JsonObject] = []
    torn = 0
    for line in data.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if isinstance(event, dict):
            events.append(event)
        else:
            torn += 1
    return events, torn


class HostFiles(Protocol):
    """What a store reads and writes through: a host session (fleet.host.session.HostSession), or `_Direct`."""

    @property
    def host(self) -> Host: ...

    def sh(self, command: str, timeout: float = 120.0, check: bool = True) -> str: ...

    def read(self, path: str) -> bytes | None: ...

    def write_atomic(self, path: str, data: bytes, mode: int, keep: bool = False) -> None: ...


@dataclass
class _Direct:
    """A connection and its host, for a store made from them (fleet.host.service's commands)."""

    conn: Connection
    host: Host

    def sh(self, command: str, timeout: float = 120.0, check: bool = True) -> str:
        return service.sh(self.conn, self.host, command, timeout=timeout, check=check)

    def read(self, path: str) -> bytes | None:
        return service.read_file(self.conn, self.host, path)

    def write_atomic(self, path: str, data: bytes, mode: int, keep: bool = False) -> None:
        service.write_atomic(self.conn, self.host, path, data, mode, keep=keep)


class ReleaseStore:
    """The releases under `root` (default /var/lib/fleet; the router's unit keeps its own under
    /var/lib/fleet/router, so one host can be a replica and the router's host at once)."""

    def __init__(self, conn: Connection, host: Host, root: str = ROOT):
        self._bind(_Direct(conn, host), root)

    @classmethod
    def on(cls, session: HostFiles, root: str = ROOT) -> ReleaseStore:
        """The store on a host session's host, read and written through it."""
        store = cls.__new__(cls)
        store._bind(session, root)
        return store

    def _bind(self, session: HostFiles, root: str) -> None:
        self.session, self.host, self.root = session, session.host, root
        self.releases, self.current_link = f"{root}/releases", f"{root}/current"

    def dir(self, release: Release) -> str:
        return f"{self.releases}/{release.id}"

    def open(self, release: Release) -> None:
        self.session.sh(f"mkdir -p -m 0700 {shlex.quote(self.dir(release))}/files")
        self.save(release)

    def save(self, release: Release) -> None:
        self.session.write_atomic(f"{self.dir(release)}/manifest.json",
                                  json.dumps(release.to_json(), indent=2).encode(), 0o600)

    def keep_file(self, release: Release, path: str, data: bytes, mode: int) -> None:
        self.session.write_atomic(f"{self.dir(release)}/files/{file_key(path)}", data, mode)

    def file(self, release: Release, path: str) -> bytes | None:
        return self.session.read(f"{self.dir(release)}/files/{file_key(path)}")

    def event(self, release: Release, event: JsonObject) -> None:
        """Append one whole line: after a torn tail (a writer killed mid-append, a full disk) a new line starts
        first, so one torn line never swallows the next."""
        line = json.dumps({"t": round(time.time(), 3), **event}) + "\n"
        f = shlex.quote(f"{self.dir(release)}/events.jsonl")
        self.session.sh(f"if [ -s {f} ] && [ -n \"$(tail -c 1 {f})\" ]; then printf '\\n' >> {f}; fi; "
                        f"printf %s {shlex.quote(line)} >> {f}")
        faulthook.reached(str(event.get("step")))

    def _id(self, rid: object, what: str) -> str:
        try:
            return release_id(rid)
        except ValueError as exc:
            raise ReleaseDamaged(f"{self.host.name}: {what}: {exc}") from None

    def events(self, release_id: str) -> list[JsonObject]:
        """The release's events, torn or garbled lines skipped (events_read says how many)."""
        return self.events_read(release_id)[0]

    def events_read(self, release_id: str) -> tuple[list[JsonObject], int]:
        rid = self._id(release_id, "release")
        data = self.session.read(f"{self.releases}/{rid}/events.jsonl") or b""
        return parse_events(data)

    def load(self, release_id: str) -> Release | None:
        """The release's manifest; ReleaseDamaged when it is not one fleet wrote (see _manifest)."""
        rid = self._id(release_id, "release")
        path = f"{self.releases}/{rid}/manifest.json"
        data = self.session.read(path)
        if not data:
            return None
        try:
            return Release.from_json(_manifest(json.loads(data), rid))
        except (ValueError, RecursionError) as exc:
            raise ReleaseDamaged(f"{self.host.name}: {path} is not a release manifest fleet wrote: "
                                 f"{str(exc)[:200]}") from None

    def current_id(self) -> str | None:
        """The release `current` points at (`releases/<id>`, as mark_current makes it); ReleaseDamaged for any
        other target."""
        out = self.session.sh(f"readlink {shlex.quote(self.current_link)} || true").strip()
        if not out:
            return None
        where = f"{self.current_link} points at {out[:80]!r}, not at a release"
        if posixpath.dirname(out) not in ("releases", self.releases):
            raise ReleaseDamaged(f"{self.host.name}: {where}")
        return self._id(posixpath.basename(out), where)

    def current(self) -> Release | None:
        """The current release; an error (nothing changed) when `current` points to no readable manifest, since
        then no run could put it back after a failure."""
        rid = self.current_id()
        if not rid:
            return None
        release = self.load(rid)
        if release is None:
            raise FleetError(f"{self.host.name}: {self.current_link} points to release {rid}, whose manifest is "
                             "missing or unreadable; restore it or point `current` at a release that served "
                             "(`inv history`); nothing was changed")
        return release

    def mark_current(self, release: Release) -> None:
        """Point `current` at the release: a new symlink renamed over the old one, never a moment without. The
        new link is removed when the rename fails (a killed run's is removed by recovery: CURRENT_TEMP). A command
        whose answer was lost (a timeout) counts by what `current` names afterwards; raises only when not moved."""
        tmp = shlex.quote(f"{self.root}/{CURRENT_TEMP}{secrets.token_hex(4)}")
        move = f"mv -T {tmp} {shlex.quote(self.current_link)} || {{ rm -f -- {tmp}; exit 1; }}"
        try:
            self.session.sh(f"ln -s releases/{shlex.quote(release.id)} {tmp} && {{ {move}; }}")
        except ConnectionLost:
            raise  # the link is gone: nothing more can be read (the caller's mark makes recovery decide)
        except FleetError:  # a timeout or a closed channel loses the answer, not the rename: what `current` names
            try:        # now is the outcome (a rename that ran is a move that succeeded)
                self.session.sh(f"rm -f -- {tmp}")
                moved = self.current_id() == release.id
            except FleetError:
                moved = False
            if not moved:
                raise

    def point_back(self, release: Release) -> str | None:
        """After a failed move of `current` away from the release that serves again (the move may have run though
        its answer was lost): `current` on that release; what is still wrong, or None. A lost link raises."""
        try:
            if self.current_id() != release.id:
                self.mark_current(release)
        except ConnectionLost:
            raise
        except FleetError as exc:
            return f"`current` could not be pointed back at it ({str(exc).strip()[:200]})"
        return None

    def clear_current(self) -> None:
        """The host is on no fleet release any more (rolled back to before fleet)."""
        self.session.sh(f"rm -f -- {shlex.quote(self.current_link)}")

    def list(self) -> list[Release]:
        """The releases whose manifests fleet wrote, oldest first; any other folder or a damaged manifest is
        passed over (never loaded, pruned or rolled back to)."""
        out = self.session.sh(f"ls -1 {shlex.quote(self.releases)} 2>/dev/null || true")
        found = []
        for rid in sorted(out.split()):
            try:
                release = self.load(rid)
            except ReleaseDamaged:
                continue
            if release:
                found.append(release)
        return found

    def last_good_before_current(self) -> Release | None:
        """Where a rollback goes (`back_to`): the newest release that served before the current one."""
        return back_to(self.list(), self.current_id())

    def prune(self, keep: int) -> tuple[builtins.list[str], builtins.list[Release]]:  # list: also a method here
        """Drop what prune_plan dooms: the ids dropped, and the releases kept."""
        doomed = prune_plan(found := self.list(), self.current_id(), keep)
        for rid in doomed:
            self.session.sh(f"rm -rf -- {shlex.quote(f'{self.releases}/{rid}')}")
        return doomed, [r for r in found if r.id not in doomed]


def back_to(releases: list[Release], current: str | None) -> Release | None:
    """Where a rollback goes (pure): the newest that served, older than `current`, not a canary not passed."""
    good = [r for r in releases if r.status == ReleaseStatus.OK and (r.canary or {}).get("decision", "pass") == "pass"]
    earlier = [r for r in good if r.id != current and (current is None or r.id < current)]
    return max(earlier, key=lambda r: r.id) if earlier else None


UNSERVED_KEPT = 3  # failed and interrupted releases kept for their evidence, on top of `keep_releases`


def prune_plan(releases: list[Release], current: str | None, keep: int,
               unserved: int = UNSERVED_KEPT) -> list[str]:
    """The releases to drop, oldest first (pure). `keep` counts releases that served (the current one among them);
    failed and interrupted ones have their own cap, `unserved`. Never dropped: the current release, one in
    progress, and the newest that served before the current one (where `inv rollback` goes)."""
    ordered = sorted(releases, key=lambda r: r.id)
    served = [r for r in ordered if r.status == ReleaseStatus.OK]
    unserved_ones = [r for r in ordered if r.status in (ReleaseStatus.FAILED, ReleaseStatus.INTERRUPTED)]
    spared = {current, getattr(back_to(releases, current), "id", None)}
    doomed = served[: max(0, len(served) - max(keep, 1))] + unserved_ones[: max(0, len(unserved_ones) - unserved)]
    return [r.id for r in sorted(doomed, key=lambda r: r.id) if r.id not in spared]
