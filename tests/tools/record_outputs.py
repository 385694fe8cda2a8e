"""Record what every task prints, on a sandbox fleet, to compare two versions of fleet (a refactor must not
change them). Not a test: run it before and after, then `diff -r BEFORE AFTER`.

    FLEET_SANDBOX_INSTANCE=dev .venv/bin/python tests/tools/record_outputs.py OUTDIR

Each task runs twice, with --json and as tables at COLUMNS=120; ids, times, durations and measured numbers
are normalised so two runs of the same code compare equal.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROFILES = ["rtx-pro-6000-x8-proxmox", "h100-sxm-x8", "rtx5090-x2-workstation", "b200-x8"]

_NORMAL = [
    (re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{4,6}"), "<ID>"),
    (re.compile(r"\d{8}T\d{6}Z"), "<TS>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:?\d\d|Z)?"), "<TIME>"),
    (re.compile(r"\d{2}:\d{2}:\d{2}"), "<CLOCK>"),
    (re.compile(r"\b\d+\.\d+"), "<N>"),
    (re.compile(r"\b\d{1,3}(,\d{3})+\b"), "<N>"),
    (re.compile(r"\b(pid|port|PID)[ =]\d+"), r"\1 <N>"),
    (re.compile(r"\b\d{4,}\b"), "<N>"),
    (re.compile(r"[0-9a-f]{12,64}"), "<HASH>"),
    (re.compile(r"fleet-test-state-\w+|/tmp/\w+"), "<TMP>"),
]


def normalise(text: str) -> str:
    text = text.replace(str(REPO), "<REPO>")
    for pattern, repl in _NORMAL:
        text = pattern.sub(repl, text)
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def main(out: Path) -> None:
    os.environ["FLEET_SANDBOX_ONLY"] = "1"
    sys.path.insert(0, str(REPO))
    from sandbox.config import config
    from sandbox.hosts import Sandbox

    cfg = config()
    sb = Sandbox(cfg, log=lambda m: None)
    sb.down()
    sb.up(len(PROFILES), PROFILES)
    inv = str(cfg.inventory_path)
    # fleet's local state (facts, known-good rungs) starts empty, as on a first run: remembered rungs would
    # change the order deploys try them in
    env = {**os.environ, "COLUMNS": "120", "FLEET_SANDBOX_ONLY": "1", "SGLANG_API_KEY": "golden-key",
           "TERM": "dumb", "FLEET_STATE_DIR": tempfile.mkdtemp(prefix="fleet-record-state-")}
    out.mkdir(parents=True, exist_ok=True)
    steps = [
        ("probe", ["probe"]),
        ("exec", ["exec", "--all", "--yes", "--cmd", "nvidia-smi -L"]),
        ("deploy-dry-run", ["deploy", "--host", "sbx0", "--playbook", "glm5-nvfp4", "--dry-run"]),
        ("deploy", ["deploy", "--host", "sbx0", "--playbook", "glm5-nvfp4"], "table"),
        ("deploy-unchanged", ["deploy", "--host", "sbx0", "--playbook", "glm5-nvfp4"]),
        ("deploy-force", ["deploy", "--host", "sbx0", "--playbook", "glm5-nvfp4", "--force"], "json"),
        ("status", ["status"]),
        ("history", ["history", "--host", "sbx0"]),
        ("logs", ["logs", "--host", "sbx0", "--only", "fatal"]),
        ("bench", ["bench", "--host", "sbx0", "--playbook", "glm5-nvfp4"]),
        ("patch-check", ["patch", "--check", "--set", "sm120-allreduce-fusion", "--host", "sbx0"]),
        ("audit", ["audit", "--host", "sbx0"]),
        ("rollback", ["rollback", "--host", "sbx0"], "table"),
        ("deploy-2node-dry-run", ["deploy", "--playbook", "glm5-2node", "--host", "sbx1", "--host", "sbx3",
                                  "--dry-run"]),
        ("deploy-2node", ["deploy", "--playbook", "glm5-2node", "--host", "sbx1", "--host", "sbx3", "--yes"], "json"),
        ("rollback-2node-none", ["rollback", "--playbook", "glm5-2node", "--host", "sbx1", "--host", "sbx3",
                                 "--yes"]),
        ("deploy-replicas", ["deploy", "--playbook", "llama-replicas", "--host", "sbx1", "--host", "sbx3", "--yes"],
         "table"),
        ("deploy-rolling", ["deploy", "--host", "sbx2", "--host", "sbx3", "--serial", "1", "--yes",
                            "--playbook", "llama-replicas"], "json"),
        ("tune", ["tune", "--host", "sbx2", "--playbook", "llama-replicas", "--yes"], "json"),
        ("status-all", ["status"]),
        ("bad-input", ["deploy", "--host", "sbx0", "--playbook", "glm5-nvfp4", "--serial", "x"]),
    ]
    fixture = REPO / "tests/fixtures/logs/sglang_kv_pool_too_small.log"
    for name, args, *once in steps:
        for mode in ("json", "table"):
            extra = ["--json"] if mode == "json" else []
            cmd = [str(REPO / ".venv/bin/inv"), args[0], "-i", inv, *args[1:], *extra]
            if once and once[0] != mode:  # a task that changes state runs once, in the mode it names
                continue
            res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
            (out / f"{name}.{mode}.out").write_text(f"$ inv {' '.join(args)} {' '.join(extra)}\nrc {res.returncode}\n"
                                                    + normalise(res.stdout))
            print(f"{name} {mode}: rc {res.returncode}", flush=True)
    for mode, extra in (("json", ["--json"]), ("table", [])):
        res = subprocess.run([str(REPO / ".venv/bin/inv"), "classify", str(fixture), *extra], cwd=REPO, env=env,
                             capture_output=True, text=True)
        (out / f"classify.{mode}.out").write_text(f"rc {res.returncode}\n" + normalise(res.stdout))
    sb.down()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
