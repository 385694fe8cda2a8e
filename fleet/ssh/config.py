"""ssh_config(5) as OpenSSH reads it, resolved into where each hop of a connection goes. No network I/O.

paramiko's parser does the Host/Match matching and the `%` tokens; this module adds what it lacks or gets
wrong for fleet:

- `Include` (globs, `~`, paths relative to ~/.ssh or /etc/ssh, nested up to 16 deep as OpenSSH allows).
  An included file's Host lines end where the file ends: the enclosing block is opened again after it.
- Both files OpenSSH reads: the user's ~/.ssh/config, then /etc/ssh/ssh_config. A file the inventory names
  (`ssh_config:`) is read alone, as `ssh -F FILE` reads it.
- The risky directives found before paramiko evaluates anything: `Match exec` runs a local command on every
  lookup and `CanonicalizeHostname` resolves names, so under FLEET_SANDBOX_ONLY both are refused in one line
  naming the file and line (paramiko would run the command while it looks the host up).
- The default identities, known_hosts files, `IdentitiesOnly`, `HostKeyAlias`, `ProxyJump` chains (each hop
  looked up in its own right, as `ssh -J` does) and `ProxyCommand`.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import threading
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from fleet.errors import InputError
from fleet.ssh import filestamp

USER_CONFIG = Path("~/.ssh/config")
SYSTEM_CONFIG = Path("/etc/ssh/ssh_config")
# ssh_config(5) IdentityFile: what ssh tries when no IdentityFile is given, in this order (OpenSSH 9).
DEFAULT_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk", "~/.ssh/id_ed25519",
                      "~/.ssh/id_ed25519_sk")
USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
MAX_INCLUDE_DEPTH = 16  # readconf.c READCONF_MAX_DEPTH
MAX_HOPS = 8

_KEYWORD = re.compile(r"\s*(\w+)(?:\s*=\s*|\s+)(.*)")


@dataclass(frozen=True)
class Directive:
    where: str  # FILE:LINE
    text: str


@dataclass(frozen=True)
class Config:
    """The merged text of every file read, parsed by paramiko, with what must be judged before a lookup."""

    parsed: paramiko.SSHConfig
    files: tuple[str, ...] = ()
    risky: tuple[Directive, ...] = ()  # Match exec, CanonicalizeHostname yes|always

    def refuse_risky(self, who: str) -> None:
        """Under FLEET_SANDBOX_ONLY: refuse a config that would run a command or resolve names on lookup."""
        if self.risky:
            d = self.risky[0]
            raise InputError(f"{who}: {d.where}: {d.text!r} refused: FLEET_SANDBOX_ONLY=1 does not let ssh_config "
                             "run commands or canonicalize names (Match exec, CanonicalizeHostname); nothing was "
                             "run or sent")


def _split_args(value: str) -> list[str]:
    try:
        return shlex.split(value, comments=False)
    except ValueError:
        return value.split()


# What a parsed config was read from, to tell whether it still holds: ("file", path, (mtime, size) or None)
# for each file looked at, ("glob", pattern, matches) for each Include.
Dep = tuple[str, str, object]


def _holds(dep: Dep) -> bool:
    kind, arg, seen = dep
    return (filestamp.stamp(arg) if kind == "file" else sorted(glob.glob(arg))) == seen


def _include_paths(arg: str, base: Path, deps: list[Dep]) -> list[str]:
    path = os.path.expanduser(arg)
    if not os.path.isabs(path):
        path = str(base / path)
    found = sorted(glob.glob(path))
    deps.append(("glob", path, found))
    return found


def _expand(path: Path, base: Path, depth: int, header: str, out: list[str], risky: list[Directive],
            files: list[str], deps: list[Dep]) -> None:
    """Append path's lines to out, Includes inlined in place; header is the Host/Match line in force."""
    if depth > MAX_INCLUDE_DEPTH:
        raise InputError(f"{path}: Include nested more than {MAX_INCLUDE_DEPTH} deep (a loop?)")
    deps.append(("file", str(path), filestamp.stamp(path)))
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ssh_config ({exc.strerror})") from None
    files.append(str(path))
    current = header
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = _KEYWORD.match(line)
        if not line or line.startswith("#") or not m:
            out.append(line)
            continue
        key, value = m.group(1).lower(), m.group(2).strip()
        where = f"{path}:{number}"
        if key in ("host", "match"):
            current = line
            if key == "match" and any(a.lower() == "exec" for a in _split_args(value)):
                risky.append(Directive(where, line))
        elif key == "canonicalizehostname" and value.lower() in ("yes", "always"):
            risky.append(Directive(where, line))
        if key == "include":
            for arg in _split_args(value):
                for found in _include_paths(arg, base, deps):
                    if Path(found).is_file():
                        _expand(Path(found), base, depth + 1, current, out, risky, files, deps)
                        out.append(current)  # the included file's Host lines end with it
            continue
        out.append(line)


_cache_lock = threading.Lock()
_cache: dict[tuple[str | None, Path, Path], tuple[tuple[Dep, ...], Config]] = {}


def load(named: str | None, owner: str) -> Config:
    """The ssh_config a connection uses: the file the inventory names, alone; else ~/.ssh/config then
    /etc/ssh/ssh_config, each if present. owner names the inventory setting for errors. Read once while its
    files (and what their Includes match) stay the same: every host of a fleet looks it up."""
    key = (named, USER_CONFIG.expanduser(), SYSTEM_CONFIG)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and all(_holds(dep) for dep in cached[0]):
        return cached[1]
    deps: list[Dep] = []
    cfg = _read(named, owner, deps)
    with _cache_lock:
        _cache[key] = (tuple(deps), cfg)
    return cfg


def _read(named: str | None, owner: str, deps: list[Dep]) -> Config:
    lines: list[str] = []
    risky: list[Directive] = []
    files: list[str] = []
    user_base = USER_CONFIG.expanduser().parent
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise InputError(f"{owner}: no such file {path}")
        _expand(path, user_base, 0, "Host *", lines, risky, files, deps)
    else:
        for path, base in ((USER_CONFIG.expanduser(), user_base), (SYSTEM_CONFIG, SYSTEM_CONFIG.parent)):
            if path.is_file():
                _expand(path, base, 0, "Host *", lines, risky, files, deps)
                lines.append("Host *")
            else:
                deps.append(("file", str(path), None))
    try:
        parsed = paramiko.SSHConfig.from_text("\n".join(lines))
    except paramiko.ssh_exception.ConfigParseError as exc:
        raise InputError(f"{owner}: {', '.join(files)}: {exc}") from None
    return Config(parsed=parsed, files=tuple(files), risky=tuple(risky))


@dataclass(frozen=True)
class Endpoint:
    """One hop with ssh_config applied: where it connects, as whom, with which keys, checked against which
    known_hosts names and files."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    identities_only: bool = False
    identities_named: bool = False  # False: the defaults of ssh_config(5), tried if they exist
    host_key_alias: str | None = None
    user_known_hosts: tuple[str, ...] = USER_KNOWN_HOSTS
    global_known_hosts: tuple[str, ...] = GLOBAL_KNOWN_HOSTS
    hash_known_hosts: bool = False  # HashKnownHosts yes: a key taken on first contact is recorded as |1|salt|hash
    strict_host_keys: str = "ask"  # StrictHostKeyChecking: not followed (fleet takes keys on --accept-new-host-keys)
    proxy_command: str | None = None  # honoured as is outside FLEET_SANDBOX_ONLY
    hops: tuple[Endpoint, ...] = field(default=(), compare=False)  # the jump hosts before it, first first

    @property
    def key_name(self) -> str:
        """The name its host key is looked up and recorded under (never the address alone when an alias is
        set): HostKeyAlias, else the host name, as `[host]:port` off port 22."""
        if self.host_key_alias:
            return self.host_key_alias
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


_SAFE_HOSTNAME = re.compile(r"[A-Za-z0-9_:][A-Za-z0-9_.:%-]{0,252}")  # `::1` too; never a leading '-' (an option)


def _files(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if value and value.lower() == "none":
        return ()
    return tuple(os.path.expanduser(p) for p in (_split_args(value) if value else default))


def parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    """One ProxyJump element, `[user@]host[:port]` (or `[host]:port`), as (user, host, port)."""
    user, _, rest = spec.rpartition("@")
    host, port = rest, None
    try:
        if rest.startswith("["):
            host, _, tail = rest[1:].partition("]")
            port = int(tail[1:]) if tail.startswith(":") else None
        elif rest.count(":") == 1:
            host, p = rest.split(":")
            port = int(p)
    except ValueError:
        raise InputError(f"bad ProxyJump element {spec!r}") from None
    if not host or (port is not None and not 0 < port < 65536):
        raise InputError(f"bad ProxyJump element {spec!r}")
    return (user or None), host, port


@dataclass(frozen=True)
class SshW:
    """A ProxyCommand of the form `ssh [-q…] [-l USER] [-p PORT] [-i KEY] [-J JUMP] -W %h:%p [USER@]HOST`:
    a jump host in another spelling, whose hop the guard can judge."""

    user: str | None
    host: str
    port: int | None
    identity: str | None
    jump: str | None


_SSH_FLAGS = set("qTxaCN46")


def parse_ssh_w(command: str, target: str) -> SshW | None:
    """command as an `ssh -W` relay to target (`host:port`, tokens already expanded), or None if it is another
    kind of ProxyCommand."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if not argv or os.path.basename(argv[0]) != "ssh":
        return None
    opts: dict[str, str] = {}
    dest: list[str] = []
    args = iter(argv[1:])
    for a in args:
        if a.startswith("-") and len(a) >= 2:
            flag, rest = a[1], a[2:]
            if flag in "lpiJW":
                value = rest or next(args, "")
                if not value:
                    return None
                opts[flag] = value
            elif set(a[1:]) <= _SSH_FLAGS:
                continue
            else:
                return None
        else:
            dest.append(a)
    if len(dest) != 1 or opts.get("W") != target:
        return None
    user, host, port = parse_jump(dest[0])
    try:
        port = int(opts["p"]) if "p" in opts else port
    except ValueError:
        return None
    return SshW(user=opts.get("l") or user, host=host, port=port, identity=opts.get("i"), jump=opts.get("J"))


def _port(cfg: Config, text: str) -> int:
    """ssh_config's Port, or one line naming the file and line that set a port that is not one."""
    if text.isascii() and text.isdigit() and 0 < int(text) < 65536:
        return int(text)
    where = ", ".join(cfg.files) or "ssh_config"
    for name in cfg.files:
        try:
            lines = Path(name).read_text(errors="replace").splitlines()
        except OSError:
            continue
        for n, line in enumerate(lines, 1):
            if re.fullmatch(rf"\s*port\s*(=\s*|\s)\s*\"?{re.escape(text)}\"?\s*", line, re.IGNORECASE):
                where = f"{name}:{n}"
                break
        else:
            continue
        break
    raise InputError(f"{where}: Port {text[:40]!r} is not a port (1 to 65535)")


def endpoint(cfg: Config, alias: str, *, user: str | None = None, port: int | None = None,
             identity: str | None = None, jump: str | None = None, sandbox: bool = False,
             hop_identity: str | None = None, depth: int = 0) -> Endpoint:
    """alias resolved as `ssh alias` would (the arguments are the command line's -l, -p, -i and -J, which win
    over ssh_config), with the jump hosts before it. sandbox: ProxyCommand only in its `ssh -W` form.
    hop_identity: also offered to jump hosts that name no IdentityFile of their own, after the defaults (an
    inventory's identity_file, which an operator expects to open the bastion too)."""
    if depth > MAX_HOPS:
        raise InputError(f"{alias}: more than {MAX_HOPS} ProxyJump hops (a loop in ssh_config?)")
    found = cfg.parsed.lookup(alias)
    hostname = found.get("hostname", alias)
    the_port = port or _port(cfg, found.get("port", "22"))
    named = [identity] if identity else found.get("identityfile", [])
    spec = jump or found.get("proxyjump")
    command = None if spec else found.get("proxycommand")
    hops: tuple[Endpoint, ...] = ()
    relay = parse_ssh_w(command, f"{hostname}:{the_port}") if command else None
    if command and sandbox and relay is None:
        raise InputError(f"{alias}: ProxyCommand {command!r} refused: under FLEET_SANDBOX_ONLY=1 only the "
                         "`ssh -W %h:%p HOST` form is accepted, whose hop the guard can check")
    if relay is not None and sandbox:
        hop = endpoint(cfg, relay.host, user=relay.user, port=relay.port, identity=relay.identity,
                       jump=relay.jump, sandbox=sandbox, hop_identity=hop_identity, depth=depth + 1)
        hops, command = (*hop.hops, hop), None
    elif spec and spec.lower() != "none":
        parts = [p.strip() for p in spec.split(",") if p.strip()]
        last_user, last_host, last_port = parse_jump(parts[-1])
        last = endpoint(cfg, last_host, user=last_user, port=last_port, jump=",".join(parts[:-1]) or None,
                        sandbox=sandbox, hop_identity=hop_identity, depth=depth + 1)
        hops = (*last.hops, last)
    if command and command.lower() == "none":
        command = None
    if not _SAFE_HOSTNAME.fullmatch(hostname):
        # %h in a ProxyCommand is run by `sh -c`, and a host name is a pattern list in known_hosts
        # (OpenSSH 9.6 refuses such names for the same reason)
        raise InputError(f"{alias[:60]}: host name {hostname[:60]!r} refused: only letters, digits and '.-_:%' "
                         "(a name or an address), not starting with '-'")
    files = named or [*DEFAULT_IDENTITIES, *([hop_identity] if hop_identity and depth else [])]
    return Endpoint(
        alias=alias,
        hostname=hostname,
        port=the_port,
        user=user or found.get("user") or "root",
        identity_files=tuple(os.path.expanduser(p) for p in files),
        identities_only=bool(identity) or found.get("identitiesonly", "no").lower() == "yes",
        identities_named=bool(named),
        host_key_alias=found.get("hostkeyalias"),
        user_known_hosts=_files(found.get("userknownhostsfile"), USER_KNOWN_HOSTS),
        global_known_hosts=_files(found.get("globalknownhostsfile"), GLOBAL_KNOWN_HOSTS),
        hash_known_hosts=found.get("hashknownhosts", "no").lower() == "yes",
        strict_host_keys=found.get("stricthostkeychecking", "ask"),
        proxy_command=command,
        hops=hops,
    )


def strict_said(ep: Endpoint) -> str:
    """Where ssh_config lets `ssh` take a new key without asking (StrictHostKeyChecking accept-new, no, off), the
    refusal of an unknown key says fleet does not follow it: `ssh HOST` logged in, fleet said only `first contact?`."""
    if ep.strict_host_keys.lower() not in ("accept-new", "no", "off"):
        return ""
    return (f" (ssh_config's StrictHostKeyChecking {ep.strict_host_keys}, which `ssh` follows, is not fleet's: it "
            "records a new key only with --accept-new-host-keys)")
