"""What the fault tests share: waiting on conditions, the fault hook, and "nothing lost" by sha256."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import fleetcli
import pytest
from fleetcli import inv, llama_playbook, sh

SITE = "/root/ml-env/lib/python3.11/site-packages"
# Every file the shipped patch set may touch (what `nothing lost` hashes besides unit, env and releases).
PATCHABLE = [f"{SITE}/flashinfer/jit/comm.py", f"{SITE}/flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh",
             f"{SITE}/flashinfer/data/include/flashinfer/comm/trtllm_allreduce_fusion.cuh",
             f"{SITE}/sglang/srt/server_args.py", f"{SITE}/sglang/srt/layers/communicator.py"]
UNIT, ENV = "/etc/systemd/system/sglang.service", "/etc/fleet/sglang.env"
# P2P off and no custom all-reduce: the rung serves on every sandbox host, sbx4's broken P2P included.
NO_P2P = {"env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}}
PLAIN = [{"name": "plain", **NO_P2P}]
PATCHED = [{"name": "patched", **NO_P2P, "patches": ["sm120-allreduce-fusion"]}]


WANTS_RESET = fleetcli.WANTS_RESET  # GPU 0's driver asks for a reset (tests/integration/fleetcli.py)


def rung(name: str, **env) -> list[dict]:
    """A one-rung ladder like PLAIN whose env differs, so its unit and env files do too."""
    return [{"name": name, "env": {**NO_P2P["env"], **env}, "flags": dict(NO_P2P["flags"])}]


def wait_for(predicate, timeout: float = 120.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not reached in {timeout:.0f}s")
        time.sleep(0.2)


def managed_digest(inventory, name: str) -> dict[str, str]:
    """sha256 of every file fleet manages on the host: unit, env, patchable files, everything under
    /var/lib/fleet (releases, backups; the lock aside) and where `current` points. One round trip."""
    files = " ".join([UNIT, ENV, *PATCHABLE])
    out = sh(inventory, name, f"sha256sum {files} 2>/dev/null; "
                              "find /var/lib/fleet -path /var/lib/fleet/lock -prune -o -type f -print0 2>/dev/null"
                              " | sort -z | xargs -0r sha256sum; echo \"current $(readlink /var/lib/fleet/current)\"")
    digest = {}
    for line in out.splitlines():
        value, _, path = line.partition(" ")
        digest[path.strip()] = value
    return digest


def temp_files(inventory, name: str) -> list[str]:
    """Temp files fleet's atomic writes leave only when they die half-way."""
    out = sh(inventory, name, f"find /etc/systemd/system /etc/fleet /var/lib/fleet {SITE}/sglang {SITE}/flashinfer "
                              "-name '.*.fleet-*' 2>/dev/null; true")
    return out.split()


def serving(inventory, name: str) -> bool:
    out = sh(inventory, name, "curl -s -m 10 -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate || true")
    try:
        return json.loads(out)["text"].strip().startswith("4")
    except (ValueError, KeyError):
        return False


def current(inventory, name: str) -> str:
    return sh(inventory, name, "readlink /var/lib/fleet/current").strip().rsplit("/", 1)[-1]


def manifest(inventory, name: str, release: str) -> dict:
    return json.loads(sh(inventory, name, f"cat /var/lib/fleet/releases/{release}/manifest.json"))


def events(inventory, name: str, release: str) -> list[dict]:
    out = sh(inventory, name, f"cat /var/lib/fleet/releases/{release}/events.jsonl")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def in_progress(inventory, name: str) -> list[str]:
    out = sh(inventory, name, "grep -l '\"status\": \"in-progress\"' /var/lib/fleet/releases/*/manifest.json "
                              "2>/dev/null; true")
    return [p.split("/")[-2] for p in out.split()]


def deploy_killed_at(sandbox, host: str, book: Path, step: str, *extra):
    """`inv deploy` SIGKILLed by the fault hook at `step`: returns the finished process."""
    proc = inv(sandbox, "deploy", "--host", host, "--playbook", str(book), "--json", "--force", *extra,
               env={"FLEET_FAULT_KILL_AT": step})
    assert proc.returncode == -signal.SIGKILL, (step, proc.returncode, proc.stderr[-2000:])
    return proc


def books(tmp_path: Path) -> tuple[Path, Path]:
    """A plain known-good playbook and one whose rung patches (sm120-allreduce-fusion, 4 files)."""
    return (llama_playbook(tmp_path, PLAIN, name="llama-plain"),
            llama_playbook(tmp_path, PATCHED, name="llama-patched"))



def slow_inventory(sandbox, tmp_path: Path, hosts: list[str], scale: str = "0.2") -> Path:
    """The sandbox inventory with a slower simulated start on `hosts`, so a fault can land mid-watch."""
    import yaml

    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    for name in hosts:
        doc["hosts"][name].setdefault("vars", {}).setdefault("env", {})["SGLANG_SIM_TIME_SCALE"] = scale
    path = inventory_file(tmp_path)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def inventory_file(tmp_path: Path) -> Path:
    """A path for an inventory of its own: fleet reads every file of an inventory's folder as inventory."""
    folder = tmp_path / "inventory"
    folder.mkdir(exist_ok=True)
    return folder / "hosts.yaml"


def wait_restarted(inventory, name: str, proc) -> None:
    """Until the deploy `proc` has restarted the unit on the host (its journal watch is on)."""
    def seen() -> bool:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the deploy ended (exit {proc.returncode}) before its watch: {out[-1500:]} {err[-1500:]}")
        rel = in_progress(inventory, name)
        return bool(rel) and any(e["step"] == "restarted" for e in events(inventory, name, sorted(rel)[-1]))
    wait_for(seen, what=f"{name} watching its new server")


def deploy_ok(sandbox, host: str, book: Path) -> str:
    """A known-good release to fall back on: its id."""
    from fleetcli import inv_json

    rc, data, err = inv_json(sandbox, "deploy", "--host", host, "--playbook", str(book), "--force")
    assert rc == 0 and data["status"] == "ok", err[-3000:]
    return data["release"]


def fleet_digest_parallel(inventory) -> dict[str, dict[str, str]]:
    """managed_digest of every host at once."""
    from concurrent.futures import ThreadPoolExecutor

    names = sorted(inventory.hosts)
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return dict(zip(names, pool.map(lambda n: managed_digest(inventory, n), names), strict=True))
