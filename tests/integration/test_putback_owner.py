"""Found by review (h-adv14, stop 54): the owner rule is asked by the deploy's preflight only, and of the venv only. A
put-back (a deploy's fall-back, `inv rollback`) restores a recorded unit byte for byte and starts it, never
asking who owns the venv now; and serve.env may point the unit's python at a user's folder. Each test fails on
main at 5244a74 and shows root running the `fleet` user's code."""

from __future__ import annotations

import json
import shlex

from fleetcli import WANTS_RESET, inv, llama_playbook, sh
from ownerkit import UNDEPLOY, Plant, recovered

HOST = "sbx2"
VENV = "/opt/fx-adv14-venv"
BASE = [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}}]
OTHER = [{"name": "other", "env": {"NCCL_P2P_DISABLE": "1", "FLEET_TEST_MARK": "b"},
          "flags": {"disable-custom-all-reduce": True}}]
DIES = [{"name": "dies", "env": {"NCCL_P2P_DISABLE": "1"},
         "flags": {"disable-custom-all-reduce": True, "mem-fraction-static": 0.01}}]


def test_a_rollback_of_a_serve_venv_release_puts_it_back(sandbox, sandbox_inventory, tmp_path):
    """Side finding (pre-existing: fails at f7016db too): a put-back (rollback, a deploy's fall-back, recovery) of
    a release served from the playbook's serve.venv reads and sets patch sets in the inventory's venv
    (venvs.in_own_venv knows `packages:` venvs only), finds none of the recorded files there (sha256 None) and
    refuses: `inv rollback` fails, and a failed deploy's fall-back fails too, leaving the host down."""
    sh(sandbox_inventory, HOST, f"rm -rf {VENV} && cp -a /root/ml-env {VENV}")
    folders = [tmp_path / d for d in ("plain", "other")]
    for folder in folders:
        folder.mkdir()
    plain, other = (llama_playbook(f, ladder, name="llama-adv14", serve={"venv": VENV})
                    for f, ladder in zip(folders, (BASE, OTHER), strict=True))
    try:
        for book in (plain, other):
            done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
            assert done.returncode == 0, done.stderr[-2000:]
        back = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(plain), "--json")
        out = json.loads(back.stdout)
    finally:
        sh(sandbox_inventory, HOST, f"rm -rf {VENV}; {UNDEPLOY}")
    assert out["status"] == "ok", (out.get("error"), back.stderr[-2000:])


RAN = "/run/adv14-ran"  # not /tmp: the unit has PrivateTmp=yes
PLANTED = Plant(RAN)
PLANT = PLANTED.line


def test_a_fall_back_and_a_rollback_never_run_a_users_code_as_root(sandbox, sandbox_inventory, tmp_path):
    """The deploys serve from the inventory's venv (root's); then the `fleet` user gets a file in it (a module of
    the server it owns, sglang/__init__.py: what `chown` of a venv, or a `pip install` by that user, leaves). A
    deploy as root is now refused at preflight (the fix). But a deploy as serve.user fleet passes preflight,
    fails (the simulator cannot run as fleet: /run/fleet-sim is root's), and its fall-back puts back the
    previous release (no User=)
    and starts it: root imports fleet's sglang/__init__.py. `inv rollback` does the same. Expected: neither starts
    a root unit on a venv another user may change (refused before anything is stopped, as the preflight)."""
    folders = [tmp_path / d for d in ("plain", "other", "asfleet")]
    for folder in folders:
        folder.mkdir()
    plain, other = (llama_playbook(f, ladder, name="llama-adv14b")
                    for f, ladder in zip(folders[:2], (BASE, OTHER), strict=True))
    asfleet = llama_playbook(folders[2], BASE, name="llama-adv14b", serve={"user": "fleet"})
    seen: dict[str, object] = {}
    try:
        for book in (plain, other):
            done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
            assert done.returncode == 0, done.stderr[-2000:]
        sh(sandbox_inventory, HOST, PLANTED.plant())
        again = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(plain), "--force", "--json")
        seen["deploy as root"] = json.loads(again.stdout)["status"]
        fell = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(asfleet), "--json")
        seen["deploy as fleet"] = json.loads(fell.stdout)["status"]
        seen["uids after the fall-back"] = PLANTED.uids(sandbox_inventory, HOST)
        sh(sandbox_inventory, HOST, f"rm -f {RAN}/*")
        back = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(plain), "--json")
        seen["rollback"] = json.loads(back.stdout)["status"]
        seen["uids after the rollback"] = PLANTED.uids(sandbox_inventory, HOST)
    finally:
        sh(sandbox_inventory, HOST, PLANTED.undo() + UNDEPLOY)
    print(json.dumps(seen, indent=1))
    assert seen["deploy as root"] == "failed", seen  # the fix's preflight
    assert "0" not in seen["uids after the fall-back"], seen  # before: ['0', '1000']: root ran fleet's file
    assert "0" not in seen["uids after the rollback"], seen  # before: ['0']


def test_a_root_unit_never_imports_from_a_folder_of_a_users_named_by_serve_env(sandbox, sandbox_inventory, tmp_path):
    """The preflight asks who owns the venv, never what else the unit's python runs: serve.env's PYTHONPATH (or
    PYTHONHOME, LD_PRELOAD, LD_LIBRARY_PATH, a cache variable holding compiled modules) naming a folder the `fleet`
    user owns. Root imports fleet's sitecustomize.py at each start. Expected: refused at preflight, as a venv of
    that user's is."""
    pp = "/home/fleet/adv14-pp"
    sh(sandbox_inventory, HOST, f"rm -rf {RAN} {pp} && mkdir -m 1777 {RAN} && runuser -u fleet -- mkdir {pp} && "
                                f"printf %s {shlex.quote(PLANT)} | runuser -u fleet -- tee {pp}/sitecustomize.py "
                                ">/dev/null")
    book = llama_playbook(tmp_path, BASE, name="llama-adv14c", serve={"env": {"PYTHONPATH": pp}})
    try:
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        status = json.loads(done.stdout)["status"]
        uids = sorted(set(sh(sandbox_inventory, HOST, f"cat {RAN}/* 2>/dev/null; true").split()))
    finally:
        sh(sandbox_inventory, HOST, f"rm -rf {RAN} {pp}; {UNDEPLOY}")
    print(status, uids)
    assert "0" not in uids, (status, uids)  # before: status ok, uids ['0']: root ran fleet's sitecustomize.py


def test_the_remedy_set_serve_user_to_the_owner_starts_for_a_system_user(sandbox, sandbox_inventory, tmp_path):
    """The refusal's remedy, `set serve.user to OWNER`, for an owner that is a system user (useradd -r, its home
    /var/lib/NAME, the usual account for a service): the preflight passes, the unit names WorkingDirectory=
    /home/NAME (fleet.deploy.serving: never the account's home) and systemd fails the start (200/CHDIR) on
    every rung. Expected: the unit works in the user's home (or the preflight says so before anything stops)."""
    user, home = "adv14sys", "/var/lib/adv14sys"
    sh(sandbox_inventory, HOST, f"userdel -r {user} 2>/dev/null; useradd -r -d {home} -m {user} && "
                                f"cp -a /root/ml-env {home}/venv && chown -R -h {user}: {home}/venv")
    book = llama_playbook(tmp_path, BASE, name="llama-adv14d", serve={"user": user, "venv": f"{home}/venv"})
    try:
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        out = json.loads(done.stdout)
        unit = sh(sandbox_inventory, HOST, "grep WorkingDirectory /etc/systemd/system/sglang.service; true")
        said = sh(sandbox_inventory, HOST, "journalctl -u sglang --no-pager -n 40 | grep -i -m3 'chdir\\|working'; "
                                           "true")
    finally:
        sh(sandbox_inventory, HOST, "systemctl stop sglang 2>/dev/null; systemctl disable sglang 2>/dev/null; "
                                    "rm -rf /etc/systemd/system/sglang.service /etc/fleet/sglang.env /var/lib/fleet; "
                                    f"systemctl daemon-reload; userdel -r {user} 2>/dev/null; rm -rf {home}; true")
    print(json.dumps({"attempts": out.get("attempts"), "unit": unit, "journal": said}, indent=1))
    assert "/home/" not in unit, (unit, said)  # before: WorkingDirectory=/home/adv14sys, a folder the host lacks


def test_recover_never_starts_a_root_unit_again_on_a_venv_a_user_may_change(sandbox, sandbox_inventory, tmp_path):
    """`inv recover` of a GPU that asks for a reset stops the unit, resets the GPU and starts the unit again. Where
    the venv the root unit runs got a file of the `fleet` user's since it started, that start would run the user's
    code as root. Before: recover did it (uids ['0']). Now it is refused before anything stops: the unit still
    serves, the GPU is left as it was, and the error says how to go on."""
    book = llama_playbook(tmp_path, BASE, name="llama-recover-owner")
    seen: dict[str, object] = {}
    try:
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        sh(sandbox_inventory, HOST, f"{PLANTED.plant()} && mkdir -p /run/fleet-sim && {WANTS_RESET}")
        pid = sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip()
        seen = recovered(sandbox, sandbox_inventory, HOST, PLANTED)
        seen["same pid"] = sh(sandbox_inventory, HOST, "systemctl show -p MainPID --value sglang").strip() == pid
    finally:
        sh(sandbox_inventory, HOST, f"{PLANTED.undo()} rm -f /run/fleet-sim/kmsg /run/fleet-sim/gpustate; {UNDEPLOY}")
    print(json.dumps(seen, indent=1, default=str))
    assert "0" not in seen["uids"], seen  # before: ['0']: root ran fleet's sglang/__init__.py at the start again
    assert seen["rc"] == 1 and seen["same pid"], seen  # refused before the stop: the server never went down
    assert "owner rule" in json.dumps(seen["result"]) + str(seen["err"]), seen


def test_a_dead_runs_stopped_unit_is_not_started_again_as_root_on_a_users_venv(sandbox, sandbox_inventory, tmp_path):
    """A run that stopped the unit outside a release (a GPU reset) and died leaves it named in the stop mark; the
    next run under the lock starts it again as it was (fleet.deploy.hostrun). Where the root unit's venv got a
    file of the `fleet` user's meanwhile, that start ran the user's code as root (before: uids ['0']). Now the
    next run leaves it stopped and says the owner rule refused it; the mark stays for the run after a fix."""
    book = llama_playbook(tmp_path, BASE, name="llama-deadrun-owner")
    seen: dict[str, object] = {}
    try:
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        sh(sandbox_inventory, HOST, "systemctl stop sglang && echo '{\"units\": [\"sglang\"]}' > "
                                    f"/var/lib/fleet/stopped.json && {PLANTED.plant()}")
        seen = recovered(sandbox, sandbox_inventory, HOST, PLANTED)
    finally:
        sh(sandbox_inventory, HOST, PLANTED.undo() + UNDEPLOY)
    print(json.dumps(seen, indent=1, default=str))
    assert "0" not in seen["uids"] and seen["active"] != "active", seen  # before: ['0'], active
    assert "the owner rule refuses it" in json.dumps(seen["result"]), seen
    assert "sglang" in str(seen["mark"]), seen  # kept: the next run after a fix starts it


def test_a_rung_whose_env_loads_a_users_folder_is_skipped_and_the_next_rung_serves(sandbox, sandbox_inventory,
                                                                                   tmp_path):
    """A rung's env naming a folder the `fleet` user owns (PYTHONPATH) is that rung's preflight refusal; the
    ladder goes on to the next rung. Before: the whole host was refused, no rung tried."""
    pp = "/home/fleet/rung-pp"
    sh(sandbox_inventory, HOST, f"rm -rf {pp} && runuser -u fleet -- mkdir {pp}")
    ladder = [{**BASE[0], "name": "user-path", "env": {**BASE[0]["env"], "PYTHONPATH": pp}}, BASE[0]]
    book = llama_playbook(tmp_path, ladder, name="llama-rung-env")
    try:
        done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        out = json.loads(done.stdout)
    finally:
        sh(sandbox_inventory, HOST, f"rm -rf {pp}; {UNDEPLOY}")
    assert out["status"] == "ok", (out.get("error"), out.get("attempts"))
    assert out["attempts"][-1]["rung"] == "plain" and out["attempts"][-1]["outcome"] == "READY", out["attempts"]
    refused = [a for a in out["attempts"] if a["rung"] == "user-path"]
    assert refused and refused[0]["outcome"] == "PREFLIGHT" and "fleet (uid 1000)" in refused[0]["evidence"], refused
