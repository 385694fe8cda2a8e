"""`inv status` parsing of its one-round-trip output (pure)."""

from __future__ import annotations

import json
from pathlib import Path

from fleet import status
from fleet.inventory import Host

HOST = Host(name="h", address="a", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("x"))
UNIT_SHA, PATCHED_SHA = "a" * 64, "b" * 64


def output(manifest: dict, health: str, hashes: list[str], smi: str) -> str:
    m = "@@fleet-status@@\n"
    return ("ActiveState=active\nSubState=running\nMainPID=42\nResult=success\n" + m + json.dumps(manifest) + "\n"
            + m + health + "\n" + m + "\n".join(hashes) + "\n" + m + smi)


MANIFEST = {
    "id": "r2", "playbook": "glm5-nvfp4", "rung": "no-fusion",
    "files": {"/etc/systemd/system/sglang.service": {"sha256": UNIT_SHA}, "before:/etc/x": {"sha256": "c" * 64}},
    "patches": {"sets": [], "files": {"/venv/sglang/srt/server_args.py": PATCHED_SHA}},
    "attempts": [{"rung": "fusion-sm120", "outcome": "TMA_FAILURE"},
                 {"rung": "no-fusion", "outcome": "READY",
                  "bench": {"result": {"output_throughput": 3540.5}}}],
}


def test_a_healthy_host_without_drift():
    st = status.parse(HOST, output(MANIFEST, "200", [f"{UNIT_SHA} /etc/systemd/system/sglang.service",
                                                     f"{PATCHED_SHA} /venv/sglang/srt/server_args.py"],
                                   "250.10, 600.00\n249.90, 600.00\n"))
    assert (st.unit["ActiveState"], st.release, st.rung, st.health, st.drift) == ("active", "r2", "no-fusion",
                                                                                 "200", [])
    assert (st.gpus, st.power_w, st.power_limit_w, st.bench_tok_s, st.last_failure) == (2, 500.0, 1200.0, 3540.5,
                                                                                        "TMA_FAILURE")


def test_changed_and_missing_managed_files_are_drift_and_no_answer_is_none():
    st = status.parse(HOST, output(MANIFEST, "000", [f"{'d' * 64} /etc/systemd/system/sglang.service"],
                                   "[N/A], 600.00\n"))
    assert st.drift == ["/etc/systemd/system/sglang.service (changed)", "/venv/sglang/srt/server_args.py (missing)"]
    assert st.health is None and st.power_w is None and st.gpus == 1


def test_a_host_never_deployed_has_no_release_and_no_drift():
    st = status.parse(HOST, "ActiveState=inactive\n@@fleet-status@@\n\n@@fleet-status@@\n000\n@@fleet-status@@\n"
                            "@@fleet-status@@\n")
    assert (st.release, st.drift, st.bench_tok_s, st.last_failure, st.gpus) == (None, [], None, None, 0)
