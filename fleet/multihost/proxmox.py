"""A Proxmox VE guest as `inv recover` drives it: the inventory's description (`vars: {proxmox: ...}`) and the
few API calls a VM reset or stop/start needs, over HTTPS with the standard library (proxmoxer is not in this
project's dependencies). Paths and JSON shapes as Proxmox's published API description gives them (api-viewer
apidata.js of proxmox/pve-docs; the calls used are recorded in tests/fixtures/proxmox/apidata_excerpt.json):
GET /nodes/{node}/qemu/{vmid}/status/current -> {data: {status: running|stopped, ...}},
POST .../status/reset|stop|start -> {data: UPID}, GET /nodes/{node}/hardware/pci -> {data: [{id, vendor,
iommugroup, ...}]}. The API token is a secret reference; it goes in a header, never in a URL or the output.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import ssl
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fleet.errors import FleetError, InputError
from fleet.inventory import Host
from fleet.secretref import SecretRef, resolve

MAX_ANSWER = 1 << 20  # bytes of one API answer read at most
NVIDIA = "0x10de"


@dataclass(frozen=True)
class PciFunction:
    """One PCI function of the Proxmox node (hardware/pci): its address and the IOMMU group it resets with."""

    id: str
    iommu_group: int


class ProxmoxError(FleetError):
    """The Proxmox API refused, failed or answered something that is not its documented shape."""


class ProxmoxGuest(BaseModel):
    """`vars: {proxmox: {api: https://pve1:8006/api2/json, node: pve1, vmid: 101, token_id: root@pam!fleet,
    token: {env: PVE_TOKEN}, ca_file: /etc/fleet/pve-ca.pem}}` on a host of the inventory."""

    model_config = ConfigDict(extra="forbid")

    api: str
    node: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$")
    vmid: int = Field(ge=100, le=999_999_999)
    token_id: str = Field(pattern=r"^[A-Za-z0-9._-]+@[A-Za-z0-9._-]+![A-Za-z0-9._-]+$")
    token: SecretRef
    ca_file: str | None = None

    @field_validator("api")
    @classmethod
    def _https(cls, v: str) -> str:
        u = urllib.parse.urlsplit(v)
        if u.scheme not in ("https", "http") or not u.hostname or u.query or u.fragment:
            raise ValueError("want the API's base URL, e.g. https://pve1:8006/api2/json")
        if u.scheme == "http" and not _loopback(u.hostname):
            raise ValueError("http:// only for a loopback address; the API token must not cross a network in clear")
        return v.rstrip("/")


def _loopback(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return name == "localhost"


def guest_of(host: Host) -> ProxmoxGuest | None:
    """The host's Proxmox description, or None; bad input is an InputError naming the host and the key."""
    raw = host.vars.get("proxmox")
    if raw is None:
        return None
    try:
        return ProxmoxGuest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{host.source}: host {host.name}: vars.proxmox.{where}: {first['msg']}") from None


def _cut(opened: list[socket.socket], cut: threading.Event) -> None:
    """The deadline: shut the call's socket, which ends a read blocked on it at once."""
    cut.set()
    for sock in opened:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the fd itself, under TLS too
        except OSError:
            pass


class Proxmox:
    """One guest's calls. `secret` is the token's value (resolved before any host is contacted)."""

    def __init__(self, guest: ProxmoxGuest, secret: str, timeout: float = 15.0) -> None:
        self.guest, self.timeout = guest, timeout
        self._auth = f"PVEAPIToken={guest.token_id}={secret}"
        self._ctx = ssl.create_default_context(cafile=guest.ca_file) if guest.api.startswith("https") else None
        self._base = f"{guest.api}/nodes/{urllib.parse.quote(guest.node, safe='')}"

    @classmethod
    def of(cls, host: Host, guest: ProxmoxGuest) -> Proxmox:
        return cls(guest, resolve(guest.token, f"{host.source}: host {host.name}", "vars.proxmox.token",
                                  "API token"))

    def _call(self, method: str, path: str) -> Any:
        """One API call within `timeout` seconds in all (a server that drips its answer is cut at the deadline,
        not given `timeout` per read), to the configured address only: a redirect is refused, never followed
        (the token would go with it, perhaps in clear)."""
        url = urllib.parse.urlsplit(self._base + path)
        what = f"Proxmox {method} {self.guest.api}/nodes/{self.guest.node}{path}"
        https = url.scheme == "https"
        port = url.port or (443 if https else 80)
        conn = (http.client.HTTPSConnection(url.hostname or "", port, timeout=self.timeout, context=self._ctx)
                if https else http.client.HTTPConnection(url.hostname or "", port, timeout=self.timeout))
        answer: http.client.HTTPResponse | None = None
        # the socket kept here: http.client forgets it once an answer will close the connection
        cut, opened = threading.Event(), list[socket.socket]()
        timer = threading.Timer(self.timeout, _cut, (opened, cut))
        timer.daemon = True
        timer.start()
        try:
            conn.connect()
            opened.append(conn.sock)
            if cut.is_set():
                raise TimeoutError("connecting took the whole deadline")
            conn.request(method, url.path, headers={"Authorization": self._auth})
            answer = conn.getresponse()
            if 300 <= answer.status < 400:
                where = str(answer.getheader("Location") or "")[:120]
                raise ProxmoxError(f"{what}: HTTP {answer.status}: a redirect (to {where!r}) is refused; set "
                                   "vars.proxmox.api to the address that answers")
            if answer.status >= 400:
                raise ProxmoxError(f"{what}: HTTP {answer.status} {str(answer.reason)[:120]}")
            body = b""
            while len(body) <= MAX_ANSWER:
                chunk = answer.read1(MAX_ANSWER + 1 - len(body))
                if not chunk:
                    break
                body += chunk
        except (OSError, http.client.HTTPException) as exc:
            if cut.is_set():
                raise ProxmoxError(f"{what}: no whole answer within {self.timeout:g}s") from None
            raise ProxmoxError(f"{what}: {str(exc)[:200] or type(exc).__name__}") from None
        finally:
            timer.cancel()
            if answer is not None:
                answer.close()
            conn.close()
            for sock in opened:
                sock.close()
        if cut.is_set():
            raise ProxmoxError(f"{what}: no whole answer within {self.timeout:g}s")
        if len(body) > MAX_ANSWER:
            raise ProxmoxError(f"{what}: answer larger than {MAX_ANSWER} bytes")
        try:
            doc = json.loads(body)
        except ValueError:
            raise ProxmoxError(f"{what}: not JSON") from None
        if not isinstance(doc, dict) or "data" not in doc:
            raise ProxmoxError(f"{what}: no 'data' in the answer")
        return doc["data"]

    def _vm(self, method: str, action: str) -> Any:
        return self._call(method, f"/qemu/{self.guest.vmid}/status/{action}")

    def status(self) -> str:
        data = self._vm("GET", "current")
        state = data.get("status") if isinstance(data, dict) else None
        if state not in ("running", "stopped"):
            raise ProxmoxError(f"Proxmox VM {self.guest.vmid}: status {str(state)[:40]!r} is neither running nor "
                               "stopped")
        return str(state)

    def reset(self) -> str:
        return str(self._vm("POST", "reset"))

    def stop(self) -> str:
        return str(self._vm("POST", "stop"))

    def start(self) -> str:
        return str(self._vm("POST", "start"))

    def nvidia_devices(self) -> list[PciFunction]:
        """The node's NVIDIA PCI functions with their IOMMU groups (what a VFIO passthrough shares a reset with)."""
        data = self._call("GET", "/hardware/pci")
        if not isinstance(data, list):
            raise ProxmoxError("Proxmox GET hardware/pci: not a list")
        return [PciFunction(str(d.get("id"))[:20], d["iommugroup"]) for d in data
                if isinstance(d, dict) and d.get("vendor") == NVIDIA and type(d.get("iommugroup")) is int]
