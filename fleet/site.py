"""Where a site's files are, from any folder of it: its inventory, its own playbooks (beside the shipped ones),
its state (`.fleet/`) and its defaults (`fleet-site.yaml`, one small file).

The site's root is FLEET_SITE when set; else the nearest folder holding `fleet-site.yaml`, from the working folder
up (as invoke finds `tasks.py`); else the clone fleet runs from (working in a clone). What fleet ships
(playbooks, rules, patch sets, templates) is always read from the clone, never from the working folder.

    # fleet-site.yaml
    inventory: inventory/hosts.yaml   # relative to the site (the default)
    offline: false                    # true: never fetch an upstream release (as --offline)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from fleet import fields, yamlfile
from fleet.errors import InputError

SHIPPED = Path(__file__).resolve().parents[1]  # the clone: playbooks/, templates/, inventory/ examples
MARKER = "fleet-site.yaml"  # not fleet.yaml: Rancher Fleet's bundles use that name
MAX_UP = 64  # folders searched upwards for fleet-site.yaml


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


@cache
def _find(named: str | None, cwd: Path) -> Site:
    if named is not None:
        root = Path(named).expanduser()
        if not root.is_dir():
            raise InputError(f"FLEET_SITE={named}: no such folder")
        return _load(root.resolve())
    for folder in [cwd, *cwd.parents][:MAX_UP]:
        if (folder / MARKER).is_file():
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
    return Site(root, doc.parse(Defaults))
