"""What a host serves after a power cut: the unit of its current release, enabled by every fleet run that settles
what serves (deploy, rollback, the put-back after a failed attempt), and `inv status` naming a host whose unit a
reboot would not start (one deployed by a fleet that did not enable it), with the remedy."""

from __future__ import annotations

import json
import time

from fleetcli import inv, llama_playbook, sh

HOST = "sbx4"
UNIT, ENV = "/etc/systemd/system/sglang.service", "/etc/fleet/sglang.env"
PLAIN = [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}}]
OTHER = [{"name": "other", "env": {"NCCL_P2P_DISABLE": "1", "FLEET_TEST_MARK": "b"},
          "flags": {"disable-custom-all-reduce": True}}]
# a rung the simulated server dies on at start (behaviour row mem-fraction-too-low: no room for the KV pool)
DIES = [{"name": "dies", "env": {"NCCL_P2P_DISABLE": "1"},
         "flags": {"disable-custom-all-reduce": True, "mem-fraction-static": 0.01}}]


def _fresh(inventory) -> None:
    sh(inventory, HOST, f"systemctl stop sglang 2>/dev/null; systemctl disable sglang 2>/dev/null; "
                        f"rm -rf {UNIT} {ENV} /var/lib/fleet; systemctl daemon-reload; true")


def _enabled(inventory) -> str:
    return sh(inventory, HOST, "systemctl is-enabled sglang 2>/dev/null; true").strip()


def _serves_after_power_cut(sandbox, inventory) -> str:
    """A hard stop (no shutdown) and a boot of the same disk; /health's code once the unit has had its time
    (polled, at most 90 s), with the MainPID it runs under."""
    sandbox.kill(HOST)
    sandbox.start(HOST)
    deadline = time.monotonic() + 90
    code = ""
    while time.monotonic() < deadline:
        code = sh(inventory, HOST, "curl -s -o /dev/null -w '%{http_code}' -m 3 http://127.0.0.1:30000/health; true")
        state = sh(inventory, HOST, "systemctl is-active sglang; true").strip()
        if code == "200" or state in ("inactive", "failed"):
            break
        time.sleep(0.5)
    return code


def _deploy(sandbox, book):
    proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_a_deployed_release_serves_again_after_a_power_cut(sandbox, sandbox_inventory, tmp_path):
    _fresh(sandbox_inventory)
    book = llama_playbook(tmp_path, PLAIN, name="llama-boot")
    try:
        rc, data, err = _deploy(sandbox, book)
        assert rc == 0 and data["status"] == "ok", err[-2000:]
        assert _enabled(sandbox_inventory) == "enabled"  # fails before: fleet never enabled its unit
        assert "enabled sglang" in err
        assert _serves_after_power_cut(sandbox, sandbox_inventory) == "200"
        proc = inv(sandbox, "status", "--host", HOST, "--json")
        row = json.loads(proc.stdout)["hosts"][0]
        assert proc.returncode == 0 and row["release"] == data["release"] and row["boot"] is None, proc.stderr
    finally:
        _fresh(sandbox_inventory)


def test_a_host_an_older_fleet_deployed_is_named_by_status_and_the_next_deploy_enables_it(
        sandbox, sandbox_inventory, tmp_path):
    _fresh(sandbox_inventory)
    book = llama_playbook(tmp_path, PLAIN, name="llama-boot-old")
    try:
        rc, data, err = _deploy(sandbox, book)
        assert rc == 0, err[-2000:]
        sh(sandbox_inventory, HOST, "systemctl disable sglang")  # as fleet before this change left it
        proc = inv(sandbox, "status", "--host", HOST, "--json")
        row = json.loads(proc.stdout)["hosts"][0]
        assert proc.returncode == 1 and "unit not enabled (no start after a reboot)" in proc.stderr
        assert "will not start after a reboot" in row["boot"] and "systemctl enable sglang" in row["boot"]
        detail = inv(sandbox, "status", "--detail", HOST)
        assert "after a reboot:" in detail.stdout and "will not start" in detail.stdout
        pid = sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip()
        proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--dry-run", "--json")
        plan = json.loads(proc.stdout)
        assert proc.returncode == 0 and plan["unchanged"] is True, proc.stderr[-2000:]
        assert f"sglang is disabled: a reboot would not start release {data['release']}" in plan["diff"]
        assert _enabled(sandbox_inventory) == "disabled"  # the dry run changed nothing
        rc, again, err = _deploy(sandbox, book)
        assert (rc, again["status"]) == (0, "unchanged") and "enabled sglang (it was disabled)" in err
        assert _enabled(sandbox_inventory) == "enabled"
        assert sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip() == pid  # no restart
        assert inv(sandbox, "status", "--host", HOST).returncode == 0
    finally:
        _fresh(sandbox_inventory)


def test_a_failed_attempt_leaves_the_good_release_enabled_and_a_rollback_its_target(
        sandbox, sandbox_inventory, tmp_path):
    _fresh(sandbox_inventory)
    folders = [tmp_path / d for d in ("good", "other", "dies")]
    for folder in folders:
        folder.mkdir()
    # one playbook name, three files: a rollback judges with the playbook its release was deployed with
    good, other, dies = (llama_playbook(f, ladder, name="llama-boot-a")
                         for f, ladder in zip(folders, (PLAIN, OTHER, DIES), strict=True))
    try:
        rc, first, err = _deploy(sandbox, good)
        assert rc == 0, err[-2000:]
        unit_a = sh(sandbox_inventory, HOST, f"sha256sum {UNIT} {ENV}")
        # a failed attempt: the good release is put back, and it is what a boot starts
        rc, failed, err = _deploy(sandbox, dies)
        assert rc == 1 and failed["status"] == "rolled_back" and failed["release"] == first["release"], err[-2000:]
        assert _enabled(sandbox_inventory) == "enabled"
        assert sh(sandbox_inventory, HOST, f"sha256sum {UNIT} {ENV}") == unit_a
        # a second release, then a rollback to the first: the first's files enabled, and served after a power cut
        rc, second, err = _deploy(sandbox, other)
        assert rc == 0 and second["release"] != first["release"], err[-2000:]
        sh(sandbox_inventory, HOST, "systemctl disable sglang")  # so that only the rollback can enable it
        proc = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(good), "--json")
        back = json.loads(proc.stdout)
        assert proc.returncode == 0 and back["release"] == first["release"], proc.stderr[-2000:]
        assert _enabled(sandbox_inventory) == "enabled" and "enabled sglang" in proc.stderr
        assert sh(sandbox_inventory, HOST, f"sha256sum {UNIT} {ENV}") == unit_a
        assert _serves_after_power_cut(sandbox, sandbox_inventory) == "200"
        assert "FLEET_TEST_MARK" not in sh(sandbox_inventory, HOST, "cat /proc/$(systemctl show -p MainPID --value "
                                                                    "sglang)/environ | tr '\\0' '\\n'")
    finally:
        _fresh(sandbox_inventory)


def test_a_first_deploy_that_serves_nothing_leaves_no_unit_a_boot_would_start(sandbox, sandbox_inventory, tmp_path):
    """Its files stay, stopped: even a unit enabled by hand before is disabled (a boot would start the attempt)."""
    _fresh(sandbox_inventory)
    sh(sandbox_inventory, HOST, f"printf '[Service]\\nExecStart=/bin/sleep infinity\\n[Install]\\n"
                                f"WantedBy=multi-user.target\\n' > {UNIT} && systemctl daemon-reload && "
                                "systemctl enable sglang")
    book = llama_playbook(tmp_path, DIES, name="llama-boot-dies")
    try:
        rc, data, err = _deploy(sandbox, book)
        assert rc == 1 and data["status"] == "failed", err[-2000:]
        assert _enabled(sandbox_inventory) == "disabled" and "disabled sglang" in err
    finally:
        _fresh(sandbox_inventory)
