"""Where a site's files are, from any folder of it: its inventory, its own playbooks (beside the shipped ones),
its state (`.fleet/`) and its defaults (`fleet-site.yaml`, one small file).

The site's root is FLEET_SITE when set; else the nearest folder holding `fleet-site.yaml`, from the working folder
up (as invoke finds `tasks.py`); else the clone fleet runs from (working in a clone). What fleet ships
(playbooks, rules, patch sets, templates) is always read from the clone, never from the working folder.

A site found by walking up is trusted as git trusts a repository (safe.directory): its `fleet-site.yaml`, its
folder and its own `inventory/` and `playbooks/` must be the user's and writable by no one else. Another local
user who planted a site in a shared folder above the operator's would otherwise get the operator's deploy (their
inventory, their playbook under a shipped name, the operator's secrets). Trusted anyway: a site named by
FLEET_SITE (the user chose it), or listed in the user's own config:

    # ~/.config/fleet/config.yaml ($XDG_CONFIG_HOME/fleet/config.yaml)
    safe:
      - /srv/team/fleet-site     # a site folder; '*' trusts every site (as git's safe.directory '*')

    # fleet-site.yaml
    inventory: inventory/hosts.yaml   # relative to the site (the default)
    offline: false                    # true: never fetch an upstream release (as --offline)
"""

from __future__ import annotations

import fcntl
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from fleet import fields, yamlfile
from fleet.errors import InputError

SHIPPED = Path(__file__).resolve().parents[1]  # the clone: playbooks/, templates/, inventory/ examples
MARKER = "fleet-site.yaml"  # not fleet.yaml: Rancher Fleet's bundles use that name
MAX_UP = 64  # folders searched upwards for fleet-site.yaml
OWN_PARTS = (MARKER, ".", "inventory", "playbooks")  # what decides what a deploy does: the user's alone


class Defaults(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    inventory: fields.LocalPath = "inventory/hosts.yaml"
    offline: bool = False


@dataclass(frozen=True)
class Site:
    root: Path
    defaults: Defaults

    @property
    def inventory(self) -> Path:
        return self.root / Path(self.defaults.inventory).expanduser()

    @property
    def playbooks(self) -> list[Path]:
        """Where a playbook's name is looked up: the site's own first, then the shipped ones."""
        own = self.root / "playbooks"
        return [own] if own.resolve() == (SHIPPED / "playbooks") else [own, SHIPPED / "playbooks"]

    @property
    def state(self) -> Path:
        return Path(os.environ.get("FLEET_STATE_DIR") or self.root / ".fleet")


def find() -> Site:
    """The site of the working folder (or FLEET_SITE)."""
    try:
        cwd = Path.cwd()
    except OSError:  # the working folder was removed under us
        raise InputError("the working folder no longer exists: cd to the site (or set FLEET_SITE)") from None
    return _find(os.environ.get("FLEET_SITE") or None, cwd)


def shadowed() -> Path | None:
    """The site of the working folder that FLEET_SITE wins over (the folder of its fleet-site.yaml); None where
    FLEET_SITE is unset, or names that site, or the working folder is in none. A FLEET_SITE left exported in a
    shell's profile took another site's inventory and playbooks without a word, in a folder of this one."""
    named = os.environ.get("FLEET_SITE")
    try:
        cwd = Path.cwd()
    except OSError:
        return None
    if not named:
        return None
    for folder in [cwd, *cwd.parents][:MAX_UP]:
        if (folder / MARKER).is_file():
            return None if folder.resolve() == Path(named).expanduser().resolve() else folder
    return None


@cache
def _find(named: str | None, cwd: Path) -> Site:
    if named is not None:
        root = Path(named).expanduser()
        if not root.is_dir():
            raise InputError(f"FLEET_SITE={named}: no such folder")
        return _load(root.resolve())
    for folder in [cwd, *cwd.parents][:MAX_UP]:
        if (folder / MARKER).is_file():
            check_trusted(folder)  # found, not named: as git, only a site that is the user's own
            return _load(folder)
    return Site(SHIPPED, Defaults())


def _load(root: Path) -> Site:
    path = root / MARKER
    if not path.is_file():
        return Site(root, Defaults())
    doc = yamlfile.load(path)
    if doc.data is None:
        return Site(root, Defaults())
    if not isinstance(doc.data, dict):
        raise doc.error((), "a mapping of inventory, offline")
    try:
        return Site(root, Defaults.model_validate(doc.data))
    except ValidationError as err:  # every problem at once: they came one per run (fixing one showed the next)
        found = doc.validation_errors(err, Defaults)
        raise InputError("; and ".join(map(str, found))) from None


def config_path() -> Path:
    """The user's own fleet config (its `safe` list)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "fleet" / "config.yaml"


def why_untrusted(root: Path, uid: int) -> str | None:
    """What makes the site at root not the user's (None: it is): a part owned by someone else, or writable by
    its group or by anyone: the marker, the folder, inventory/ and playbooks/ with the files in them, and the
    inventory the marker names; a symlink is judged as itself and as what it points to."""
    for part, path in _parts(root):
        name = root.name + "/" if part == "." else part
        for st in _stats(path):
            if st.st_uid != uid:
                return f"{name} is owned by uid {st.st_uid}, not by you (uid {uid})"
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not stat.S_ISLNK(st.st_mode):
                return f"{name} is writable by {'anyone' if st.st_mode & stat.S_IWOTH else 'its group'}"
    return None


def _parts(root: Path) -> list[tuple[str, Path]]:
    """What decides what a deploy does, by the name an operator knows it by."""
    parts = [(part, root / part) for part in OWN_PARTS]
    for folder in ("inventory", "playbooks"):
        with suppress(OSError):
            parts += [(f"{folder}/{p.name}", p) for p in sorted((root / folder).iterdir())[:1000]]
    with suppress(OSError, yaml.YAMLError, AttributeError):  # the inventory the marker names, and its folder
        named = (yaml.safe_load((root / MARKER).read_text()[:65536]) or {}).get("inventory")
        if isinstance(named, str) and named:
            where = root / Path(named).expanduser()
            parts += [(named, where), (str(Path(named).parent) + "/", where.parent)]
    return parts


def _stats(path: Path) -> list[os.stat_result]:
    """The path's own stat and, for a symlink, its target's; [] where there is nothing."""
    try:
        own = path.lstat()
    except OSError:
        return []
    if not stat.S_ISLNK(own.st_mode):
        return [own]
    try:
        return [own, path.stat()]
    except OSError:
        return [own]


def safe_list(uid: int) -> list[str]:
    """The `safe` entries of the user's own config; a config not the user's, or writable by others, counts not."""
    path = config_path()
    try:
        st = path.stat()
        if st.st_uid != uid or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return []
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    entries = doc.get("safe") if isinstance(doc, dict) else None
    return [str(e) for e in entries if isinstance(e, str)] if isinstance(entries, list) else []


def check_trusted(root: Path) -> None:
    """Raise InputError, in one line saying why and how to trust it, when the site at root is not trusted."""
    uid = os.geteuid()
    why = why_untrusted(root, uid)
    if why is None:
        return
    safe = safe_list(uid)
    if "*" in safe or any(Path(e).expanduser().resolve() == root.resolve() for e in safe):
        return
    raise InputError(f"site {root} refused: {why} (another user could plant it); if you trust it, name it with "
                     f"FLEET_SITE={root} or add it to `safe:` in {config_path()}")


@contextmanager
def one_writer(target: Path, threads: threading.Lock) -> Iterator[None]:
    """One writer of a state file at a time, across threads (`threads`, the file's own) and processes (flock on a
    file beside it): each reads the file again under the lock and changes only its own entry, so no update is
    lost."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with threads, open(target.with_name(f".{target.name}.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
