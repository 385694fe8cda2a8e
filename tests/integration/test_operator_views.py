"""What operators keep open: `inv logs` over several hosts at once and `inv status` (also --watch) with a host
cut off, on sandbox hosts over real SSH."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess

import pytest
import yaml
from fleetcli import REPO, sh

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 150.00 MiB. GPU 0 has a total capacity of 94 GiB"


def _inventory(sandbox, tmp_path, hosts: list[str], **defaults) -> str:
    """The sandbox's inventory narrowed to `hosts`, with extra defaults (e.g. a unit of the test's own)."""
    data = yaml.safe_load(sandbox.cfg.inventory_path.read_text())
    data["hosts"] = {name: spec for name, spec in data["hosts"].items() if name in hosts}
    data["defaults"].update(defaults)
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _inv(*args, wait=True):
    cmd = [str(REPO / ".venv/bin/inv"), *args]
    env = {**os.environ, "COLUMNS": "250"}  # the status table whole, not folded into 80 columns
    if not wait:
        return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, env=env)
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          env=env)


@pytest.mark.timeout(120)
def test_logs_from_three_hosts_at_once_show_the_injected_failure_on_its_host_only(sandbox, sandbox_inventory,
                                                                                   tmp_path):
    unit = "fleet-logtest-" + os.urandom(3).hex()  # a journal of the test's own, whatever else ran here
    names = ["sbx0", "sbx1", "sbx2"]
    for name in names:
        lines = ["Load weight begin.", f"{name} serving"] + ([OOM] if name == "sbx1" else []) + ["shutting down"]
        script = "; ".join(f"echo {json.dumps(line)}" for line in lines)
        sh(sandbox_inventory, name,
           f"systemd-run --quiet --wait --unit={unit} --description={unit} sh -c '{script}' && journalctl --sync")
    inventory = _inventory(sandbox, tmp_path, names, unit=unit)

    proc = _inv("logs", "-i", inventory, "--since", "1h", "--json")
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 1 and "fatal lines (exit 1): sbx1: 1" in proc.stderr, proc.stderr  # not clean
    assert {r["host"] for r in rows if r["text"].endswith("serving")} == set(names)  # every host streamed
    classified = [r for r in rows if r["class"]]
    assert [(r["host"], r["class"], r["severity"]) for r in classified] == [("sbx1", "CUDA_OOM", "fatal")]
    assert "LOWER --mem-fraction-static" in classified[0]["remedy"]
    # one record per journal line, its class a field of it (before: the OOM line came twice, bare then classified)
    assert [r["text"] for r in rows if r["host"] == "sbx1"].count(OOM) == 1 and classified[0]["text"] == OOM
    journal = sh(sandbox_inventory, "sbx1", f"journalctl -u {unit} --since -1h -o cat --no-pager | wc -l")
    assert len([r for r in rows if r["host"] == "sbx1"]) == int(journal)

    text = _inv("logs", "-i", inventory, "--since", "1h").stdout
    marked = [line for line in text.splitlines() if ">> CUDA_OOM" in line]
    assert len(marked) == 1 and marked[0].startswith("sbx1 ")
    assert "next: LOWER --mem-fraction-static" in text
    others = [line for line in text.splitlines() if line.startswith(("sbx0 ", "sbx2 ")) and line.endswith(" serving")]
    assert len(others) == 2

    # -n with --since: the span's LAST lines (journalctl's own -n counts from --since: it gave the first ones)
    ends = {name: [r["text"] for r in rows if r["host"] == name][-2:] for name in names}
    last = _inv("logs", "-i", inventory, "--since", "1h", "-n", "2", "--json")
    got = {name: [r["text"] for r in map(json.loads, last.stdout.splitlines()) if r["host"] == name] for name in names}
    assert got == ends and "Load weight begin." not in str(got), (got, ends)
    following = _inv("logs", "-i", inventory, "-H", "sbx0", "--since", "1h", "-n", "2", "-f", "--json", wait=False)
    try:
        seen = [json.loads(following.stdout.readline())["text"] for _ in range(2)]
        sh(sandbox_inventory, "sbx0", f"systemd-run --quiet --wait --unit={unit} --description={unit} "
                                      "sh -c 'echo after-the-span' && journalctl --sync")
        while seen[-1] != "after-the-span" and len(seen) < 12:  # systemd's own lines of the second run first
            seen.append(json.loads(following.stdout.readline())["text"])
    finally:
        following.send_signal(signal.SIGINT)
        following.communicate(timeout=30)
    assert seen[:2] == ends["sbx0"] and seen[-1] == "after-the-span", seen
    assert "Load weight begin." not in seen and "sbx0 serving" not in seen[2:], seen  # nothing twice


@pytest.mark.timeout(120)
def test_status_with_a_host_cut_says_unreachable_for_it_and_completes_the_others(sandbox, tmp_path):
    inventory = _inventory(sandbox, tmp_path, ["sbx0", "sbx1", "sbx2"])
    sandbox.cut("sbx1")
    try:
        proc = _inv("status", "-i", inventory, "--json")
        table = _inv("status", "-i", inventory)
    finally:
        sandbox.heal("sbx1")
    rows = {r["host"]: r for r in json.loads(proc.stdout)["hosts"]}
    assert proc.returncode == 1 and list(rows) == ["sbx0", "sbx1", "sbx2"]
    cut = rows["sbx1"]
    # a dead link times out, or the kernel gives up on ARP first: either way the row says so
    assert cut["ok"] is False and "sbx1" in cut["error"] and re.search("timed out|unreachable", cut["error"])
    assert "; check " in cut["error"]  # the next thing to try
    for name in ("sbx0", "sbx2"):
        assert rows[name]["ok"] and rows[name]["gpus"] > 0 and rows[name]["unit"], rows[name]
    assert "unreachable" in table.stdout and "sbx1 (root@" in table.stdout


@pytest.mark.timeout(120)
def test_status_watch_refreshes_the_reachable_hosts_while_one_is_cut_and_ctrl_c_exits_130(sandbox, tmp_path):
    inventory = _inventory(sandbox, tmp_path, ["sbx0", "sbx1", "sbx2"])
    sandbox.cut("sbx1")
    watcher = _inv("status", "-i", inventory, "--watch", "--interval", "0.5", "--json", wait=False)
    try:
        seen: dict[str, list[bool]] = {}
        # Until each reachable host has refreshed twice and the cut one has answered (within its connect bound).
        while not (len(seen.get("sbx0", [])) >= 2 and len(seen.get("sbx2", [])) >= 2 and seen.get("sbx1")):
            line = watcher.stdout.readline()
            assert line, watcher.stderr.read()
            row = json.loads(line)
            seen.setdefault(row["host"], []).append(row["ok"])
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=30)
    finally:
        sandbox.heal("sbx1")
        if watcher.poll() is None:
            watcher.kill()
    assert seen["sbx1"] == [False] * len(seen["sbx1"]) and all(seen["sbx0"]) and all(seen["sbx2"])
    assert watcher.returncode == 130 and "Traceback" not in err


def test_a_bad_watch_interval_is_bad_input_before_any_host_is_contacted(sandbox):
    proc = _inv("status", "-i", str(sandbox.cfg.inventory_path), "--watch", "--interval", "soon")
    assert proc.returncode == 2 and "--interval 'soon'" in proc.stderr
