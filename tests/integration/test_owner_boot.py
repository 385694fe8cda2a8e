"""Found by review (h-adv16, of 8788d47..f7fb7f0): `inv recover` asks the owner rule before it stops a unit that
runs, as it would start it again. A reboot (or a VM reset) starts more than recover does: the boot starts every
enabled unit, and fleet enables the unit of the release it deploys. A unit that does not run when recover looks (it
died with the GPU fault, the usual reason to recover; or an operator stopped it, as recover's own refusal advises:
`stop sglang first to recover the GPUs with it stopped`) was never asked of: the reboot went ahead and the boot
started the root unit on a venv the `fleet` user had got a file in (uids ['0'])."""

from __future__ import annotations

import json
import shlex

import pytest
from fleetcli import inv, llama_playbook, sh
from ownerkit import UNDEPLOY, Plant, recovered

HOST = "sbx2"
BASE = [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}}]
RAN = "/var/lib/adv16-ran"  # kept through the reboot (/run is a tmpfs; the unit's /tmp is its own)
PLANTED = Plant(RAN)
# GPU 0 falls off the bus: recover's plan is a reboot
LOST = ("b=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0) && s=${b#0000} && s=${s%.0} && "
        "echo \"[ 901.5] NVRM: Xid (PCI:$s): 79, pid=1, GPU has fallen off the bus.\" >> /run/fleet-sim/kmsg && "
        "echo $b >> /run/fleet-sim/lost")
BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


def test_recover_never_reboots_into_an_enabled_root_unit_on_a_venv_a_user_may_change(sandbox, sandbox_inventory,
                                                                                        tmp_path):
    """The unit was stopped (as recover's refusal advises) and is enabled; GPU 0 is lost, so recover reboots. Before:
    the reboot went ahead, the boot started sglang as root on the `fleet` user's file (uids ['0']) and recover said
    `ok`. Now refused before anything is done: same boot, no start, the error says to disable the unit."""
    book = llama_playbook(tmp_path, BASE, name="llama-adv16-boot")
    seen: dict[str, object] = {}
    try:
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        sh(sandbox_inventory, HOST, f"systemctl stop sglang && {PLANTED.plant()} && mkdir -p /run/fleet-sim && {LOST}")
        boot = sh(sandbox_inventory, HOST, BOOT_ID)
        enabled = sh(sandbox_inventory, HOST, "systemctl is-enabled sglang; true").strip()
        seen = {"enabled before": enabled, **recovered(sandbox, sandbox_inventory, HOST, PLANTED),
                "same boot": sh(sandbox_inventory, HOST, BOOT_ID) == boot}
    finally:
        sh(sandbox_inventory, HOST, f"{PLANTED.undo()} rm -f /run/fleet-sim/kmsg /run/fleet-sim/lost; {UNDEPLOY}")
    print(json.dumps(seen, indent=1, default=str))
    assert seen["enabled before"] == "enabled", seen
    assert "0" not in seen["uids"], seen  # before: ['0']: the boot ran fleet's sglang/__init__.py as root
    assert seen["rc"] == 1 and seen["same boot"], seen  # refused before the reboot
    said = json.dumps(seen["result"]) + str(seen["err"])
    assert "owner rule" in said and "disable" in said, seen


DROPIN = "/etc/systemd/system/sglang.service.d/adv16.conf"


def test_a_stopped_unit_is_not_started_again_where_a_drop_in_makes_it_run_a_users_code(sandbox, sandbox_inventory,
                                                                                       tmp_path):
    """The owner rule of a unit as installed (restore.installed_problem: the run skeleton's start again, recover's)
    read /etc/systemd/system/UNIT.service alone; systemd runs it with its drop-ins (`systemctl edit sglang`), which
    may name another User=, ExecStart= or Environment=. A drop-in's PYTHONPATH naming a folder of the `fleet`
    user's: a dead run's stopped root unit was started again and root imported that user's sitecustomize.py (uids
    ['0']). Now the rule reads the unit as systemd has it (`systemctl cat`): left stopped, said, the mark kept."""
    pp = "/home/fleet/adv16-pp"
    book = llama_playbook(tmp_path, BASE, name="llama-adv16-dropin")
    seen: dict[str, object] = {}
    try:
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        sh(sandbox_inventory, HOST, f"systemctl stop sglang && echo '{{\"units\": [\"sglang\"]}}' > "
                                    f"/var/lib/fleet/stopped.json && {PLANTED.recorder()} && rm -rf {pp} && "
                                    f"runuser -u fleet -- mkdir {pp} && printf %s {shlex.quote(PLANTED.line)} | "
                                    f"runuser -u fleet -- tee {pp}/sitecustomize.py >/dev/null && "
                                    f"mkdir -p {DROPIN.rsplit('/', 1)[0]} && "
                                    f"printf '[Service]\\nEnvironment=PYTHONPATH={pp}\\n' > {DROPIN} && "
                                    "systemctl daemon-reload")
        seen = recovered(sandbox, sandbox_inventory, HOST, PLANTED)
    finally:
        sh(sandbox_inventory, HOST, f"rm -rf {RAN} {pp} {DROPIN.rsplit('/', 1)[0]}; {UNDEPLOY}")
    print(json.dumps(seen, indent=1, default=str))
    assert "0" not in seen["uids"] and seen["active"] != "active", seen  # before: ['0'], active
    assert "the owner rule refuses it" in json.dumps(seen["result"]) and pp in json.dumps(seen["result"])
    assert "sglang" in str(seen["mark"]), seen  # kept: the next run after a fix starts it


@pytest.mark.parametrize("dropin", [DROPIN, "/etc/systemd/system/sglang.service.d/by hand.conf"])  # systemd quotes
def test_a_rollback_never_starts_a_release_whose_unit_a_drop_in_makes_run_a_users_code(sandbox, sandbox_inventory,
                                                                                       tmp_path, dropin):
    """The owner rule of a release put back (restore.owner_problem: rollback, a deploy's fall-back, the router's,
    multi-node's) read the release's own unit alone; systemd starts it with the host's drop-ins over it. A drop-in's
    PYTHONPATH naming a folder of the `fleet` user's: `inv rollback` put the old release back and root imported
    that user's sitecustomize.py (fails before: uids ['0']). Now it is refused before anything stops."""
    pp = "/home/fleet/dropin-pp"
    folders = [tmp_path / d for d in ("a", "b")]
    books = []
    for folder, mark in zip(folders, "ab", strict=True):
        folder.mkdir()
        ladder = [{**BASE[0], "env": {**BASE[0]["env"], "FLEET_TEST_MARK": mark}}]
        books.append(llama_playbook(folder, ladder, name="llama-dropin-back"))
    try:
        for book in books:
            done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
            assert done.returncode == 0, done.stderr[-2000:]
        pid = sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip()
        sh(sandbox_inventory, HOST, f"{PLANTED.recorder()} && rm -rf {pp} && runuser -u fleet -- mkdir {pp} && "
                                    f"printf %s {shlex.quote(PLANTED.line)} | "
                                    f"runuser -u fleet -- tee {pp}/sitecustomize.py >/dev/null && "
                                    f"mkdir -p {dropin.rsplit('/', 1)[0]} && "
                                    f"printf '[Service]\\nEnvironment=PYTHONPATH={pp}\\n' > {shlex.quote(dropin)} && "
                                    "systemctl daemon-reload")
        back = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(books[0]), "--json")
        uids = PLANTED.uids(sandbox_inventory, HOST)
        same = sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip() == pid
    finally:
        sh(sandbox_inventory, HOST, f"rm -rf {RAN} {pp} {dropin.rsplit('/', 1)[0]}; {UNDEPLOY}")
    print(back.returncode, back.stdout[-1500:], uids)
    assert "0" not in uids, uids  # before: ['0']
    assert back.returncode == 1 and "code as root" in back.stdout and pp in back.stdout, back.stdout[-1500:]
    assert same  # refused before anything stopped: the server that served still serves
