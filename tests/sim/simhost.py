"""Simulated hosts for tests/sim: temp dirs standing in for a sandbox host, no sandbox needed.

A SimHost is what a sandbox host gives the simulator: a site-packages with the simulated packages
(installed by sandbox/sim/install.py, copied per host so tests can patch it), a profile folder
(a copy of one in sandbox/profiles), an nvidia-smi on PATH (the sandbox stand-in
sandbox/standins/nvidia-smi when it exists, unless SIM_NVIDIA_SMI=fake; else the test double
tests/sim/fake_nvidia_smi.py), a live-state dir and a HOME.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROFILES = REPO / "sandbox" / "profiles"
FAKE_SMI = Path(__file__).with_name("fake_nvidia_smi.py")
STANDIN_SMI = REPO / "sandbox" / "standins" / "nvidia-smi"
TIME_SCALE = "0.0002"  # start-up phases: minutes -> tens of ms
TOKEN_TIME_SCALE = "0.2"  # default token pacing in tests (5x the modelled speed); rate tests set their own

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class SimServer:
    def __init__(self, host: SimHost, proc: subprocess.Popen, port: int, log_path: Path) -> None:
        self.host, self.proc, self.port, self.log_path = host, proc, port, log_path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, n: int = 60) -> str:
        """The end of the log without the (very long) server_args line, for assertion messages."""
        lines = [ln for ln in self.log().splitlines() if "server_args=ServerArgs(" not in ln]
        return "\n".join(lines[-n:])

    def health(self) -> int | None:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode} before ready:\n{self.tail()}")
            if self.health() == 200:
                return
            time.sleep(0.05)
        raise AssertionError(f"not ready after {timeout} s:\n{self.tail()}")

    def wait_exit(self, timeout: float = 20.0) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout} s:\n{self.tail()}") from None

    def wait_log(self, text: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not logged after {timeout} s:\n{self.tail()}")

    def request(self, method: str, path: str, body: dict | None = None, headers: dict | None = None,
                timeout: float = 30.0) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"content-type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def generate(self, text: str, max_new_tokens: int = 8, **kw) -> dict:
        status, body = self.request("POST", "/generate", {"text": text, "sampling_params": {
            "max_new_tokens": max_new_tokens, "temperature": 0, **kw}})
        assert status == 200, body
        return json.loads(body)

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)


class SimHost:
    def __init__(self, root: Path, pristine_site: Path, profile: str, smi: Path, switches: dict | None = None) -> None:
        self.root = root
        self.site = root / "site"
        shutil.copytree(pristine_site, self.site)
        self.profile = root / "profile"
        shutil.copytree(PROFILES / profile, self.profile)
        if switches:
            with open(self.profile / "profile.yaml", "a") as f:
                for k, v in switches.items():
                    f.write(f"{k}: {str(v).lower() if isinstance(v, bool) else v}\n")
        self.bin = root / "bin"
        self.bin.mkdir()
        (self.bin / "nvidia-smi").symlink_to(smi)
        self.run_dir = root / "run"
        self.home = root / "home"
        self.home.mkdir()
        self.servers: list[SimServer] = []
        self.pids: set[int] = set()

    def env(self, extra: dict | None = None) -> dict:
        env = {
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "PYTHONPATH": str(self.site),
            "HOME": str(self.home),
            "FLEET_SANDBOX_PROFILE": str(self.profile),
            "FLEET_SIM_RUN": str(self.run_dir),
            "SGLANG_SIM_TIME_SCALE": TIME_SCALE,
            "SGLANG_SIM_TOKEN_TIME_SCALE": TOKEN_TIME_SCALE,
            "LANG": "C.UTF-8",
            # real flashinfer builds its JIT modules silently; verbose, ninja -v shows each build (JIT_BUILT)
            "FLASHINFER_JIT_VERBOSE": "1",
        }
        env.update(extra or {})
        return env

    def file(self, rel: str) -> Path:
        return self.site / rel

    def patch(self, rel: str, old: str, new: str, count: int | None = None) -> None:
        path = self.file(rel)
        text = path.read_text()
        found = text.count(old)
        assert found and (count is None or found == count), f"{old!r} found {found} times in {rel}"
        path.write_text(text.replace(old, new))

    def apps(self) -> dict[int, tuple[int, int, str]]:
        out = {}
        d = self.run_dir / "apps"
        if d.is_dir():
            for f in d.iterdir():
                if f.name.isdigit() and _alive(int(f.name)):
                    gpu, used, name = f.read_text().split(maxsplit=2)
                    out[int(f.name)] = (int(gpu), int(used), name.strip())
        return out

    def start(self, *args: str, env: dict | None = None, port: int | None = None) -> SimServer:
        port = port or free_port()
        log_path = self.root / f"server-{len(self.servers)}.log"
        log = open(log_path, "wb")  # noqa: SIM115 - owned by the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "sglang.launch_server", *args, "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, env=self.env(env), cwd=self.root,
        )
        log.close()
        server = SimServer(self, proc, port, log_path)
        self.servers.append(server)
        self.pids.add(proc.pid)
        return server

    def run(self, module: str, *args: str, env: dict | None = None,
            timeout: float = 60.0) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                              env=self.env(env), cwd=self.root, timeout=timeout)

    def run_code(self, code: str, *args: str, env: dict | None = None,
                 timeout: float = 60.0) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              env=self.env(env), cwd=self.root, timeout=timeout)

    def cleanup(self) -> None:
        for server in self.servers:
            if server.proc.poll() is None:
                server.proc.send_signal(signal.SIGTERM)
                try:
                    server.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    server.proc.kill()
                    server.proc.wait()
        # workers left behind on purpose (SIGKILL of the launcher only) are ours: end them by pid
        for pid in list(self.apps()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def smi_path(tmp_root: Path) -> Path:
    """The sandbox's stand-in nvidia-smi when it exists (SIM_NVIDIA_SMI=fake forces the test double)."""
    if os.environ.get("SIM_NVIDIA_SMI") != "fake" and STANDIN_SMI.exists():
        return STANDIN_SMI
    dst = tmp_root / "fake-nvidia-smi"
    dst.write_text(f"#!{sys.executable} -S\n" + FAKE_SMI.read_text())
    dst.chmod(0o755)
    return dst
