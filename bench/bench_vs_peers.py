"""fleet against the tools users would otherwise use, on one sandbox fleet (a benchmark, not a test).

For 16 and 64 hosts of one profile, each measured as a separate command from a cold start (fresh
interpreter, fresh SSH connections, no ControlMaster socket left over), medians of --repeat runs, with the
client's CPU (user + system of the command and its children) beside the wall time:

  floor         a bare Paramiko fan-out of `true` (one thread per host, strict host keys)
  floor script  the same fan-out running fleet's probe script: what the hosts' side of the probe costs
  fleet         `inv probe --json`: every GPU fact, one SSH round trip per host
  pyinfra exec  `pyinfra INVENTORY exec -- <fleet's probe script>`: the same commands through pyinfra
  pyinfra fact  `pyinfra INVENTORY fact server.Os server.Kernel ...`: pyinfra's own fact gathering
  ansible sh    `ansible all -m shell -a <fleet's probe script>`: the same commands through Ansible
  setup         `ansible all -m setup`: Ansible's own facts (no GPU facts at all)

plus fleet's peak RSS while probing, and a no-change `inv deploy` of 16 hosts (every host already serves
the playbook's release, so each host only proves it and nothing restarts).

Ansible runs with forks = number of hosts (its default is 5, which would only make it slower), pyinfra
with --parallel = number of hosts; both with strict host-key checking against the sandbox's known_hosts,
everything else at their defaults. ansible-core and pyinfra are installed into the benchmark's own venvs
(bench/.venv-ansible, bench/.venv-pyinfra), never into fleet's.

usage (root): .venv/bin/python bench/bench_vs_peers.py [--sizes 16,64] [--repeat 3] [--deploy-hosts 16]
It uses the "bench" sandbox instance (172.30.73.0/24), so it never replaces the demo or test fleets.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["FLEET_SANDBOX_ONLY"] = "1"
os.environ["FLEET_SANDBOX_INSTANCE"] = "bench"

from fleet import inventory  # noqa: E402
from fleet.host import probe  # noqa: E402
from sandbox.config import config  # noqa: E402
from sandbox.hosts import Sandbox  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PROFILE = "rtx-pro-6000-x8-proxmox"
ANSIBLE_VENV = REPO / "bench" / ".venv-ansible"
ANSIBLE_SPEC = "ansible-core>=2.17,<2.20"
PYINFRA_VENV = REPO / "bench" / ".venv-pyinfra"
PYINFRA_SPEC = "pyinfra>=3.1,<4"
# Facts pyinfra gathers on its own that stand beside fleet's host section (it has no GPU facts).
PYINFRA_FACTS = ["server.Os", "server.Arch", "server.Kernel", "server.Hostname", "server.LinuxDistribution",
                 "hardware.Cpus", "hardware.Memory", "server.Mounts"]
PYTHON = sys.executable
INV = str(Path(PYTHON).with_name("inv"))

FLOOR = r"""
import sys, paramiko
from concurrent.futures import ThreadPoolExecutor
known_hosts, key, command, *addresses = sys.argv[1:]
def one(addr):
    c = paramiko.SSHClient()
    c.load_host_keys(known_hosts)
    c.set_missing_host_key_policy(paramiko.RejectPolicy())
    c.connect(addr, username="root", key_filename=key, allow_agent=False, look_for_keys=False, timeout=30)
    _, out, _ = c.exec_command(command)
    out.read()
    rc = out.channel.recv_exit_status()
    c.close()
    return rc
with ThreadPoolExecutor(max_workers=len(addresses)) as pool:
    codes = list(pool.map(one, addresses))
sys.exit(1 if any(codes) else 0)
"""


def ensure_tool(venv: Path, spec: str, name: str) -> Path:
    tool = venv / "bin" / name
    if not tool.exists():
        print(f"installing {spec} into {venv}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", spec], check=True)
    return tool


CLIENT_CPU: list[float] = []  # the client CPU seconds of each timed() command, in order


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv: list[str], env: dict[str, str] | None = None, merged: bool = False) -> tuple[float, str]:
    """Wall seconds and stdout (with stderr where `merged`) of one command (its CPU, with its children's,
    into CLIENT_CPU); a failure aborts the run."""
    cpu0 = _children_cpu()
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                            env=env or os.environ.copy(), cwd=REPO)
    out, err = proc.communicate()
    wall = time.monotonic() - t0
    CLIENT_CPU.append(_children_cpu() - cpu0)
    if proc.returncode:
        sys.exit(f"{shlex.join(argv[:4])} ... failed ({proc.returncode}): {(err or out).decode()[-800:]}")
    return wall, out.decode()


def peak_rss_kib(argv: list[str], env: dict[str, str]) -> int:
    """The command's own peak RSS, read by a fresh Python that runs it (so earlier children don't mix in)."""
    probe_rss = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
                 "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
                 "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([PYTHON, "-c", probe_rss, *argv], env=env, capture_output=True, text=True, cwd=REPO,
                         check=True)
    return int(out.stdout.strip())


def ansible_env(work: Path, sb: Sandbox, forks: int) -> dict[str, str]:
    cfg = sb.cfg
    ssh_args = (f"-o UserKnownHostsFile={cfg.known_hosts} -o StrictHostKeyChecking=yes "
                f"-o ControlMaster=auto -o ControlPersist=60s")
    return {**os.environ, "ANSIBLE_HOME": str(work / "home"), "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(work / "cp"), "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_SSH_ARGS": ssh_args, "ANSIBLE_FORKS": str(forks),
            "ANSIBLE_PYTHON_INTERPRETER": "auto_silent", "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOAD_CALLBACK_PLUGINS": "0"}


def ansible_inventory(work: Path, sb: Sandbox, hosts: list[inventory.Host]) -> Path:
    path = work / "hosts.ini"
    lines = ["[sandbox]"] + [f"{h.name} ansible_host={h.address}" for h in hosts]
    lines += ["", "[sandbox:vars]", "ansible_user=root", f"ansible_ssh_private_key_file={sb.cfg.identity_file}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def pyinfra_inventory(work: Path, sb: Sandbox, hosts: list[inventory.Host]) -> Path:
    """A pyinfra inventory module: every host by address, strict host keys against the sandbox's file."""
    data = {"ssh_user": "root", "ssh_key": str(sb.cfg.identity_file), "ssh_known_hosts_file": str(sb.cfg.known_hosts),
            "ssh_strict_host_key_checking": "yes"}
    path = work / "pyinfra_inventory.py"
    path.write_text("sandbox = " + repr([(h.name, {"ssh_hostname": h.address, **data}) for h in hosts]) + "\n")
    return path


def fresh(work: Path) -> None:
    """No ControlMaster sockets or caches from an earlier run: every run starts cold, as fleet's does."""
    subprocess.run(["rm", "-rf", str(work / "cp"), str(work / "tmp"), str(work / "home")], check=True)
    for sub in ("cp", "tmp", "home"):
        (work / sub).mkdir()


def median_of(sb: Sandbox, repeat: int, before, fn) -> tuple[float, float, float, float, float]:
    """Median, min and max wall seconds, the median CPU seconds the hosts spent on one run, and the
    median client CPU seconds."""
    walls, cpus, client = [], [], []
    for _ in range(repeat):
        before()
        cpu0 = sb.cpu_seconds()
        walls.append(fn())
        cpus.append(sb.cpu_seconds() - cpu0)
        client.append(CLIENT_CPU[-1])
    return statistics.median(walls), min(walls), max(walls), statistics.median(cpus), statistics.median(client)


def check_facts(out: str, n: int) -> None:
    facts = json.loads(out)
    rows = facts if isinstance(facts, list) else facts.get("hosts", [])
    ok = [r for r in rows if r.get("ok", True) and r.get("gpus")]
    if len(ok) != n:
        sys.exit(f"inv probe returned {len(ok)} hosts with GPU facts, expected {n}")


def compare(sb: Sandbox, n: int, repeat: int, ansible: Path, pyinfra: Path, state: Path,
            skip_ansible: bool = False) -> dict[str, float]:
    sb.up(n, [PROFILE])
    inv_path = sb.cfg.inventory_path
    hosts = inventory.load(inv_path).select(default_file=inv_path)
    env = {**os.environ, "FLEET_STATE_DIR": str(state)}
    work = Path(tempfile.mkdtemp(prefix="fleet-bench-ansible-"))
    hosts_ini = ansible_inventory(work, sb, hosts)
    pyinfra_inv = pyinfra_inventory(work, sb, hosts)
    penv = {**os.environ, "PYINFRA_YES": "1", "HOME": str(work / "home")}
    aenv = ansible_env(work, sb, n)
    script = probe.command(hosts[0].venv, hosts[0].unit)
    nothing = lambda: None  # noqa: E731

    def floor(command: str = "true") -> float:
        return timed([PYTHON, "-c", FLOOR, str(sb.cfg.known_hosts), str(sb.cfg.identity_file), command,
                      *[h.address for h in hosts]])[0]

    def fleet_probe() -> float:
        wall, out = timed([INV, "probe", "-i", str(inv_path), "--json"], env)
        check_facts(out, n)
        return wall

    def pyinfra_exec() -> float:
        wall, out = timed([str(pyinfra), str(pyinfra_inv), "--parallel", str(n), "-y", "exec", "--", script], penv,
                          merged=True)
        if out.count("@@fleet:done@@") < n:
            sys.exit(f"pyinfra exec: fewer than {n} hosts ran the probe script: {out[-500:]}")
        return wall

    def pyinfra_facts() -> float:
        wall, out = timed([str(pyinfra), str(pyinfra_inv), "--parallel", str(n), "--json", "fact", *PYINFRA_FACTS],
                          penv)
        try:  # {fact: {host: value}}, the shape pyinfra 3 prints with --json
            answered = min(len(by_host) for by_host in json.loads(out).values())
        except (ValueError, AttributeError, TypeError):
            answered = 0
        if answered < n:
            sys.exit(f"pyinfra fact: {answered} of {n} hosts answered: {out[-500:]}")
        return wall

    def ansible_shell() -> float:
        wall, out = timed([str(ansible), "all", "-i", str(hosts_ini), "-m", "shell", "-a", script], aenv)
        if out.count("CHANGED") + out.count("SUCCESS") < n:
            sys.exit(f"ansible -m shell: fewer than {n} hosts answered")
        return wall

    def ansible_setup() -> float:
        wall, out = timed([str(ansible), "all", "-i", str(hosts_ini), "-m", "setup"], aenv)
        if out.count("SUCCESS") < n:
            sys.exit(f"ansible -m setup: fewer than {n} hosts answered")
        return wall

    results = {
        "floor": median_of(sb, repeat, nothing, floor),
        "floor_script": median_of(sb, repeat, nothing, lambda: floor(script)),
        "fleet": median_of(sb, repeat, nothing, fleet_probe),
        "pyinfra_exec": median_of(sb, repeat, lambda: fresh(work), pyinfra_exec),
        "pyinfra_facts": median_of(sb, repeat, lambda: fresh(work), pyinfra_facts),
    }
    if not skip_ansible:
        results["ansible_shell"] = median_of(sb, repeat, lambda: fresh(work), ansible_shell)
        results["ansible_setup"] = median_of(sb, repeat, lambda: fresh(work), ansible_setup)
    rss = peak_rss_kib([INV, "probe", "-i", str(inv_path), "--json"], env) / 1024
    subprocess.run(["rm", "-rf", str(work)], check=True)
    base = results["fleet"][0]
    print(f"\n{n} hosts ({PROFILE}), median of {repeat} (min-max), and CPU the hosts spent (they share this "
          f"machine's {os.cpu_count()} cores, where a real fleet has its own on every host):")
    for name, label in (("floor", "bare Paramiko fan-out of `true`"),
                        ("floor_script", "bare Paramiko fan-out, probe script"),
                        ("fleet", "inv probe (full GPU facts)"),
                        ("pyinfra_exec", "pyinfra exec (same commands)"),
                        ("pyinfra_facts", f"pyinfra fact ({len(PYINFRA_FACTS)} facts)"),
                        ("ansible_shell", "ansible -m shell (same commands)"), ("ansible_setup", "ansible -m setup")):
        if name not in results:
            continue
        med, lo, hi, cpu, client = results[name]
        print(f"  {label:<36} {med:7.2f} s  ({lo:.2f}-{hi:.2f})  {med / base:5.2f}x fleet   host CPU {cpu:6.2f} s"
              f"   client CPU {client:6.2f} s ({client / n * 1000:5.1f} ms/host)")
    floor_cpu, fleet_cpu = results["floor"][4], results["fleet"][4]
    print(f"  fleet's client CPU {fleet_cpu / floor_cpu:.2f}x the floor's (goal <= 1.5x); "
          f"pyinfra exec {results['pyinfra_exec'][0] / base:.1f}x fleet's wall time")
    setup = (f"ansible -m setup is {results['ansible_setup'][0] / base:.1f}x slower (goal >= 15x); "
             if "ansible_setup" in results else "")
    print(f"  fleet probe within {base / results['floor'][0]:.2f}x of the floor of `true` (goal <= 1.5x) and "
          f"{base / results['floor_script'][0]:.2f}x of the floor running the same script; {setup}"
          f"peak RSS of inv probe {rss:.0f} MB (goal < 150 MB)")
    return ({name: r[0] for name, r in results.items()} | {f"{name}_client_cpu": r[4] for name, r in results.items()}
            | {"rss_mb": rss})


def no_change_deploy(sb: Sandbox, n: int, repeat: int, state: Path) -> None:
    sb.up(n, [PROFILE])
    inv_path = str(sb.cfg.inventory_path)
    env = {**os.environ, "FLEET_STATE_DIR": str(state)}
    t0 = time.monotonic()
    first = subprocess.run([INV, "deploy", "-i", inv_path, "--json"], env=env, capture_output=True, text=True,
                           cwd=REPO)
    setup = time.monotonic() - t0
    statuses = [r["status"] for r in json.loads(first.stdout)["hosts"]] if first.stdout.strip() else []
    if first.returncode or statuses.count("ok") != n:
        sys.exit(f"first deploy failed ({first.returncode}): {statuses} {first.stderr[-800:]}")
    walls = []
    for _ in range(repeat):
        wall, out = timed([INV, "deploy", "-i", inv_path, "--json"], env)
        statuses = [r["status"] for r in json.loads(out)["hosts"]]
        if statuses.count("unchanged") != n:
            sys.exit(f"second deploy was not a no-change deploy: {statuses}")
        walls.append(wall)
    print(f"\nno-change deploy of {n} hosts (glm5-nvfp4, every host already serving it): median "
          f"{statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}; goal < 5 s); "
          f"the first deploy, which started {n} servers, took {setup:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,64")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--deploy-hosts", type=int, default=16, help="0 skips the no-change deploy")
    ap.add_argument("--keep", action="store_true", help="leave the bench fleet up afterwards")
    ap.add_argument("--skip-ansible", action="store_true", help="leave Ansible's rows out (its -m setup is slow)")
    args = ap.parse_args()
    ansible = ensure_tool(ANSIBLE_VENV, ANSIBLE_SPEC, "ansible")
    pyinfra = ensure_tool(PYINFRA_VENV, PYINFRA_SPEC, "pyinfra")
    version = subprocess.run([str(ansible), "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    pversion = subprocess.run([str(pyinfra), "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{version}; {pversion}; fleet from {REPO}; {os.cpu_count()} CPUs")
    sb = Sandbox(config("bench"), log=lambda m: None)
    state = Path(tempfile.mkdtemp(prefix="fleet-bench-state-"))
    try:
        for n in [int(s) for s in args.sizes.split(",")]:
            compare(sb, n, args.repeat, ansible, pyinfra, state, args.skip_ansible)
        if args.deploy_hosts:
            no_change_deploy(sb, args.deploy_hosts, args.repeat, state)
    finally:
        if not args.keep:
            sb.down()
        subprocess.run(["rm", "-rf", str(state)], check=True)


if __name__ == "__main__":
    main()
