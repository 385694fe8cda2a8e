"""The API key of a server exposed on 0.0.0.0 is looked for everywhere a local user or an operator could
see it, on a sandbox host, while fleet deploys, health-checks and benchmarks: every process's command line
and environment (scanned over and over, 20 ms apart, the whole time), the journal, the release store and every file, and
fleet's own --json. It may be only in the 0600 key file and systemd's credential copy of it."""

from __future__ import annotations

import json
import os
import shlex

import pytest
from fleetcli import inv, llama_playbook, sh

HOST = "sbx2"
KEY_FILE = "/etc/fleet/sglang.key"
SCAN = "/tmp/fleet-key-scan"
RESULTS: list[tuple[str, str]] = []

# Runs on the host: the key file itself is grep's pattern, so no command line of the scan holds the key.
SCANNER = f"""
rm -f {SCAN}.out {SCAN}.stop {SCAN}.n
n=0
while [ ! -e {SCAN}.stop ]; do
  for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do
    if tr '\\0' ' ' < "$f" 2>/dev/null | grep -qF -f {KEY_FILE}; then
      p=${{f#/proc/}}; p=${{p%%/*}}
      echo "$f $(cat /proc/$p/comm 2>/dev/null) $(cat /proc/$p/cgroup 2>/dev/null | tail -n 1)" >> {SCAN}.out
    fi
  done
  n=$((n + 1)); echo $n > {SCAN}.n
  sleep 0.02
done
"""


_DEPLOYED: dict[str, tuple] = {}


@pytest.fixture
def keyed(sandbox, sandbox_inventory, tmp_path_factory):
    """A server on 0.0.0.0 with a key, with a benchmark gate (the bench gets the key too); deployed once
    for the module."""
    if "keyed" in _DEPLOYED:
        return _DEPLOYED["keyed"]
    key = "sk-sweep-" + os.urandom(12).hex()
    book = llama_playbook(tmp_path_factory.mktemp("secrets"), [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}],
                          name="llama-keyed", serve={"host": "0.0.0.0", "api_key": {"env": "FLEET_TEST_API_KEY"}},
                          bench={"num_prompts": 4, "input_len": 32, "output_len": 16, "max_concurrency": 2,
                                 "gate": True})
    env = {"FLEET_TEST_API_KEY": key}
    first = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json", "--force", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    _DEPLOYED["keyed"] = key, book, env, [first.stdout]
    return _DEPLOYED["keyed"]


def test_the_key_is_in_no_command_line_environment_journal_store_or_output(sandbox, sandbox_inventory, keyed):
    key, book, env, outputs = keyed
    sh(sandbox_inventory, HOST, f"setsid nohup sh -c {shlex.quote(SCANNER)} > /dev/null 2>&1 < /dev/null &")
    # the control: a process that does show the key, which the scan must find
    control = sh(sandbox_inventory, HOST, f"setsid nohup python3 -c 'import time; time.sleep(2)' \"$(cat {KEY_FILE})\" "
                                          "> /dev/null 2>&1 < /dev/null & echo $!").strip()
    try:
        again = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json", "--force", env=env)
        assert again.returncode == 0, again.stderr[-3000:]
        bench = inv(sandbox, "bench", "--host", HOST, "--playbook", str(book), "--json", env=env)
        assert bench.returncode == 0, bench.stderr[-3000:]
        outputs += [again.stdout, again.stderr, bench.stdout, bench.stderr]
        for task in ("status", "history", "logs"):
            proc = inv(sandbox, task, "--host", HOST, "--json", env=env)
            outputs += [proc.stdout, proc.stderr]
    finally:
        sh(sandbox_inventory, HOST, f"touch {SCAN}.stop; sleep 0.3")
    rounds = int(sh(sandbox_inventory, HOST, f"cat {SCAN}.n").strip())
    seen = sh(sandbox_inventory, HOST, f"cat {SCAN}.out 2>/dev/null; rm -f {SCAN}.*; true")
    assert rounds > 50, "the scanner hardly ran"
    assert f"/proc/{control}/cmdline python3" in seen, "the scan did not see the control process"
    leaks = [line for line in seen.splitlines() if not line.startswith(f"/proc/{control}/")]
    assert leaks == [], "the key showed in a process list or environment:\n" + "\n".join(leaks)
    assert all(key not in text for text in outputs)
    # the server does have the key: an unauthenticated call is refused, the right key is served
    url = "http://127.0.0.1:30000/generate"
    assert sh(sandbox_inventory, HOST, f"curl -s -o /dev/null -w '%{{http_code}}' -d '{{}}' {url}") == "401"
    assert sh(sandbox_inventory, HOST, "journalctl --no-pager -o cat | grep -cF -f /etc/fleet/sglang.key; true"
              ).strip() == "0"
    assert "api_key='<secret>'" in sh(sandbox_inventory, HOST, "journalctl --no-pager -o cat -u sglang | "
                                                               "grep -F 'server_args=' | tail -n 1")
    holders = sh(sandbox_inventory, HOST,
                 f"grep -rlsF -f {KEY_FILE} /etc /var /run /root /home /tmp /opt 2>/dev/null; true").split()
    assert sorted(holders) == sorted([KEY_FILE, "/run/credentials/sglang.service/api-key"])
    modes = sh(sandbox_inventory, HOST, f"stat -c '%a %U' {' '.join(holders)}").split("\n")
    assert sorted(m for m in modes if m) == ["400 root", "600 root"]
    RESULTS.append(("api key during deploy, health, bench, status, logs",
                    f"{rounds} scans of every /proc/*/cmdline and environ: only in the control process; "
                    f"journal 0 lines; files: {', '.join(sorted(holders))}"))


def test_the_unit_names_the_credential_and_runs_the_launcher(sandbox_inventory, keyed):
    unit = sh(sandbox_inventory, HOST, "cat /etc/systemd/system/sglang.service")
    assert "LoadCredential=api-key:/etc/fleet/sglang.key" in unit.splitlines()
    start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert " /var/lib/fleet/bin/fleet-launch api-key flag:api-key sglang.launch_server " in start
    assert "api-key" not in sh(sandbox_inventory, HOST, "cat /etc/fleet/sglang.env").lower()


def test_a_new_key_is_a_new_release_and_the_old_one_stops_working(sandbox, sandbox_inventory, keyed):
    key, book, env, _ = keyed
    new = "sk-rotated-" + os.urandom(8).hex()
    proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json",
               env={"FLEET_TEST_API_KEY": new})
    res = json.loads(proc.stdout)
    assert proc.returncode == 0 and res["status"] == "ok", proc.stderr[-2000:]  # not "unchanged"
    url = "http://127.0.0.1:30000/v1/models"
    for k, code in ((key, "401"), (new, "200")):
        got = sh(sandbox_inventory, HOST, f"printf 'header = \"Authorization: Bearer %s\"\\n' {k} | "
                                         f"curl -s -o /dev/null -w '%{{http_code}}' -K - {url}")
        assert got == code
    unchanged = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json",
                    env={"FLEET_TEST_API_KEY": new})
    assert json.loads(unchanged.stdout)["status"] == "unchanged"
