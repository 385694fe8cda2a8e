"""inv recover against what a reviewer made hostile (loopback only): a guest that answers SSH and drops us is
not VM-reset without --unreachable, the Proxmox API token never follows a redirect, a dripping API answer ends
at its deadline, a power cycle always sends its start, a crash-looping unit is started again after a GPU
reset, a link lost under `nvidia-smi -r` ends in a reboot, not a stopped unit and a traceback, and recover
holds the host lock (never under another operator's deploy)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fakesession import HOST, FakeSession

from fleet.deploy.hostrun import HostRun
from fleet.errors import ConnectError, FleetError
from fleet.host import lock as hostlock
from fleet.host.facts import Gpu, HostFacts
from fleet.host.gpuhealth import GpuHealth
from fleet.host.session import BOOT_ID
from fleet.inventory import Host
from fleet.multihost import proxmox as pve
from fleet.multihost import recover as rec
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import ConnectionLost

TOKEN = "SECRET-TOKEN-1234"


class Api(BaseHTTPRequestHandler):
    """A Proxmox API stand-in whose GET answers as `mode` says: ok, a redirect, or one byte every 0.2 s."""

    mode = "ok"
    redirect_to = ""
    posts: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, data: Any, code: int = 200) -> None:
        body = json.dumps({"data": data}).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if Api.mode == "redirect":
            self.send_response(302)
            self.send_header("Location", Api.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if Api.mode == "drip":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            for _ in range(100):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.2)
            return
        self._answer([] if self.path.endswith("/pci") else {"status": "running"})

    def do_POST(self) -> None:
        Api.posts.append(self.path)
        self._answer("UPID:pve1:x")


class Thief(BaseHTTPRequestHandler):
    """Another host a redirect points at: it records the Authorization it is sent."""

    got: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        Thief.got.append(self.headers.get("Authorization", ""))
        body = b'{"data": {"status": "running"}}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(handler: type[BaseHTTPRequestHandler], addr: str = "127.0.0.1") -> ThreadingHTTPServer:
        server = ThreadingHTTPServer((addr, 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server

    Api.mode, Api.posts, Thief.got = "ok", [], []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def client(server: ThreadingHTTPServer, timeout: float = 15.0) -> pve.Proxmox:
    guest = pve.ProxmoxGuest(api=f"http://127.0.0.1:{server.server_address[1]}/api2/json", node="pve1", vmid=101,
                             token_id="root@pam!fleet", token={"env": "PVE_TOKEN"})
    return pve.Proxmox(guest, TOKEN, timeout=timeout)


def host_at(port: int, tmp_path: Path) -> Host:
    known = tmp_path / "known_hosts"
    known.write_text("")
    return Host(name="h1", address="127.0.0.1", port=port, user="u", become=False, identity_file=None,
                known_hosts=str(known), ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
                source=tmp_path / "inv.yaml")


@pytest.fixture
def closer() -> Iterator[int]:
    """A port that accepts and closes at once, as sshd does for a client hosts.deny or MaxStartups refuses."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(50)

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=loop, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


@pytest.mark.parametrize("dropped", [True, False], ids=["accepted-and-closed", "refused"])
def test_a_guest_that_drops_or_refuses_ssh_is_not_reset_without_unreachable(serve, closer, tmp_path, dropped):
    api = serve(Api)
    if dropped:
        port = closer
    else:  # a port nothing listens on: sshd stopped, or a wrong port in the inventory
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
    with pytest.raises(ConnectError, match=r"`inv recover --host h1 --unreachable` resets it through the API"):
        rec.recover(host_at(port, tmp_path), ConnectOptions(attempts=1), client(api), wait_s=1)
    assert Api.posts == []


def test_with_unreachable_the_operator_s_word_resets_the_guest(serve, closer, tmp_path):
    api = serve(Api)
    with pytest.raises(FleetError, match=r"h1: not back in a new boot 0.5s after the recovery"):
        rec.recover(host_at(closer, tmp_path), ConnectOptions(attempts=1), client(api), wait_s=0.5,
                    unreachable=True)
    assert Api.posts == ["/api2/json/nodes/pve1/qemu/101/status/reset"]


def test_the_token_never_follows_a_redirect(serve):
    thief = serve(Thief, "127.0.0.2")
    Api.mode, Api.redirect_to = "redirect", f"http://127.0.0.2:{thief.server_address[1]}"
    with pytest.raises(pve.ProxmoxError, match=r"HTTP 302: a redirect \(to 'http://127.0.0.2:.*'\) is refused") as e:
        client(serve(Api)).status()
    assert Thief.got == [] and TOKEN not in str(e.value)


def test_a_dripping_answer_ends_at_the_call_s_deadline(serve):
    api = client(serve(Api), timeout=1.0)
    Api.mode = "drip"
    start = time.monotonic()
    with pytest.raises(pve.ProxmoxError, match=r"no whole answer within 1s"):
        api.status()
    assert time.monotonic() - start < 3  # one deadline, not a timeout per byte


class FakeVm(pve.Proxmox):
    """The client's calls without HTTP: a status sequence, and what fails."""

    def __init__(self, states: list[Any], start_fails: bool = False) -> None:
        self.guest = pve.ProxmoxGuest(api="https://pve1:8006/api2/json", node="pve1", vmid=101,
                                      token_id="root@pam!fleet", token={"env": "PVE_TOKEN"})
        self.states, self.start_fails, self.calls = states, start_fails, []

    def status(self) -> str:
        self.calls.append("status")
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        if isinstance(state, BaseException):
            raise state
        return str(state)

    def stop(self) -> str:
        self.calls.append("stop")
        return "UPID:stop"

    def start(self) -> str:
        self.calls.append("start")
        if self.start_fails:
            raise pve.ProxmoxError("Proxmox POST .../status/start: HTTP 500 VM is locked (stop)")
        return "UPID:start"


@pytest.mark.parametrize("ends", [
    pve.ProxmoxError("Proxmox GET .../status/current: timed out"),
    KeyboardInterrupt(),
])
def test_a_power_cycle_whose_wait_fails_still_sends_the_start(ends):
    vm = FakeVm(["running", ends])
    with pytest.raises(type(ends)):
        rec.vm(vm, rec.VM_POWER_CYCLE, 30, lambda m: None)
    assert vm.calls == ["status", "stop", "status", "start"]


def test_a_stop_that_outlasts_wait_is_followed_by_a_start_and_said():
    vm = FakeVm(["running"])
    with pytest.raises(FleetError, match=r"still running 0.01s after stop; a start was sent after it \(check"):
        rec.vm(vm, rec.VM_POWER_CYCLE, 0.01, lambda m: None, sleep=lambda s: None)
    assert vm.calls[:2] == ["status", "stop"] and vm.calls[-1] == "start"


def test_a_start_that_fails_says_the_vm_may_be_stopped_and_how_to_start_it():
    vm = FakeVm(["running", "stopped"], start_fails=True)
    with pytest.raises(FleetError, match=r"may be left stopped: start it with `qm start 101` on pve1"):
        rec.vm(vm, rec.VM_POWER_CYCLE, 30, lambda m: None)


def wants_reset(action: str = "reset") -> HostFacts:
    return HostFacts(host="h1", address="a", gpus=[Gpu(index=0, pci_bus_id="00000000:01:00.0",
                                                       health=GpuHealth(recovery_action=action))])


def healthy() -> HostFacts:
    return HostFacts(host="h1", address="a", gpus=[Gpu(index=0, health=GpuHealth())])


def run_of(session: FakeSession) -> HostRun:
    return HostRun(session, hostlock.Lock("h1", "t" * 32, {}), None, lambda m: None)


@pytest.mark.parametrize("state,started", [("active", True), ("activating", True), ("reloading", True),
                                           ("inactive", False), ("failed", False)])
def test_the_unit_is_started_again_when_it_ran_or_was_trying_to(state, started):
    def answer(command: str) -> tuple[int, str]:
        if command.startswith("systemctl is-active"):
            return (0 if state == "active" else 3), state  # activating: Restart= between two crashes
        return 0, "GPU 00000000:01:00.0 was successfully reset." if "-r -i" in command else ""

    session = FakeSession(answer=answer)
    assert rec.gpu_reset(run_of(session), [0], wants_reset(), lambda m: None) is None
    assert ("systemctl start sglang" in session.sent) is started


class Link:
    """What recover sees of SSH: a boot id that changes on `systemctl reboot`, a reset that loses the link (or,
    with `refuse`, a driver that refuses it: another client holds the GPU)."""

    def __init__(self, comes_back: bool = True, refuse: bool = False, lock_error: Exception | None = None) -> None:
        self.boot, self.calls, self.opened, self.comes_back = "b1", [], 0, comes_back
        self.refuse, self.lock_error, self.active = refuse, lock_error, True

    def open(self, host: Host, opts: Any) -> FakeSession:
        self.opened += 1
        if self.opened > 1 and not self.comes_back:
            raise ConnectError("h1: timed out connecting after 10s", unreachable=True)
        return FakeSession(answer=self.answer, facts=self.facts, log=self.calls, lock_error=self.lock_error)

    def answer(self, command: str) -> tuple[int, str]:
        if "-r -i" in command:
            if self.refuse:
                return 255, "GPU 00000000:01:00.0: In use by another client"
            raise ConnectionLost("h1: connection lost during `nvidia-smi -r -i 0`: keepalive timed out")
        if command == BOOT_ID:
            return 0, self.boot
        if command == "systemctl reboot":
            self.boot = "b2"
        if command.startswith("systemctl stop"):
            self.active = False
        if command.startswith("systemctl start"):
            self.active = True
        if "is-active" in command or "ActiveState" in command:
            state = "active" if self.active else "inactive"
            return (0, state) if "is-active" in command else (0, f"ActiveState={state}\n")
        return 0, ""

    def unlocks(self) -> list[str]:
        return [c for c in self.calls if c == "unlock"]


def test_a_link_lost_under_the_gpu_reset_reboots_the_host_and_says_so():
    link = Link()
    link.facts = iter([wants_reset(), healthy()])
    result = rec.recover(HOST, ConnectOptions(), None, wait_s=5, sessions=link.open)
    assert result.action == rec.REBOOT and result.ok
    assert result.steps[0].startswith("GPU reset of 0: the connection was lost: h1: connection lost during")
    assert result.steps[1:] == ["systemctl reboot (on a new connection)", "sglang was started again (active)",
                               "probed again: no GPU fault"]
    assert "systemctl stop sglang" in link.calls and link.calls.count("systemctl reboot") == 1
    # the host lock taken before the unit is stopped, and given back only in the host's next boot
    assert link.calls[link.calls.index("lock recover (gpu-reset)") + 1].startswith("systemctl is-active")
    assert link.calls.index("unlock") > link.calls.index("systemctl reboot")
    new_boot = len(link.calls) - 1 - link.calls[::-1].index(BOOT_ID)  # asked of the new boot before
    assert new_boot < link.calls.index("systemctl start sglang", new_boot) < link.calls.index("unlock")


class Resets(Link):
    """A driver that resets the GPU when asked."""

    def answer(self, command: str) -> tuple[int, str]:
        if "-r -i" in command:
            return 0, "GPU 00000000:01:00.0 was successfully reset."
        return super().answer(command)


@pytest.mark.parametrize("action,stop", [("reset", "systemctl stop sglang"), ("reboot", "systemctl reboot")])
def test_a_replica_is_taken_out_of_its_router_under_the_lock_before_recover_stops_its_server(action, stop):
    """Issue 52: `before_stop` (the router's take-out, fleet.cli.recover) runs once the host is recover's and
    before the GPU reset stops the unit or the reboot takes the machine down."""
    link = Resets()
    link.facts = iter([wants_reset(action), healthy()])
    result = rec.recover(HOST, ConnectOptions(), None, wait_s=5, sessions=link.open,
                         before_stop=lambda s: link.calls.append("out of the router"))
    assert result.ok and link.calls.count("out of the router") == 1
    lock = next(c for c in link.calls if c.startswith("lock recover"))
    assert link.calls.index(lock) < link.calls.index("out of the router") < link.calls.index(stop)


@pytest.mark.parametrize("facts,dry_run", [(wants_reset(), True), (healthy(), False)])
def test_a_dry_run_or_a_host_with_no_gpu_fault_is_never_taken_out_of_its_router(facts, dry_run):
    link = Resets()
    link.facts = iter([facts, healthy()])
    rec.recover(HOST, ConnectOptions(), None, dry_run=dry_run, wait_s=5, sessions=link.open,
                before_stop=lambda s: link.calls.append("out of the router"))
    assert "out of the router" not in link.calls


def test_recover_does_not_touch_a_host_another_operator_holds():
    link = Link(lock_error=hostlock.HostLockError("h1: locked by ana@ops1 pid 4242 for deploy glm5 since 16:40"))
    link.facts = iter([wants_reset()])
    with pytest.raises(hostlock.HostLockError, match="locked by ana@ops1"):
        rec.recover(HOST, ConnectOptions(), None, wait_s=5, sessions=link.open)
    assert not [c for c in link.calls if c.startswith(("systemctl stop", "nvidia-smi", "systemctl reboot"))]


def test_a_link_lost_under_the_gpu_reset_that_never_comes_back_says_the_unit_is_stopped():
    link = Link(comes_back=False)
    link.facts = iter([wants_reset()])
    with pytest.raises(FleetError, match=r"lost under `nvidia-smi -r` and did not come back in 0.2s; sglang was "
                                         r"stopped for the reset: reboot the host \(or start sglang\)"):
        rec.recover(HOST, ConnectOptions(), None, wait_s=0.2, sessions=link.open, sleep=lambda s: None)


GUEST = pve.ProxmoxGuest(api="https://pve1:8006/api2/json", node="pve1", vmid=101, token_id="root@pam!fleet",
                         token={"env": "PVE_TOKEN"})


class FailingApi:
    """A Proxmox API that fails every call as `error` says (an untrusted certificate, HTTP 500, garbage)."""

    guest = GUEST

    def __init__(self, error: str) -> None:
        self.error, self.calls = error, []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append(name)
            raise pve.ProxmoxError(self.error)
        return call


@pytest.mark.parametrize("error", [
    "Proxmox GET .../status/current: certificate verify failed: self-signed certificate",
    "Proxmox GET .../status/current: HTTP 500 Internal Server Error",
    "Proxmox GET .../status/current: not JSON: '<html>garbage'",
])
def test_a_refused_gpu_reset_and_a_failing_proxmox_api_leave_the_unit_running_and_the_lock_released(error):
    link = Link(refuse=True)
    link.facts = iter([wants_reset()])
    api = FailingApi(error)
    with pytest.raises(FleetError) as raised:
        rec.recover(HOST, ConnectOptions(), api, wait_s=5, sessions=link.open)  # type: ignore[arg-type]
    said = str(raised.value)
    assert "\n" not in said and said.startswith(error)
    assert "sglang was started again (active)" in said and "the host lock was released" in said
    assert link.active and link.unlocks() == ["unlock"]
    assert link.calls.index("systemctl start sglang") > link.calls.index("systemctl stop sglang")
    assert "systemctl reboot" not in link.calls
