"""inv recover's plan (pure) and its Proxmox client against a stand-in of the API, on loopback only: the
paths, methods and JSON shapes of Proxmox's published API description (tests/fixtures/proxmox: the calls
fleet makes, extracted from proxmox/pve-docs api-viewer/apidata.js, pve-docs 9.1.3)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fleet.errors import InputError
from fleet.host.facts import Gpu, HostFacts
from fleet.host.gpuhealth import GpuHealth, LostGpu
from fleet.inventory import Host
from fleet.multihost import proxmox as pve
from fleet.multihost import recover as rec

API = json.loads((Path(__file__).resolve().parents[2] / "fixtures/proxmox/apidata_excerpt.json").read_text())
TOKEN = "5f1c2b1e-0c7e-4c7b-9a55-2f2f6d3b1a10"


def facts(lost: bool = False, **health) -> HostFacts:
    return HostFacts(host="h", address="a", gpus=[
        Gpu(index=0, pci_bus_id="00000000:01:00.0", health=GpuHealth(recovery_action="none", persistence=True)),
        Gpu(index=1, pci_bus_id="00000000:02:00.0", health=GpuHealth(**{"recovery_action": "none", **health}))],
        lost_gpus=[LostGpu(pci_bus_id="0000:03:00", reason="Unknown Error")] if lost else [])


GUEST = pve.ProxmoxGuest(api="http://127.0.0.1:1/api2/json", node="pve1", vmid=101, token_id="root@pam!fleet",
                         token={"env": "PVE_TOKEN"})


def test_the_plan_follows_what_the_gpus_ask_for():
    assert rec.plan(facts(), None) == ("none", [], "no GPU fault")
    assert rec.plan(facts(recovery_action="reset"), None)[:2] == ("gpu-reset", [1])
    assert rec.plan(facts(remapped_rows_pending=True), GUEST)[:2] == ("gpu-reset", [1])
    assert rec.plan(facts(recovery_action="reboot"), None)[:2] == ("reboot", [])
    assert rec.plan(facts(lost=True), None) == ("reboot", [], "GPU 0000:03:00 cannot be opened (Unknown Error)")
    assert rec.plan(facts(lost=True), GUEST)[0] == "vm-reset"
    assert rec.plan(facts(lost=True), GUEST, power_cycle=True)[0] == "vm-power-cycle"
    assert rec.plan(facts(remapped_rows_pending=True), None, power_cycle=True)[0] == "reboot"
    assert rec.plan(facts(ecc_uncorrected_volatile=4), None)[0] == "none"  # a note until a repair is asked for


class StandIn(BaseHTTPRequestHandler):
    """Proxmox's API for one node and VM: only documented paths and methods, the documented answer shapes."""

    state = {"status": "running"}
    calls: list[tuple[str, str, str]] = []

    def log_message(self, *args):  # quiet
        pass

    def _answer(self, code: int, data) -> None:
        body = json.dumps({"data": data}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, method: str) -> None:
        path = self.path.removeprefix("/api2/json")
        self.calls.append((method, path, self.headers.get("Authorization", "")))
        if self.headers.get("Authorization") != f"PVEAPIToken=root@pam!fleet={TOKEN}":
            return self._answer(401, None)
        template = path.replace("/nodes/pve1", "/nodes/{node}").replace("/qemu/101", "/qemu/{vmid}")
        if method not in API.get(template, {}):  # the stand-in serves nothing the description lacks
            return self._answer(501, None)
        action = template.rsplit("/", 1)[-1]
        if action == "current":
            return self._answer(200, {"status": self.state["status"], "vmid": 101, "name": "gpu7",
                                      "qmpstatus": "running"})
        if action == "pci" and self.state.get("pci") == "forbidden":  # a token without Sys.Audit on the node
            return self._answer(403, None)
        if action == "pci":
            return self._answer(200, [
                {"id": "0000:01:00.0", "class": "0x030000", "vendor": "0x10de", "device": "0x2bb1", "iommugroup": 14},
                {"id": "0000:01:00.1", "class": "0x040300", "vendor": "0x10de", "device": "0x22e8", "iommugroup": 14},
                {"id": "0000:00:1f.0", "class": "0x060100", "vendor": "0x8086", "device": "0x7a06", "iommugroup": 3}])
        self.state["status"] = {"stop": "stopped", "start": "running"}.get(action, self.state["status"])
        return self._answer(200, f"UPID:pve1:0000ABCD:0001:6790:qm{action}:101:root@pam!fleet:")

    def do_GET(self):  # noqa: N802
        self._route("GET")

    def do_POST(self):  # noqa: N802
        self._route("POST")


@pytest.fixture
def api(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    StandIn.state.update(status="running", pci="ok")
    StandIn.calls[:] = []
    monkeypatch.setenv("PVE_TOKEN", TOKEN)
    guest = GUEST.model_copy(update={"api": f"http://127.0.0.1:{server.server_address[1]}/api2/json"})
    yield guest
    server.shutdown()
    server.server_close()


def test_the_stand_in_serves_only_paths_of_the_published_description():
    assert set(API) == {"/nodes/{node}/qemu/{vmid}/status/current", "/nodes/{node}/qemu/{vmid}/status/reset",
                        "/nodes/{node}/qemu/{vmid}/status/stop", "/nodes/{node}/qemu/{vmid}/status/start",
                        "/nodes/{node}/hardware/pci"}
    assert "status" in API["/nodes/{node}/qemu/{vmid}/status/current"]["GET"]["returns"]["properties"]
    assert "iommugroup" in API["/nodes/{node}/hardware/pci"]["GET"]["returns"]["items"]["properties"]
    assert API["/nodes/{node}/qemu/{vmid}/status/reset"]["POST"]["returns"] == {"type": "string"}


def test_a_vm_reset_and_a_power_cycle_through_the_api(api):
    client = pve.Proxmox(api, TOKEN)
    said: list[str] = []
    rec.vm(client, rec.VM_RESET, 5, said.append)
    rec.vm(client, rec.VM_POWER_CYCLE, 5, said.append)
    calls = [(m, p) for m, p, _ in StandIn.calls]
    assert calls == [("GET", "/nodes/pve1/qemu/101/status/current"), ("POST", "/nodes/pve1/qemu/101/status/reset"),
                     ("GET", "/nodes/pve1/qemu/101/status/current"), ("POST", "/nodes/pve1/qemu/101/status/stop"),
                     ("GET", "/nodes/pve1/qemu/101/status/current"), ("POST", "/nodes/pve1/qemu/101/status/start")]
    assert client.nvidia_devices() == [pve.PciFunction("0000:01:00.0", 14), pve.PciFunction("0000:01:00.1", 14)]
    assert all(TOKEN not in line for line in said)


def test_a_refused_token_is_an_error_that_never_shows_the_secret(api):
    client = pve.Proxmox(api, "wrong-" + TOKEN)
    with pytest.raises(pve.ProxmoxError) as err:
        client.status()
    assert "HTTP 401" in str(err.value) and TOKEN not in str(err.value)


def _host(proxmox) -> Host:
    return Host(name="gpu7", address="10.0.0.7", port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
                source=Path("inventory/hosts.yaml"), vars={"proxmox": proxmox})


@pytest.mark.parametrize(("bad", "message"), [
    ({"vmid": 7}, "host gpu7: vars.proxmox.vmid: Input should be greater than or equal to 100"),
    ({"api": "http://pve1:8006/api2/json"}, "vars.proxmox.api: Value error, http:// only for a loopback address"),
    ({"node": "pve1/../../access"}, "vars.proxmox.node: String should match pattern"),
    ({"token": "in-the-clear"}, "vars.proxmox.token: Input should be"),
])
def test_a_bad_proxmox_description_is_bad_input_naming_host_and_key(bad, message):
    good = {"api": "https://pve1:8006/api2/json", "node": "pve1", "vmid": 101, "token_id": "root@pam!fleet",
            "token": {"env": "PVE_TOKEN"}}
    assert pve.guest_of(_host(good)) is not None
    with pytest.raises(InputError) as err:
        pve.guest_of(_host({**good, **bad}))
    assert message in str(err.value) and str(err.value).startswith("inventory/hosts.yaml: host gpu7:")


def test_a_token_that_may_not_list_the_nodes_pci_devices_still_resets_its_vm(api):
    StandIn.state["pci"] = "forbidden"
    steps = rec.vm_steps(pve.Proxmox(api, TOKEN), rec.VM_RESET, 5, lambda m: None)
    assert steps[0].startswith("NVIDIA functions on the node not listed (Proxmox GET ") and "HTTP 403" in steps[0]
    assert steps[1] == "Proxmox vm-reset of VM 101 on pve1"
    assert [(m, p) for m, p, _ in StandIn.calls][-1] == ("POST", "/nodes/pve1/qemu/101/status/reset")


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures/gpu-health"


def recorded(fixture: str, command: str) -> str:
    """What `command` printed in a recording of tests/tools/record_gpu_reset.sh (its `== command` section)."""
    text = (FIXTURES / fixture).read_text()
    return text.split(f"== {command}\n", 1)[1].split("\nrc=", 1)[0]


@pytest.mark.parametrize(("fixture", "command", "reason"), [
    ("gpu_reset_refused_in_use.txt", "nvidia-smi -r -i 0", "GPU 00000000:00:06.0: In use by another client"),
    ("gpu_reset_refused_not_root.txt", "nobody nvidia-smi -r -i 0",
     "Unable to disable persistence mode for GPU 00000000:00:06.0: Insufficient Permissions"),
])
def test_a_refused_reset_is_told_by_the_drivers_reason_line(fixture, command, reason):
    """What driver 580 printed on the H200 for `nvidia-smi -r -i 0`, refused."""
    assert rec.refusal(recorded(fixture, command)) == reason


def test_a_refusal_without_a_reason_line_is_its_last_line_cut_short():
    assert rec.refusal("\n\nNo devices were found\n") == "No devices were found"
    assert rec.refusal("") == "no output"
    assert len(rec.refusal("x" * 5000)) == 160
