"""The probe against the shipped hardware profiles (sandbox/profiles): first the output the remote script
would print on such a host, assembled here from the profile's files; then the real `command()` script
run under sh with tiny stand-in commands answering from the same files. Both must give the same facts."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from fleet.cli import probe_view
from fleet.host import facts as F
from fleet.host import gpuhealth, nvsmi, probe
from fleet.host import programs as hostside
from fleet.host import sysinfo as hostinfo

PROFILES = Path(__file__).resolve().parents[3] / "sandbox" / "profiles"
VENV_PACKAGES = {  # what the fake venv holds: distribution -> version
    "sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1", "nvidia-nccl-cu12": "2.27.5"}
TORCH_CUDA, TORCH_ARCHS = "12.8", "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"
UNIT_SHOW = "LoadState=loaded\nActiveState=inactive\nSubState=dead\nUnitFileState=disabled\nMainPID=0\n"


# --- the stand-in nvidia-smi's answers (sandbox/profiles/FORMAT.md), in Python --------------------------

def standin_query(csv: str, fields: list[str]) -> tuple[int, str]:
    """`nvidia-smi --query-gpu=FIELDS --format=csv,nounits` as the profile's machine answered it."""
    lines = csv.splitlines()
    header = lines[0].split(", ")
    names = [nvsmi.field_name(h) for h in header]
    fields = [f.replace("clocks_throttle_reasons.", "clocks_event_reasons.") for f in fields]  # driver 580's alias
    for f in fields:
        if f not in names:
            return 2, f'Field "{f}" is not a valid field to query.\n'
    cols = [names.index(f) for f in fields]
    out = [", ".join(header[c] for c in cols)]
    for line in lines[1:]:
        cells = line.split(", ")
        out.append(", ".join(re.sub(r" (MiB|W|MHz|%)$", "", cells[c]) for c in cols))
    return 0, "\n".join(out) + "\n"


def xid_section(kernel_log: str) -> tuple[int, str]:
    """probe.sh's xid section over a dmesg that printed KERNEL_LOG (the harness has no journalctl)."""
    counts: dict[tuple[str, str], list] = {}
    for line in kernel_log.splitlines():
        if m := re.search(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): *(\d+)", line):
            counts.setdefault((m.group(1), m.group(2)), [0, ""])
            counts[m.group(1), m.group(2)][0] += 1
            counts[m.group(1), m.group(2)][1] = line[:300]
    rows = [f"xid {p} {c} {n} {last}\n" for (p, c), (n, last) in counts.items()]
    return 0, f"source dmesg rc=0 lines={len(kernel_log.splitlines())}\n" + "".join(rows)


def _file(path: Path) -> tuple[int, str]:
    return (0, path.read_text()) if path.is_file() else (2, f'Option "{path.stem}" is not recognized.\n')


def assemble(profile: Path, venv: str = "/opt/venv") -> str:
    """The probe script's output on a host of this profile (with the fake venv of VENV_PACKAGES)."""
    smi, system = profile / "nvidia-smi", profile / "system"
    out: list[tuple[str, int, str]] = []
    fields = list(probe.QUERY_FIELDS)
    while True:
        rc, text = standin_query((smi / "query-gpu.csv").read_text(), fields)
        out.append(("query-gpu", rc, text))
        rejected = nvsmi.parse_query_gpu(text).rejected
        if rc != 2 or not rejected:
            break
        fields.remove(rejected[0])
    out.append(("health-gpu", *standin_query((smi / "query-health.csv").read_text(), list(gpuhealth.HEALTH_FIELDS))))
    out.append(("topo-m", *_file(smi / "topo-m.txt")))
    out.append(("topo-p2p-r", *_file(smi / "topo-p2p-r.txt")))
    out.append(("smi-version", *_file(smi / "version.txt")))
    if out[-1][1] != 0:
        out.append(("smi-plain", *_file(smi / "smi.txt")))
    out.append(("proc-driver", 0, (system / "proc-driver-nvidia-version.txt").read_text()))
    out.append(("xid", *xid_section((system / "kernel-log.txt").read_text())))
    virt = system / "systemd-detect-virt.txt"
    word = virt.read_text().strip() if virt.is_file() else None
    out.append(("virt", (1 if word == "none" else 0) if word else 127,
                word or "sh: 1: systemd-detect-virt: not found"))
    dmi = system / "dmi"
    out.append(("dmi", 0, "source=dmidecode\n" + "".join(
        f"{key}={(dmi / name).read_text().strip()}\n"
        for key, name in (("vendor", "sys_vendor"), ("product", "product_name"))) if dmi.is_dir() else ""))
    out.append(("os-release", 0, 'PRETTY_NAME="Debian GNU/Linux 12"\nID=debian\nVERSION_ID="12"\n'))
    out.append(("kernel", 0, "Linux 6.1.0-28-amd64 x86_64\n"))
    out.append(("unit", 0, "Unit=sglang\n" + UNIT_SHOW))
    out.append(("df", 0, "path root /\nFilesystem 1024-blocks Used Available Capacity Mounted on\n"
                         "/dev/vda 1000 400 600 40% /\n"))
    sp = f"{venv}/lib/python3.12/site-packages"
    lines = [f"@sp {sp}"] + [f"@dir {sp}/{d}" for d in sorted({hostinfo.PACKAGE_DIRS[n] for n in VENV_PACKAGES})]
    for name, version in VENV_PACKAGES.items():
        lines += [f"@file {sp}/{name.replace('-', '_')}-{version}.dist-info/METADATA",
                  f"Name: {name}", f"Version: {version}"]
    out.append(("packages", 0, "\n".join(lines) + "\n"))
    out.append(("torch-version", 0, f"__version__ = '2.9.1+cu128'\ncuda: Optional[str] = '{TORCH_CUDA}'\n"))
    out.append(("torch-archs", 0, TORCH_ARCHS + "\n"))
    out.append(("flashinfer-cache", 0, "path /root/.cache/flashinfer\n"))
    body = "".join(f"@@fleet:begin {n}@@\n{t}\n@@fleet:end {n} rc={rc}@@\n" for n, rc, t in out)
    return body + probe.DONE + "\n"


# --- expectations per shipped profile -------------------------------------------------------------------

EXPECT = {
    "rtx-pro-6000-x8-proxmox": dict(
        gpus=8, sm=120, cc="12.0", family="blackwell-consumer", interconnect="pcie", pcie_link="PHB",
        link="PHB", nvlink=False, p2p="refused (CNS)", p2p_code="CNS", virt="kvm", driver="580.95.05",
        cuda="13.0", memory=97887,
        verdict="8x RTX PRO 6000 Blackwell (SM 12.0), PCIe only (PHB), P2P refused (CNS), "
                "KVM guest (QEMU Q35: Proxmox-style)"),
    "h100-sxm-x8": dict(
        gpus=8, sm=90, cc="9.0", family="hopper", interconnect="nvlink", pcie_link=None, link="NV18",
        nvlink=True, p2p="ok", p2p_code="OK", virt="none", driver="570.172.08", cuda="12.8", memory=81559,
        verdict="8x H100 80GB HBM3 (SM 9.0), NVLink (NV18), P2P ok, bare metal"),
    "rtx5090-x2-workstation": dict(
        gpus=2, sm=120, cc="12.0", family="blackwell-consumer", interconnect="pcie", pcie_link="PHB",
        link="PHB", nvlink=False, p2p="refused (GNS)", p2p_code="GNS", virt="none", driver="580.126.20",
        cuda="13.0", memory=32607,
        verdict="2x GeForce RTX 5090 (SM 12.0), PCIe only (PHB), P2P refused (GNS), bare metal"),
    "b200-x8": dict(
        gpus=8, sm=100, cc="10.0", family="blackwell-datacenter", interconnect="nvlink", pcie_link=None,
        link="NV18", nvlink=True, p2p="ok", p2p_code="OK", virt="none", driver="580.95.05", cuda="13.0",
        memory=183359, verdict="8x B200 (SM 10.0), NVLink (NV18), P2P ok, bare metal"),
}


def test_every_shipped_profile_has_expectations():
    assert sorted(p.name for p in PROFILES.iterdir() if p.is_dir()) == sorted(EXPECT)


def check(f: F.HostFacts, e: dict) -> None:
    n = e["gpus"]
    assert f.ok and len(f.gpus) == n
    assert {(g.sm, g.compute_cap, g.compute_cap_source, g.memory_total_mib) for g in f.gpus} == {
        (e["sm"], e["cc"], "nvidia-smi", e["memory"])}
    assert [g.index for g in f.gpus] == list(range(n))
    assert all(g.uuid and g.uuid.startswith("GPU-") and g.pci_bus_id and g.power_limit_w for g in f.gpus)
    assert all((g.pcie_gen, g.pcie_width) != (None, None) for g in f.gpus)
    square = [["X" if i == j else e["link"] for j in range(n)] for i in range(n)]
    p2p = [["X" if i == j else e["p2p_code"] for j in range(n)] for i in range(n)]
    assert (f.topology.links, f.topology.p2p_read, f.topology.nvlink) == (square, p2p, e["nvlink"])
    assert (f.arch_family, f.gpus_agree, f.interconnect, f.pcie_link, f.p2p) == (
        e["family"], True, e["interconnect"], e["pcie_link"], e["p2p"])
    assert (f.virtualization, f.driver_version, f.cuda_version) == (e["virt"], e["driver"], e["cuda"])
    assert (f.torch_cuda, f.nccl_version, f.flashinfer_jit_cache) == (TORCH_CUDA, "2.27.5", False)
    assert {k: p.version for k, p in f.packages.items()} == VENV_PACKAGES
    assert probe_view.verdict_line(f) == e["verdict"]


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_assembled_profile_output_parses_to_expected_facts(name):
    f = probe.parse(assemble(PROFILES / name), name, "10.0.0.1")
    check(f, EXPECT[name])
    assert f.warnings == []  # a healthy host with a matching stack raises nothing
    assert (f.unit.name, f.unit.active_state) == ("sglang", "inactive")


def test_json_has_the_keys_of_the_issue():
    f = probe.parse(assemble(PROFILES / "rtx-pro-6000-x8-proxmox"), "seed", "10.0.0.1")
    d = f.model_dump(mode="json")
    assert {"host", "address", "ok", "error", "gpus", "topology", "driver_version", "cuda_version",
            "virtualization", "arch_family", "interconnect", "p2p", "packages", "unit", "warnings"} <= set(d)
    assert {"index", "name", "uuid", "compute_cap", "sm", "memory_total_mib", "power_draw_w", "power_limit_w",
            "pci_bus_id"} <= set(d["gpus"][0])
    assert set(d["topology"]) == {"links", "nvlink", "p2p_read"}
    assert (d["gpus"][0]["compute_cap"], d["gpus"][0]["sm"]) == ("12.0", 120)
    assert set(d["packages"]["sglang"]) >= {"version", "path"}


# --- the real script under sh, with stand-in commands answering from a profile ------------------------

FAKE_SMI = r"""#!/bin/sh
P=__PROFILE__/nvidia-smi
case "$1" in
  --query-gpu=*)
    csv=$P/query-gpu.csv
    case $1 in *ecc.errors*|*remapped_rows*|*gpu_recovery_action*|*retired_pages*) csv=$P/query-health.csv ;; esac
    awk -v q="${1#--query-gpu=}" -v fmt="${2#--format=}" -F', ' '
      NR == 1 { for (i = 1; i <= NF; i++) { n = $i; sub(/ \[.*\]$/, "", n); col[n] = i; hdr[i] = $i }
                nq = split(q, want, ",")
                for (k = 1; k <= nq; k++) sub(/^clocks_throttle_reasons\./, "clocks_event_reasons.", want[k])
                for (k = 1; k <= nq; k++) if (!(want[k] in col)) {
                  printf "Field \"%s\" is not a valid field to query.\n\n", want[k]; exit 2 }
                if (fmt !~ /noheader/) {
                  s = ""; for (k = 1; k <= nq; k++) s = s (k > 1 ? ", " : "") hdr[col[want[k]]]; print s }
                next }
      /^Unable to determine the device handle/ { print; next }
      { s = ""
        for (k = 1; k <= nq; k++) {
          v = $(col[want[k]]); if (fmt ~ /nounits/) sub(/ (MiB|W|MHz|%)$/, "", v)
          s = s (k > 1 ? ", " : "") v }
        print s }' "$csv"
    exit $? ;;
  topo) case "$2" in -m) f=topo-m.txt ;; -p2p) f=topo-p2p-$3.txt ;; esac ;;
  --version) f=version.txt ;;
  "") f=smi.txt ;;
esac
[ -n "$f" ] && [ -f "$P/$f" ] && exec cat "$P/$f"
echo "Option \"$1\" is not recognized."
exit 2
"""
FAKE_VIRT = """#!/bin/sh
cat __PROFILE__/system/systemd-detect-virt.txt
[ "$(cat __PROFILE__/system/systemd-detect-virt.txt)" != none ]
"""
FAKE_DMIDECODE = """#!/bin/sh
case "$2" in system-manufacturer) exec cat __PROFILE__/system/dmi/sys_vendor ;;
             system-product-name) exec cat __PROFILE__/system/dmi/product_name ;; esac
exit 1
"""
FAKE_DMESG = """#!/bin/sh
exec cat __PROFILE__/system/kernel-log.txt
"""
FAKE_SYSTEMCTL = f"#!/bin/sh\ncat <<'EOF'\n{UNIT_SHOW}EOF\n"
HOST_TOOLS = ("awk", "cat", "df", "grep", "sleep", "timeout", "uname")  # what a minimal host has besides the stand-ins
TEMP_TOOLS = ("mktemp", "rm")  # with them the probe runs its nvidia-smi calls at once; without, one by one


def _exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def fake_venv(root: Path, packages: dict[str, str] | None = None) -> Path:
    sp = root / "venv/lib/python3.12/site-packages"
    for name, version in (packages or VENV_PACKAGES).items():
        meta = sp / f"{name.replace('-', '_')}-{version}.dist-info/METADATA"
        meta.parent.mkdir(parents=True)
        meta.write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: decoy\n")
        (sp / hostinfo.PACKAGE_DIRS[name]).mkdir(parents=True, exist_ok=True)
    (sp / "torch/version.py").write_text(f"__version__ = '2.9.1'\ncuda: Optional[str] = '{TORCH_CUDA}'\n")
    (sp / "torch/lib").mkdir()
    elf = b"\x7fELF\x00junk sm_x\x00" + TORCH_ARCHS.encode() + b"\x00more"
    (sp / "torch/lib/libtorch_python.so").write_bytes(elf)
    return root / "venv"


def run_script(profile: Path, tmp: Path, sysfs_dmi: bool = False, concurrent: bool = True,
               smi: str = FAKE_SMI, limit: int | None = None, packages: dict[str, str] | None = None) -> str:
    """Run the real probe script with PATH holding only the stand-ins and a few host tools (`concurrent`:
    with mktemp and rm, so its commands run at once; `smi`: the nvidia-smi stand-in; `limit`: the deadline;
    `packages`: what the fake venv holds, else VENV_PACKAGES)."""
    bin_dir, tools, home = tmp / "bin", tmp / "tools", tmp / "home"
    for d in (bin_dir, tools, home / ".cache/flashinfer/0.6.3/120a/cached_ops/trtllm_comm"):
        d.mkdir(parents=True)
    for tool in HOST_TOOLS + (TEMP_TOOLS if concurrent else ()):
        (tools / tool).symlink_to(shutil.which(tool))
    p = str(profile)
    _exe(bin_dir / "nvidia-smi", smi.replace("__PROFILE__", p))
    _exe(bin_dir / "systemctl", FAKE_SYSTEMCTL)
    _exe(bin_dir / "dmesg", FAKE_DMESG.replace("__PROFILE__", p))
    if (profile / "system/systemd-detect-virt.txt").is_file():
        _exe(bin_dir / "systemd-detect-virt", FAKE_VIRT.replace("__PROFILE__", p))
    if (profile / "system/dmi").is_dir():
        _exe(bin_dir / "dmidecode", FAKE_DMIDECODE.replace("__PROFILE__", p))
    sysfs = tmp / "sysfs-dmi"
    if sysfs_dmi:
        shutil.copytree(profile / "system/dmi", sysfs)
    script = hostside.text("probe.sh")
    # the host's own /sys and /proc stand in for nothing: point the script at the profile's copies
    for real, fake in (("/sys/class/dmi/id", str(sysfs)),
                       ("/proc/driver/nvidia/version", p + "/system/proc-driver-nvidia-version.txt")):
        assert script.count(real) == 1
        script = script.replace(real, fake)
    env = {"PATH": f"{bin_dir}:{tools}", "HOME": str(home), "LC_ALL": "C", "TMPDIR": str(tmp / "tmpdir")}
    (tmp / "tmpdir").mkdir()
    args = [str(fake_venv(tmp, packages)), "sglang", ",".join(probe.QUERY_FIELDS)] + ([str(limit)] if limit else [])
    done = subprocess.run(["/bin/sh", "-c", script, "fleet-probe", *args], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    assert list((tmp / "tmpdir").iterdir()) == []  # the concurrent run's files are gone with it
    return done.stdout


def _comparable(f: F.HostFacts) -> dict:
    d = f.model_dump(exclude={"host", "address", "os", "disk", "flashinfer_cache"})
    d["packages"] = {k: v["version"] for k, v in d["packages"].items()}
    return d


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_the_concurrent_probe_prints_exactly_what_the_sequential_one_does(name, tmp_path):
    """Its sections intact and in the same order, byte for byte, whether the nvidia-smi calls ran at once
    (a temp dir) or one after the other (no mktemp on the host)."""
    def same(text: str, tmp: Path) -> str:  # this machine's disk usage moves between the two runs
        return re.sub(r"(?m)^(\S+ +)\d+ +\d+ +\d+ +\d+%", r"\1df", text.replace(str(tmp), "T"))

    at_once = run_script(PROFILES / name, tmp_path / "a")
    in_turn = run_script(PROFILES / name, tmp_path / "b", concurrent=False)
    assert same(at_once, tmp_path / "a") == same(in_turn, tmp_path / "b")
    assert at_once.endswith(probe.DONE + "\n")


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_real_script_under_sh_agrees_with_the_parser(name, tmp_path):
    output = run_script(PROFILES / name, tmp_path)
    f = probe.parse(output, name, "10.0.0.1")
    check(f, EXPECT[name])
    assert _comparable(f) == _comparable(probe.parse(assemble(PROFILES / name), name, "10.0.0.1"))
    assert f.dmi.source == "dmidecode"  # no sysfs DMI here: the fallback the sandbox answers
    sp = tmp_path / "venv/lib/python3.12/site-packages"
    assert f.packages["torch"].path == f"{sp}/torch"
    assert f.packages["nvidia-nccl-cu12"].path == f"{sp}/nvidia/nccl"
    assert f.torch_cuda_archs == TORCH_ARCHS.split()
    assert f.flashinfer_cache.model_dump() == {
        "path": f"{tmp_path}/home/.cache/flashinfer", "exists": True, "workspaces": ["0.6.3/120a"],
        "modules": ["0.6.3/120a/trtllm_comm"]}
    assert set(f.disk) == {"root", "venv", "flashinfer_cache", "hf_cache"}
    assert all(d.avail_kib is not None for d in f.disk.values())
    assert f.disk["hf_cache"].path == f"{tmp_path}/home/.cache"  # its nearest existing parent
    assert output.count("@@fleet:begin query-gpu@@") == 1  # a driver that knows compute_cap is asked once


# `nvidia-smi topo -m` that never ends: killed by a TERM, or (STUCK) deaf to it, like a process stuck in
# the driver; each writes its PID where the test can find (and end) it.
TOPO = '  topo) case "$2" in'
HANGS = FAKE_SMI.replace(TOPO, '  topo) [ "$2" = -m ] && { echo $$ > "$HOME/hung.pid"; exec sleep 600; }\n'
                               '        case "$2" in')
STUCK = FAKE_SMI.replace(TOPO, """  topo) [ "$2" = -m ] && {
          trap '' TERM; echo $$ > "$HOME/hung.pid"; while :; do sleep 1; done; }
        case "$2" in""")


QUERY_STUCK = FAKE_SMI.replace("  --query-gpu=*)\n", """  --query-gpu=*)
    trap '' TERM; echo $$ >> "$HOME/hung.pid"; while :; do sleep 1; done ;;
  --never)
""")


def _sections(output: str) -> dict[str, probe.Section]:
    return {s.name: s for s in probe.split_sections(output)}


@pytest.mark.parametrize("smi,concurrent", [(HANGS, True), (STUCK, True), (HANGS, False)],
                         ids=["killed", "deaf-to-the-kill", "one-after-the-other"])
def test_a_command_still_running_at_the_deadline_ends_its_section_and_the_rest_print_whole(smi, concurrent,
                                                                                          tmp_path):
    """The script answers at its deadline (2 s here, the hang is 600 s): the hung call's section ends
    rc=124 and says what it printed; every other section is whole, and the facts say which call timed out.
    A call that ignores the kill is left behind, never waited for: the answer still ends."""
    try:
        out = run_script(PROFILES / "rtx-pro-6000-x8-proxmox", tmp_path, concurrent=concurrent, smi=smi, limit=2)
    finally:
        pid = int((tmp_path / "home/hung.pid").read_text())
        try:
            os.kill(pid, 9)  # the deaf one is still there; the others are gone already
        except ProcessLookupError:
            pass
    sections = _sections(out)
    assert sections["topo-m"].rc == 124 and sections["topo-m"].text == ""
    for name in ("query-gpu", "topo-p2p-r", "smi-version", "virt", "unit", "df", "packages"):
        assert sections[name].rc == 0 and sections[name].text, name
    assert out.endswith(probe.DONE + "\n")
    facts = probe.parse(out, "h", "a")
    assert len(facts.gpus) == 8 and facts.driver_version and facts.unit.active_state == "inactive"
    assert any("timed out" in w for w in facts.warnings), facts.warnings


def test_a_query_stuck_past_the_deadline_ends_its_section_and_the_rest_print_whole(tmp_path):
    """query-gpu runs in a shell of its own (it may ask again on an old driver): stuck and deaf to the kill,
    the `timeout` inside waits on it forever; the deadline still ends the section rc=124 and the probe
    answers. (One after the other, with no temp dir, timeout(1) is all there is.)"""
    try:
        out = run_script(PROFILES / "rtx-pro-6000-x8-proxmox", tmp_path, smi=QUERY_STUCK, limit=2)
    finally:
        for pid in (tmp_path / "home/hung.pid").read_text().split():  # every stuck call, the retry's too
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
    sections = _sections(out)
    assert sections["query-gpu"].rc == 124
    for name in ("topo-m", "topo-p2p-r", "smi-version", "virt", "unit", "df", "packages"):
        assert sections[name].rc == 0 and sections[name].text, name
    facts = probe.parse(out, "h", "a")
    assert facts.gpus == [] and any("timed out" in w for w in facts.warnings), facts.warnings


def test_sysfs_dmi_is_read_first(tmp_path):
    f = probe.parse(run_script(PROFILES / "rtx-pro-6000-x8-proxmox", tmp_path, sysfs_dmi=True), "seed", "a")
    assert f.dmi.model_dump() == {"vendor": "QEMU", "product": "Standard PC (Q35 + ICH9, 2009)",
                                  "source": "sysfs"}
    assert f.virt_verdict == "KVM guest (QEMU Q35: Proxmox-style)"


def test_profile_without_virt_command_or_dmi(tmp_path):
    profile = tmp_path / "bare"
    shutil.copytree(PROFILES / "rtx5090-x2-workstation", profile)
    (profile / "system/systemd-detect-virt.txt").unlink()
    shutil.rmtree(profile / "system/dmi")
    f = probe.parse(run_script(profile, tmp_path / "run"), "bare", "a")
    assert (f.virtualization, f.virt_verdict, f.dmi.vendor) == (None, None, None)
    assert "virtualization unknown: systemd-detect-virt: command not found" in f.warnings
    assert "DMI vendor/product not readable (sysfs, dmidecode, hostnamectl)" in f.warnings
    assert probe_view.verdict_line(f).endswith("P2P refused (GNS), virtualization unknown")


@pytest.fixture
def old_driver_profile(tmp_path) -> Path:
    """A 470-era host: no compute_cap field, no --version, no topo -p2p file, old space-separated topo."""
    p = tmp_path / "a100-x2-470"
    (p / "nvidia-smi").mkdir(parents=True)
    (p / "system").mkdir()
    (p / "nvidia-smi/query-gpu.csv").write_text(
        "index, name, uuid, pci.bus_id, memory.total [MiB], power.draw [W], power.limit [W], driver_version, "
        "pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max\n"
        "0, NVIDIA A100-SXM4-40GB, GPU-aa, 00000000:07:00.0, 40536 MiB, 52.10 W, 400.00 W, 470.82.01, "
        "4, 4, 16, 16\n"
        "1, NVIDIA A100-SXM4-40GB, GPU-bb, 00000000:0F:00.0, 40536 MiB, 50.00 W, 400.00 W, 470.82.01, "
        "4, 4, 16, 16\n")
    (p / "nvidia-smi/topo-m.txt").write_text(
        "        GPU0    GPU1    mlx5_0  CPU Affinity\nGPU0     X      NV12    PXB     0-31\n"
        "GPU1    NV12     X      PXB     0-31\nmlx5_0  PXB     PXB      X      \n\n"
        "Legend:\n\n  X    = Self\n")
    (p / "nvidia-smi/smi.txt").write_text(
        "+-----------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |\n")
    (p / "system/proc-driver-nvidia-version.txt").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01  Thu Oct 28 21:20:38 UTC 2021\n")
    (p / "system/systemd-detect-virt.txt").write_text("none\n")
    return p


def test_old_driver_script_retries_without_compute_cap_and_parse_warns(old_driver_profile, tmp_path):
    output = run_script(old_driver_profile, tmp_path / "run")
    attempts = [s for s in probe.split_sections(output) if s.name == "query-gpu"]
    assert [s.rc for s in attempts] == [2, 0]
    assert 'Field "compute_cap" is not a valid field to query.' in attempts[0].text
    f = probe.parse(output, "old", "a")
    assert [(g.compute_cap, g.sm, g.compute_cap_source) for g in f.gpus] == [("8.0", 80, "name-table")] * 2
    assert [g.memory_total_mib for g in f.gpus] == [40536, 40536]
    assert (f.driver_version, f.cuda_version) == ("470.82.01", "11.4")  # query + bare nvidia-smi banner
    assert f.topology.links == [["X", "NV12"], ["NV12", "X"]]
    assert (f.interconnect, f.arch_family) == ("nvlink", "ampere")
    assert f.p2p == "unknown" and f.topology.p2p_read is None
    assert "the driver's nvidia-smi rejects the field 'compute_cap'" in f.warnings
    assert any("taken from fleet's table of known names for 'NVIDIA A100-SXM4-40GB'" in w for w in f.warnings)
    assert any(w.startswith("nvidia-smi topo -p2p r failed (rc=2)") for w in f.warnings)


def test_missing_venv_is_a_warning_and_no_packages(tmp_path):
    done = subprocess.run(["/bin/sh", "-c", probe.command(str(tmp_path / "nowhere"), "sglang")],
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, capture_output=True, text=True,
                          timeout=60)
    f = probe.parse(done.stdout, "h", "a")
    assert f.packages == {} and f"venv {tmp_path}/nowhere not found: no package versions" in f.warnings


def test_command_quotes_its_arguments_and_starts_no_interpreter():
    words = shlex.split(probe.command("/opt/my venv; rm -rf /", "sglang@1.service"))
    assert words[:2] == ["sh", "-c"] and words[2] == hostside.text("probe.sh")
    assert words[3:6] == ["fleet-probe", "/opt/my venv; rm -rf /", "sglang@1.service"]
    assert not re.search(r"\bpython[0-9.]*\s", words[2])  # versions come from METADATA, not `python -c`


def test_a_venv_under_the_home_folder_is_found_on_the_host(tmp_path):
    (tmp_path / "venvs/sg/lib/python3.11/site-packages").mkdir(parents=True)
    done = subprocess.run(["/bin/sh", "-c", probe.command("~/venvs/sg", "x")],
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, capture_output=True, text=True,
                          timeout=60)
    assert f"@sp {tmp_path}/venvs/sg/lib/python3.11/site-packages" in done.stdout


# --- the human view ----------------------------------------------------------------------------------

def test_render_shows_gpus_links_verdict_and_failed_hosts():
    seed = probe.parse(assemble(PROFILES / "rtx-pro-6000-x8-proxmox"), "seed", "10.0.0.1")
    h100 = probe.parse(assemble(PROFILES / "h100-sxm-x8"), "h100", "10.0.0.2")
    down = F.HostFacts.failed("down", "10.0.0.3", "10.0.0.3:22: connection timed out after 5 s")
    console = Console(record=True, width=200, color_system=None)
    probe_view.render([seed, h100, down], console)
    text = console.export_text()
    assert EXPECT["rtx-pro-6000-x8-proxmox"]["verdict"] in text
    assert "down: 10.0.0.3:22: connection timed out after 5 s" in text  # the reason, under the table
    assert next(line for line in text.splitlines() if line.startswith("down ")).split()[1:3] == ["probe", "failed"]
    assert "RTX PRO 6000 Blackwell " in text and "96 GiB" in text
    assert "28 / 600 W" in text and "5 / x16" in text
    assert "PHB CNS" in text and "NV18 OK" in text  # link / P2P read cells of the matrices
    assert "down GPUs" not in text  # a failed host is one row, no detail
    narrow = Console(record=True, width=80, color_system=None)
    probe_view.render([seed, h100, down], narrow)
    lines = narrow.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    summary = lines[:lines.index("")]
    assert [line.split()[0] for line in summary[2:5]] == ["seed", "h100", "down"]  # one line per host
    assert all(len([x for x in lines if x.startswith(f"  {i}  RTX PRO 6000")]) == 1 for i in range(8))


def test_verdict_for_mixed_and_cc_fallback_hosts():
    f = F.HostFacts(host="m", address="a", gpus=[
        F.Gpu(index=0, name="NVIDIA GeForce RTX 4090", compute_cap="8.9"),
        F.Gpu(index=1, name="NVIDIA GeForce RTX 5090", compute_cap="12.0")],
        topology=F.Topology(links=[["X", "PHB"], ["PHB", "X"]]), interconnect="pcie", pcie_link="PHB",
        p2p="unknown", virt_verdict="bare metal")
    assert probe_view.verdict_line(f) == ("1x GeForce RTX 4090 (SM 8.9) + 1x GeForce RTX 5090 (SM 12.0), "
                                          "PCIe only (PHB), P2P unknown, bare metal")
    if os.environ.get("FLEET_SHOW_RENDER"):  # eyeball it: FLEET_SHOW_RENDER=1 pytest -s
        probe_view.render([f], Console())


def test_probe_script_counts_xids_per_gpu_and_code_and_names_a_lost_gpu(tmp_path):
    """The real probe.sh (its awk) over a kernel log where GPU 3 fell off the bus, nvidia-smi unable to open it."""
    prof = tmp_path / "prof"
    shutil.copytree(PROFILES / "rtx-pro-6000-x8-proxmox", prof)
    log = prof / "system/kernel-log.txt"
    xid79 = "[  812.10] NVRM: Xid (PCI:0000:04:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    log.write_text(log.read_text() + f"{xid79}\n{xid79}\n"
                   "[  812.11] NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x0 (None) to "
                   "0x2 (Node Reboot Required)\n[  813.00] NVRM: Xid (PCI:0000:zz:00): 79, bad bus\n"
                   "[  813.01] NVRM: Xid (PCI:0000:01:00): 13, pid=9, name=python3, Graphics SM Warp Exception\n")
    for name in ("query-gpu.csv", "query-health.csv"):
        csv = prof / "nvidia-smi" / name
        lines = csv.read_text().splitlines()
        csv.write_text("\n".join(ln if not ln.startswith("3, ") else
                                  "Unable to determine the device handle for GPU00000000:04:00.0: Unknown Error"
                                  for ln in lines) + "\n")
    f = probe.parse(run_script(prof, tmp_path / "run"), "h", "10.0.0.1")
    assert f.kernel_log.source == "dmesg"
    assert [(e.pci, e.code, e.count, e.gpu_index) for e in f.kernel_log.events] == [
        ("0000:04:00", 79, 2, None), ("0000:04:00", 154, 1, None), ("0000:01:00", 13, 1, 0)]
    assert f.kernel_log.events[0].last == xid79
    assert [g.pci_bus_id for g in f.lost_gpus] == ["0000:04:00"]
    assert len(f.gpus) == 7 and all(g.health and g.health.recovery_action == "none" for g in f.gpus)
    assert "GPU 0000:04:00: nvidia-smi cannot open it (Unknown Error)" in f.warnings


def test_the_stack_a_release_records_is_what_the_real_script_read(tmp_path):
    """sglang 0.5.14+ depends on sglang-kernel (no longer sgl-kernel): the probe reads either, a release
    records it as sgl-kernel beside sglang, flashinfer, torch with its CUDA, NCCL and the driver."""
    packages = {"sglang": "0.5.23", "flashinfer-python": "0.7.2", "sglang-kernel": "0.4.10", "torch": "2.9.1",
                "nvidia-nccl-cu13": "2.28.3"}
    name = sorted(EXPECT)[0]
    f = probe.parse(run_script(PROFILES / name, tmp_path, packages=packages), name, "10.0.0.1")
    assert f.driver_version
    assert F.stack_versions(f) == {"sglang": "0.5.23", "flashinfer-python": "0.7.2", "sgl-kernel": "0.4.10",
                                   "torch": "2.9.1", "cuda": TORCH_CUDA, "nvidia-nccl": "2.28.3",
                                   "driver": f.driver_version}
    assert list(F.stack_versions(f)) == list(F.STACK)


def test_a_stack_not_read_is_left_out_not_guessed(tmp_path):
    f = probe.parse(assemble(PROFILES / sorted(EXPECT)[0]), "h", "10.0.0.1")
    f.packages.pop("sglang")
    f.torch_cuda = None
    assert "sglang" not in F.stack_versions(f) and "cuda" not in F.stack_versions(f)
    assert F.stack_versions(f)["flashinfer-python"] == "0.6.3"


def test_a_version_a_host_sends_is_recorded_only_in_a_version_s_shape():
    f = probe.parse(assemble(PROFILES / sorted(EXPECT)[0]), "h", "10.0.0.1")
    f.packages["sglang"].version = "0.5.9\x1b[31m"
    f.packages["torch"].version = "[bold]2.9.1"
    assert "sglang" not in F.stack_versions(f) and "torch" not in F.stack_versions(f)
