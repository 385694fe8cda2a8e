"""The one place fleet opens SSH connections.

Fabric's defaults are not safe enough for machines that serve users, so every connection here gets:
strict host-key checking against the known_hosts files ssh would read (Fabric hard-codes AutoAddPolicy,
fabric#2071), an explicit opt-in for first contact, a connect timeout, a keepalive that declares a silent link
dead (fabric#1807; fleet.ssh.keepalive), retries with jittered backoff for connect errors only, ssh_config as
`ssh -G` resolves it (fleet.ssh.config), keys in OpenSSH's order (fleet.ssh.auth), jump hosts shared by every
target behind them, and the sandbox guard on the target and every jump hop before a packet leaves, with each
name resolved once and connected to at that address.
"""

from __future__ import annotations

import errno
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paramiko
from fabric import Config, Connection
from paramiko.ssh_exception import (
    AuthenticationException,
    BadHostKeyException,
    ChannelException,
    NoValidConnectionsError,
    SSHException,
)
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from fleet.errors import ConnectError, InputError, NotReached
from fleet.inventory import Host
from fleet.ssh import auth as sshauth
from fleet.ssh import config as sshconfig
from fleet.ssh import faulty, guard, keepalive, remote
from fleet.ssh import known_hosts as knownhosts
from fleet.ssh.config import Endpoint
from fleet.ssh.heard import Heard, after_banner, not_ssh
from fleet.ssh.known_hosts import host_key_file

DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    connect: float = 10.0
    banner: float = 15.0
    auth: float = 15.0
    keepalive_interval: int = 2
    keepalive_count_max: int = 3  # unanswered keepalives in a row before the link counts as dead


@dataclass(frozen=True, kw_only=True)
class ConnectOptions:
    accept_new_host_keys: bool = False
    timeouts: Timeouts = field(default_factory=Timeouts)
    attempts: int = 3
    # sudo passwords of become hosts, by host name (fleet.ssh.become_password), never printed
    become_passwords: Mapping[str, str] = field(default_factory=dict, repr=False)
    # told each host key --accept-new-host-keys records, as one sentence with its SHA256 fingerprint (the CLI says
    # it on stderr, always: a first contact that trusts a key is worth a line)
    on_new_host_key: Callable[[str], None] | None = field(default=None, compare=False, repr=False)


_known_hosts_lock = threading.Lock()  # appends to known_hosts (first contact) one at a time


class RevokedHostKey(SSHException):
    """The host offered a key that known_hosts marks @revoked."""


class HostCertificatesUnsupported(SSHException):
    """Only a @cert-authority line vouches for the host, and fleet does not verify host certificates."""


class UnknownHostKey(SSHException):
    """The host offered a key no known_hosts line vouches for (and --accept-new-host-keys was not given)."""

    def __init__(self, hostname: str, key: paramiko.PKey, known_as: list[str] | None = None):
        super().__init__(f"Server {hostname!r} not found in known_hosts")  # known_as: this key's lines, other names
        self.key_type, self.fingerprint, self.known_as = key.get_name(), key.fingerprint, known_as or []


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Asked before authentication when the host's key is not among its known (unrevoked) keys: a revoked key
    and a host only a @cert-authority line vouches for are refused; an unknown key is refused too, or on
    first contact (--accept-new-host-keys) recorded in the first user known_hosts file. A changed key still
    fails (BadHostKeyException)."""

    def __init__(self, path: Path, known: knownhosts.KnownHosts, accept_new: bool,
                 told: Callable[[str], None] | None = None, label: str = "", hashed: bool = False):
        self.path, self.known, self.accept_new, self.told, self.label = path, known, accept_new, told, label
        self.hashed = hashed  # ssh_config's HashKnownHosts yes: the name written as ssh writes it, |1|salt|hash
        self.fate: str | None = None  # what became of a key taken on first contact (probe -v says it)

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        where = self.known.revoked(hostname, key)
        if where is not None:
            raise RevokedHostKey(f"host key {key.get_name()} {key.fingerprint} is marked @revoked in {where}: "
                                 "refusing")
        where = self.known.authority_for(hostname)
        if where is not None and not self.accept_new:
            raise HostCertificatesUnsupported(
                f"only a @cert-authority line ({where}) vouches for this host, and fleet does not "
                "verify host certificates: add the host's own key to known_hosts (ssh-keyscan, checked "
                "against its console) or re-run with --accept-new-host-keys on first contact")
        if not self.accept_new:
            raise UnknownHostKey(hostname, key, self.known.known_as(key))
        check = f"`ssh-keygen -lf {host_key_file(key.get_name())}` on its console says the same if it is the host"
        with _known_hosts_lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                with open(self.path, "a") as f:
                    f.write(f"{paramiko.HostKeys.hash_host(hostname) if self.hashed else hostname} "
                            f"{key.get_name()} {key.get_base64()}\n")
            except OSError as exc:  # as OpenSSH's accept-new: this run goes on, and says the key stays unrecorded
                self.fate = f"accepted on first contact, NOT recorded in {self.path} ({exc.strerror or exc})"
                said = (f"accepted new host key {key.get_name()} {key.fingerprint} for {hostname} for this run "
                        f"only: it could not be recorded in {self.path} ({exc.strerror or exc}), so a run without "
                        f"--accept-new-host-keys refuses it ({check})")
            else:
                self.fate = f"recorded on first contact in {self.path}"
                said = (f"recorded new host key {key.get_name()} {key.fingerprint} for {hostname}"
                        f"{' (hashed: HashKnownHosts yes)' if self.hashed else ''} in {self.path} "
                        f"(--accept-new-host-keys; {check})")
            client.get_host_keys().add(hostname, key.get_name(), key)
        if self.told is not None:
            self.told(f"{self.label or hostname}: {said}")


def ssh_config_of(host: Host) -> sshconfig.Config:
    """The ssh_config a connection to `host` reads; under FLEET_SANDBOX_ONLY one that would run a command (Match
    exec) or resolve names on lookup is refused."""
    where = f"{host.source}: hosts.{host.name}"
    cfg = sshconfig.load(host.ssh_config, f"{where}.ssh_config")
    if guard.enabled():
        cfg.refuse_risky(where)
    return cfg


def route(host: Host) -> tuple[Endpoint, list[Endpoint]]:
    """The target and the jump hops (first hop first), with ssh_config applied. No network I/O. Under
    FLEET_SANDBOX_ONLY a config that would run a command (Match exec) or resolve names on lookup is refused
    first, and a ProxyCommand is taken only as an `ssh -W` hop."""
    where = f"{host.source}: hosts.{host.name}"
    cfg = ssh_config_of(host)
    sandbox = guard.enabled()
    try:
        # The inventory's own settings win over ssh_config (as ssh's -l, -p, -i, -J do over the file).
        target = sshconfig.endpoint(cfg, host.address, user=host.user, port=host.port, identity=host.identity_file,
                                    jump=host.proxy_jump, sandbox=sandbox, hop_identity=host.identity_file)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    return target, list(target.hops)


def check_guard(host: Host) -> dict[Endpoint, str]:
    """Refuse (GuardError) before any packet if FLEET_SANDBOX_ONLY=1 and any hop leaves the sandbox. Returns
    the address each hop is pinned to (resolved once, here): connections go there, so a second DNS answer
    cannot send them elsewhere. Without the guard, nothing is pinned and names resolve as OpenSSH does (a
    jump host resolves the next hop by its own DNS)."""
    return _pins(host, *route(host))


def _pins(host: Host, target: Endpoint, hops: list[Endpoint]) -> dict[Endpoint, str]:
    pins: dict[Endpoint, str] = {}
    for ep, role in [*((hop, f"{host.name}: ProxyJump hop {i + 1}") for i, hop in enumerate(hops)),
                     (target, f"{host.name}:")]:
        pin = guard.pin(ep.hostname, role)
        if pin:
            pins[ep] = pin
    return pins


def _is_connect_error(exc: BaseException) -> bool:
    if isinstance(exc, (AuthenticationException, BadHostKeyException)):
        return False
    if isinstance(exc, (NoValidConnectionsError, socket.timeout, TimeoutError, ConnectionError, EOFError)):
        return True
    if isinstance(exc, SSHException):
        return "banner" in str(exc).lower() or "reset" in str(exc).lower()
    return isinstance(exc, OSError)


def _no_banner(exc: BaseException) -> bool:
    """paramiko's words for a host that took the TCP connection and sent no SSH banner: closed before it ("Error
    reading SSH protocol banner"), or silent past the connect timeout (start_client gives up without a word, and
    the host key lookup after it finds "No existing session")."""
    said = str(exc).lower()
    return isinstance(exc, EOFError) or isinstance(exc, SSHException) and (
        "banner" in said or said == "no existing session" or said.startswith("indecipherable protocol version"))


def _gave_up_waiting(exc: BaseException) -> bool:
    """No banner because fleet stopped waiting, not because the host closed: start_client's own deadline ("No
    existing session"), or the banner timeout, which paramiko words as a closed connection is ("Error reading
    SSH protocol banner"), told apart by the exception underneath it (socket.timeout, not EOFError)."""
    said = str(exc).lower()
    return said == "no existing session" or "banner" in said and isinstance(exc.__context__, TimeoutError)


def _silent(exc: BaseException) -> bool:
    """SSH could not reach the host itself: no TCP connection (timed out, refused) or one closed or silent before
    the SSH banner. That is a wedged machine as often as sshd stopped, a wrong port, hosts.deny or MaxStartups,
    so `inv recover` resets a Proxmox guest for it only when told (--unreachable). A name that does not resolve,
    a host key or a login refused are answers, never this."""
    if isinstance(exc, socket.gaierror) or isinstance(exc, SSHException) and (
            not _no_banner(exc) or str(exc).lower().startswith("indecipherable")):  # text, not SSH: an answer
        return False
    no_route = isinstance(exc, OSError) and exc.errno == errno.EHOSTUNREACH  # no ARP answer; not ENETUNREACH
    return no_route or isinstance(exc, (NoValidConnectionsError, socket.timeout, TimeoutError, ConnectionError,
                                        SSHException, EOFError))  # EOFError: a reset before the banner


def cause_of(exc: BaseException) -> NotReached:
    """A failed connection in the word every per-host row shows: a key or a login refused is never `unreachable`."""
    if isinstance(exc, BadHostKeyException):
        return NotReached.CHANGED_KEY
    if isinstance(exc, (RevokedHostKey, HostCertificatesUnsupported)):
        return NotReached.REFUSED_KEY
    if isinstance(exc, UnknownHostKey) or isinstance(exc, SSHException) and "not found in known_hosts" in str(exc):
        return NotReached.UNKNOWN_KEY
    if isinstance(exc, AuthenticationException):
        return NotReached.LOGIN
    return NotReached.UNREACHABLE if _silent(exc) else NotReached.OTHER


class _ProxyCommand(paramiko.ProxyCommand):
    """paramiko's ProxyCommand run through `sh -c` as OpenSSH runs it, its stderr to ours (as ssh leaves it,
    and so a chatty command cannot fill a pipe nobody reads), and on close ended, reaped and its pipes shut."""

    def __init__(self, command: str):  # not super().__init__: it splits the command and pipes its stderr
        # a terminal's Ctrl-C and hang-up reach its whole job, and so does `timeout`'s SIGTERM: ignored here (ssh and
        # sh leave an ignored one so), the link stays up while fleet answers them by ending its hosts' steps
        self.cmd = ["sh", "-c", "trap '' HUP INT TERM; " + command]
        self.process = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.timeout = None

    def close(self) -> None:
        """Its input ended (`ssh -W` ends with it), then killed: it ignores SIGTERM."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class Hop(Connection):  # type: ignore[misc]
    """A Fabric Connection that makes its own socket on every open: to the pinned address, through the hop
    before it (a direct-tcpip channel), or through a ProxyCommand. Jump hosts are shared: every target behind
    the same chain in this process rides one authenticated connection to it (a bastion sees one handshake,
    not one per target, so its sshd's MaxStartups never drops fleet's), which closes with its last user.
    Class attributes, because a Fabric Connection turns unknown attributes into config keys."""

    endpoint: Endpoint | None = None
    role: str = "target"
    pin: str | None = None
    via: Hop | None = None
    known: knownhosts.KnownHosts = knownhosts.KnownHosts()
    strategy: sshauth.Strategy | None = None
    timeouts: Timeouts = Timeouts()
    lines: list[str] = []  # how it was reached, set on each open
    users: int = 0  # targets and hops riding a shared jump host
    shared_key: tuple[Any, ...] | None = None
    opening: threading.Lock | None = None
    hostkeys: _HostKeyPolicy | None = None  # asked for a key known_hosts lacks

    def bind(self, ep: Endpoint, role: str, pin: str | None, via: Hop | None, known: knownhosts.KnownHosts,
             strategy: sshauth.Strategy, timeouts: Timeouts, hostkeys: _HostKeyPolicy) -> None:
        """Where and how it connects: its endpoint, pinned address, the hop before it, host keys and auth."""
        self.endpoint, self.role, self.pin, self.via, self.known = ep, role, pin, via, known
        self.strategy, self.timeouts, self.hostkeys = strategy, timeouts, hostkeys
        self.client.set_missing_host_key_policy(hostkeys)

    def share_as(self, key: tuple[Any, ...]) -> None:
        """A jump host every target behind the same chain rides (`_shared[key]`)."""
        self.shared_key, self.opening = key, threading.Lock()

    def take(self) -> None:
        """One more target or hop rides it."""
        self.users += 1

    def let_go(self) -> bool:
        """One fewer rides it; True when none does any longer."""
        self.users -= 1
        return self.users <= 0

    def _socket(self) -> Any:
        ep = self.endpoint
        assert ep is not None
        where = (self.pin or ep.hostname, ep.port)
        if self.via is not None:
            self.via.open()
            assert self.via.transport is not None
            return self.via.transport.open_channel("direct-tcpip", where, ("", 0), timeout=self.timeouts.connect)
        if ep.proxy_command:
            return _ProxyCommand(ep.proxy_command)
        return Heard(socket.create_connection(where, timeout=self.timeouts.connect))

    def open(self) -> Any:
        if self.opening is None:
            return self._open()
        with self.opening:  # a shared jump host: one thread connects it, the others then find it connected
            return self._open()

    def _open(self) -> Any:
        if self.is_connected:
            return None
        self.connect_kwargs["sock"] = self._socket()
        result = super().open()
        self.lines = self._record()
        t = self.timeouts
        keepalive.start(self.transport, t.keepalive_interval, t.keepalive_count_max)
        return result

    def _record(self) -> list[str]:
        ep = self.endpoint
        if ep is None or self.transport is None:
            return []
        how = (f"pinned to {self.pin}" if self.pin else "resolved by name") + (
            f", through {self.via.endpoint.alias}" if self.via is not None and self.via.endpoint else "") + (
            f", through ProxyCommand {ep.proxy_command!r}" if ep.proxy_command else "")
        key = self.transport.get_remote_server_key()
        where = self.known.where(ep.key_name, key) or getattr(self.hostkeys, "fate", None) or "taken on first contact"
        lines = [f"{self.role}: {ep.user}@{ep.hostname}:{ep.port} ({how})",
                 f"{self.role}: host key {key.get_name()} {key.fingerprint} for {ep.key_name} matched {where}"]
        notes = self.strategy.notes if self.strategy is not None else []
        return lines + [f"{self.role}: identity {note.what}: {note.fate}" for note in notes]

    def close(self) -> None:
        super().close()
        if self.via is not None:
            _release(self.via)


_shared_lock = threading.RLock()
_shared: dict[tuple[Any, ...], Hop] = {}


def _release(hop: Hop) -> None:
    with _shared_lock:
        if not hop.let_go():
            return
        if hop.shared_key is not None and _shared.get(hop.shared_key) is hop:
            del _shared[hop.shared_key]
    hop.close()


def _jump(host: Host, chain: list[Endpoint], opts: ConnectOptions, pins: dict[Endpoint, str]) -> Hop | None:
    """The shared connection to the last jump host of chain (one per chain, pins and host-key files), taken
    for one more user; None for no chain."""
    if not chain:
        return None
    ep = chain[-1]
    files, record_in = known_hosts_files(host, ep)
    key = (tuple((e, pins.get(e)) for e in chain), tuple(files), record_in, opts.accept_new_host_keys,
           opts.timeouts)
    with _shared_lock:
        hop = _shared.get(key)
        if hop is None:
            via = _jump(host, chain[:-1], opts, pins)
            hop = _connection(host, ep, f"jump host {len(chain)}", opts, via, pins.get(ep))
            hop.share_as(key)
            _shared[key] = hop
        hop.take()
        return hop


def known_hosts_files(host: Host, ep: Endpoint) -> tuple[list[Path], Path]:
    """The files a hop's host keys are read from (the inventory's known_hosts, else ssh_config's
    UserKnownHostsFile, then GlobalKnownHostsFile) and the one a first contact is recorded in."""
    users = [Path(host.known_hosts).expanduser()] if host.known_hosts else [Path(p) for p in ep.user_known_hosts]
    files = users + [Path(p) for p in ep.global_known_hosts]
    return files, users[0] if users else Path(DEFAULT_KNOWN_HOSTS).expanduser()


def _connection(host: Host, ep: Endpoint, role: str, opts: ConnectOptions, via: Hop | None,
                pin: str | None) -> Hop:
    t = opts.timeouts
    strategy = sshauth.Strategy(ep)
    # paramiko looks host keys up as HOST, or [HOST]:PORT off port 22; HostKeyAlias is taken as it is
    name, port = (ep.host_key_alias, 22) if ep.host_key_alias else (ep.hostname, ep.port)
    conn = Hop(
        host=name, user=ep.user, port=port,
        config=Config(overrides={"load_ssh_configs": False}),
        connect_timeout=int(t.connect),
        connect_kwargs={"auth_strategy": strategy, "banner_timeout": t.banner, "auth_timeout": t.auth},
    )
    files, record_in = known_hosts_files(host, ep)
    known = knownhosts.load_all(files, host.name)
    label = host.name if role == "target" else f"{host.name} ({role} {ep.alias})"
    conn.bind(ep, role, pin, via, known, strategy, t, _HostKeyPolicy(
        record_in, known, opts.accept_new_host_keys, opts.on_new_host_key, label, ep.hash_known_hosts))
    for keytype, key in known.keys_for(ep.key_name).items():
        conn.client.get_host_keys().add(ep.key_name, keytype, key)
    return conn


def _describe(host: Host, conn: Hop, exc: BaseException, timeouts: Timeouts) -> str:
    ep = conn.endpoint
    assert ep is not None
    where = f"{host.name} ({ep.user}@{ep.hostname}:{ep.port}{'' if conn.role == 'target' else ', ' + conn.role})"
    files = ", ".join(str(p) for p in known_hosts_files(host, ep)[0])
    if isinstance(exc, BadHostKeyException):
        line = conn.known.where(ep.key_name, exc.expected_key)
        known = (f"{line} has {exc.expected_key.get_name()} {exc.expected_key.fingerprint}" if line else
                 f"known_hosts ({files}) has another")
        remove = conn.known.how_to_remove(ep.key_name, exc.expected_key, line)
        return (f"{where}: host key CHANGED (offered {exc.key.get_name()} {exc.key.fingerprint}; {known} for "
                f"{ep.key_name}): refusing; if the host was reinstalled, check the new key on its console "
                f"(`ssh-keygen -lf {host_key_file(exc.key.get_name())}`), then {remove}")
    if isinstance(exc, (RevokedHostKey, HostCertificatesUnsupported)):
        return f"{where}: {exc}"
    if isinstance(exc, UnknownHostKey):  # a key known_hosts has for other names says so, as ssh's prompt does
        return (f"{where}: host key unknown (no entry for {ep.key_name} in {files}); it offers {exc.key_type} "
                f"{exc.fingerprint}" + (knownhosts.other_names_said(exc.known_as) or ": first contact? check that "
                f"against `ssh-keygen -lf {host_key_file(exc.key_type)}` on its console, then re-run with "
                "--accept-new-host-keys") + sshconfig.strict_said(ep))
    if isinstance(exc, SSHException) and "not found in known_hosts" in str(exc):
        return (f"{where}: host key unknown (no entry for {ep.key_name} in {files}); first contact? re-run with "
                "--accept-new-host-keys")
    if isinstance(exc, AuthenticationException) and conn.strategy is not None:
        return f"{where}: {conn.strategy.explain()}"
    timeout = timeouts.connect
    heard = getattr(conn.connect_kwargs.get("sock"), "heard", b"")
    if said := after_banner(where, heard, exc, timeouts.connect):
        return said
    if _no_banner(exc) and (other := not_ssh(heard)):
        return (f"{where}: answered with something that is not SSH on that port: {other}; check the port (another "
                "service listens there) and where sshd listens")
    if _no_banner(exc):
        waited = timeouts.connect if str(exc).lower() == "no existing session" else timeouts.banner
        return (f"{where}: took the connection but sent no SSH banner within {waited:.0f}s (a wedged sshd, "
                "MaxStartups, a middlebox, or no SSH server on that port); check sshd there (its console), then retry"
                if _gave_up_waiting(exc) else
                f"{where}: closed the connection before sending the SSH banner (sshd refusing: MaxStartups, "
                "hosts.deny, a middlebox, or no SSH server on that port); check sshd there, then retry")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return (f"{where}: timed out connecting after {timeout:.0f}s (no answer: host down, link cut or a "
                f"firewall); check it is up and reachable (ping, its console), then retry")
    if isinstance(exc, socket.gaierror):
        return f"{where}: cannot resolve {ep.hostname} ({exc.strerror})"
    if isinstance(exc, ChannelException):
        via = conn.via.endpoint.alias if conn.via is not None and conn.via.endpoint else "the jump host"
        return f"{where}: {via} could not open a connection to it ({exc.text}); check the address and port"
    if isinstance(exc, (NoValidConnectionsError, ConnectionError, OSError)):
        return (f"{where}: connection refused or unreachable ({getattr(exc, 'strerror', None) or exc}); check "
                "sshd runs there and the address and port are right")
    return f"{where}: SSH failed: {str(exc).strip() or type(exc).__name__}"


def trace_of(conn: Connection) -> list[str]:
    """How conn was made, first hop first: each hop's address, the known_hosts line that vouched for its host
    key, and the identities offered."""
    chain: list[Hop] = []
    hop = conn if isinstance(conn, Hop) else None
    while hop is not None:
        chain.insert(0, hop)
        hop = hop.via
    return [line for h in chain for line in h.lines]


def open_connection(host: Host, opts: ConnectOptions | None = None) -> Connection:
    """Open and return a connected Fabric Connection (guard, host keys, keepalive, retries)."""
    opts = opts or ConnectOptions()
    target, hops = route(host)
    pins = _pins(host, target, hops)
    conn = _connection(host, target, "target", opts, _jump(host, hops, opts, pins), pins.get(target))
    try:
        for attempt in Retrying(
            stop=stop_after_attempt(opts.attempts),
            wait=wait_random_exponential(multiplier=0.5, max=5),
            retry=retry_if_exception(_is_connect_error),
            reraise=True,
        ):
            with attempt:
                conn.open()
    except Exception as exc:
        failed, hop = conn, conn.via
        while hop is not None:  # the first hop of the chain that is not up is where it failed
            failed = hop if not hop.is_connected else failed
            hop = hop.via
        conn.close()
        raise ConnectError(_describe(host, failed, exc, opts.timeouts), unreachable=failed is conn and _silent(exc),
                           cause=cause_of(exc) if failed is conn else NotReached.OTHER) from None
    faulty.install(conn)
    try:
        remote.establish_become(conn, host, opts.become_passwords.get(host.name))
    except BaseException:
        conn.close()
        raise
    return conn
