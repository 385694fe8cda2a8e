"""A rollback and a deploy's fall-back say when they stop the server (issue 46, finding 5, a form nobody tried):
a real sglang on 8 GPUs takes up to its TimeoutStopSec (120 s) to stop and its GPUs a while more to empty, and
`inv rollback` said `rolling back to ...`, then nothing until the new start's first phase; the fall-back after a
failed attempt the same. Now the stop is said with its budget, and where it stands while it lasts (the deploy's
own stop did so already)."""

from __future__ import annotations

import json

from fleetcli import inv, llama_playbook, sh

HOST = "sbx2"
PLAIN = [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}}]
OTHER = [{"name": "other", "env": {"NCCL_P2P_DISABLE": "1", "FLEET_TEST_MARK": "b"},
          "flags": {"disable-custom-all-reduce": True}}]
DIES = [{"name": "dies", "env": {"NCCL_P2P_DISABLE": "1"},  # the simulated server has no room for its KV pool
         "flags": {"disable-custom-all-reduce": True, "mem-fraction-static": 0.01}}]
STOPPING = f"{HOST} stopping sglang and emptying the GPUs (budget 30s)"  # fleetcli.BUDGETS's stop


def test_a_rollback_and_a_fall_back_say_they_stop_the_server_with_its_budget(sandbox, sandbox_inventory, tmp_path):
    folders = [tmp_path / d for d in ("plain", "other", "dies")]
    for folder in folders:
        folder.mkdir()
    plain, other, dies = (llama_playbook(f, ladder, name="llama-stop-said")
                          for f, ladder in zip(folders, (PLAIN, OTHER, DIES), strict=True))
    try:
        for book in (plain, other):
            done = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
            assert done.returncode == 0, done.stderr[-2000:]
        back = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(plain), "--json")
        assert back.returncode == 0 and json.loads(back.stdout)["status"] == "ok", back.stderr[-2000:]
        assert STOPPING in back.stderr.splitlines(), back.stderr[-2000:]
        fell = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(dies), "--json")
        assert fell.returncode == 1 and json.loads(fell.stdout)["status"] == "rolled_back", fell.stderr[-2000:]
        assert STOPPING in fell.stderr.splitlines(), fell.stderr[-2000:]  # the attempt's own stop says its rung
    finally:
        sh(sandbox_inventory, HOST, "systemctl stop sglang 2>/dev/null; systemctl disable sglang 2>/dev/null; "
                                    "rm -rf /etc/systemd/system/sglang.service /etc/fleet/sglang.env /var/lib/fleet; "
                                    "systemctl daemon-reload; true")
