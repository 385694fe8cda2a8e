"""The stand-in nvidia-smi, systemd-detect-virt and dmidecode on sandbox hosts, over real SSH."""

from __future__ import annotations

from pathlib import Path

import pytest
from sshutil import sh

from fleet.ssh.connect import open_connection

REPO = Path(__file__).resolve().parents[2]
VERBATIM = {"topo-m.txt": "topo -m", "L.txt": "-L", "version.txt": "--version",
            "topo-p2p-r.txt": "topo -p2p r", "topo-p2p-w.txt": "topo -p2p w"}


@pytest.fixture(scope="module", autouse=True)
def _idle_hosts(_sandbox_session):
    """The stand-ins answer as the profile's idle GPUs only with no simulated server left running on the host by
    an earlier module of this worker (in a parallel run the modules come in another order than the serial one)."""
    from fleet import inventory

    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    hosts = inventory.load(str(sandbox.cfg.inventory_path)).hosts
    for host in hosts.values():
        sh(host, "systemctl stop 'sglang*' 'simrow*' 2>/dev/null; pkill -KILL -f 'sglang.launch_server' ; true")


def _sh(inv, name, command):
    return sh(inv.hosts[name], command)


def _raw(inv, name, command) -> bytes:
    """stdout as bytes, exactly as the host wrote it (no decoding or newline translation)."""
    host = inv.hosts[name]
    conn = open_connection(host)
    try:
        chan = conn.client.get_transport().open_session()
        chan.exec_command(command)
        data = b""
        while chunk := chan.recv(65536):
            data += chunk
        chan.recv_exit_status()
        return data
    finally:
        conn.close()


@pytest.mark.parametrize("host,profile", [("sbx0", "rtx-pro-6000-x8-proxmox"), ("sbx2", "rtx5090-x2-workstation")])
def test_every_profile_file_is_reproduced_byte_for_byte(sandbox_inventory, host, profile):
    folder = REPO / "sandbox/profiles" / profile / "nvidia-smi"
    checked = 0
    for f in sorted(folder.iterdir()):
        if f.name in ("query-gpu.csv", "query-health.csv"):  # the health fields answer from a file of their own
            header = f.read_text().splitlines()[0]
            fields = ",".join(c.split(" [")[0] for c in header.split(", "))
            command = f"nvidia-smi --query-gpu={fields} --format=csv"
        else:
            command = f"nvidia-smi {VERBATIM[f.name]}"
        assert _raw(sandbox_inventory, host, command) == f.read_bytes(), command
        checked += 1
    assert checked >= 5


def test_field_selection_keeps_asked_order_and_header_units(sandbox_inventory):
    res = _sh(sandbox_inventory, "sbx0", "nvidia-smi --query-gpu=power.limit,index,memory.total --format=csv -i 1")
    assert res.exited == 0
    assert res.stdout == "power.limit [W], index, memory.total [MiB]\n600.00 W, 1, 97887 MiB\n"


def test_noheader_nounits_drop_header_and_units_but_not_na(sandbox_inventory):
    res = _sh(sandbox_inventory, "sbx0", "nvidia-smi --query-gpu=index,memory.total,mig.mode.current,utilization.gpu "
                                         "--format=csv,noheader,nounits")
    lines = res.stdout.splitlines()
    assert len(lines) == 8
    assert lines[0] == "0, 97887, [N/A], 0"


def test_nounits_keeps_units_in_the_header(sandbox_inventory):
    res = _sh(sandbox_inventory, "sbx1", "nvidia-smi --query-gpu=memory.total --format=csv,nounits -i 0")
    assert res.stdout.splitlines() == ["memory.total [MiB]", "81559"]


def test_unknown_field_prints_exact_message_on_stdout_and_exits_2(sandbox_inventory):
    res = _sh(sandbox_inventory, "sbx0", "nvidia-smi --query-gpu=index,compute_capability --format=csv")
    assert res.exited == 2
    assert res.stdout == 'Field "compute_capability" is not a valid field to query.\n\n'
    assert res.stderr == ""


def test_bad_index_prints_no_devices_and_exits_6(sandbox_inventory):
    res = _sh(sandbox_inventory, "sbx2", "nvidia-smi --query-gpu=index --format=csv -i 2")
    assert (res.exited, res.stdout) == (6, "No devices were found\n")


def test_unknown_option_and_missing_file_say_not_recognized(sandbox_inventory):
    res = _sh(sandbox_inventory, "sbx2", "nvidia-smi --bogus; echo rc=$?; nvidia-smi topo -p2p w; echo rc=$?")
    assert res.stdout == ('Option "--bogus" is not recognized.\nrc=2\n'
                          'Option "w" is not recognized.\nrc=2\n')


def test_compute_apps_lists_only_live_processes(sandbox_inventory):
    script = (
        "mkdir -p /run/fleet-sim/apps; sleep 60 & p=$!; echo \"3 1234 sglang::scheduler_TP3\" > /run/fleet-sim/apps/$p;"
        " echo '0 1 dead' > /run/fleet-sim/apps/999999;"
        " nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory --format=csv;"
        " nvidia-smi --query-gpu=index,memory.used --format=csv,noheader -i 3;"
        " kill $p; wait; rm -f /run/fleet-sim/apps/*; nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l"
    )
    lines = _sh(sandbox_inventory, "sbx0", script).stdout.splitlines()
    assert lines[0] == "pid, process_name, used_gpu_memory [MiB]"
    assert lines[1].endswith(", sglang::scheduler_TP3, 1234 MiB")
    assert lines[2] == "3, 1234 MiB"
    assert lines[3] == "0"


def test_virt_and_dmi_answer_from_the_profile(sandbox_inventory):
    out = _sh(sandbox_inventory, "sbx0", "systemd-detect-virt; dmidecode -s system-manufacturer; "
                                         "dmidecode -s system-product-name").stdout
    assert out == "kvm\nQEMU\nStandard PC (Q35 + ICH9, 2009)\n"
    res = _sh(sandbox_inventory, "sbx1", "systemd-detect-virt; echo rc=$?")
    assert res.stdout == "none\nrc=1\n"


def test_a_profile_without_virt_or_dmi_has_neither(sandbox_inventory):
    res = _sh(sandbox_inventory, "sbx4", "command -v systemd-detect-virt; echo rc=$?; dmidecode -s system-manufacturer;"
                                         " echo rc=$?; nvidia-smi -L | wc -l")
    assert res.stdout == "rc=1\nrc=1\n2\n"
    assert "No SMBIOS" in res.stderr
