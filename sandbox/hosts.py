"""Sandbox hosts: each a real systemd (systemd-nspawn --boot over an overlay of the shared image) with a
real OpenSSH server, in its own network namespace on a bridge with no uplink.

Recipe and timings: SANDBOX.md (copied into docs/). Requires root.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from sandbox import blackhole, image
from sandbox.config import (
    BOOT_SCRIPT,
    HOST_PROFILE_DIR,
    HOST_VENV,
    PROFILES_DIR,
    STANDINS_DIR,
    SandboxConfig,
)

READY_TIMEOUT_S = 90.0
# The simulated server's minutes become seconds; fleet passes it through like any per-host env var.
TIME_SCALE = os.environ.get("FLEET_SANDBOX_TIME_SCALE", "0.02")
STOP_TIMEOUT_S = 15.0


class SandboxError(RuntimeError):
    pass


class SandboxInputError(SandboxError):
    """Bad input to a sandbox task (a host or profile it does not have, a count out of range): exit 2, refused before
    anything changed, as every task's --help says (it was 1, a failed host's code)."""


@dataclass
class HostRecord:
    name: str
    index: int
    address: str
    profile: str
    netns: str
    veth: str


# ---------------------------------------------------------------- helpers


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SandboxError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def resolve_profile(spec: str) -> Path:
    """A profile name from sandbox/profiles, or a path to any folder in FORMAT.md's layout."""
    path = Path(spec)
    if not path.is_dir():
        path = PROFILES_DIR / spec
    if not (path / "nvidia-smi" / "query-gpu.csv").is_file():
        known = ", ".join(sorted(p.name for p in PROFILES_DIR.iterdir() if p.is_dir()))
        raise SandboxInputError(f"--profile {spec}: not a profile folder (no nvidia-smi/query-gpu.csv); "
                           f"shipped profiles: {known}")
    return path.resolve()


def _profile_digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _mac(address: str, bridge_side: bool = False) -> str:
    # Fixed MAC per IP: a random MAC on a reused IP leaves stale ARP entries (SANDBOX.md).
    octets = [int(o) for o in address.split(".")]
    return ("02:fc:" if bridge_side else "02:fb:") + ":".join(f"{o:02x}" for o in octets)


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- the manager


class Sandbox:
    def __init__(self, cfg: SandboxConfig, log: Callable[[str], None] = print):
        self.cfg = cfg
        self.log = log

    # state --------------------------------------------------------------
    def load_state(self) -> dict | None:
        try:
            return json.loads(self.cfg.state_file.read_text())
        except (OSError, ValueError):
            return None

    def hosts(self) -> list[HostRecord]:
        state = self.load_state()
        return [HostRecord(**h) for h in state["hosts"]] if state else []

    def cpu_seconds(self) -> float:
        """CPU time all hosts have used so far (sshd, shells, nvidia-smi, servers), from their cgroups."""
        total = 0
        for h in self.hosts():
            for line in (self.cfg.cgroups(h.name)[1] / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec"):
                    total += int(line.split()[1])
        return total / 1e6

    def host(self, name: str) -> HostRecord:
        hosts = self.hosts()
        for h in hosts:
            if h.name == name:
                return h
        if not hosts:
            raise SandboxInputError(f"no sandbox fleet ({self.cfg.instance}) is up, so no host {name!r}: bring it up "
                               "with `inv sandbox.up` (or `inv demo`)")
        raise SandboxInputError(f"no sandbox host named {name!r} (have: {', '.join(h.name for h in hosts)})")

    def nspawn_pid(self, name: str) -> int | None:
        pid = _read_pid(self.cfg.host_dir(name) / "nspawn.pid")
        return pid if _pid_alive(pid) else None

    def is_running(self, name: str) -> bool:
        return self.nspawn_pid(name) is not None

    # up / down ----------------------------------------------------------
    def up(self, count: int, profiles: Sequence[str]) -> tuple[list[HostRecord], bool]:
        """Bring up `count` hosts; host i gets profiles[i % len]. Returns (hosts, changed)."""
        if os.geteuid() != 0:
            raise SandboxError("the sandbox needs root (network namespaces, overlayfs, nspawn)")
        if count < 1:
            raise SandboxInputError(f"--hosts {count}: need at least 1 host")
        if count > 200:
            raise SandboxInputError(f"--hosts {count}: at most 200 hosts fit the sandbox subnet")
        resolved = [resolve_profile(p) for p in (profiles or ["rtx-pro-6000-x8-proxmox"])]
        args = {"hosts": count, "profiles": [[str(p), _profile_digest(p)] for p in resolved],
                "image": image.recipe_key()}
        state = self.load_state()
        if state and state.get("args") == args and all(self.is_running(h["name"]) for h in state["hosts"]):
            return self.hosts(), False
        if state:
            self.down()
        rootfs = image.ensure_image(self.log)
        self._sysctls()
        self._ensure_client_key()
        blackhole.sandbox_ranges()  # stays after down: a fleet that is down is cut off, never routed outside
        self._bridge_up()
        records = [
            HostRecord(name=f"sbx{i}", index=i, address=self.cfg.address(i), profile=str(resolved[i % len(resolved)]),
                       netns=self.cfg.netns(f"sbx{i}"), veth=self.cfg.veth(i))
            for i in range(count)
        ]
        self._write_state({"args": args, "rootfs": str(rootfs), "hosts": [asdict(r) for r in records]})
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(self._prepare_host, records))
        for r in records:
            self._netns_up(r)
            self._launch(r, rootfs)
        self._write_known_hosts(records)
        wheels = self._wheelhouse()
        self._wait_ready(records)
        self._write_inventory(records, wheels)
        return records, True

    def down(self) -> None:
        """Stop every host and remove what up made: processes, namespaces, bridge, cgroups, host dirs."""
        state = self.load_state()
        records = self.hosts()
        for r in records:
            self._request_stop(r.name)
        for r in records:
            self._finish_stop(r)
        for r in records:
            shutil.rmtree(self.cfg.host_dir(r.name), ignore_errors=True)
        shutil.rmtree(self.cfg.home / "wheelhouse", ignore_errors=True)
        _run("ip", "link", "del", self.cfg.bridge, check=False)
        for path in (self.cfg.state_file, self.cfg.known_hosts, self.cfg.inventory_path):
            path.unlink(missing_ok=True)
        for empty in (self.cfg.home / "hosts", *(cg.parent for cg in self.cfg.cgroups("x"))):
            try:
                empty.rmdir()
            except OSError:
                pass  # still in use by the other instance, or never made
        if state is None:
            self._sweep_leftovers()

    # single-host faults ---------------------------------------------------
    def kill(self, name: str) -> None:
        """Hard stop, as a power cut: SIGKILL everything in the host's cgroups, no shutdown."""
        r = self.host(name)
        (self.cfg.host_dir(name) / "stopping").touch()
        self._kill_cgroups(name)
        self._netns_down(r)

    def start(self, name: str) -> None:
        r = self.host(name)
        if self.is_running(name):
            return
        self._kill_cgroups(name)
        self._netns_down(r)
        self._netns_up(r)
        self._launch(r, Path(self.load_state()["rootfs"]))
        self._wait_ready([r])

    def cut(self, name: str) -> None:
        _run("ip", "link", "set", self.host(name).veth, "down")

    def heal(self, name: str) -> None:
        _run("ip", "link", "set", self.host(name).veth, "up")

    def link_up(self, name: str) -> bool:
        proc = _run("ip", "-o", "link", "show", self.host(name).veth, check=False)
        return proc.returncode == 0 and "state DOWN" not in proc.stdout and ",UP" in proc.stdout

    def status(self) -> list[dict]:
        rows = []
        for r in self.hosts():
            running = self.is_running(r.name)
            rows.append({
                "host": r.name, "address": r.address, "profile": Path(r.profile).name,
                "state": ("running" if running else "stopped"),
                "link": ("up" if self.link_up(r.name) else "down") if running else "-",
                "ssh": _ssh_banner(r.address, 0.5) if running else False,
                "pid": self.nspawn_pid(r.name),
            })
        return rows

    # internals ----------------------------------------------------------
    def _write_state(self, state: dict) -> None:
        self.cfg.home.mkdir(parents=True, exist_ok=True)
        tmp = self.cfg.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.rename(self.cfg.state_file)

    def _sysctls(self) -> None:
        # At the default 128, containers beyond 20-30 die with "Too many open files" (SANDBOX.md).
        path = Path("/proc/sys/fs/inotify/max_user_instances")
        if int(path.read_text()) < 8192:
            path.write_text("8192\n")

    def _ensure_client_key(self) -> None:
        key = self.cfg.identity_file
        if not key.exists():
            self.cfg.home.mkdir(parents=True, exist_ok=True)
            _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"fleet-sandbox-{self.cfg.instance}",
                 "-f", str(key))
        key.chmod(0o600)

    def _bridge_up(self) -> None:
        br = self.cfg.bridge
        if _run("ip", "link", "show", br, check=False).returncode != 0:
            _run("ip", "link", "add", br, "type", "bridge")
        _run("ip", "addr", "replace", f"{self.cfg.gateway}/{self.cfg.subnet.prefixlen}", "dev", br)
        _run("ip", "link", "set", br, "up")

    def _prepare_host(self, r: HostRecord) -> None:
        d = self.cfg.host_dir(r.name)
        shutil.rmtree(d, ignore_errors=True)
        up = d / "upper"
        (up / "etc/ssh").mkdir(parents=True)
        (up / "etc/hostname").write_text(r.name + "\n")
        (up / "etc/hosts").write_text(f"127.0.0.1\tlocalhost\n127.0.1.1\t{r.name}\n::1\tlocalhost ip6-localhost\n")
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{r.name}",
             "-f", str(up / "etc/ssh/ssh_host_ed25519_key"))
        pub = self.cfg.identity_file.with_suffix(".pub").read_text()
        for home, uid in (("root", 0), ("home/fleet", self._uid("fleet"))):
            ssh = up / home / ".ssh"
            ssh.mkdir(parents=True, mode=0o700)
            (ssh / "authorized_keys").write_text(pub)
            (ssh / "authorized_keys").chmod(0o600)
            if uid:
                for p in (ssh.parent, ssh, ssh / "authorized_keys"):
                    os.chown(p, uid, uid)
        (up / "home/fleet").chmod(0o755)
        profile = Path(r.profile)
        shutil.copytree(profile, up / HOST_PROFILE_DIR.lstrip("/"))
        for tool, where in (("nvidia-smi", "usr/bin"), ("dmidecode", "usr/sbin"),
                            ("systemd-detect-virt", "usr/bin"), ("dmesg", "usr/bin")):
            dest = up / where / tool
            dest.parent.mkdir(parents=True, exist_ok=True)
            if tool == "systemd-detect-virt" and not (profile / "system/systemd-detect-virt.txt").exists():
                os.mknod(dest, 0o600 | 0o020000, os.makedev(0, 0))  # overlay whiteout: command absent
                continue
            shutil.copy2(STANDINS_DIR / tool, dest)
            dest.chmod(0o755)
        self._install_sim(up)
        for model in MODELS:
            _model_folder(up / "models", **model)

    def _install_sim(self, upper: Path) -> None:
        try:
            from sandbox.sim import install as sim_install
        except ImportError:
            return
        site = upper / HOST_VENV.lstrip("/") / "lib" / "python3.11" / "site-packages"
        site.mkdir(parents=True, exist_ok=True)
        sim_install.install(site)
        from sandbox import router
        router.install(upper)  # the real sglang-router wheels, both API generations

    def _uid(self, user: str) -> int:
        rootfs = Path(image.image_path())
        for line in (rootfs / "etc/passwd").read_text().splitlines():
            parts = line.split(":")
            if parts[0] == user:
                return int(parts[2])
        raise SandboxError(f"user {user} missing from the sandbox image")

    def _netns_up(self, r: HostRecord) -> None:
        _run("ip", "netns", "add", r.netns)
        _run("ip", "link", "add", r.veth, "address", _mac(r.address, bridge_side=True),
             "type", "veth", "peer", "name", "eth0", "netns", r.netns)
        _run("ip", "link", "set", r.veth, "master", self.cfg.bridge, "up")
        _run("ip", "-n", r.netns, "link", "set", "lo", "up")
        _run("ip", "-n", r.netns, "addr", "add", f"{r.address}/{self.cfg.subnet.prefixlen}", "dev", "eth0")
        _run("ip", "-n", r.netns, "link", "set", "eth0", "address", _mac(r.address), "up")

    def _launch(self, r: HostRecord, rootfs: Path) -> None:
        d = self.cfg.host_dir(r.name)
        (d / "stopping").unlink(missing_ok=True)
        (d / "nspawn.pid").unlink(missing_ok=True)
        with open(d / "console.log", "ab") as out:
            # setsid -f: the host outlives this process and is nobody's child to reap.
            subprocess.run(
                ["setsid", "-f", str(BOOT_SCRIPT), r.name, str(rootfs), str(d), r.netns,
                 *map(str, self.cfg.cgroups(r.name))],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, check=True,
            )

    def _write_known_hosts(self, records: Sequence[HostRecord]) -> None:
        lines = []
        for r in records:
            pub = (self.cfg.host_dir(r.name) / "upper/etc/ssh/ssh_host_ed25519_key.pub").read_text().split()
            lines.append(f"{r.address} {pub[0]} {pub[1]}\n")
        self.cfg.known_hosts.write_text("".join(lines))

    def _wait_ready(self, records: Sequence[HostRecord]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        pending = {r.name: r for r in records}
        while pending:
            for name, r in list(pending.items()):
                if _ssh_banner(r.address, 0.3):
                    del pending[name]
                elif not self.is_running(name) and not (self.cfg.host_dir(name) / "nspawn.pid").exists() \
                        and time.monotonic() > deadline - READY_TIMEOUT_S + 5:
                    log = self.cfg.host_dir(name) / "console.log"
                    raise SandboxError(f"{name}: container exited during boot; see {log}")
            if pending and time.monotonic() > deadline:
                raise SandboxError(f"not ssh-ready after {READY_TIMEOUT_S:.0f}s: {', '.join(sorted(pending))}")
            if pending:
                time.sleep(0.05)

    def _wheelhouse(self) -> Path | None:
        """The simulated releases' wheels (sandbox/sim/wheels.py) in the fleet's own wheelhouse, which its inventory
        names: a pinned deploy to the sandbox works out of the box and never reads the operator's real one. None
        (said) when the upstream corpus they are made from is missing."""
        from sandbox.sim import wheels

        dest = self.cfg.home / "wheelhouse"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        try:
            wheels.build(dest)
        except wheels.CorpusMissing as exc:
            self.log(f"no sandbox wheelhouse (pinned deploys need one): {exc}")
            return None
        return dest

    def _write_inventory(self, records: Sequence[HostRecord], wheelhouse: Path | None) -> None:
        doc: dict[str, object] = {
            "defaults": {
                "user": "root",
                "venv": HOST_VENV,
                "identity_file": str(self.cfg.identity_file),
                "known_hosts": str(self.cfg.known_hosts),
            },
            "groups": {"sandbox": {"vars": {}}},
            "hosts": {
                r.name: {"address": r.address, "groups": ["sandbox"],
                         "vars": {"profile": Path(r.profile).name, "env": {"SGLANG_SIM_TIME_SCALE": TIME_SCALE}}}
                for r in records
            },
            **({"wheelhouse": str(wheelhouse)} if wheelhouse else {}),
        }
        path = self.cfg.inventory_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"# Written by `inv sandbox.up` ({self.cfg.instance} sandbox); replaced on every up.\n"
                       + yaml.safe_dump(doc, sort_keys=False))
        tmp.rename(path)

    def _request_stop(self, name: str) -> None:
        d = self.cfg.host_dir(name)
        if d.exists():
            (d / "stopping").touch()
        pid = self.nspawn_pid(name)
        if pid:
            os.kill(pid, signal.SIGTERM)

    def _finish_stop(self, r: HostRecord) -> None:
        deadline = time.monotonic() + STOP_TIMEOUT_S
        forced = False
        while self._cgroup_pids(r.name):
            if time.monotonic() > deadline:
                self._kill_cgroups(r.name)
                break
            if not forced and time.monotonic() > deadline - STOP_TIMEOUT_S / 2:
                pid = self.nspawn_pid(r.name)
                if pid:
                    os.kill(pid, signal.SIGTERM)  # a second SIGTERM makes nspawn force the stop
                forced = True
            time.sleep(0.05)
        self._kill_cgroups(r.name)
        self._netns_down(r)

    def _cgroup_pids(self, name: str) -> set[int]:
        pids: set[int] = set()
        for cg in self.cfg.cgroups(name):
            # os.walk, not rglob: the container's systemd removes its cgroups while we look.
            for folder, _, _ in os.walk(cg):
                try:
                    pids |= {int(p) for p in Path(folder, "cgroup.procs").read_text().split()}
                except OSError:
                    pass
        return pids

    def _kill_cgroups(self, name: str) -> None:
        for _ in range(100):
            pids = self._cgroup_pids(name)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)
        for cg in self.cfg.cgroups(name):
            for folder, _, _ in sorted(os.walk(cg), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(folder)
                except OSError:
                    pass
        (self.cfg.host_dir(name) / "nspawn.pid").unlink(missing_ok=True)

    def _netns_down(self, r: HostRecord) -> None:
        if _run("ip", "netns", "pids", r.netns, check=False).returncode == 0:
            for pid in _run("ip", "netns", "pids", r.netns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _run("ip", "netns", "del", r.netns, check=False)
        _run("ip", "link", "del", r.veth, check=False)

    def _sweep_leftovers(self) -> None:
        """With no state file, still remove namespaces and cgroups a crashed run of this instance left."""
        prefix = f"fsb{self.cfg.index}-"
        for line in _run("ip", "netns", "list", check=False).stdout.splitlines():
            ns = line.split()[0] if line.split() else ""
            if ns.startswith(prefix):
                name = ns[len(prefix):]
                self._kill_cgroups(name)
                self._netns_down(HostRecord(name, -1, "", "", ns, ""))
        _run("ip", "link", "del", self.cfg.bridge, check=False)


# Models "downloaded" on every sandbox host: real config and index, sparse shards (real sizes, no disk used).
MODELS = [
    {"name": "GLM-5-NVFP4", "total_bytes": 440 * 2**30, "layers": 78,
     "config": {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "n_routed_experts": 256,
                "kv_lora_rank": 512, "max_position_embeddings": 202752,
                "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}},
    {"name": "Llama-3.1-8B-Instruct", "total_bytes": 16 * 2**30, "layers": 32,
     "config": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 131072}},
]


def _model_folder(root: Path, name: str, total_bytes: int, layers: int, config: dict, shards: int = 4) -> None:
    dest = root / name
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    weight_map = {f"model.layers.{layer}.mlp.weight": names[layer % shards] for layer in range(layers)}
    (dest / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total_bytes}, "weight_map": weight_map}, indent=2))
    for shard in names:
        with open(dest / shard, "wb") as f:
            f.truncate(total_bytes // shards)


def _ssh_banner(address: str, timeout: float) -> bool:
    try:
        with socket.create_connection((address, 22), timeout=timeout) as s:
            s.settimeout(timeout)
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False
