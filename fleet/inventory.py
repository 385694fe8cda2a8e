"""The inventory: hosts, groups and their variables, from every YAML file in inventory/.

File layout (all keys optional except a host's address):

    defaults: {user: root, venv: /root/ml-env}      # for every host of this file
    groups:
      blackwell-pcie: {description: ..., unit: sglang, hosts: [gpu-node-1]}
    hosts:
      gpu-node-1: {address: 10.1.230.174, groups: [blackwell-pcie], vars: {rack: a3}}

A host's settings: defaults < its groups < the host itself. Two groups of one host that set the same
key to different values are an error, not a silent precedence rule.

Selection (`--host`, `--group`) reads as Ansible's `--limit`: each value is one pattern or several joined by
commas; a pattern is a name (a host's address too), a glob (`pve-gpu-0*`, `gpu-[12]`), `!pattern` (leave
those out) or `&pattern` (only those also matched). Every pattern must match something: a typo in an
exclusion would act on the host it meant to spare, so an unknown name is an error saying the nearest one.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fleet import errors, fields, yamlfile
from fleet.errors import InputError, as_given, as_typed
from fleet.fields import HostVars
from fleet.secretref import SecretRef

M = TypeVar("M", bound=BaseModel)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")  # fullmatch


def _env(variables: dict[str, object]) -> dict[str, object]:
    return env if isinstance(env := variables.get("env"), dict) else {}


def _vars(v: HostVars | None) -> dict[str, object]:
    if v is None:
        return {}
    return {k: val for k, val in v.model_dump().items() if k != "env" or val is not None}


class HostSettings(BaseModel):
    """Settings that defaults, groups and hosts may all carry."""

    model_config = ConfigDict(extra="forbid", strict=True)

    user: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    become: bool | None = None
    become_password: SecretRef | None = None  # sudo's password where a rule wants one
    identity_file: fields.LocalPath | None = None
    known_hosts: fields.LocalPath | None = None
    ssh_config: fields.LocalPath | None = None
    proxy_jump: fields.Text | None = None
    venv: fields.AbsPath | None = None
    unit: fields.UnitName | None = None
    vars: HostVars | None = None

    @field_validator("user")
    @classmethod
    def _user(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[a-z_][a-z0-9_.-]{0,31}", v):
            raise ValueError(f"not a valid user name: {v!r}")
        return v


class HostEntry(HostSettings):
    address: str
    groups: list[str] = []

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        return fields.host_addr(v)


class GroupEntry(HostSettings):
    description: str | None = None
    hosts: list[str] = []
    playbook: fields.Text | None = None  # the playbook its hosts get when a task is given no --playbook


class InventoryFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    defaults: HostSettings = HostSettings()
    groups: dict[str, GroupEntry] = {}
    hosts: dict[str, HostEntry] = {}
    # the controller's folder of wheels that `packages:` pins of this file's hosts are built from (relative to
    # this file; FLEET_WHEELHOUSE, when set, wins): the sandbox's inventory names the sandbox's own
    wheelhouse: fields.LocalPath | None = None


_SETTINGS = [f for f in HostSettings.model_fields if f != "vars"]
# user and port stay None when unset, so ssh_config can supply them (connect.route).
_FALLBACKS: dict[str, bool | str] = {"become": False, "venv": "/root/ml-env", "unit": "sglang"}
# keys that are settings of their own, never read inside vars: (it loaded, and the deploy used the default venv)
_NOT_VARS = {**{k: k for k in [*_SETTINGS, "address", "groups", "hosts", "playbook"]}, "ansible_host": "address",
             "ansible_user": "user", "ansible_port": "port", "ansible_ssh_private_key_file": "identity_file",
             "ansible_become": "become", "ansible_become_password": "become_password"}


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    port: int | None
    user: str | None
    become: bool
    identity_file: str | None
    known_hosts: str | None
    ssh_config: str | None
    proxy_jump: str | None
    venv: str
    unit: str
    groups: tuple[str, ...]
    source: Path
    vars: dict[str, object] = field(default_factory=dict, compare=False, hash=False)  # the site's, free-form
    become_password: SecretRef | None = field(default=None, compare=False, hash=False)
    playbook: str | None = None  # bound by one of its groups (`playbook:`): a name, or a path made absolute
    wheelhouse: Path | None = None  # its inventory file's `wheelhouse:`, made absolute
    env_replaced: tuple[str, ...] = ()  # 'NCCL_DEBUG (group gpus)': of a vars.env a later level's replaced whole
    written: frozenset[str] = frozenset()  # the settings the inventory gives (venv, unit...), not fleet's fallbacks


@dataclass
class Inventory:
    hosts: dict[str, Host]
    groups: dict[str, list[str]]
    files: dict[Path, list[str]]  # host names each file defines

    def select(self, names: Sequence[str] = (), groups: Sequence[str] = (),
               default_file: Path | None = None, host_flag: str = "--host") -> list[Host]:
        """Hosts named (by name, address or glob) or in the groups given, in the order given, less those of `!`
        patterns and only those of `&` patterns; with no pattern that adds hosts, every host of default_file (or
        of the inventory) is the start. InputError for a pattern that matches nothing or a selection left empty,
        naming the option the names came from (`host_flag`)."""
        chosen: dict[str, Host] = {}
        leave: set[str] = set()
        keep: list[set[str]] = []
        adds = False
        for flag, patterns, matching in ((host_flag, names, self._hosts_matching),
                                         ("--group", groups, self._group_members)):
            for pattern in split_patterns(patterns):
                found = matching(flag, pattern)
                if pattern.startswith("!"):
                    leave.update(found)
                elif pattern.startswith("&"):
                    keep.append(set(found))
                else:
                    adds = True
                    chosen.update((n, self.hosts[n]) for n in found)
        if not adds:
            chosen = {h.name: h for h in self._default(default_file)}
        picked = [h for n, h in chosen.items() if n not in leave and all(n in k for k in keep)]
        if not picked and (leave or keep):
            raise InputError(f"{as_given(names, groups, host_flag)}: leaves no host (of {len(chosen)} matched, every "
                             "one is left out)")
        return picked

    def _default(self, default_file: Path | None) -> list[Host]:
        if default_file is None:
            return list(self.hosts.values())
        key = default_file.resolve()
        if key not in self.files:
            raise InputError(f"--inventory {default_file}: no such inventory file")
        return [self.hosts[n] for n in self.files[key]]

    def _hosts_matching(self, flag: str, typed: str) -> list[str]:
        """Host names a --host pattern matches (its `!`/`&` aside): a name, an address, or a glob over names and
        addresses. Errors name the pattern as typed (`--host '!a3'`)."""
        pattern = errors.pattern_of(flag, typed, "name")
        if not is_glob(pattern):
            return [self.find(pattern, flag, typed).name]
        found = [h.name for h in self.hosts.values()
                 if fnmatch.fnmatchcase(h.name, pattern) or fnmatch.fnmatchcase(h.address, pattern)]
        if not found:  # a glob's nearest is no one host: the case it missed, else the names
            folded = any(fnmatch.fnmatchcase(h.name, pattern.lower()) for h in self.hosts.values())
            hint = f"; globs match case as typed: {as_typed(flag, typed.lower())}" if folded else \
                errors.known_names(list(self.hosts))
            raise InputError(f"{as_typed(flag, typed)}: matches no host of the inventory"
                             f"{self.ansible_spelling(pattern, flag) or hint}")
        return found

    def _group_members(self, flag: str, typed: str) -> list[str]:
        """Host names of the groups a --group pattern matches (its `!`/`&` aside: a name or a glob over group
        names)."""
        pattern = errors.pattern_of(flag, typed, "group name")
        names = [g for g in self.groups if fnmatch.fnmatchcase(g, pattern)] if is_glob(pattern) else \
            [pattern] if pattern in self.groups else []
        if not names:
            what = "matches no group" if is_glob(pattern) else "no such group"
            hint = self.ansible_spelling(pattern, flag) or errors.hint(pattern, self.groups, flag)
            if pattern in self.hosts:
                hint = f": it is a host, {as_typed('--host', typed)}"
            raise InputError(f"{as_typed(flag, typed)}: {what}{hint}")
        return list(dict.fromkeys(n for g in names for n in self.groups[g]))

    def ansible_spelling(self, pattern: str, flag: str) -> str:
        """errors.ansible_spelling over this inventory's names."""
        return errors.ansible_spelling(pattern, flag, {h.name: h.address for h in self.hosts.values()}, self.groups)

    def find(self, name_or_address: str, flag: str = "--host", typed: str | None = None) -> Host:
        """The host of that name or address; errors name it as `typed` (the pattern with its `!`/`&`)."""
        if name_or_address in self.hosts:
            return self.hosts[name_or_address]
        given = as_typed(flag, typed or name_or_address)
        matches = [h for h in self.hosts.values() if h.address == name_or_address]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise InputError(f"{given}: address shared by {', '.join(h.name for h in matches)}")
        if name_or_address in self.groups:
            raise InputError(f"{given}: no such host in the inventory; it is a group: "
                             f"{as_typed('--group', typed or name_or_address)}")
        hint = self.ansible_spelling(name_or_address, flag) or errors.hint(name_or_address, self.hosts, flag)
        raise InputError(f"{given}: no such host in the inventory{hint}")


def split_patterns(values: Iterable[str]) -> list[str]:
    """`-H 'a,b' -H '!c'` -> ['a', 'b', '!c'] (spaces around commas dropped; a comma in a shell's `{a,b}` is its)."""
    return [part.strip() for value in values for part in re.split(r",(?![^{}]*\})", value)]


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def only_narrowing(patterns: Iterable[str]) -> bool:
    """True when every pattern is `!x` or `&x`: they narrow a selection and name no host by themselves."""
    parts = split_patterns(patterns)
    return bool(parts) and all(p.startswith(("!", "&")) for p in parts)


def load(inventory: Path) -> Inventory:
    """Load `inventory` and every other *.yaml of its folder: host names resolve across all of them (an
    `*.example.yaml` beside it is a template to copy, not hosts, unless it is the file named; a hidden one, an
    editor's or a tool's, is not read, as a shell's `*.yaml` leaves it out). A file beside it that is no inventory
    (a playbook, a compose file) is refused in one line naming it, not read for a schema it never followed."""
    inventory = Path(inventory)
    if why := yamlfile.not_a_file(inventory, "--inventory", "hosts.yaml"):
        raise InputError(why)
    named = inventory.resolve()
    inv = Inventory(hosts={}, groups={}, files={})
    shared = _shared_groups(files_of(inventory))
    for path in files_of(inventory):
        _merge_file(inv, path, None if path == named else inventory, shared=shared)
    return inv


def check(inventory: Path, into: dict[str, Host] | None = None) -> tuple[set[str] | None, list[InputError]]:
    """inv check: every problem of the inventory file and of the *.yaml beside it in one pass (`load` stops at the
    first), and the host names they define, a host refused for one of its keys too; None when the file named
    cannot be read, so that no name can be checked against it. `into` gets the hosts that hold up."""
    inventory = Path(inventory)
    if why := yamlfile.not_a_file(inventory, "--inventory", "hosts.yaml"):
        return None, [InputError(why)]
    found: list[InputError] = []
    inv = Inventory(hosts={}, groups={}, files={})
    named = inventory.resolve()
    names: set[str] | None = set()
    unread: list[Path] = []  # files whose `hosts:` is refused whole: no name can be checked against them
    shared = _shared_groups(files_of(inventory))
    for path in files_of(inventory):
        defined = _merge_file(inv, path, None if path == named else inventory, found, unread, shared)
        names = None if defined is None and path == named else names if defined is None or names is None \
            else names | defined
    into is None or into.update(inv.hosts)
    return None if unread else names, found


def files_of(inventory: Path) -> list[Path]:
    """The inventory file and every *.yaml read beside it (not an `*.example.yaml` nor a hidden one), sorted."""
    others = (p.resolve() for p in inventory.parent.glob("*.yaml")
              if not p.name.endswith(".example.yaml") and not p.name.startswith("."))
    return sorted({inventory.resolve(), *others})


def _holding(model: type[M], value: Any, fill: dict[str, Any] | None = None) -> M | None:
    """`value` as `model`, less the keys it refused (said by the whole file's schema problems), `fill` standing in
    for a required one; None when even that fails (not a mapping)."""
    try:
        return model.model_validate(value)
    except ValidationError as err:
        refused = {e["loc"][0] for e in err.errors() if e["loc"]}
        if not isinstance(value, dict) or not refused:
            return None
        try:
            return model.model_validate({**{k: v for k, v in value.items() if k not in refused},
                                         **{k: v for k, v in (fill or {}).items() if k in refused}})
        except ValidationError:
            return None


_FILL = {"address": "address.invalid"}  # a host whose address is refused: its groups and settings still checked


def _lenient(doc: yamlfile.Document, found: list[InputError]) -> InventoryFile:
    """The file as InventoryFile, every schema problem said in `found`; where there are some, what holds up (each
    host, group and the defaults less their refused keys), so that the rules of the rest still run."""
    try:
        return InventoryFile.model_validate(doc.data)
    except ValidationError as err:
        found += doc.validation_errors(err, InventoryFile)
    data = doc.data

    def entries(key: str, model: type[M]) -> dict[str, M]:
        raw = data.get(key)
        held = {str(k): _holding(model, v, _FILL) for k, v in raw.items()} if isinstance(raw, dict) else {}
        return {k: v for k, v in held.items() if v is not None}
    defaults = _holding(HostSettings, data.get("defaults", {})) or HostSettings()
    wheelhouse = _holding(InventoryFile, {"wheelhouse": data.get("wheelhouse")})
    return InventoryFile.model_construct(defaults=defaults, groups=entries("groups", GroupEntry),
                                         hosts=entries("hosts", HostEntry),
                                         wheelhouse=wheelhouse.wheelhouse if wheelhouse else None)


def _settings_of(group: GroupEntry) -> dict[str, Any]:
    """What a group gives its hosts (its members and description aside)."""
    given = group.model_dump(exclude={"hosts", "description"}, exclude_none=True)
    return {k: v for k, v in given.items() if v not in ({}, [])}


def _shared_groups(paths: Iterable[Path]) -> dict[str, tuple[Path, GroupEntry]]:
    """Each group that some file of the folder gives settings, with the first such file: a group is one for the
    folder, its hosts in any file take them (a host naming a group another file defined was a KeyError)."""
    shared: dict[str, tuple[Path, GroupEntry]] = {}
    for path in paths:
        try:
            data = yamlfile.load(path).data
        except InputError:
            continue  # said where the file itself is read
        groups = data.get("groups") if isinstance(data, dict) else None
        for name, raw in groups.items() if isinstance(groups, dict) else []:
            entry = _holding(GroupEntry, raw)
            if entry is not None and _settings_of(entry) and str(name) not in shared:
                shared[str(name)] = (path, entry)
    return shared


_KEYS = ", ".join(f"{k}:" for k in InventoryFile.model_fields)


def _merge_file(inv: Inventory, path: Path, beside: Path | None = None, found: list[InputError] | None = None,
                unread: list[Path] | None = None,
                shared: dict[str, tuple[Path, GroupEntry]] | None = None) -> set[str] | None:
    """`beside`: the inventory file the operator named, where `path` is another *.yaml of its folder. `found`:
    where each problem is said and the rest still checked (inv check), else the first is raised. `shared`: the
    groups the folder's files give settings (_shared_groups). The host names the file defines (None when it
    cannot be read as an inventory)."""
    def fail(exc: InputError) -> None:
        if found is None:
            raise exc
        found.append(exc)
    try:
        doc = yamlfile.load(path, collect=found is not None)
    except InputError as exc:
        fail(exc)
        return None
    for twice in doc.duplicates or []:  # inv check: each said, the file read all the same
        fail(twice)
    if doc.data is None:
        inv.files[path] = []
        return set()
    if beside is not None and not (isinstance(doc.data, dict) and set(doc.data) & set(InventoryFile.model_fields)):
        what = (f"its keys are {', '.join(f'{k}:' for k in list(doc.data)[:4])}" if isinstance(doc.data, dict)
                else f"it is a YAML {type(doc.data).__name__}")
        fail(InputError(f"{path}: not an inventory file ({what}; an inventory's are {_KEYS}): fleet reads every "
                        f"*.yaml beside {beside.name} as inventory; move it out of {path.parent} or rename it (.bak)"))
        return None
    if not isinstance(doc.data, dict):
        fail(doc.error((), "an inventory file must be a mapping with hosts/groups/defaults"))
        return None
    model = doc.parse(InventoryFile) if found is None else _lenient(doc, found)
    raw = doc.data.get("hosts")
    defined = {str(k) for k in raw} if isinstance(raw, dict) else set()  # a host refused for a key is defined
    if raw is not None and not isinstance(raw, dict):  # no host names to check the groups' members against
        if unread is not None:
            unread.append(path)
        if any(group.hosts for group in model.groups.values()):
            fail(doc.error(("groups",), "members not checked: hosts: is refused, no host name can be read"))
    for kind, names in (("groups", model.groups), ("hosts", defined)):
        for name in names:
            if not _NAME.fullmatch(str(name)):
                fail(doc.error((kind, name), "names may use letters, digits, '.', '_' and '-' only"))
    members: dict[str, list[str]] = {}
    for gname, group in model.groups.items():
        for h in group.hosts:
            if h not in defined and isinstance(raw, dict | None):
                fail(doc.error(("groups", gname, "hosts"), f"host {h!r} is not defined in this file"
                                                                       f"{errors.did_you_mean(h, defined)}"))
            members.setdefault(h, []).append(gname)
    _share_groups(doc, path, model, shared or {}, fail)
    levels = [(("defaults",), model.defaults), *((("groups", g), e) for g, e in model.groups.items()),
              *((("hosts", h), e) for h, e in model.hosts.items())]
    for where, entry in levels:
        for key in (k for k in _vars(entry.vars) if k in _NOT_VARS):
            own = "" if _NOT_VARS[key] == key else f" is Ansible's; fleet's is {_NOT_VARS[key]}: it"
            fail(doc.error((*where, "vars"), f"{key}{own} is a setting of its own, written beside vars: "
                           f"({_NOT_VARS[key]}: {_vars(entry.vars)[key]}), not inside it: fleet reads no vars.{key}"))
    inv.files[path] = []
    for name, entry in model.hosts.items():
        if name in inv.hosts:
            fail(doc.error(("hosts", name), f"host also defined in {inv.hosts[name].source} (every *.yaml of "
                                            "an inventory's folder is read: a copy kept there must not end in .yaml)"))
            continue
        groups = list(dict.fromkeys([*entry.groups, *members.get(name, [])]))
        for g in groups:
            if g not in model.groups:
                model.groups[g] = GroupEntry()  # a group named only by its members is fine
        settings = _resolve(doc, name, entry, model, groups, fail)
        try:
            bound = _bound_playbook(doc, path, name, model, groups)
        except InputError as exc:
            fail(exc)  # raised, but by inv check: the host's other keys still checked (proxy_jump, ssh_config)
            bound = None
        inv.hosts[name] = Host(name=name, address=entry.address, groups=tuple(groups), source=path,
                               playbook=bound,
                               wheelhouse=path.parent / Path(model.wheelhouse).expanduser() if model.wheelhouse
                               else None, **settings)
        inv.files[path].append(name)
        for g in groups:
            inv.groups.setdefault(g, []).append(name)
    for gname in model.groups:
        inv.groups.setdefault(gname, [])
    return defined


def _share_groups(doc: yamlfile.Document, path: Path, model: InventoryFile,
                  shared: dict[str, tuple[Path, GroupEntry]], fail: Callable[[InputError], None]) -> None:
    """The file's groups as the folder has them: one another file gives settings, with them (this file may list
    members); one given other settings here than there, said."""
    for name, (source, entry) in shared.items():
        own = model.groups.get(name)
        if own is None or not _settings_of(own):
            model.groups[name] = entry.model_copy(update={"hosts": own.hosts if own else []})
        elif source != path and (mine := _settings_of(own)) != (theirs := _settings_of(entry)):
            differ = ", ".join(f"{k} {mine.get(k)!r} vs {theirs.get(k)!r}".replace("None", "unset")
                               for k in GroupEntry.model_fields if mine.get(k) != theirs.get(k))
            fail(doc.error(("groups", name), f"also defined in {source} with other settings ({differ}): a group is "
                           "one for the inventory's folder; give its settings in one file (its members in any)"))


def _bound_playbook(doc: yamlfile.Document, path: Path, name: str, model: InventoryFile,
                    groups: list[str]) -> str | None:
    """The playbook the host's groups bind; two groups binding different ones are an error naming both."""
    bound: dict[str, str] = {}
    for g in groups:
        book = model.groups[g].playbook
        if book is not None:
            # a path is relative to the inventory file's folder, as the file is read from any folder
            book = str(path.parent / book) if book.endswith((".yaml", ".yml")) else book
            bound[g] = book
    if len(set(bound.values())) > 1:
        raise doc.error(("hosts", name, "groups"), "groups " + " and ".join(f"{g} ({b})" for g, b in bound.items())
                        + " bind different playbooks; a host has one")
    return next(iter(bound.values()), None)


def _resolve(doc: yamlfile.Document, name: str, entry: HostEntry, model: InventoryFile,
             groups: list[str], fail: Callable[[InputError], None]) -> dict[str, Any]:
    """The host's settings: defaults < its groups < the host; two groups that disagree each said by `fail`."""
    merged: dict[str, Any] = {k: v for k, v in model.defaults.model_dump().items() if v is not None and k != "vars"}
    variables = _vars(model.defaults.vars)
    offered = {k: "defaults" for k in _env(variables)}  # each vars.env variable and the last level that set it
    from_group: dict[str, str] = {}
    for g in groups:
        group = model.groups[g]
        for key in _SETTINGS:
            value = getattr(group, key)
            if value is None:
                continue
            if key in from_group and merged[key] != value and getattr(entry, key) is None:
                fail(doc.error(("hosts", name, "groups"),
                               f"groups {from_group[key]} and {g} set {key} differently "
                               f"({merged[key]!r} vs {value!r}); set it on the host to decide"))
            merged[key], from_group[key] = value, g
        for key, value in _vars(group.vars).items():
            if key in from_group and variables.get(key) != value and key not in _vars(entry.vars):
                fail(doc.error(("hosts", name, "groups"),
                               f"groups {from_group[key]} and {g} set vars.{key} differently; set it on the host"))
            variables[key], from_group[key] = value, g
        offered.update({k: f"group {g}" for k in _env(_vars(group.vars))})
    merged.update({k: v for k, v in entry.model_dump(include=set(_SETTINGS)).items() if v is not None})
    variables.update(_vars(entry.vars))
    result: dict[str, Any] = {k: merged.get(k, _FALLBACKS.get(k)) for k in _SETTINGS}
    result["written"] = frozenset(k for k in _SETTINGS if k in merged)
    if isinstance(result["become_password"], dict):  # model_dump turned the reference into a dict
        result["become_password"] = SecretRef(**result["become_password"])
    result["vars"] = variables
    result["env_replaced"] = tuple(f"{k} ({level})" for k, level in offered.items() if k not in _env(variables))
    return result
