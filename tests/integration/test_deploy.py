"""`inv deploy`, `inv rollback` and `inv history` on sandbox hosts running the simulated sglang stack."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from fleetcli import glm5_playbook, inv, inv_json, llama_playbook, sh

from sandbox.sim import wheels as simwheels

PATCHED = ["/root/ml-env/lib/python3.11/site-packages/sglang/srt/server_args.py",
           "/root/ml-env/lib/python3.11/site-packages/flashinfer/jit/comm.py"]


def deploy(sandbox, host, book: Path, *extra, env=None):
    return inv_json(sandbox, "deploy", "--host", host, "--playbook", str(book), *extra, env=env)


def checksums(inventory, name) -> str:
    files = " ".join(["/etc/systemd/system/sglang.service", "/etc/fleet/sglang.env", *PATCHED])
    return sh(inventory, name, f"sha256sum {files} 2>&1; readlink /var/lib/fleet/current; ls /var/lib/fleet/releases")


@pytest.fixture(scope="module")
def seed(_sandbox_session, tmp_path_factory):
    """The seed's story on sbx0 (8x RTX PRO 6000, SM 12.0, Proxmox): one deploy, shared by the tests here."""
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    book = glm5_playbook(tmp_path_factory.mktemp("books"), "glm5-nvfp4")
    rc, data, err = deploy(sandbox, "sbx0", book)
    return {"rc": rc, "data": data, "stderr": err, "book": book}


def test_seed_story_falls_back_from_fusion_and_serves_without_it(seed, sandbox_inventory):
    data = seed["data"]
    assert seed["rc"] == 0, seed["stderr"][-3000:]
    assert data["status"] == "ok" and data["config"]["rung"] == "no-fusion"
    first, last = data["attempts"][0], data["attempts"][-1]
    assert first["rung"] == "fusion-sm120"
    assert first["outcome"] in {"TMA_FAILURE", "CUDA_GRAPH_FAILURE", "ARCH_UNSUPPORTED", "AUTOTUNE_FAILURE"}
    assert first["evidence"]
    assert (last["rung"], last["outcome"]) == ("no-fusion", "READY")
    assert "--enable-flashinfer-allreduce-fusion" not in sh(sandbox_inventory, "sbx0",
                                                            "cat /etc/systemd/system/sglang.service")
    # no-fusion does not list the SM120 patch set, so it was reverted: the gates are pristine again.
    assert "[9, 10, 12]" not in sh(sandbox_inventory, "sbx0", f"cat {PATCHED[1]}")
    out = sh(sandbox_inventory, "sbx0", "curl -s -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate")
    assert json.loads(out)["text"].strip().startswith("4")
    assert "phase" in seed["stderr"] and "fusion-sm120" in seed["stderr"]  # live progress, on stderr
    # a line per phase with its budget; the in-place lines (phase, seconds of budget, last line) are for terminals
    assert re.search(r"^sbx0 \[no-fusion\] phase \w+ \(after [\d.]+s in \w+; budget \d+s\)$", seed["stderr"], re.M)
    assert not re.search(r"s of \d+s budget; last line: ", seed["stderr"])
    assert sh(sandbox_inventory, "sbx0", "stat -c %a /etc/fleet/sglang.env").strip() == "600"


def test_a_deploy_that_changes_nothing_restarts_nothing(seed, sandbox, sandbox_inventory):
    pid = sh(sandbox_inventory, "sbx0", "systemctl show -p MainPID --value sglang").strip()
    rc, data, _ = deploy(sandbox, "sbx0", seed["book"])
    assert (rc, data["status"], data["release"]) == (0, "unchanged", seed["data"]["release"])
    assert sh(sandbox_inventory, "sbx0", "systemctl show -p MainPID --value sglang").strip() == pid


def test_pins_are_checked_before_anything_is_stopped(seed, sandbox, sandbox_inventory, tmp_path):
    """packages: pins whose wheels disagree, or that the wheelhouse lacks, are bad input (exit 2, no host
    contacted, the old server serving); pins it has plan a dry run that builds nothing."""
    pid = sh(sandbox_inventory, "sbx0", "systemctl show -p MainPID --value sglang").strip()
    current = sh(sandbox_inventory, "sbx0", "readlink /var/lib/fleet/current").strip()
    # an index fleet may not ask (FLEET_SANDBOX_ONLY=1 allows only file://), whatever this machine's pip is set to
    empty = {"FLEET_WHEELHOUSE": str(tmp_path / "no-wheels"), "PIP_INDEX_URL": "https://pypi.org/simple"}
    book = glm5_playbook(tmp_path, "glm5-nvfp4", packages={"sglang": "0.5.23", "flashinfer-python": "0.7.4"})
    proc = inv(sandbox, "deploy", "--host", "sbx0", "--playbook", str(book), "--json", env=empty)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {book}:{book.read_text().splitlines().index('  flashinfer-python: 0.7.4') + 1}: "
        "packages.flashinfer-python: sglang 0.5.23 requires flashinfer-python==0.7.2; the playbook pins 0.7.4"]
    book = glm5_playbook(tmp_path, "glm5-nvfp4", packages={"sglang": "0.5.23", "flashinfer-python": "0.7.2"})
    proc = inv(sandbox, "deploy", "--host", "sbx0", "--playbook", str(book), "--json", env=empty)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {book}:{book.read_text().splitlines().index('  sglang: 0.5.23') + 1}: packages.sglang: no wheel of "
        f"sglang 0.5.23 in the wheelhouse {tmp_path / 'no-wheels'} (fleet installs only from it: pip download "
        f"--no-deps sglang==0.5.23 -d {tmp_path / 'no-wheels'}, or FLEET_WHEELHOUSE=a folder with it); not downloaded: "
        "FLEET_SANDBOX_ONLY=1 allows no index but a file:// one (PIP_INDEX_URL is https://pypi.org/simple) "
        f"(and 1 more: inv check --playbook {book})"]
    assert sh(sandbox_inventory, "sbx0", "systemctl show -p MainPID --value sglang").strip() == pid
    assert sh(sandbox_inventory, "sbx0", "readlink /var/lib/fleet/current").strip() == current
    house = tmp_path / "wheels"
    simwheels.build(house)
    book = glm5_playbook(tmp_path, "glm5-nvfp4", packages={"sglang": "0.5.9", "flashinfer-python": "0.6.3",
                                                           "torch": "2.9.1"})
    # an earlier test (tests/integration/test_pinned_venvs.py) may have left this pin set's venv on sbx0: the dry run
    # says which, and either way builds nothing
    listing = "ls -la --time-style=full-iso /var/lib/fleet/venvs 2>&1; true"
    venvs_before = sh(sandbox_inventory, "sbx0", listing)
    rc, data, _ = deploy(sandbox, "sbx0", book, "--dry-run", env={"FLEET_WHEELHOUSE": str(house)})
    assert rc == 0 and data["status"] == "dry-run", data
    said = re.match(r"venv (/var/lib/fleet/venvs/([0-9a-f]{16})): (would be built|there, used as it is)\n",
                    data["diff"])
    assert said, data["diff"]
    names = sh(sandbox_inventory, "sbx0", "ls -1 /var/lib/fleet/venvs 2>/dev/null; true").split()
    assert said[3] == ("there, used as it is" if said[2] in names else "would be built")
    assert f"{said[1]}/bin/python" in data["diff"]  # the unit would name that venv
    assert sh(sandbox_inventory, "sbx0", listing) == venvs_before


def test_dry_run_touches_nothing(seed, sandbox, sandbox_inventory):
    before = checksums(sandbox_inventory, "sbx0")
    rc, data, _ = deploy(sandbox, "sbx0", seed["book"], "--dry-run")  # what the deploy would say: nothing to do
    assert rc == 0 and data["status"] == "dry-run" and data["unchanged"] is True, data
    rc, data, _ = deploy(sandbox, "sbx0", seed["book"], "--dry-run", "--force")  # the ladder from its top again
    assert rc == 0 and data["status"] == "dry-run" and data["unchanged"] is False
    assert "--enable-flashinfer-allreduce-fusion" in data["diff"]
    assert "sm120-allreduce-fusion: applicable" in data["diff"]
    assert checksums(sandbox_inventory, "sbx0") == before


def test_every_rung_failing_ends_on_the_previous_release(seed, sandbox, sandbox_inventory, tmp_path):
    doomed = glm5_playbook(tmp_path, "glm5-doomed", ladder=[
        {"name": "too-greedy", "flags": {"mem-fraction-static": 0.99}},
        {"name": "still-greedy", "flags": {"mem-fraction-static": 0.985}},
    ])
    rc, data, _ = deploy(sandbox, "sbx0", doomed)
    assert rc == 1 and data["status"] == "rolled_back"
    assert data["release"] == seed["data"]["release"]
    assert [a["outcome"] for a in data["attempts"]] == ["CUDA_OOM", "CUDA_OOM"]
    assert sh(sandbox_inventory, "sbx0", "readlink /var/lib/fleet/current").strip().endswith(seed["data"]["release"])
    assert "--mem-fraction-static" not in sh(sandbox_inventory, "sbx0", "cat /etc/systemd/system/sglang.service")
    out = sh(sandbox_inventory, "sbx0", "curl -s -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate")
    assert json.loads(out)["text"].strip().startswith("4")


def test_rollback_restores_the_earlier_release_byte_for_byte(seed, sandbox, sandbox_inventory, tmp_path):
    first = seed["data"]["release"]
    unit_a = sh(sandbox_inventory, "sbx0", "sha256sum /etc/systemd/system/sglang.service").split()[0]
    triton = glm5_playbook(tmp_path, "glm5-triton", ladder=[{"name": "triton-moe",
                                                             "flags": {"moe-runner-backend": "triton"}}])
    meta = "/root/ml-env/lib/python3.11/site-packages/sglang-0.5.9.dist-info/METADATA"
    post = "s/^Version: 0.5.9$/Version: 0.5.9.post1/"  # as after a hand-run pip install of a post-release
    sh(sandbox_inventory, "sbx0", f"cp -p {meta} /tmp/METADATA.bak && sed -i '{post}' {meta}")
    try:
        rc, data, _ = deploy(sandbox, "sbx0", triton)
        assert rc == 0 and data["config"]["rung"] == "triton-moe"
        assert (data["versions_before"]["sglang"], data["versions"]["sglang"]) == ("0.5.9", "0.5.9.post1")
        assert sh(sandbox_inventory, "sbx0", "sha256sum /etc/systemd/system/sglang.service").split()[0] != unit_a
        proc = inv(sandbox, "rollback", "--host", "sbx0", "--playbook", str(seed["book"]), "--json")
    finally:
        sh(sandbox_inventory, "sbx0", f"cp -p /tmp/METADATA.bak {meta}")
    back = json.loads(proc.stdout)
    assert proc.returncode == 0 and back["status"] == "ok" and back["release"] == first
    # fleet installs no packages: the rollback says the venv is not what that release ran
    assert back["notes"] == [f"release {first} ran sglang 0.5.9 -> 0.5.9.post1 now in the venv: a rollback puts "
                             "back the unit, env and patch sets, not packages (install the release's versions by "
                             "hand)"], back
    # what serves is the venv as found, not the release's record (the review of stop 52: it said 0.5.9.post1 -> 0.5.9
    # beside the note that the venv still holds 0.5.9.post1)
    assert back["versions"]["sglang"] == "0.5.9.post1", back
    assert sh(sandbox_inventory, "sbx0", "sha256sum /etc/systemd/system/sglang.service").split()[0] == unit_a
    assert sh(sandbox_inventory, "sbx0", "readlink /var/lib/fleet/current").strip().endswith(first)
    # the wrong playbook's port, key and health check would judge another server: refused, nothing changed
    proc = inv(sandbox, "rollback", "--host", "sbx0", "--playbook", str(triton), "--to", first, "--json")
    wrong = json.loads(proc.stdout)
    assert proc.returncode == 1 and "served playbook glm5-nvfp4, not glm5-triton" in wrong["error"], wrong
    assert sh(sandbox_inventory, "sbx0", "sha256sum /etc/systemd/system/sglang.service").split()[0] == unit_a
    # without --playbook: the one the release records (glm5-nvfp4, from playbooks/)
    proc = inv(sandbox, "rollback", "--host", "sbx0", "--to", first, "--json")
    named = json.loads(proc.stdout)
    assert proc.returncode == 0 and named["status"] == "ok" and named["release"] == first, named
    hist = json.loads(inv(sandbox, "history", "--host", "sbx0", "--json").stdout)["hosts"][0]
    assert hist["current"] == first
    assert {r["status"] for r in hist["releases"]} >= {"ok"}
    # each release records the stack the deploy's probe read on the host (the sandbox's simulated venv)
    for r in hist["releases"]:
        assert {k: r["versions"].get(k) for k in ("sglang", "flashinfer-python", "torch", "cuda")} == {
            "sglang": "0.5.9.post1" if r["rung"] == "triton-moe" else "0.5.9", "flashinfer-python": "0.6.3",
            "torch": "2.9.1+cu130", "cuda": "13.0"}, r["versions"]
        assert r["versions"]["driver"]
    table = inv(sandbox, "history", "--host", "sbx0", "--bench").stdout
    assert "sglang/flashinfer" in table and "0.5.9/0.6.3" in table and "0.5.9.post1/0.6.3" in table


def test_workers_of_a_server_run_by_hand_are_named_by_preflight_and_never_killed(seed, sandbox, sandbox_inventory):
    # Someone ran the server by hand, outside systemd, then killed only its main process: the TP workers
    # stay on the GPUs with their memory. They are not the unit's: fleet names them and leaves them be.
    sh(sandbox_inventory, "sbx0", "systemctl stop sglang")
    sh(sandbox_inventory, "sbx0", "cd / && rm -f /tmp/by-hand.pid && setsid -f sh -c 'echo $$ > /tmp/by-hand.pid; "
                                  "exec env SGLANG_SIM_TIME_SCALE=0.02 /root/ml-env/bin/python -m sglang.launch_server "
                                  "--model-path /models/GLM-5-NVFP4 --tp-size 8 --port 30001' "
                                  ">/tmp/by-hand.log 2>&1 < /dev/null")
    count = "nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l"
    _wait_for(lambda: int(sh(sandbox_inventory, "sbx0", count)) >= 8)
    main = sh(sandbox_inventory, "sbx0", "cat /tmp/by-hand.pid").strip()
    sh(sandbox_inventory, "sbx0", f"kill -9 {main}")
    workers = sh(sandbox_inventory, "sbx0", "nvidia-smi --query-compute-apps=pid --format=csv,noheader").split()
    assert len(workers) >= 8, "the simulated workers should outlive their parent"
    rc, data, err = deploy(sandbox, "sbx0", seed["book"], "--force")
    assert rc == 1 and data["status"] == "failed", err[-2000:]
    (attempt,) = data["attempts"]
    assert attempt["outcome"] == "PREFLIGHT" and "held by a process that is not the unit's" in attempt["evidence"]
    assert f"pid {workers[0]} (" in attempt["evidence"] and "of user root" in attempt["evidence"]
    # refused at preflight: the versions as found, once, never a transition a script reads as an up- or downgrade
    assert data["nothing_changed"] is True and "versions_before" not in data and data["versions"], data
    assert sh(sandbox_inventory, "sbx0", count).strip() == str(len(workers))  # none of them killed
    # the operator ends them; the deploy goes ahead
    sh(sandbox_inventory, "sbx0", "kill -9 " + " ".join(workers))
    _wait_for(lambda: int(sh(sandbox_inventory, "sbx0", count)) == 0)
    rc, data, err = deploy(sandbox, "sbx0", seed["book"], "--force")
    assert rc == 0 and data["status"] == "ok", err[-2000:]
    assert data["attempts"][-1]["outcome"] == "READY"


def test_a_hang_is_detected_and_the_next_rung_serves(sandbox, tmp_path):
    book = llama_playbook(tmp_path, [
        {"name": "nccl-p2p", "description": "P2P as nvidia-smi offers it (OK, but broken in this VM)"},
        {"name": "no-p2p", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}},
    ])
    rc, data, err = deploy(sandbox, "sbx4", book)
    assert rc == 0, err[-2000:]
    assert [(a["rung"], a["outcome"]) for a in data["attempts"]] == [("nccl-p2p", "HANG"), ("no-p2p", "READY")]
    assert "no progress for" in data["attempts"][0]["evidence"]


def test_a_second_deploy_fails_fast_naming_the_lock_holder(sandbox, sandbox_inventory, tmp_path):
    book = llama_playbook(tmp_path, [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}], name="llama-lock")
    first = inv(sandbox, "deploy", "--host", "sbx1", "--playbook", str(book), "--json", wait=False)
    try:
        _wait_for(lambda: sh(sandbox_inventory, "sbx1", "cat /var/lib/fleet/lock/owner.json 2>/dev/null"))
        rc, data, _ = deploy(sandbox, "sbx1", book)
        assert rc == 1 and data["status"] == "failed"
        assert re.search(r"host is locked .* held by .* pid \d+ for deploy llama-lock", data["error"])
    finally:
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-2000:]


def test_bad_playbook_is_exit_2_before_any_host_is_touched(sandbox, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text('name: bad\nmodel: {path: /m}\nladder:\n  - name: x\n'
                   '    flags: {tp-size: "8\\nExecStartPre=/bin/sh"}\n')
    proc = inv(sandbox, "deploy", "--host", "sbx2", "--playbook", str(bad), "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "bad.yaml:5: ladder.0.flags" in proc.stderr


def _wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("condition not reached in time")
        time.sleep(0.2)


def test_status_shows_release_health_and_drift_of_a_hand_edited_file(seed, sandbox, sandbox_inventory):
    proc = inv(sandbox, "status", "--host", "sbx0", "--json")
    row = json.loads(proc.stdout)["hosts"][0]
    assert proc.returncode == 0 and row["unit"]["ActiveState"] == "active" and row["health"] == "200"
    assert row["release"] and row["playbook"] == "glm5-nvfp4" and row["drift"] == []
    assert (row["versions"]["sglang"], row["versions"]["flashinfer-python"]) == ("0.5.9", "0.6.3")
    assert row["sglang"] == "0.5.9"  # as the deploy's probe recorded it: remedies name 0.5.9's flags
    assert row["gpus"] == 8 and row["power_limit_w"] == 4800.0 and row["power_w"] > 0
    # the board reads sglang's own gauges from /metrics (idle now, so nothing running)
    assert set(row["metrics"]) == {"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput",
                                   "sglang:token_usage"} and row["metrics"]["sglang:num_running_reqs"] == 0
    sh(sandbox_inventory, "sbx0", "echo '# edited by hand' >> /etc/systemd/system/sglang.service")
    try:
        row = json.loads(inv(sandbox, "status", "--host", "sbx0", "--json").stdout)["hosts"][0]
        assert row["drift"] == ["/etc/systemd/system/sglang.service (changed)"]
    finally:
        sh(sandbox_inventory, "sbx0", "sed -i '$d' /etc/systemd/system/sglang.service")
    assert json.loads(inv(sandbox, "status", "--host", "sbx0", "--json").stdout)["hosts"][0]["drift"] == []
    # Files the patch engine manages are recorded by the release too: a hand edit there is drift as well.
    sh(sandbox_inventory, "sbx0", f"cp -p {PATCHED[0]} /tmp/sa.bak && echo '# hand' >> {PATCHED[0]}")
    try:
        row = json.loads(inv(sandbox, "status", "--host", "sbx0", "--json").stdout)["hosts"][0]
        assert row["drift"] == [f"{PATCHED[0]} (changed)"]
    finally:
        sh(sandbox_inventory, "sbx0", f"cp -p /tmp/sa.bak {PATCHED[0]}")


STATUS_OUTCOMES = [  # (what is done to sbx0, what puts it back, inv status's exit, its stderr line)
    ("true", "true", 0, None),
    ("echo '# edited by hand' >> /etc/systemd/system/sglang.service", "sed -i '$d' /etc/systemd/system/sglang.service",
     1, "fleet: not clean (exit 1): sbx0: drift in 1 file"),
    ("systemctl stop sglang", "systemctl start sglang", 1, "fleet: not clean (exit 1): sbx0: unit inactive (dead)"),
]


@pytest.mark.parametrize(("break_it", "mend", "code", "said"), STATUS_OUTCOMES, ids=["serving", "drift", "stopped"])
def test_status_exit_code_follows_the_table(seed, sandbox, sandbox_inventory, break_it, mend, code, said):
    """docs/cli.md: 1 when what status checks is not clean (it was 0 with a stopped server and with drift)."""
    sh(sandbox_inventory, "sbx0", break_it)
    try:
        proc = inv(sandbox, "status", "--host", "sbx0")
        assert proc.returncode == code, proc.stderr[-2000:]
        assert (said in proc.stderr) if said else "not clean" not in proc.stderr
    finally:
        sh(sandbox_inventory, "sbx0", mend)
    deadline = time.monotonic() + 120  # serving again (a started unit loads its model first) for the tests after
    while inv(sandbox, "status", "--host", "sbx0").returncode != 0:
        assert time.monotonic() < deadline, "sbx0 did not serve again"
        time.sleep(1)


def test_logs_classify_the_journal_and_follow_ends_cleanly_on_ctrl_c(seed, sandbox):
    proc = inv(sandbox, "logs", "--host", "sbx0", "--since", "1h", "--only", "fatal", "--json")
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 1 and events  # fatal lines shown: the journal is not clean
    assert all(e["severity"] == "fatal" and e["host"] == "sbx0" for e in events)
    assert seed["data"]["attempts"][0]["outcome"] in {e["class"] for e in events}
    assert all(set(e) >= {"explanation", "remedy", "rule", "source"} and e["explanation"] for e in events)
    # with 0.5.9's sites behind the rules: a rank's death is no refused argument (it was, by engine.py's area)
    dead = [e for e in events if "scheduler is dead" in e["text"]]
    assert dead and {e["class"] for e in dead} == {"FATAL"}

    follower = inv(sandbox, "logs", "--host", "sbx0", "-f", "--since", "1h", wait=False)
    first = follower.stdout.readline()
    assert first.startswith("sbx0 ")
    follower.send_signal(signal.SIGINT)
    _, err = follower.communicate(timeout=15)
    assert follower.returncode == 130 and "Traceback" not in err


def test_logs_show_host_time_fold_rank_copies_and_take_lines_and_a_clock_time(seed, sandbox, sandbox_inventory):
    """Issue 46 finding 9: the seed's fusion-sm120 crash is printed by each of sbx0's 8 TP ranks; `inv logs` shows
    it once with a count, each line with its time on the host's clock; --lines and --since 20:00 as journalctl
    takes them (-n as tail's)."""
    proc = inv(sandbox, "logs", "--host", "sbx0", "--json")
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    # every line has its time; journalctl's mark between two boots, where the journal spans one, has none
    assert proc.returncode == 1 and rows and all(r["time"] for r in rows if not r["boot"]), proc.stderr[-2000:]
    folded = [r for r in rows if r["count"] > 1]
    assert folded and max(r["count"] for r in folded) == 8, [r["text"] for r in rows][:40]
    assert all(r["count"] == len(r["ranks"]) and r["ranks"][0].startswith(("TP", "pid ")) for r in folded)
    # a traceback's lines carry no rank header: the error line, once per rank's process, is shown once too
    crash = [r for r in rows if r["class"] == "TMA_FAILURE" and r["severity"] == "fatal"]
    assert crash and all(r["count"] == 8 and r["ranks"][0].startswith("pid ") for r in crash), crash
    text = inv(sandbox, "logs", "--host", "sbx0").stdout
    assert re.search(r"^sbx0 \d\d-\d\d \d\d:\d\d:\d\d .*\[x8: TP0-TP7\]$", text, re.M), text[-3000:]
    last = inv(sandbox, "logs", "--host", "sbx0", "--lines", "5", "--json")
    plain = [json.loads(line) for line in last.stdout.splitlines() if json.loads(line)["class"] is None]
    assert last.returncode in (0, 1) and 1 <= sum(r["count"] for r in plain) <= 5, last.stdout
    later = inv(sandbox, "logs", "--host", "sbx0", "--since", "23:59:59", "--json")  # today, on the host's clock
    texts = [json.loads(line)["text"] for line in later.stdout.splitlines()]
    assert later.returncode == 0 and texts in ([], ["-- No entries --"]), later.stdout
    dated = inv(sandbox, "logs", "--host", "sbx0", "--since", f"{rows[0]['time'][:10]} 00:00", "-n", "3")
    assert dated.returncode in (0, 1) and "--since" not in dated.stderr, dated.stderr


def test_bad_since_is_bad_input(sandbox):
    proc = inv(sandbox, "logs", "--host", "sbx0", "--since", "yesterday; rm -rf /")
    assert proc.returncode == 2 and "--since" in proc.stderr
    proc = inv(sandbox, "logs", "--host", "sbx0", "--lines", "ten")
    assert proc.returncode == 2 and "--lines ten" in proc.stderr
    proc = inv(sandbox, "logs", "--host", "sbx0", "-n", "ten")  # -n is --lines here, as tail's
    assert proc.returncode == 2 and "--lines ten" in proc.stderr


def test_a_standalone_patch_is_a_release_that_rollback_undoes(seed, sandbox, sandbox_inventory):
    before = sh(sandbox_inventory, "sbx0", "readlink /var/lib/fleet/current").strip().rsplit("/", 1)[-1]
    proc = inv(sandbox, "patch", "--host", "sbx0", "--set", "sm120-allreduce-fusion", "--json")
    res = json.loads(proc.stdout)["hosts"][0]
    assert proc.returncode == 0 and res["release"], proc.stderr
    assert "[9, 10, 12]" in sh(sandbox_inventory, "sbx0", f"cat {PATCHED[1]}")
    hist = json.loads(inv(sandbox, "history", "--host", "sbx0", "--json").stdout)["hosts"][0]
    assert hist["current"] == res["release"]
    assert hist["releases"][-1]["config"]["patches"] == ["sm120-allreduce-fusion"]
    proc = inv(sandbox, "rollback", "--host", "sbx0", "--playbook", str(seed["book"]), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["release"] == before, proc.stderr[-2000:]
    assert "[9, 10, 12]" not in sh(sandbox_inventory, "sbx0", f"cat {PATCHED[1]}")
    assert json.loads(inv(sandbox, "status", "--host", "sbx0", "--json").stdout)["hosts"][0]["drift"] == []


def test_an_exposed_server_gets_its_api_key_as_a_credential_and_never_shows_it(sandbox, sandbox_inventory, tmp_path):
    key = "sk-fleet-test-" + os.urandom(8).hex()
    book = llama_playbook(tmp_path, [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}], name="llama-exposed",
                          serve={"host": "0.0.0.0", "api_key": {"env": "FLEET_TEST_API_KEY"}})
    proc = inv(sandbox, "deploy", "--host", "sbx2", "--playbook", str(book), "--json",
               env={"FLEET_TEST_API_KEY": key})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert key not in proc.stdout and key not in proc.stderr
    unit = sh(sandbox_inventory, "sbx2", "cat /etc/systemd/system/sglang.service")
    assert key not in unit and "LoadCredential=api-key:/etc/fleet/sglang.key" in unit and "--host 0.0.0.0" in unit
    assert "--enable-metrics" in unit  # on by default: the playbook does not name it
    modes = sh(sandbox_inventory, "sbx2", "stat -c %a /etc/fleet/sglang.env /etc/fleet/sglang.key").split()
    assert modes == ["600", "600"]
    url = "http://127.0.0.1:30000/generate"
    assert sh(sandbox_inventory, "sbx2", f"curl -s -o /dev/null -w '%{{http_code}}' -d '{{}}' {url}") == "401"
    out = sh(sandbox_inventory, "sbx2", f"curl -s -H 'Authorization: Bearer {key}' -d '{{\"text\": \"2+2=\"}}' {url}")
    assert json.loads(out)["text"].strip().startswith("4")
    missing = inv(sandbox, "deploy", "--host", "sbx2", "--playbook", str(book), "--json", "--force")
    assert missing.returncode == 2 and "FLEET_TEST_API_KEY" in missing.stderr and missing.stdout == ""
