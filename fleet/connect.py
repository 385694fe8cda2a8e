"""The one place fleet opens SSH connections.

Fabric's defaults are not safe enough for machines that serve users, so every connection here gets:
strict host-key checking against a known_hosts file (Fabric hard-codes AutoAddPolicy, fabric#2071),
an explicit opt-in for first contact, a connect timeout, a keepalive that declares a silent link dead
(fabric#1807; fleet.keepalive), retries with jittered backoff for connect errors only, ssh_config's
HostName/User/Port/IdentityFile/ProxyJump,
and the sandbox guard on the target and every jump hop before a packet leaves.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from fabric import Config, Connection
from paramiko.ssh_exception import (
    AuthenticationException,
    BadHostKeyException,
    NoValidConnectionsError,
    SSHException,
)
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from fleet import guard, keepalive, knownhosts, remote
from fleet.errors import ConnectError, InputError
from fleet.inventory import Host

DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
DEFAULT_SSH_CONFIG = Path("~/.ssh/config")


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
    # sudo passwords of become hosts, by host name (fleet.inputs.become_passwords), never printed
    become_passwords: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Endpoint:
    """Where a hop really goes once ssh_config is applied."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]


_known_hosts_lock = threading.Lock()  # appends to known_hosts (first contact) one at a time


class RevokedHostKey(SSHException):
    """The host offered a key that known_hosts marks @revoked."""


class HostCertificatesUnsupported(SSHException):
    """Only a @cert-authority line vouches for the host, and fleet does not verify host certificates."""


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Asked before authentication when the host's key is not among its known (unrevoked) keys: a revoked key
    and a host only a @cert-authority line vouches for are refused; an unknown key is refused too, or on
    first contact (--accept-new-host-keys) recorded. A changed key still fails (BadHostKeyException)."""

    def __init__(self, path: Path, known: knownhosts.KnownHosts, accept_new: bool):
        self.path, self.known, self.accept_new = path, known, accept_new

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        line = self.known.revoked(hostname, key)
        if line is not None:
            raise RevokedHostKey(f"host key {key.get_name()} is marked @revoked in {self.path}:{line}: refusing")
        line = self.known.authority_for(hostname)
        if line is not None and not self.accept_new:
            raise HostCertificatesUnsupported(
                f"only a @cert-authority line ({self.path}:{line}) vouches for this host, and fleet does not "
                "verify host certificates: add the host's own key to known_hosts (ssh-keyscan, checked "
                "against its console) or re-run with --accept-new-host-keys on first contact")
        if not self.accept_new:
            raise SSHException(f"Server {hostname!r} not found in known_hosts")
        with _known_hosts_lock:
            client.get_host_keys().add(hostname, key.get_name(), key)
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with open(self.path, "a") as f:
                f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


def _ssh_config(host: Host) -> paramiko.SSHConfig:
    path = Path(host.ssh_config).expanduser() if host.ssh_config else DEFAULT_SSH_CONFIG.expanduser()
    if host.ssh_config and not path.is_file():
        raise InputError(f"{host.source}: hosts.{host.name}.ssh_config: no such file {path}")
    return paramiko.SSHConfig.from_path(str(path)) if path.is_file() else paramiko.SSHConfig()


def _endpoint(alias: str, cfg: paramiko.SSHConfig, user: str | None, port: int | None,
              identity: str | None) -> Endpoint:
    found = cfg.lookup(alias)
    files = [identity] if identity else found.get("identityfile", [])
    return Endpoint(
        alias=alias,
        hostname=found.get("hostname", alias),
        port=int(port or str(found.get("port", 22))),
        user=user or found.get("user") or "root",
        identity_files=tuple(os.path.expanduser(p) for p in files),
    )


def _parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    user, _, rest = spec.rpartition("@")
    host, port = rest, None
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port = int(tail[1:]) if tail.startswith(":") else None
    elif rest.count(":") == 1:
        host, p = rest.split(":")
        port = int(p)
    return (user or None), host, port


def route(host: Host) -> tuple[Endpoint, list[Endpoint]]:
    """The target and the jump hops (first hop first), with ssh_config applied. No network I/O."""
    cfg = _ssh_config(host)
    found = cfg.lookup(host.address)
    # The inventory's own settings win over ssh_config; ssh_config fills what the inventory leaves out.
    target = _endpoint(host.address, cfg, host.user, host.port, host.identity_file)
    jump = host.proxy_jump or found.get("proxyjump")
    hops: list[Endpoint] = []
    if jump and jump.lower() != "none":
        for spec in jump.split(","):
            try:
                user, alias, port = _parse_jump(spec.strip())
            except ValueError:
                raise InputError(f"{host.source}: hosts.{host.name}: bad ProxyJump {spec!r}") from None
            hops.append(_endpoint(alias, cfg, user, port, None))
    return target, hops


def check_guard(host: Host) -> None:
    """Refuse (GuardError) before any packet if FLEET_SANDBOX_ONLY=1 and any hop leaves the sandbox."""
    target, hops = route(host)
    for i, hop in enumerate(hops):
        guard.check(hop.hostname, f"{host.name}: ProxyJump hop {i + 1}")
    guard.check(target.hostname, f"{host.name}:")


def _is_connect_error(exc: BaseException) -> bool:
    if isinstance(exc, (AuthenticationException, BadHostKeyException)):
        return False
    if isinstance(exc, (NoValidConnectionsError, socket.timeout, TimeoutError, ConnectionError, EOFError)):
        return True
    if isinstance(exc, SSHException):
        return "banner" in str(exc).lower() or "reset" in str(exc).lower()
    return isinstance(exc, OSError)


def _connection(ep: Endpoint, known_hosts: Path, opts: ConnectOptions, gateway: Connection | None) -> Connection:
    t = opts.timeouts
    conn = Connection(
        host=ep.hostname, user=ep.user, port=ep.port, gateway=gateway or False,
        config=Config(overrides={"load_ssh_configs": False}),
        connect_timeout=int(t.connect),
        connect_kwargs={
            # no identity named: ssh-agent, then ~/.ssh/id_* (Fabric cannot take key_filename=None)
            **({"key_filename": list(ep.identity_files)} if ep.identity_files else {}),
            "look_for_keys": not ep.identity_files,
            "allow_agent": not ep.identity_files,
            "banner_timeout": t.banner,
            "auth_timeout": t.auth,
        },
    )
    client = conn.client
    name = ep.hostname if ep.port == 22 else f"[{ep.hostname}]:{ep.port}"  # how paramiko looks the host up
    known = knownhosts.load(known_hosts)
    for keytype, key in known.keys_for(name).items():
        client.get_host_keys().add(name, keytype, key)
    client.set_missing_host_key_policy(_HostKeyPolicy(known_hosts, known, opts.accept_new_host_keys))
    return conn


def _describe(host: Host, ep: Endpoint, exc: BaseException, known_hosts: Path, timeout: float) -> str:
    where = f"{host.name} ({ep.user}@{ep.hostname}:{ep.port})"
    if isinstance(exc, BadHostKeyException):
        return (f"{where}: host key CHANGED (offered {exc.key.get_name()} {exc.key.get_fingerprint().hex()}, "
                f"known_hosts {known_hosts} has another): refusing; if the host was reinstalled, remove its "
                f"old entry")
    if isinstance(exc, (RevokedHostKey, HostCertificatesUnsupported)):
        return f"{where}: {exc}"
    if isinstance(exc, SSHException) and "not found in known_hosts" in str(exc):
        return f"{where}: host key unknown (not in {known_hosts}); first contact? re-run with --accept-new-host-keys"
    if isinstance(exc, SSHException) and "No authentication methods available" in str(exc):
        return (f"{where}: no key to offer: no identity_file (inventory or ssh_config IdentityFile), no ssh-agent "
                f"(SSH_AUTH_SOCK) and no default key (~/.ssh/id_rsa, id_ecdsa, id_ed25519)")
    if isinstance(exc, AuthenticationException):
        return (f"{where}: authentication failed for user {ep.user} ({exc}); check the key it offers "
                f"(identity_file / ssh_config IdentityFile) is in that user's authorized_keys")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return (f"{where}: timed out connecting after {timeout:.0f}s (no answer: host down, link cut or a "
                f"firewall); check it is up and reachable (ping, its console), then retry")
    if isinstance(exc, NoValidConnectionsError):
        return (f"{where}: connection refused or unreachable ({exc.strerror or exc}); check sshd runs there "
                f"and the address and port are right")
    return f"{where}: {type(exc).__name__}: {exc}"


def open_connection(host: Host, opts: ConnectOptions | None = None) -> Connection:
    """Open and return a connected Fabric Connection (guard, host keys, keepalive, retries)."""
    opts = opts or ConnectOptions()
    check_guard(host)
    target, hops = route(host)
    known_hosts = Path(host.known_hosts or DEFAULT_KNOWN_HOSTS).expanduser()
    gateway: Connection | None = None
    chain: list[tuple[Endpoint, Connection]] = []
    for ep in [*hops, target]:
        conn = _connection(ep, known_hosts, opts, gateway)
        chain.append((ep, conn))
        gateway = conn
    ep, conn = chain[-1]
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
        for hop_ep, hop in chain[:-1]:
            if not hop.is_connected:
                raise ConnectError(_describe(host, hop_ep, exc, known_hosts, opts.timeouts.connect)) from None
        raise ConnectError(_describe(host, ep, exc, known_hosts, opts.timeouts.connect)) from None
    for _, c in chain:
        keepalive.start(c.transport, opts.timeouts.keepalive_interval, opts.timeouts.keepalive_count_max)
    try:
        remote.establish_become(conn, host, opts.become_passwords.get(host.name))
    except BaseException:
        conn.close()
        raise
    return conn

