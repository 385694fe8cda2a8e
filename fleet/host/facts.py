"""What a probe learned about one host (HostFacts), and the pure rules that derive verdicts from it.

The models dump to the JSON of `inv probe --json`. A value the machine did not report stays None and a
warning says why: nothing here is guessed and presented as fact.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from fleet.errors import NotReached
from fleet.host.gpuhealth import GpuHealth, KernelLog, LostGpu
from fleet.host.p2pcheck import P2PCheck


class Gpu(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    compute_cap: str | None = None  # "12.0", as nvidia-smi prints it
    sm: int | None = None  # 120
    compute_cap_source: str | None = None  # "nvidia-smi", or "name-table" when the driver could not say
    memory_total_mib: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    pci_bus_id: str | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    health: GpuHealth | None = None  # None: the driver answered no health query


class Topology(BaseModel):
    model_config = ConfigDict(frozen=True)

    links: list[list[str | None]] | None = None  # GPUs only; None cell = row missing from the output
    nvlink: bool = False
    p2p_read: list[list[str | None]] | None = None


class Package(BaseModel):
    version: str | None = None
    path: str | None = None  # the import folder in site-packages (or the source tree of an editable install)
    editable: bool = False


class Dmi(BaseModel):
    vendor: str | None = None
    product: str | None = None
    source: str | None = None  # sysfs | dmidecode | hostnamectl


class OsInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str | None = None
    version_id: str | None = None
    pretty_name: str | None = None
    kernel: str | None = None
    machine: str | None = None  # uname -m: aarch64 matters for GB200-class hosts


class DiskFree(BaseModel):
    path: str  # the folder asked about (or its nearest existing parent)
    mount: str | None = None
    total_kib: int | None = None
    avail_kib: int | None = None


class FlashinferCache(BaseModel):
    path: str | None = None
    exists: bool = False
    workspaces: list[str] = Field(default_factory=list)  # "<flashinfer version>/<arch list>"
    modules: list[str] = Field(default_factory=list)  # "<workspace>/<op>", e.g. "0.6.3/120a/trtllm_comm"


class UnitState(BaseModel):
    name: str
    load_state: str | None = None  # "loaded", "not-found"
    active_state: str | None = None  # what `systemctl is-active` prints
    sub_state: str | None = None
    unit_file_state: str | None = None
    main_pid: int | None = None


class HostFacts(BaseModel):
    host: str
    address: str
    ok: bool = True
    error: str | None = None
    unreached: NotReached | None = None  # not ok because the host was not reached: why, in a word
    gpus: list[Gpu] = Field(default_factory=list)
    topology: Topology = Field(default_factory=Topology)
    driver_version: str | None = None
    cuda_version: str | None = None  # the highest CUDA the driver supports
    virtualization: str | None = None  # systemd-detect-virt's word
    virt_verdict: str | None = None  # e.g. "KVM guest (QEMU Q35: Proxmox-style)"
    dmi: Dmi = Field(default_factory=Dmi)
    os: OsInfo = Field(default_factory=OsInfo)
    arch_family: str = "unknown"
    gpus_agree: bool = True
    interconnect: str = "unknown"  # nvlink | pcie | none (one GPU) | unknown
    pcie_link: str | None = None  # worst PCIe class between GPU pairs not on NVLink
    p2p: str = "unknown"  # ok | refused (CNS) | partial (OK, CNS) | n/a | unknown
    packages: dict[str, Package] = Field(default_factory=dict)
    torch_cuda: str | None = None
    torch_cuda_archs: list[str] | None = None
    nccl_version: str | None = None
    flashinfer_jit_cache: bool = False
    flashinfer_cache: FlashinferCache = Field(default_factory=FlashinferCache)
    disk: dict[str, DiskFree] = Field(default_factory=dict)
    unit: UnitState | None = None
    lost_gpus: list[LostGpu] = Field(default_factory=list)  # GPUs nvidia-smi could not open
    smi_error: str | None = None  # why nvidia-smi --query-gpu listed nothing (it failed: the driver, no device)
    kernel_log: KernelLog | None = None  # Xid events since boot (None: the probe did not read it)
    p2p_check: P2PCheck | None = None  # the data check of `inv probe --p2p-check` (None: not asked)
    warnings: list[str] = Field(default_factory=list)
    connection: list[str] = Field(default_factory=list)  # how fleet reached it (fleet.ssh.connect.trace_of)
    probed_at: str | None = None  # ISO time, set by whoever runs the probe (parse is pure)

    @classmethod
    def failed(cls, host: str, address: str, error: str, unreached: NotReached | None = None) -> HostFacts:
        """The row of a host that could not be probed (unreachable, refused, timed out)."""
        return cls(host=host, address=address, ok=False, error=error, unreached=unreached)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)


# --- derivation: pure functions over the typed facts ------------------------------------------------

# Ranked best to worst; SOC is the pre-2018 drivers' name for SYS.
PCIE_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")
_PCIE_ALIASES = {"SOC": "SYS"}
_NVLINK = re.compile(r"^NV\d+$")

# Name -> compute capability, used ONLY when the driver cannot report compute_cap (and then warned).
# Order matters: the first pattern that matches wins (e.g. "RTX PRO 6000 Blackwell" before "RTX 6000").
CC_BY_NAME: tuple[tuple[str, str], ...] = (
    (r"\bGB10\b", "12.1"),
    (r"RTX PRO \d+.*Blackwell", "12.0"),
    (r"RTX 50\d0", "12.0"),
    (r"\bB[12]00\b|\bGB200\b", "10.0"),
    (r"\bB300\b|\bGB300\b", "10.3"),
    (r"\bH100\b|\bH200\b|\bH800\b|\bH20\b|\bGH200\b", "9.0"),
    (r"\bL40S?\b|\bL4\b|RTX 40\d0|RTX \d+ Ada", "8.9"),
    (r"\bA100\b|\bA800\b|\bA30\b", "8.0"),
    (r"\bA10G?\b|\bA40\b|RTX A\d+|RTX 30\d0", "8.6"),
    (r"\bT4\b|RTX 20\d0|Quadro RTX|TITAN RTX", "7.5"),
    (r"\bV100\b|TITAN V\b", "7.0"),
)


def cc_from_name(name: str | None) -> str | None:
    for pattern, cc in CC_BY_NAME:
        if name and re.search(pattern, name):
            return cc
    return None


# The values a rung's `when:` can meet (docs/playbooks.md lists them; fleet.deploy.check holds playbooks to them)
ARCH_FAMILIES = ("ampere", "ada", "hopper", "blackwell-datacenter", "blackwell-consumer", "mixed", "unknown")
INTERCONNECTS = ("nvlink", "pcie", "none", "unknown")
P2P_STATES = ("ok", "refused", "partial", "n/a", "unknown")  # refused and partial name the codes: "refused (CNS)"
KNOWN_SMS = (70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121)  # major * 10 + minor of compute_cap


def unknown_sm(sm: int) -> str | None:
    """Why `sm` is no SM fleet knows, or None: the one rule for a playbook's `when: sm` (inv check) and for the
    `--sm` of inv audit and inv patch."""
    if sm in KNOWN_SMS:
        return None
    return (f"SM {sm} is no GPU fleet knows (major x 10 + minor: 120 for compute capability 12.0; known: "
            f"{', '.join(map(str, KNOWN_SMS))})")


def sm_of(compute_cap: str | None) -> int | None:
    m = re.fullmatch(r"(\d+)\.(\d+)", compute_cap or "")
    return int(m.group(1)) * 10 + int(m.group(2)) if m else None


def arch_family(compute_cap: str | None) -> str:
    m = re.fullmatch(r"(\d+)\.(\d+)", compute_cap or "")
    if not m:
        return "unknown"
    major, minor = int(m.group(1)), int(m.group(2))
    if major == 8:
        return "ada" if minor == 9 else "ampere"
    return {9: "hopper", 10: "blackwell-datacenter", 12: "blackwell-consumer"}.get(major, "unknown")


STACK = ("sglang", "flashinfer-python", "sgl-kernel", "torch", "cuda", "nvidia-nccl", "driver")
VERSION_SHAPE = re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,39}")  # what a recorded version may print as


def stack_versions(facts: HostFacts) -> dict[str, str]:
    """What a release records of the software it ran (STACK's names; one not installed or not read is left
    out): sgl-kernel is sglang-kernel from sglang 0.5.14, cuda the CUDA torch was built for."""
    pk = facts.packages
    kernel = pk.get("sglang-kernel") or pk.get("sgl-kernel")
    found = {"sglang": pk["sglang"].version if "sglang" in pk else None,
             "flashinfer-python": pk["flashinfer-python"].version if "flashinfer-python" in pk else None,
             "sgl-kernel": kernel.version if kernel else None,
             "torch": pk["torch"].version if "torch" in pk else None,
             "cuda": facts.torch_cuda, "nvidia-nccl": facts.nccl_version, "driver": facts.driver_version}
    return {k: v for k, v in found.items() if v and VERSION_SHAPE.fullmatch(v)}  # the host's text, never raw


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    m = re.match(r"(\d+(?:\.\d+)*)", text or "")
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def off_diagonal(matrix: list[list[str | None]]) -> list[str]:
    return [c for i, row in enumerate(matrix) for j, c in enumerate(row) if i != j and c is not None]


def interconnect(links: list[list[str | None]] | None) -> tuple[str, str | None, list[str]]:
    """(kind, worst PCIe class, warnings) from the GPU link matrix."""
    if links is None:
        return "unknown", None, ["no GPU link matrix (nvidia-smi topo -m): interconnect unknown"]
    if len(links) < 2:
        return "none", None, []
    codes = [_PCIE_ALIASES.get(c, c) for c in off_diagonal(links)]
    warnings = [f"unknown link code {c!r} in topo -m" for c in sorted(set(codes))
                if not _NVLINK.match(c) and c not in PCIE_CLASSES]
    pcie = [c for c in codes if c in PCIE_CLASSES]
    worst = max(pcie, key=PCIE_CLASSES.index) if pcie else None
    if any(_NVLINK.match(c) for c in codes):
        if pcie:
            warnings.append(f"NVLink joins only some GPU pairs; the others go over PCIe ({worst})")
        return "nvlink", worst, warnings
    return ("pcie" if pcie else "unknown"), worst, warnings


def p2p_status(p2p: list[list[str | None]] | None, gpu_count: int) -> str:
    if gpu_count == 1:
        return "n/a"
    if p2p is None:
        return "unknown"
    codes = off_diagonal(p2p)
    if not codes:
        return "unknown"
    kinds = sorted(set(codes), key=codes.index)
    if kinds == ["OK"]:
        return "ok"
    refused = [k for k in kinds if k != "OK"]
    return f"{'partial' if 'OK' in kinds else 'refused'} ({', '.join(refused)})"


_CONTAINERS = {"openvz", "lxc", "lxc-libvirt", "systemd-nspawn", "docker", "podman", "rkt", "wsl", "proot",
               "pouch"}


def virt_verdict(virt: str | None, dmi: Dmi) -> str | None:
    vendor, product = dmi.vendor or "", dmi.product or ""
    qemu = "QEMU" in vendor.upper()
    if "Q35" in product:
        machine = "QEMU Q35: Proxmox-style"  # q35 is the machine type Proxmox needs for PCIe passthrough
    elif "i440FX" in product:
        machine = "QEMU i440FX: no PCIe passthrough"
    else:
        machine = " ".join(p for p in (vendor, product) if p)
    if virt in ("kvm", "qemu"):
        return f"KVM guest ({machine})" if machine else "KVM guest"
    if virt == "none":
        return "bare metal"
    if virt in _CONTAINERS:
        return f"container ({virt})"
    if virt:
        return f"{virt} guest" + (f" ({machine})" if qemu else "")
    if qemu:
        return f"QEMU guest per DMI ({machine})"
    return None


def gpu_warnings(gpus: list[Gpu]) -> tuple[bool, str, list[str]]:
    """(all GPUs agree, arch family, warnings)."""
    if not gpus:
        return True, "unknown", ["no GPUs reported"]
    names = sorted({g.name or "?" for g in gpus})
    ccs = sorted({g.compute_cap or "?" for g in gpus})
    agree = len(names) == 1 and len(ccs) == 1
    warnings = []
    if not agree:
        warnings.append(f"mixed GPUs on one host: {', '.join(names)} (compute capability {', '.join(ccs)})")
    families = {arch_family(g.compute_cap) for g in gpus}
    family = families.pop() if len(families) == 1 else "mixed"
    return agree, family, warnings


def torch_runs_on(archs: list[str], sm: int) -> bool:
    """SASS runs on the same major at an equal or higher minor ('a' variants only on their own SM);
    PTX (compute_N) is JIT-compiled for any newer SM."""
    for arch in archs:
        m = re.fullmatch(r"(sm|compute)_(\d+)([a-z]?)", arch)
        if not m:
            continue
        n = int(m.group(2))
        if m.group(1) == "compute" and n <= sm:
            return True
        if m.group(1) == "sm" and n // 10 == sm // 10 and n <= sm and (not m.group(3) or n == sm):
            return True
    return False


def known_bad(facts: HostFacts) -> list[str]:
    """Combinations known to break sglang on this hardware (FACTS.md sections 1, 3, 4)."""
    out: list[str] = []
    family = facts.arch_family
    blackwell = family.startswith("blackwell") or any((g.sm or 0) >= 100 for g in facts.gpus)
    torch_cuda = version_tuple(facts.torch_cuda)
    if torch_cuda and blackwell and torch_cuda < (12, 8):
        out.append(f"torch is built for CUDA {facts.torch_cuda}: Blackwell (SM 10.x/12.x) needs CUDA >= 12.8")
    if torch_cuda and family == "hopper" and torch_cuda < (12, 3):
        out.append(f"torch is built for CUDA {facts.torch_cuda}: sglang's SM90 paths need CUDA >= 12.3")
    driver_cuda = version_tuple(facts.cuda_version)
    if torch_cuda and driver_cuda and torch_cuda[:2] > driver_cuda[:2]:
        out.append(f"torch is built for CUDA {facts.torch_cuda} but the driver supports CUDA "
                   f"{facts.cuda_version} at most")
    archs = facts.torch_cuda_archs
    if archs:
        for sm in sorted({g.sm for g in facts.gpus if g.sm}):
            if not torch_runs_on(archs, sm):
                out.append(f"torch was not built for SM {sm} (its archs: {' '.join(archs)})")
    nccl = version_tuple(facts.nccl_version)
    if nccl and blackwell and nccl < (2, 27, 5):
        out.append(f"NCCL {facts.nccl_version} is known to break multi-GPU on Blackwell (sglang #7227); "
                   "2.27.5 fixes a hang once a P2P path goes live")
    if facts.flashinfer_jit_cache:
        out.append("flashinfer-jit-cache is installed: its prebuilt kernels load first, so source patches to "
                   "flashinfer have no effect")
    return out
