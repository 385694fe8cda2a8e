"""Every row of the simulator's behaviour table, reproduced on sandbox hosts through systemd (issue 4).

tests/sim runs the simulated stack as local subprocesses; here each row runs the way an operator meets
it: the files the row needs are prepared on a sandbox host (hand edits over SSH, or `inv patch`), the
server is started as a transient systemd unit (`systemd-run --unit=simrow-<id>`), its journal is followed
until the row's line appears, the HTTP API is called with curl on the host and, for the serving rows,
`python -m sglang.bench_serving` measures the modelled rate. Every case stops its units, restores the
files it touched byte for byte and leaves the GPUs empty (per `nvidia-smi --query-compute-apps`).

Hosts (tests/conftest.py): sbx0 8x RTX PRO 6000 SM120 (CNS), sbx1 8x H100 SM90 (NVLink), sbx2 2x RTX 5090
SM120 (GNS), sbx3 8x B200 SM100, sbx4 2x RTX 5090 whose P2P reads OK but hangs (`p2p_broken: true`).
Also here: flag rejection through systemd and hand-written wrong patches that must fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from fleet.ssh import remote
from fleet.ssh.connect import open_connection

pytestmark = pytest.mark.sandbox

REPO = Path(__file__).resolve().parents[2]
INV = str(Path(sys.executable).parent / "inv")
PY = "/root/ml-env/bin/python"
SITE = "/root/ml-env/lib/python3.11/site-packages"
WORK = "/root/simrow"  # scripts, bench output, saved originals (removed after each case)
JIT_CACHE = "/root/.cache/flashinfer"
# a JIT build of trtllm_comm, as `ninja -v` shows it under FLASHINFER_JIT_VERBOSE=1 (its link step)
JIT_BUILT = "c++ -shared -o trtllm_comm.so"
CACHES = (JIT_CACHE, "/root/.cache/sglang")  # flashinfer's JIT cache, sglang's P2P-check cache
GLM = ("--model-path", "/models/GLM-5-NVFP4", "--tp", "8")  # the seed's model: MoE, speed 1.0
LLAMA = "/models/Llama-3.1-8B-Instruct"  # dense, 4x the seed model's speed (models.CATALOGUE)
DENSE_SPEED = 4.0
TUNED = ("--moe-runner-backend", "flashinfer_cutlass", "--max-running-requests", "1024")
FUSION = "--enable-flashinfer-allreduce-fusion"
TIME_SCALE = "0.02"  # start-up phases: minutes -> seconds (GLM-5 TP8 with a JIT build: ~7 s)
READY = "The server is fired up and ready to roll!"
PATCH_SET = "sm120-allreduce-fusion"

COMMUNICATOR = "sglang/srt/layers/communicator.py"
SERVER_ARGS = "sglang/srt/server_args.py"
JIT_COMM = "flashinfer/jit/comm.py"
ALLREDUCE_CUH = "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"
PATCHED_FILES = (COMMUNICATOR, SERVER_ARGS, JIT_COMM, ALLREDUCE_CUH)
UPPER_GATE = "(__CUDA_ARCH__ < 1200)"


def _load_behaviour():
    path = REPO / "sandbox/sim/pkgs/sglang_sim_core/behaviour.py"
    spec = importlib.util.spec_from_file_location("sim_behaviour_on_hosts", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


behaviour = _load_behaviour()
ROW_IDS = [r["id"] for r in behaviour.ROWS]


# ---------------------------------------------------------------------------------------------- host side
class Remote:
    """One fleet SSH connection per sandbox host, kept for the module (journal polling is many commands)."""

    def __init__(self, inventory) -> None:
        self.inventory = inventory
        self.conns: dict = {}

    def sh(self, name: str, command: str, timeout: float = 120) -> remote.CommandResult:
        host = self.inventory.hosts[name]
        if name not in self.conns or not self.conns[name].is_connected:  # a host restarted by another module
            self.conns[name] = open_connection(host)
        return remote.run(self.conns[name], host, command, timeout=timeout)

    def ok(self, name: str, command: str, timeout: float = 120) -> str:
        res = self.sh(name, command, timeout)
        assert res.ok, f"{name}: {command}\nexit {res.exited}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
        return res.stdout

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()


def gpu_apps(rem: Remote, host: str) -> list[tuple[int, int]]:
    """(pid, used MiB) of every process nvidia-smi lists on the host's GPUs."""
    out = rem.ok(host, "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits")
    return [(int(p), int(m)) for p, m in (line.split(",") for line in out.splitlines() if line.strip())]


class Unit:
    """`python -m sglang.launch_server` as a transient systemd unit on a sandbox host."""

    def __init__(self, rig: Rig, host: str, name: str, port: int) -> None:
        self.rig, self.host, self.name, self.port = rig, host, name, port
        self.invocation = ""

    def sh(self, command: str, timeout: float = 120) -> remote.CommandResult:
        return self.rig.rem.sh(self.host, command, timeout)

    def start(self, *args: str, env: dict[str, str] | None = None, props: Iterable[str] = ()) -> Unit:
        # the command line goes through a script: systemd would expand `$` in an ExecStart line
        script = f"{WORK}/{self.name}.sh"
        body = "#!/bin/sh\nexec " + shlex.join([PY, "-m", "sglang.launch_server", *args, "--port", str(self.port)])
        # real flashinfer builds its JIT modules silently; verbose, ninja -v shows each build (JIT_BUILT)
        env = {"SGLANG_SIM_TIME_SCALE": TIME_SCALE, "FLASHINFER_JIT_VERBOSE": "1", **(env or {})}
        cmd = ["systemd-run", f"--unit={self.name}", "--property=TimeoutStopSec=20"]
        cmd += [f"--property={p}" for p in props]
        cmd += [f"--setenv={k}={v}" for k, v in env.items()]
        cmd += ["/bin/sh", script]
        self.rig.rem.ok(self.host, f"mkdir -p {WORK} && printf '%s\\n' {shlex.quote(body)} > {script} && "
                                   f"{shlex.join(cmd)}")
        self.invocation = self.show("InvocationID")
        return self

    def show(self, prop: str) -> str:
        return self.sh(f"systemctl show -p {prop} --value {self.name}").stdout.strip()

    def journal(self) -> str:
        match = f"_SYSTEMD_INVOCATION_ID={self.invocation}" if self.invocation else ""
        res = self.sh(f"journalctl --no-pager -o cat -u {self.name} {match}")
        return res.stdout

    def tail(self, n: int = 50) -> str:
        lines = [ln for ln in self.journal().splitlines() if "server_args=ServerArgs(" not in ln]
        return f"--- journal of {self.name} on {self.host} (last {n} lines) ---\n" + "\n".join(lines[-n:])

    def active(self) -> bool:
        return self.show("ActiveState") in ("active", "activating", "deactivating")

    def wait_log(self, text: str, count: int = 1, timeout: float = 90) -> str:
        """Follow the journal until `text` appears `count` times; fail early when the unit has ended."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.journal()
            if log.count(text) >= count:
                return log
            if not self.active():
                log = self.journal()  # lines written just before the exit
                if log.count(text) >= count:
                    return log
                pytest.fail(f"unit ended ({self.show('Result')}, status {self.show('ExecMainStatus')}) before "
                            f"{text!r} x{count}\n{self.tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{text!r} x{count} not in the journal after {timeout} s\n{self.tail()}")
            time.sleep(0.2)

    def wait_exit(self, timeout: float = 90) -> int:
        """Wait for the unit's main process to end; its exit status as systemd recorded it."""
        deadline = time.monotonic() + timeout
        while self.active():
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name} still running after {timeout} s\n{self.tail()}")
            time.sleep(0.2)
        return int(self.show("ExecMainStatus") or -1)

    def wait_ready(self, timeout: float = 90) -> str:
        log = self.wait_log(READY, timeout=timeout)
        assert self.http("GET", "/health")[0] == 200, self.tail()
        return log

    def http(self, method: str, path: str, body: dict | None = None, timeout: float = 60) -> tuple[int, str]:
        """curl on the host; (status, body), status 0 when nothing answers on the port."""
        data = f"-H 'content-type: application/json' -d {shlex.quote(json.dumps(body))} " if body is not None else ""
        res = self.sh(f"curl -s -m {int(timeout)} -X {method} {data}-w '\\n%{{http_code}}' "
                      f"http://127.0.0.1:{self.port}{path}", timeout=timeout + 30)
        text, _, code = res.stdout.rpartition("\n")
        return (int(code) if code.strip().isdigit() else 0), text

    def generate(self, text: str, max_new_tokens: int = 8) -> str:
        status, body = self.http("POST", "/generate", {"text": text, "sampling_params": {
            "max_new_tokens": max_new_tokens, "temperature": 0}})
        assert status == 200, f"{status} {body}\n{self.tail()}"
        return json.loads(body)["text"]

    def bench(self, prompts: int, concurrency: int, out_len: int, power: bool = False) -> dict:
        """bench_serving on the host against this unit; its JSON record (+ 'power_w' samples if asked)."""
        out = f"{WORK}/bench-{self.name}.jsonl"
        cmd = shlex.join([PY, "-m", "sglang.bench_serving", "--backend", "sglang", "--host", "127.0.0.1",
                          "--port", str(self.port), "--dataset-name", "random-ids", "--random-input-len", "32",
                          "--random-output-len", str(out_len), "--random-range-ratio", "1.0",
                          "--num-prompts", str(prompts), "--max-concurrency", str(concurrency),
                          "--output-file", out, "--disable-tqdm", "--warmup-requests", "0"])
        samples, stop = f"{WORK}/power-{self.name}.txt", f"{WORK}/power-{self.name}.stop"
        if power:  # nvidia-smi's power.draw every 0.1 s while the bench runs (detached from the SSH channel)
            cmd = (f"rm -f {stop}; (while [ ! -e {stop} ]; do nvidia-smi --query-gpu=power.draw "
                   f"--format=csv,noheader,nounits >> {samples}; sleep 0.1; done) </dev/null >/dev/null 2>&1 & "
                   f"{cmd}; rc=$?; touch {stop}; wait; exit $rc")
        res = self.sh(f"cd {WORK} || exit 1; {cmd}", timeout=300)
        assert res.ok, f"bench failed ({res.exited}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}\n{self.tail()}"
        assert "============ Serving Benchmark Result ============" in res.stdout
        record = json.loads(self.rig.rem.ok(self.host, f"tail -n 1 {out}"))
        if power:
            record["power_w"] = [float(x) for x in self.rig.rem.ok(self.host, f"cat {samples}").split()]
        return record

    def stop(self) -> None:
        self.sh(f"systemctl stop {self.name}; systemctl reset-failed {self.name} 2>/dev/null; true", timeout=60)


class Rig:
    """What one case touched on the hosts, undone in `cleanup` (units, files, caches, leftover workers)."""

    def __init__(self, rem: Remote, sandbox) -> None:
        self.rem, self.sandbox = rem, sandbox
        self.units: list[Unit] = []
        self.saved: dict[str, dict[str, str]] = {}  # host -> site-relative path -> sha256 before
        self.hosts: set[str] = set()
        self.cleanups: list[Callable[[], None]] = []
        self._port = 31000

    def use(self, host: str) -> None:
        """First touch of a host: make WORK; the caches the simulator writes (JIT, P2P) go when this case
        made them."""
        if host in self.hosts:
            return
        made = self.rem.ok(host, f"mkdir -p {WORK} && for d in {' '.join(CACHES)}; do test -e $d || echo $d; done")
        self.hosts.add(host)
        if made.split():
            self.cleanups.insert(0, lambda: self.rem.ok(host, "rm -rf " + " ".join(made.split())))

    def unit(self, host: str, name: str) -> Unit:
        self.use(host)
        self._port += 1
        u = Unit(self, host, f"simrow-{name}", self._port)
        self.units.append(u)
        return u

    # files --------------------------------------------------------------------------------------------
    def save(self, host: str, files: Iterable[str] = PATCHED_FILES) -> None:
        """Copy the files aside (cp -p) and remember their sha256: `cleanup` puts them back byte for byte."""
        self.use(host)
        files = [f for f in files if f not in self.saved.get(host, {})]
        if not files:
            return
        out = self.rem.ok(host, f"mkdir -p {WORK}/orig && cd {SITE} && cp -p --parents {shlex.join(files)} "
                                f"{WORK}/orig/ && sha256sum {shlex.join(files)}")
        self.saved.setdefault(host, {}).update({ln.split()[1]: ln.split()[0] for ln in out.splitlines()})

    def edit(self, host: str, rel: str, old: str, new: str, found: int, replace: int | None = None) -> None:
        """A hand edit of an installed file over SSH: `old` must occur `found` times; the first `replace`
        occurrences (all when None) become `new`. Mode and owner stay (the file is rewritten in place)."""
        self.save(host, [rel])
        code = ("import sys; p, old, new, found, n = sys.argv[1:]; t = open(p).read(); c = t.count(old); "
                "assert c == int(found), f'{old!r} found {c} times in {p}'; "
                "open(p, 'w').write(t.replace(old, new, int(n)))")
        self.rem.ok(host, shlex.join([PY, "-c", code, f"{SITE}/{rel}", old, new, str(found),
                                      str(found if replace is None else replace)]))

    def patch_sglang_gates(self, host: str) -> None:
        """The seed's sglang edit: SM 12.x through the SM90/SM100 gates on allreduce fusion."""
        self.edit(host, COMMUNICATOR, "    is_sm100_supported,\n)",
                  "    is_sm100_supported,\n    is_sm120_supported,\n)", 1)
        self.edit(host, COMMUNICATOR, "(_is_sm90_supported or _is_sm100_supported)",
                  "(_is_sm90_supported or _is_sm100_supported or (_is_cuda and is_sm120_supported()))", 1)
        self.edit(host, SERVER_ARGS, "and (is_sm90_supported() or is_sm100_supported())",
                  "and (is_sm90_supported() or is_sm100_supported() or is_sm120_supported())", 1)

    def patch_jit_gate(self, host: str) -> None:
        self.edit(host, JIT_COMM, "supported_major_versions=[9, 10]", "supported_major_versions=[9, 10, 12]", 1)

    def inv_patch(self, host: str, *extra: str) -> dict:
        """The repo's own `inv patch --set sm120-allreduce-fusion` (reverted with --revert in cleanup)."""
        self.save(host)
        had_fleet_dir = self.rem.sh(host, "test -d /var/lib/fleet").ok

        def run(*args: str) -> tuple[int, dict]:
            proc = subprocess.run([INV, "patch", "--inventory", str(self.sandbox.cfg.inventory_path), "--host", host,
                                   "--set", PATCH_SET, "--json", *args], cwd=REPO, capture_output=True, text=True,
                                  timeout=300, env={**os.environ, "COLUMNS": "200"})
            assert proc.stdout.strip(), proc.stderr
            return proc.returncode, json.loads(proc.stdout)["hosts"][0]

        def revert() -> None:
            rc, out = run("--revert")
            assert rc == 0 and out["ok"], out
            if not had_fleet_dir:
                self.rem.ok(host, "rm -rf /var/lib/fleet")

        rc, out = run(*extra)
        self.cleanups.append(revert)
        assert rc == 0 and out["ok"], out
        return out

    # end ----------------------------------------------------------------------------------------------
    def cleanup(self) -> list[str]:
        problems: list[str] = []

        def attempt(what: str, fn: Callable[[], object]) -> None:
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - collect, then report every problem
                problems.append(f"{what}: {e!r}")

        for u in reversed(self.units):
            attempt(f"stop {u.name}", u.stop)
        for host in sorted(self.hosts):
            # workers left behind on purpose (a launcher killed alone) are this case's: end them by pid
            def kill_leftovers(host=host) -> None:
                pids = [p for p, _ in gpu_apps(self.rem, host)]
                if pids:
                    self.rem.sh(host, "kill -9 " + " ".join(map(str, pids)))
            attempt(f"{host}: leftover workers", kill_leftovers)
        for fn in reversed(self.cleanups):
            attempt("cleanup", fn)
        for host, files in self.saved.items():
            def restore(host=host, files=files) -> None:
                names = shlex.join(files)
                out = self.rem.ok(host, f"cd {WORK}/orig && for f in {names}; do cmp -s $f {SITE}/$f || "
                                        f"cp -p $f {SITE}/$f; done; cd {SITE} && sha256sum {names}")
                now = {ln.split()[1]: ln.split()[0] for ln in out.splitlines()}
                assert now == files, f"{host}: files not put back: {now} != {files}"
            attempt(f"{host}: restore files", restore)
        for host in sorted(self.hosts):
            def empty(host=host) -> None:
                deadline = time.monotonic() + 20
                while (apps := gpu_apps(self.rem, host)) and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert apps == [], f"{host}: GPUs not empty: {apps}"
                self.rem.ok(host, f"rm -rf {WORK}")
            attempt(f"{host}: GPUs empty", empty)
        return problems


@pytest.fixture(scope="module")
def rem(_sandbox_session):
    from fleet import inventory

    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    r = Remote(inventory.load(sandbox.cfg.inventory_path))
    yield r
    r.close()


@pytest.fixture
def rig(sandbox, rem):
    r = Rig(rem, sandbox)
    yield r
    problems = r.cleanup()
    assert not problems, "cleanup failed:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------------------- numbers
def slow_tokens(modelled_rate: float, saturation: int) -> tuple[float, dict[str, str]]:
    """A token time scale that paces each stream at ~10 tok/s on the wall clock: light for a busy host, and
    long enough steps that scheduling hiccups barely move the median TPOT."""
    scale = max(1.0, round(modelled_rate / saturation / 10.0, 1))
    return scale, {"SGLANG_SIM_TOKEN_TIME_SCALE": str(scale)}


def decode_rate(record: dict, concurrency: int, scale: float) -> float:
    """Aggregate decode tok/s (modelled units) implied by the measured median TPOT with `concurrency` streams."""
    return concurrency * 1000.0 / record["median_tpot_ms"] * scale


def assert_near(measured: float, expected: float, tol: float) -> None:
    assert abs(measured - expected) <= tol * expected, f"measured {measured:.1f}, expected ~{expected:.1f} ±{tol:.0%}"


def assert_failed(unit: Unit, status: int = 1) -> str:
    code = unit.wait_exit()
    log = unit.journal()
    assert code == status, f"exit status {code}, expected {status}\n{unit.tail()}"
    assert unit.show("Result") == "exit-code", unit.tail()
    assert unit.http("GET", "/health")[0] == 0  # the port was never opened
    return log


def assert_scheduler_died(log: str) -> None:
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert re.search(r"Rank \d+ scheduler is dead\. Please check if there are relevant logs\.", log), log[-3000:]
    assert "Exit code: 1" in log


def assert_hangs_after(unit: Unit, marker: str, ranks: int, window: float = 2.5) -> str:
    """Every rank printed `marker`, then nothing more: no new journal line for `window` s, the unit still
    running, nothing listening on the port."""
    log = unit.wait_log(marker, count=ranks)
    before = log
    deadline = time.monotonic() + window
    while time.monotonic() < deadline:
        assert unit.active(), unit.tail()
        assert unit.http("GET", "/health", timeout=2)[0] == 0
        time.sleep(0.3)
    log = unit.journal()
    assert log == before, "new output during the hang:\n" + log[len(before):]
    assert log.rstrip().splitlines()[-1].split("] ", 1)[-1].startswith(marker), unit.tail()
    return log


TMA_SKIP = re.compile(r"WARNING - autotuner\.py:\d+ - flashinfer\.jit: \[Autotuner\]: Skipping tactic <flashinfer\."
                      r"fused_moe\.core\.get_cutlass_fused_moe_module\.<locals>\.MoERunner object at 0x[0-9a-f]+> \d+, "
                      r"due to failure while profiling: \[TensorRT-LLM\]\[ERROR\] Assertion failed: Failed to "
                      r"initialize cutlass TMA WS grouped gemm\. Error: Error Internal")


# ---------------------------------------------------------------------------------------------- the rows
CASES: dict[str, Callable[[Rig], None]] = {}


def case(*row_ids: str):
    def register(fn):
        for row_id in row_ids:
            behaviour.row(row_id)  # the row must exist
            assert row_id not in CASES, row_id
            CASES[row_id] = fn
        return fn
    return register


@case("tp-pp-exceed-gpus")
def _tp_pp_exceed_gpus(rig: Rig) -> None:
    u = rig.unit("sbx2", "tp-pp-exceed-gpus").start("--model-path", LLAMA, "--tp", "2", "--pp-size", "2")
    log = assert_failed(u)
    assert "RuntimeError: CUDA error: invalid device ordinal" in log
    assert_scheduler_died(log)


@case("memory-unbalanced")
def _memory_unbalanced(rig: Rig) -> None:
    first = rig.unit("sbx2", "memory-unbalanced-gpu0").start("--model-path", LLAMA,
                                                             env={"CUDA_VISIBLE_DEVICES": "0"})
    first.wait_ready()
    assert [m > 0 for _, m in gpu_apps(rig.rem, "sbx2")] == [True]
    second = rig.unit("sbx2", "memory-unbalanced").start("--model-path", LLAMA, "--tp", "2")
    log = assert_failed(second)
    assert "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes." in log
    assert first.http("GET", "/health")[0] == 200  # the other server is untouched
    assert first.generate("2+2=") == "4"


@case("p2p-refused-custom-allreduce-off")
def _p2p_refused(rig: Rig) -> None:
    u = rig.unit("sbx2", "p2p-refused-custom-allreduce-off").start("--model-path", LLAMA, "--tp", "2")
    log = u.wait_ready()  # topo -p2p r: GNS
    assert log.count("Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test "
                     "failed. To silence this warning, specify disable_custom_all_reduce=True explicitly.") == 2
    assert u.generate("2+2=") == "4"
    assert rig.rem.sh("sbx2", "test -f /root/.cache/sglang/gpu_p2p_access_cache_for_0,1.json").ok


@case("p2p-broken-hang-nccl")
def _p2p_broken_hang_nccl(rig: Rig) -> None:
    u = rig.unit("sbx4", "p2p-broken-hang-nccl").start("--model-path", LLAMA, "--tp", "2")
    log = assert_hangs_after(u, "Init torch distributed begin.", ranks=2)
    assert "Init torch distributed ends" not in log
    u.stop()
    assert not u.active()
    assert gpu_apps(rig.rem, "sbx4") == []


@case("p2p-broken-hang-custom-allreduce")
def _p2p_broken_hang_custom_allreduce(rig: Rig) -> None:
    # flashinfer's attention modules build in the first forward, before the hang: silently, as by default
    u = rig.unit("sbx4", "p2p-broken-hang-custom-allreduce").start("--model-path", LLAMA, "--tp", "2",
                                                                   env={"NCCL_P2P_DISABLE": "1",
                                                                        "FLASHINFER_JIT_VERBOSE": "0"})
    log = assert_hangs_after(u, "Capture cuda graph bs", ranks=2)
    assert "Init torch distributed ends" in log and "Capture cuda graph end" not in log
    u.stop()
    # the fix that works on such hosts: no P2P anywhere
    fixed = rig.unit("sbx4", "p2p-broken-no-p2p").start("--model-path", LLAMA, "--tp", "2",
                                                        "--disable-custom-all-reduce", env={"NCCL_P2P_DISABLE": "1"})
    fixed.wait_ready()
    assert fixed.generate("2+2=") == "4"


@case("gpu-memory-taken-oom")
def _gpu_memory_taken_oom(rig: Rig) -> None:
    # a careless stop: KillMode=process, then only the launcher is killed; its TP workers stay on the GPUs
    first = rig.unit("sbx2", "gpu-memory-taken-first").start("--model-path", LLAMA, "--tp", "2",
                                                             "--disable-cuda-graph", props=["KillMode=process"])
    first.wait_ready()
    workers = dict(gpu_apps(rig.rem, "sbx2"))
    assert len(workers) == 2
    rig.rem.ok("sbx2", f"systemctl kill --kill-whom=main --signal=SIGKILL {first.name}")
    first.wait_exit()
    assert dict(gpu_apps(rig.rem, "sbx2")) == workers  # still listed, memory held
    second = rig.unit("sbx2", "gpu-memory-taken-oom").start("--model-path", LLAMA, "--tp", "2",
                                                            "--disable-cuda-graph")
    log = assert_failed(second)
    oom = re.search(r"torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate 1\.75 GiB\. GPU (\d) has a "
                    r"total capacity of [\d.]+ GiB of which [\d.]+ GiB is free\. Process (\d+) has [\d.]+ GiB memory "
                    r"in use\.", log)
    assert oom, second.tail()
    assert int(oom.group(2)) in workers  # the worker left behind
    rig.rem.ok("sbx2", "kill -9 " + " ".join(map(str, workers)))
    deadline = time.monotonic() + 20
    while gpu_apps(rig.rem, "sbx2") and time.monotonic() < deadline:
        time.sleep(0.2)
    third = rig.unit("sbx2", "gpu-memory-freed").start("--model-path", LLAMA, "--tp", "2", "--disable-cuda-graph")
    third.wait_ready()


@case("mem-fraction-too-low")
def _mem_fraction_too_low(rig: Rig) -> None:
    u = rig.unit("sbx0", "mem-fraction-too-low").start(*GLM, "--mem-fraction-static", "0.3")
    log = assert_failed(u)
    assert_scheduler_died(log)
    assert ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.3") in log


@case("mem-fraction-too-high")
def _mem_fraction_too_high(rig: Rig) -> None:
    u = rig.unit("sbx0", "mem-fraction-too-high").start(*GLM, "--mem-fraction-static", "0.97")
    log = assert_failed(u)
    assert "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 512.00 MiB." in log
    assert "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)" in log


@case("sm12x-tma-tactics-skipped")
def _tma_tactics_skipped(rig: Rig) -> None:
    u = rig.unit("sbx0", "sm12x-tma-tactics-skipped").start(*GLM, "--moe-runner-backend", "flashinfer_cutlass")
    log = u.wait_ready()
    assert "[Autotuner]: Autotuning process starts ..." in log
    assert TMA_SKIP.search(log), u.tail()
    assert "FlashInfer workspace initialized" not in log  # without fusion too
    assert u.generate("2+2=") == "4"  # only warnings


@case("fusion-asked-sglang-gates-unpatched")
def _fusion_asked_unpatched(rig: Rig) -> None:
    u = rig.unit("sbx0", "fusion-asked-sglang-gates-unpatched").start(*GLM, FUSION)
    log = u.wait_ready()
    assert "enable_flashinfer_allreduce_fusion=True" in log
    assert "FlashInfer workspace initialized" not in log and JIT_BUILT not in log
    assert u.generate("2+2=") == "4"


@case("jit-gate-unpatched")
def _jit_gate_unpatched(rig: Rig) -> None:
    rig.patch_sglang_gates("sbx0")
    u = rig.unit("sbx0", "jit-gate-unpatched").start(*GLM, FUSION)
    log = assert_failed(u)
    assert "RuntimeError: No supported CUDA architectures found for major versions [9, 10]." in log
    assert ("Exception: Capture cuda graph failed: No supported CUDA architectures found for major versions "
            "[9, 10].") in log
    assert 'flashinfer/jit/comm.py", line 60, in gen_trtllm_comm_module' in log


@case("kernel-build-broken")
def _kernel_build_broken(rig: Rig) -> None:
    # a hand-written wrong patch: sglang and JIT gates right, the header edit drops one ')' from each gate
    rig.patch_sglang_gates("sbx0")
    rig.patch_jit_gate("sbx0")
    rig.edit("sbx0", ALLREDUCE_CUH, "(__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))",
             "(__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1300)", 13)
    u = rig.unit("sbx0", "kernel-build-broken").start(*GLM, FUSION)
    log = assert_failed(u)
    assert JIT_BUILT not in log
    assert "FAILED: trtllm_allreduce.cuda.o" in log
    assert "error: missing ')' in expression" in log
    assert "RuntimeError: Ninja build failed. Ninja output:" in log
    assert "Exception: Capture cuda graph failed: Ninja build failed." in log


@case("fusion-kernels-compiled-out")
def _kernels_compiled_out(rig: Rig) -> None:
    rig.patch_sglang_gates("sbx0")
    rig.patch_jit_gate("sbx0")  # the 13 `< 1200` kernel gates left as they are
    u = rig.unit("sbx0", "fusion-kernels-compiled-out").start(*GLM, FUSION, env={"SGLANG_SIM_TOKEN_TIME_SCALE": "0.25"})
    log = u.wait_ready()
    assert JIT_BUILT in log
    assert log.count("FlashInfer workspace initialized for rank") == 8
    answer = u.generate("2+2=", max_new_tokens=4)
    assert answer and not answer.startswith("4")
    assert "error" not in answer.lower()
    assert "Traceback" not in u.journal()  # no error anywhere: just wrong answers
    assert rig.rem.sh("sbx0", f"test -f {JIT_CACHE}/0.6.3/120a/cached_ops/trtllm_comm/trtllm_comm.so").ok


@case("fusion-sm12x-slow")
def _fusion_sm12x_slow(rig: Rig) -> None:
    applied = rig.inv_patch("sbx0")
    assert len(applied["written"]) == 5, applied  # comm.py, the two headers, server_args.py, communicator.py
    rate, sat = behaviour.row("fusion-sm12x-slow")["then"]["rate"], 8
    scale, env = slow_tokens(rate, sat)
    u = rig.unit("sbx0", "fusion-sm12x-slow").start(*GLM, FUSION, "--moe-runner-backend", "flashinfer_cutlass",
                                                    "--max-running-requests", "512", env=env)
    log = u.wait_ready()
    assert JIT_BUILT in log and log.count("FlashInfer workspace initialized for rank") == 8
    assert TMA_SKIP.search(log), u.tail()
    assert u.generate("2+2=") == "4"  # fully patched: right answers
    record = u.bench(prompts=sat, concurrency=sat, out_len=16, power=True)
    assert record["completed"] == sat
    assert_near(record["output_throughput"] * scale, rate, tol=0.25)  # ramp-up included
    assert_near(decode_rate(record, sat, scale), rate, tol=0.1)
    assert max(record["power_w"]) == pytest.approx(125, abs=15)


@case("fusion-sm12x-batch-over-512")
def _fusion_sm12x_batch_over_512(rig: Rig) -> None:
    rig.inv_patch("sbx0")
    u = rig.unit("sbx0", "fusion-sm12x-batch-over-512").start(*GLM, FUSION, *TUNED)
    log = assert_failed(u)
    assert ("Exception: Capture cuda graph failed: [TensorRT-LLM][ERROR] Assertion failed: Failed to initialize "
            "cutlass TMA WS grouped gemm.") in log


def _fusion_native(rig: Rig, host: str, untuned: str) -> None:
    """Fusion works without any patch on SM 9.0 / 10.0 and is ~1.15x the no-fusion rung (same test)."""
    plain_rate = behaviour.row(untuned)["then"]["rate"] * DENSE_SPEED
    factor = behaviour.row("fusion-sm90-native")["then"]["relative_to_no_fusion"]
    sat = behaviour.row(untuned)["then"]["saturation"]
    scale, env = slow_tokens(plain_rate, sat)
    args = ("--model-path", LLAMA, "--tp", "8")
    fused = rig.unit(host, f"fusion-native-{host}").start(*args, FUSION, env=env)
    log = fused.wait_ready()
    assert JIT_BUILT in log and log.count("FlashInfer workspace initialized for rank") == 8
    assert fused.generate("2+2=") == "4"
    with_fusion = fused.bench(prompts=sat, concurrency=sat, out_len=8)
    fused.stop()
    plain = rig.unit(host, f"fusion-native-{host}-plain").start(*args, env=env)
    assert "FlashInfer workspace" not in plain.wait_ready()
    without = plain.bench(prompts=sat, concurrency=sat, out_len=8)
    assert_near(decode_rate(without, sat, scale), plain_rate, tol=0.12)
    ratio = decode_rate(with_fusion, sat, scale) / decode_rate(without, sat, scale)
    assert_near(ratio, factor, tol=0.06)


@case("fusion-sm90-native")
def _fusion_sm90_native(rig: Rig) -> None:
    _fusion_native(rig, "sbx1", "sm90-untuned")


@case("fusion-sm100-native")
def _fusion_sm100_native(rig: Rig) -> None:
    _fusion_native(rig, "sbx3", "sm100-untuned")


def _serving_rung(rig: Rig, host: str, row_id: str, args: tuple[str, ...], speed: float, out_len: int = 8,
                  power_limit: float | None = None) -> dict:
    then = behaviour.row(row_id)["then"]
    rate, sat = then["rate"] * speed, then["saturation"]
    scale, env = slow_tokens(rate, sat)
    u = rig.unit(host, row_id).start(*args, env=env)
    log = u.wait_ready()
    assert u.generate("2+2=") == "4"
    record = u.bench(prompts=sat, concurrency=sat, out_len=out_len, power=power_limit is not None)
    assert record["completed"] == sat
    assert_near(decode_rate(record, sat, scale), rate, tol=0.12)
    if power_limit is not None:
        watts = then.get("power_w", then.get("power_frac", 0.0) * power_limit)
        assert max(record["power_w"]) == pytest.approx(watts, rel=0.12), record["power_w"]
    record["log"] = log
    return record


@case("sm12x-autotuned-1024")
def _sm12x_autotuned(rig: Rig) -> None:
    record = _serving_rung(rig, "sbx0", "sm12x-autotuned-1024", (*GLM, *TUNED), 1.0, power_limit=600)
    assert "Skipping tactic" in record["log"]  # the MoE GEMM tactics fail on SM 12.x with or without fusion


@case("sm12x-untuned")
def _sm12x_untuned(rig: Rig) -> None:
    record = _serving_rung(rig, "sbx0", "sm12x-untuned", GLM, 1.0, power_limit=600)
    assert "Skipping tactic" not in record["log"]


@case("sm90-tuned")
def _sm90_tuned(rig: Rig) -> None:
    _serving_rung(rig, "sbx1", "sm90-tuned", ("--model-path", LLAMA, "--tp", "8", "--max-running-requests", "1024"),
                  DENSE_SPEED)


@case("sm90-untuned")
def _sm90_untuned(rig: Rig) -> None:
    _serving_rung(rig, "sbx1", "sm90-untuned", ("--model-path", LLAMA, "--tp", "8"), DENSE_SPEED)


@case("sm100-tuned")
def _sm100_tuned(rig: Rig) -> None:
    _serving_rung(rig, "sbx3", "sm100-tuned", ("--model-path", LLAMA, "--tp", "8", "--max-running-requests", "1024"),
                  DENSE_SPEED)


# multi-node: sbx2 (rank 0) and sbx4 (rank 1), both 2x RTX 5090, one Llama TP 4 server over the bridge
NODES = ("sbx2", "sbx4")
DIST_PORT = 5758
P2P_OFF = {"NCCL_P2P_DISABLE": "1"}  # sbx4's P2P reads OK but hangs: its intra-node check would never end


def _node_args(rig: Rig, rank: int, timeout_s: int = 600) -> tuple[str, ...]:
    # --dist-timeout is modelled time: 600 s -> 12 s here; nothing but the rendezvous crosses hosts
    addr = f"{rig.rem.inventory.hosts[NODES[0]].address}:{DIST_PORT}"
    return ("--model-path", LLAMA, "--tp", "4", "--nnodes", "2", "--node-rank", str(rank),
            "--dist-init-addr", addr, "--dist-timeout", str(timeout_s))


def _free_gpus(rig: Rig, *hosts: str) -> None:
    """A server fleet deployed there earlier holds the GPUs: these cases need them (it stays stopped)."""
    for host in hosts:
        rig.use(host)
        rig.rem.ok(host, "systemctl stop sglang 2>/dev/null; true")


def _two_nodes(rig: Rig, row: str) -> tuple[Unit, Unit]:
    _free_gpus(rig, *NODES)
    rank0 = rig.unit(NODES[0], f"{row}-r0").start(*_node_args(rig, 0), env=P2P_OFF)
    rank1 = rig.unit(NODES[1], f"{row}-r1").start(*_node_args(rig, 1), env=P2P_OFF)
    rank0.wait_ready()
    rank1.wait_log("Dummy health check server started in background thread at")
    return rank0, rank1


@case("multinode-rendezvous")
def _multinode_rendezvous(rig: Rig) -> None:
    rank0, rank1 = _two_nodes(rig, "mn-ok")
    assert rank0.generate("2+2=") == "4"
    assert "spans across nodes" in rank0.journal()
    assert rank1.http("GET", "/health")[0] == 200
    assert rank1.http("POST", "/generate", {"text": "2+2="})[0] == 404  # only node 0 serves the API
    assert READY not in rank1.journal()
    # each node holds its own 2 GPUs (TP 4 = 2 per node)
    assert len(gpu_apps(rig.rem, NODES[0])) == 2 and len(gpu_apps(rig.rem, NODES[1])) == 2


@case("multinode-rank-missing")
def _multinode_rank_missing(rig: Rig) -> None:
    _free_gpus(rig, *NODES)
    rank0 = rig.unit(NODES[0], "mn-alone-r0").start(*_node_args(rig, 0, timeout_s=100))
    assert rank0.wait_exit() != 0
    log = rank0.journal()
    assert "torch.distributed.DistStoreError: Timed out after" in log and "clients joined." in log, rank0.tail()
    # a rank whose rank 0 never listens: torch's client-side timeout, naming the address it tried
    rank1 = rig.unit(NODES[1], "mn-alone-r1").start(*_node_args(rig, 1, timeout_s=100))
    assert rank1.wait_exit() != 0
    log = rank1.journal()
    assert "The client socket has timed out after" in log and f"{DIST_PORT})" in log, rank1.tail()
    assert "DistNetworkError" in log and READY not in log


@case("multinode-peer-lost")
def _multinode_peer_lost(rig: Rig) -> None:
    rank0, rank1 = _two_nodes(rig, "mn-lost")
    rank1.sh(f"systemctl kill -s KILL {rank1.name}")
    assert rank0.wait_exit() != 0
    log = rank0.journal()
    assert "remote process exited or there was a network error" in log, rank0.tail()
    assert rank0.http("GET", "/health")[0] == 0  # nothing listens any more


@case("sm100-untuned")
def _sm100_untuned(rig: Rig) -> None:
    _serving_rung(rig, "sbx3", "sm100-untuned", ("--model-path", LLAMA, "--tp", "8"), DENSE_SPEED)


@case("other-gpu")
def _other_gpu(rig: Rig) -> None:
    # no sandbox host has an SM outside 9/10/12: a copy of sbx2's profile whose GPUs report compute_cap 8.9,
    # handed to the unit (nvidia-smi and the simulator both read FLEET_SANDBOX_PROFILE)
    profile = f"{WORK}/profile-sm89"
    rig.use("sbx2")
    rig.rem.ok("sbx2", f"cp -r /usr/share/fleet-sandbox/profile {profile} && "
                       f"sed -i 's/, 12\\.0, /, 8.9, /' {profile}/nvidia-smi/query-gpu.csv && "
                       f"FLEET_SANDBOX_PROFILE={profile} nvidia-smi --query-gpu=compute_cap --format=csv,noheader "
                       f"| sort -u | grep -qx 8.9")
    then = behaviour.row("other-gpu")["then"]
    rate, sat = then["rate"] * DENSE_SPEED, then["saturation"]
    scale, env = slow_tokens(rate, sat)
    u = rig.unit("sbx2", "other-gpu").start("--model-path", LLAMA, "--tp", "2",
                                            env={**env, "FLEET_SANDBOX_PROFILE": profile})
    u.wait_ready()
    assert u.generate("2+2=") == "4"
    record = u.bench(prompts=sat, concurrency=sat, out_len=8)
    assert_near(decode_rate(record, sat, scale), rate, tol=0.12)


# ---------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("row_id", ROW_IDS)
def test_behaviour_row_through_systemd(rig, row_id):
    if row_id not in CASES:
        pytest.fail(f"behaviour row {row_id!r} has no case in {Path(__file__).name}")
    CASES[row_id](rig)


def test_every_row_of_the_table_has_a_case():
    assert set(CASES) == set(ROW_IDS)


@pytest.mark.parametrize(("args", "message"), [
    (("--no-such-flag", "1"), "launch_server.py: error: unrecognized arguments: --no-such-flag 1"),
    (("--moe-runner-backend", "flashinfer_cutlas"),
     "launch_server.py: error: argument --moe-runner-backend: invalid choice: 'flashinfer_cutlas' (choose from"),
    (("--tp-size", "two"), "launch_server.py: error: argument --tensor-parallel-size/--tp-size: invalid int value: "
                           "'two'"),
], ids=["unknown-flag", "bad-choice", "bad-type"])
def test_a_rejected_flag_fails_the_unit_with_argparses_message(rig, args, message):
    u = rig.unit("sbx2", "flags").start("--model-path", LLAMA, *args)
    log = assert_failed(u, status=2)
    assert log.startswith("usage: launch_server.py [-h] --model-path MODEL_PATH"), u.tail()
    assert message in log, u.tail()
    assert " TP0]" not in log  # nothing started
    assert gpu_apps(rig.rem, "sbx2") == []


def test_a_hand_written_patch_of_only_some_kernel_gates_serves_garbage(rig):
    """The wrong patch: sglang and JIT gates right, but only 6 of the 13 `< 1200` gates widened by hand.
    The build succeeds, the server comes up, and every answer is wrong, with no error anywhere."""
    rig.patch_sglang_gates("sbx0")
    rig.patch_jit_gate("sbx0")
    rig.edit("sbx0", ALLREDUCE_CUH, UPPER_GATE, "(__CUDA_ARCH__ < 1300)", found=13, replace=6)
    assert rig.rem.ok("sbx0", f"grep -c {shlex.quote(UPPER_GATE)} {SITE}/{ALLREDUCE_CUH}").strip() == "7"
    u = rig.unit("sbx0", "wrong-patch").start(*GLM, FUSION, env={"SGLANG_SIM_TOKEN_TIME_SCALE": "0.25"})
    log = u.wait_ready()
    assert JIT_BUILT in log
    answer = u.generate("2+2=", max_new_tokens=4)
    assert answer and not answer.startswith("4")
    assert "Traceback" not in log and "RuntimeError" not in log
    # the same hand edit finished (the 7 remaining gates too): right answers
    u.stop()
    rig.edit("sbx0", ALLREDUCE_CUH, UPPER_GATE, "(__CUDA_ARCH__ < 1300)", found=7)
    fixed = rig.unit("sbx0", "right-patch").start(*GLM, FUSION, env={"SGLANG_SIM_TOKEN_TIME_SCALE": "0.25"})
    assert JIT_BUILT in fixed.wait_ready()  # the changed header rebuilt the module
    assert fixed.generate("2+2=") == "4"
