"""The strings that reach a systemd unit, an env file, a path or a shell command, checked once, at load.

Each is a typed pydantic field (`Annotated[str, AfterValidator(...)]`) with a whole-string match (a `$` in a
regex would let a trailing newline through: `re.match(r"^x$", "x\\n")` matches). Free text that is legal in a
unit is escaped where it is written (fleet.host.render); here it only must not hold control characters. And the
inventory's `vars.env` (HostVars), whose values reach the env file.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, field_validator

_UNIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9:_.\\-]{0,200}(?:@[A-Za-z0-9:_.\\-]{0,50})?")  # systemd.unit(5)
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")  # useradd's default NAME_REGEX, without the trailing $
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
_HOSTNAME = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*")
_ZONE = re.compile(r"[A-Za-z0-9_.-]{1,15}")  # an interface name: 15 characters (IFNAMSIZ), no shell syntax
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # C0, DEL, C1, Unicode line breaks
MAX_TEXT = 4096
T = TypeVar("T")


def text(v: str) -> str:
    """Free text: no control characters (a newline would start a new directive or line), bounded."""
    if _CONTROL.search(v):
        raise ValueError(f"{v[:60]!r} contains a newline or another control character")
    if len(v) > MAX_TEXT:
        raise ValueError(f"longer than {MAX_TEXT} characters")
    return v


def unit_name(v: str) -> str:
    if not _UNIT.fullmatch(v) or v.endswith(".service"):
        raise ValueError(f"not a systemd unit name (letters, digits, ':_.-', one '@'; without .service): {v[:60]!r}")
    return v


def user_name(v: str) -> str:
    if not _USER.fullmatch(v):
        raise ValueError(f"not a user name (lower-case letters, digits, '_' and '-', 32 at most): {v[:60]!r}")
    return v


def name(v: str) -> str:
    if not _NAME.fullmatch(v):
        raise ValueError(f"{v[:60]!r}: lower-case letters, digits, '.', '_', '-' (63 at most)")
    return v


def abs_path(v: str) -> str:
    """An absolute, normalised POSIX path (no '..', no '//', no trailing '/'), no control characters, no quotes,
    backslash or '$' (what an ExecStart path cannot carry)."""
    text(v)
    if not v.startswith("/") or posixpath.normpath(v) != v or v.startswith("//"):
        raise ValueError(f"must be an absolute path, normalised (no '..', '//' or trailing '/'): {v[:60]!r}")
    # systemd refuses an executable path with quotes or a backslash (string_is_safe), and does not expand "$$"
    # in it (only in arguments), so no escaping can carry a '$' there
    if any(c in v for c in "'\"\\$"):
        raise ValueError(f"must not contain quotes, a backslash or '$': {v[:60]!r}")
    return v


def local_path(v: str) -> str:
    """A path on the machine fleet runs on; `~user/...` only for a user that exists (expanded where it is used)."""
    text(v)
    if v.startswith("~"):
        try:
            Path(v).expanduser()
        except RuntimeError:
            raise ValueError(f"{v[:60]!r}: no such user {v[1:].split('/', 1)[0]!r} here to take ~ from") from None
    return v


def host_addr(v: str) -> str:
    """An IP address or a DNS name (what sglang's --host and a URL take). An IPv6 zone id (`fe80::1%eth0`) is
    an interface name: Python's ipaddress takes any text after the `%`, which would reach a ProxyCommand's `%h`
    (run by `sh -c`) and known_hosts (`,` starts another host name there)."""
    try:
        ipaddress.ip_address(v)
    except ValueError:
        if not _HOSTNAME.fullmatch(v) or v.replace(".", "").isdigit():
            raise ValueError(f"not an IP address or host name: {v[:60]!r}") from None
        return v
    _, percent, zone = v.partition("%")
    if percent and not _ZONE.fullmatch(zone):
        raise ValueError(f"IPv6 zone id {zone[:40]!r}: an interface name (letters, digits, '_', '.', '-'; 15 at most)")
    return v


Text = Annotated[str, AfterValidator(text)]
UnitName = Annotated[str, AfterValidator(unit_name)]
UserName = Annotated[str, AfterValidator(user_name)]
Name = Annotated[str, AfterValidator(name)]
AbsPath = Annotated[str, AfterValidator(abs_path)]
HostAddr = Annotated[str, AfterValidator(host_addr)]
LocalPath = Annotated[str, AfterValidator(local_path)]


def env_text(env: Any) -> Any:
    """A number or true/false in an env mapping is text, as Python spells it (`8`, `True`), as vars.env takes it
    (`OMP_NUM_THREADS: 8` was refused with pydantic's own 'Input should be a valid string')."""
    if not isinstance(env, dict):
        return env
    return {k: str(v) if isinstance(v, int | float | bool) else v for k, v in env.items()}


def each(items: Iterable[T], check: Callable[[T], object]) -> None:
    """Every item checked: what is wrong with each, said at once in one ValueError (a field has one error)."""
    wrong = []
    for item in items:
        try:
            check(item)
        except ValueError as exc:
            wrong.append(str(exc))
    if wrong:
        raise ValueError("; ".join(wrong))


class HostVars(BaseModel):
    """A host's `vars:`: the site's own keys (rack, proxmox, ...), free-form, and `env`, which fleet reads: the
    server's environment on this host, over the playbook's `serve.env` and the rung's `env` (docs/playbooks.md,
    "Environment: who wins"). A number or a boolean is written as Python spells it (`1`, `True`)."""

    model_config = ConfigDict(extra="allow")

    env: dict[str, str] | None = None

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: Any) -> dict[str, str] | None:
        if v is None:
            return None
        if not isinstance(v, dict):
            raise ValueError("a mapping of NAME: value")
        each(v.items(), lambda item: _variable(*item))  # what is wrong with each, said at once
        return {name: str(value) for name, value in v.items()}


def _variable(name: object, value: object) -> None:
    if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
        raise ValueError(f"environment variable name {name!r} is not valid")
    if not isinstance(value, str | int | float | bool):
        raise ValueError(f"env {name}: a value is text, a number or true/false")
    try:
        text(str(value))
    except ValueError as exc:
        raise ValueError(f"env {name}: {exc}") from None
