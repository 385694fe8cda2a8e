"""Driving fleet's own CLI against the sandbox, as a user would (what the deploy-level tests share)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
import sshutil
import yaml

REPO = Path(__file__).resolve().parents[2]
# Test-sized phase budgets: the sandbox runs the simulated startup 50x faster than real time.
BUDGETS = {"start": 20, "weight_load": 30, "jit_compile": 30, "autotune": 30, "graph_capture": 30, "ready": 30,
           "stop": 30}


def write_book(tmp_path: Path, book: dict) -> Path:
    path = tmp_path / f"{book['name']}.yaml"
    path.write_text(yaml.safe_dump(book, sort_keys=False))
    return path


def glm5_playbook(tmp_path: Path, name: str, **changes) -> Path:
    """The shipped glm5-nvfp4 playbook with test-sized budgets, or a variant of it."""
    book = yaml.safe_load((REPO / "playbooks/glm5-nvfp4.yaml").read_text())
    book["budgets"] = dict(BUDGETS)
    book.update(changes)
    book["name"] = name
    return write_book(tmp_path, book)


def llama_playbook(tmp_path: Path, ladder: list[dict], name: str = "llama-tp2", **extra) -> Path:
    return write_book(tmp_path, {"name": name, "model": {"path": "/models/Llama-3.1-8B-Instruct"},
                                 "flags": {"tp-size": 2}, "ladder": ladder,
                                 "budgets": {**BUDGETS, "start": 12, "weight_load": 12}, **extra})


def inv(sandbox, *args, wait=True, env=None):
    """`inv TASK -i <the sandbox's inventory> ARGS...` in the repository, stdin closed."""
    return inv_at(sandbox.cfg.inventory_path, *args, wait=wait, env=env)


def inv_at(inventory_path, *args, wait=True, env=None):
    """`inv TASK -i INVENTORY ARGS...` in the repository, stdin closed; the process when not `wait`."""
    cmd = [str(REPO / ".venv/bin/inv"), *args[:1], "-i", str(inventory_path), *args[1:]]
    env = {**os.environ, **(env or {})}
    if not wait:
        return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                stdin=subprocess.DEVNULL)
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env,
                          stdin=subprocess.DEVNULL)


def inv_json(sandbox, *args, env=None):
    """(exit code, parsed JSON, stderr) of `inv ... --json`; a failure names what was printed instead."""
    proc = inv(sandbox, *args, "--json", env=env)
    try:
        return proc.returncode, json.loads(proc.stdout), proc.stderr
    except ValueError:
        pytest.fail(f"{args[0]} printed no JSON (exit {proc.returncode}): {proc.stdout[-500:]} {proc.stderr[-3000:]}")


def sh(inventory, name, command) -> str:
    return sshutil.sh(inventory.hosts[name], command).stdout


# GPU 0's driver asks for a reset (Xid 154 to "GPU Reset Required", the recovery action nvidia-smi reports), as
# after an uncorrectable ECC error (Xid 48) on a board that remaps rows; the stand-in keeps it in /run/fleet-sim.
WANTS_RESET = ("b=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0) && s=${b#0000} && s=${s%.0} && "
               "echo \"[ 902.1] NVRM: Xid (PCI:$s): 48, pid=1, An uncorrectable double bit error (DBE) has been "
               "detected on GPU in the framebuffer.\" >> /run/fleet-sim/kmsg && echo \"[ 902.1] NVRM: Xid (PCI:$s): "
               "154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)\" "
               ">> /run/fleet-sim/kmsg && "
               "printf '%s\\n' \"$b gpu_recovery_action=GPU Reset\" \"$b remapped_rows.pending=Yes\" "
               ">> /run/fleet-sim/gpustate")


def break_module(entry: Path) -> None:
    """A warm-start store entry's (issue 49) prefill module cut short, its tar and checksum made whole again."""
    src = tarfile.open(fileobj=io.BytesIO((entry / "cache.tar").read_bytes()))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for m in src.getmembers():
            f = src.extractfile(m) if m.isfile() else None
            body = f.read() if f else b""
            if m.name.endswith(".so") and "batch_prefill" in m.name:
                body = body[:20]
            m.size = len(body)
            tar.addfile(m, io.BytesIO(body) if m.isfile() else None)
    data = out.getvalue()
    (entry / "cache.tar").write_bytes(data)
    meta = json.loads((entry / "meta.json").read_text())
    meta["sha256"], meta["size"] = hashlib.sha256(data).hexdigest(), len(data)
    (entry / "meta.json").write_text(json.dumps(meta))
