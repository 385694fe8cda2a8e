"""The probe's per-command parsers against recorded real nvidia-smi output (tests/fixtures/nvidia-smi),
one table row per fixture file, plus the other commands' parsers and the assembly in `parse`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleet.host import facts as F
from fleet.host import nvsmi, probe
from fleet.host import sysinfo as hostinfo

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"
_COMMAND_LINE = re.compile(r"^\$ |\]\$ |^/\S*nvidia-smi ")


def segments(name: str) -> list[tuple[str | None, str]]:
    """A fixture split at the command lines it quotes: [(command or None, output), ...]."""
    out: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in (FIXTURES / name).read_text().splitlines():
        if _COMMAND_LINE.search(line):
            out.append((line, []))
        elif not line.startswith("#"):
            out[-1][1].append(line)
    return [(cmd, "\n".join(lines)) for cmd, lines in out if cmd or any(x.strip() for x in lines)]


def row(first: str, width: int, fill: str) -> list[str]:
    return [first] + [fill] * (width - 1)


def square(n: int, code: str) -> list[list[str | None]]:
    return [["X" if i == j else code for j in range(n)] for i in range(n)]


# --- one test per fixture file; a new fixture without a case fails `test_every_fixture_has_a_case` --

def case_topo_help(text: str) -> None:
    assert nvsmi.parse_topo_matrices(text) == []
    assert nvsmi.parse_query_gpu(text).rows == []
    assert "r - p2p read" in text  # the probe's `topo -p2p r` asks for exactly this capability


def case_gb10_memory_na(text: str) -> None:
    q = nvsmi.parse_query_gpu(text)
    assert q.fields == ["index", "name", "memory.total", "memory.free"]
    assert q.rows == [{"index": "0", "name": "NVIDIA GB10", "memory.total": None, "memory.free": None}]
    gpu = nvsmi.gpu_from_row(q.rows[0])
    assert (gpu.index, gpu.name, gpu.memory_total_mib, gpu.compute_cap) == (0, "NVIDIA GB10", None, None)
    assert F.cc_from_name(gpu.name) == "12.1"


def case_compute_cap_rejected(text: str) -> None:
    parts = segments("query_gpu_compute_cap_unsupported_old_driver.txt")
    old, new = parts[0][1], parts[1][1]
    rejected = nvsmi.parse_query_gpu(old)
    assert rejected.rejected == ["compute_cap"] and rejected.rows == []
    assert nvsmi.parse_query_gpu(new).rows == [{"compute_cap": "8.9"}]


def case_header_570(text: str) -> None:
    q = nvsmi.parse_query_gpu(text)
    assert q.fields == ["compute_cap", "compute_mode", "driver_version", "name", "index"]
    gpus = [nvsmi.gpu_from_row(r) for r in q.rows]
    assert [(g.index, g.name, g.compute_cap, g.sm) for g in gpus] == [
        (0, "NVIDIA TITAN V", "7.0", 70), (1, "NVIDIA RTX 5880 Ada Generation", "8.9", 89)]
    assert {r["driver_version"] for r in q.rows} == {"570.86.15"}
    agree, family, warnings = F.gpu_warnings(gpus)
    assert (agree, family) == (False, "mixed") and "mixed GPUs" in warnings[0]


def case_noheader_440(text: str) -> None:
    [(cmd, out)] = segments("query_gpu_csv_noheader_nounits_440.txt")
    fields = re.search(r"--query-gpu=(\S+)", cmd or "").group(1).split(",")
    q = nvsmi.parse_query_gpu(out, fields)
    assert len(q.rows) == 1 and q.skipped == []
    r = q.rows[0]
    assert (r["name"], r["uuid"], r["driver_version"]) == (
        "GeForce RTX 2080", "GPU-22b2c6ac-2d49-4863-197c-9c469071178a", "440.64")
    assert r["temperature.memory"] is None  # "N/A"
    gpu = nvsmi.gpu_from_row(r)
    got = (gpu.power_limit_w, gpu.power_draw_w, gpu.memory_total_mib, gpu.pcie_width)
    assert got == (200.0, 176.98, 7979, 8)
    assert gpu.compute_cap is None and gpu.index is None  # not asked for: unknown, not guessed
    assert nvsmi.parse_query_gpu(out).rows == []  # without the field list a header-less table means nothing


def case_all_phb(text: str) -> None:
    m = nvsmi.parse_topo_matrix(text)
    assert m.gpu_labels() == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert m.gpu_matrix() == square(4, "PHB")
    assert F.interconnect(m.gpu_matrix()) == ("pcie", "PHB", [])


def case_pxb_pix_sys(text: str) -> None:
    m = nvsmi.parse_topo_matrix(text)
    assert m.gpu_matrix() == [["X", "PXB", "SYS", "SYS"], ["PXB", "X", "SYS", "SYS"],
                              ["SYS", "SYS", "X", "PIX"], ["SYS", "SYS", "PIX", "X"]]
    assert F.interconnect(m.gpu_matrix()) == ("pcie", "SYS", [])


def case_a100_nics_truncated(text: str) -> None:
    m = nvsmi.parse_topo_matrix(text)
    assert len(m.labels) == 20 and m.labels[8:10] == ["NIC0", "NIC1"]
    matrix = m.gpu_matrix()
    assert len(matrix) == 8 and all(len(r) == 8 for r in matrix)  # NIC columns dropped
    assert matrix[:5] == square(8, "NV12")[:5]
    assert matrix[5:] == [[None] * 8] * 3  # rows the excerpt lost stay unknown
    assert F.interconnect(matrix)[:2] == ("nvlink", None)


def case_h100_nv18(text: str) -> None:
    m = nvsmi.parse_topo_matrix(text)
    assert m.gpu_matrix() == square(8, "NV18") and m.incomplete == []
    assert F.interconnect(m.gpu_matrix()) == ("nvlink", None, [])


def case_l4_vm_truncated(text: str) -> None:
    m = nvsmi.parse_topo_matrix(text)
    assert m.incomplete == ["GPU5"]
    matrix = m.gpu_matrix()
    assert matrix[0] == ["X", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    assert matrix[4] == ["SYS", "SYS", "SYS", "SYS", "X", "NODE", "NODE", "NODE"]
    assert matrix[5:] == [[None] * 8] * 3
    assert F.interconnect(matrix) == ("pcie", "SYS", [])


def case_5090_phb_gns(text: str) -> None:
    topo, p2p = nvsmi.parse_topo_matrices(text)
    assert topo.gpu_matrix() == [["X", "PHB"], ["PHB", "X"]]
    assert p2p.gpu_matrix() == [["X", "GNS"], ["GNS", "X"]]  # rows start with a space, end with a tab
    assert F.p2p_status(p2p.gpu_matrix(), 2) == "refused (GNS)"


def case_p2p_all_ok(text: str) -> None:
    m = nvsmi.parse_topo_matrix(text)
    assert m.gpu_matrix() == square(8, "OK")
    assert F.p2p_status(m.gpu_matrix(), 8) == "ok"


CASES = {
    "nvidia_smi_topo_help.txt": case_topo_help,
    "query_gpu_GB10_memory_NA.txt": case_gb10_memory_na,
    "query_gpu_compute_cap_unsupported_old_driver.txt": case_compute_cap_rejected,
    "query_gpu_csv_header_compute_cap_570.txt": case_header_570,
    "query_gpu_csv_noheader_nounits_440.txt": case_noheader_440,
    "topo_m_4gpu_4090_5090_A6000_all_PHB.txt": case_all_phb,
    "topo_m_4gpu_PXB_PIX_SYS.txt": case_pxb_pix_sys,
    "topo_m_8x_A100_NV12_with_NICs_TRUNCATED.txt": case_a100_nics_truncated,
    "topo_m_8x_H100_NV18.txt": case_h100_nv18,
    "topo_m_8x_L4_aws_g6_48xlarge_VM_TRUNCATED.txt": case_l4_vm_truncated,
    "topo_m_and_p2p_rw_2x_rtx5090_PHB_GNS.txt": case_5090_phb_gns,
    "topo_p2p_p_8gpu_all_OK_nccl_docs.txt": case_p2p_all_ok,
}


def test_every_fixture_has_a_case():
    assert sorted(p.name for p in FIXTURES.iterdir()) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_parses_to_recorded_facts(name):
    CASES[name]((FIXTURES / name).read_text())


# --- output recorded on this project's H200 device (driver 580.159.04): one GPU, escape codes ---------

H200_TOPO = ("\t\x1b[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\nGPU0\t X \t0-15\t0\t\tN/A\n\n"
             "Legend:\n\n  X    = Self\n")
H200_P2P = " \t\x1b[4mGPU0\t\x1b[0m\n GPU0\tX\t\n\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n"
H200_QUERY = (
    "index, name, uuid, compute_cap, pci.bus_id, memory.total [MiB], power.draw [W], power.limit [W], "
    "driver_version, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max\n"
    "0, NVIDIA H200, GPU-34747df1-9587-cd05-21c3-1ab5677dc942, 9.0, 00000000:00:06.0, 143771, 115.73, "
    "700.00, 580.159.04, 5, 5, 16, 16")
H200_VERSION = ("NVIDIA-SMI version  : 580.159.04\nNVML version        : 580.159\n"
                "DRIVER version      : 580.159.04\nCUDA Version        : 13.0\n")
H200_BANNER = ("| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |")
H200_PROC = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
             "(nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n")


def test_single_gpu_matrix_header_has_no_other_gpu_label():
    topo, p2p = nvsmi.parse_topo_matrix(H200_TOPO), nvsmi.parse_topo_matrix(H200_P2P)
    assert topo.gpu_matrix() == [["X"]] and p2p.gpu_matrix() == [["X"]]
    assert F.interconnect(topo.gpu_matrix()) == ("none", None, [])
    assert F.p2p_status(p2p.gpu_matrix(), 1) == "n/a"


def test_query_with_units_in_header_maps_columns_by_name():
    [gpu] = [nvsmi.gpu_from_row(r) for r in nvsmi.parse_query_gpu(H200_QUERY).rows]
    assert gpu.model_dump() == {
        "index": 0, "name": "NVIDIA H200", "uuid": "GPU-34747df1-9587-cd05-21c3-1ab5677dc942",
        "compute_cap": "9.0", "sm": 90, "compute_cap_source": "nvidia-smi", "memory_total_mib": 143771,
        "power_draw_w": 115.73, "power_limit_w": 700.0, "pci_bus_id": "00000000:00:06.0", "pcie_gen": 5,
        "pcie_gen_max": 5, "pcie_width": 16, "pcie_width_max": 16, "health": None}


def test_query_values_keep_units_without_nounits():
    q = nvsmi.parse_query_gpu("index, memory.total [MiB], power.draw [W]\n0, 97887 MiB, 28.00 W\n")
    gpu = nvsmi.gpu_from_row(q.rows[0])
    assert (gpu.memory_total_mib, gpu.power_draw_w) == (97887, 28.0)


@pytest.mark.parametrize("value", ["[N/A]", "N/A", "[Not Supported]", "", " [Unknown Error] "])
def test_not_available_values_are_none(value):
    assert nvsmi.na(value) is None


@pytest.mark.parametrize("text, driver, cuda", [
    (H200_VERSION, "580.159.04", "13.0"),
    (H200_BANNER, "580.159.04", "13.0"),
    ('Option "--version" is not recognized.', None, None),
])
def test_smi_version_from_version_or_banner(text, driver, cuda):
    got = nvsmi.parse_smi_version(text)
    assert (got.driver, got.cuda) == (driver, cuda)


@pytest.mark.parametrize("text, version", [
    (H200_PROC, "580.159.04"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01  Thu Oct 28 ...\n", "470.82.01"),
    ("cannot read /proc/driver/nvidia/version\n", None),
])
def test_proc_driver_version(text, version):
    assert nvsmi.parse_proc_driver_version(text) == version


def test_space_separated_old_format_with_legacy_soc_code():
    text = "        GPU0    GPU1    CPU Affinity\nGPU0     X      SOC     0-7\nGPU1    SOC      X      0-7\n"
    m = nvsmi.parse_topo_matrix(text)
    assert m.gpu_matrix() == [["X", "SOC"], ["SOC", "X"]]
    assert F.interconnect(m.gpu_matrix()) == ("pcie", "SYS", [])


def test_mlx_columns_and_rows_are_dropped():
    text = ("\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\nGPU0\t X \tNV4\tPXB\t0-9\nGPU1\tNV4\t X \tPXB\t0-9\n"
            "mlx5_0\tPXB\tPXB\t X \t\n")
    m = nvsmi.parse_topo_matrix(text)
    assert m.labels == ["GPU0", "GPU1", "mlx5_0"] and m.gpu_matrix() == [["X", "NV4"], ["NV4", "X"]]


def test_partial_nvlink_is_nvlink_with_a_warning():
    kind, worst, warnings = F.interconnect([["X", "NV4", "SYS"], ["NV4", "X", "SYS"], ["SYS", "SYS", "X"]])
    assert (kind, worst) == ("nvlink", "SYS") and "only some GPU pairs" in warnings[0]


def test_p2p_mixed_codes():
    assert F.p2p_status([["X", "OK", "CNS"], ["OK", "X", "CNS"], ["CNS", "CNS", "X"]], 3) == "partial (CNS)"
    assert F.p2p_status(None, 2) == "unknown"


@pytest.mark.parametrize("cc, family, sm", [
    ("9.0", "hopper", 90), ("10.0", "blackwell-datacenter", 100), ("12.0", "blackwell-consumer", 120),
    ("12.1", "blackwell-consumer", 121), ("8.0", "ampere", 80), ("8.6", "ampere", 86), ("8.9", "ada", 89),
    ("7.5", "unknown", 75), (None, "unknown", None),
])
def test_arch_family_and_sm(cc, family, sm):
    assert (F.arch_family(cc), F.sm_of(cc)) == (family, sm)


@pytest.mark.parametrize("name, cc", [
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"), ("NVIDIA GeForce RTX 5090", "12.0"),
    ("NVIDIA B200", "10.0"), ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA A100-SXM4-40GB", "8.0"),
    ("NVIDIA RTX 6000 Ada Generation", "8.9"), ("NVIDIA RTX A6000", "8.6"), ("Quadro RTX 6000", "7.5"),
    ("Tesla T4", "7.5"), ("Some Future GPU", None),
])
def test_name_table_for_drivers_without_compute_cap(name, cc):
    assert F.cc_from_name(name) == cc


# --- the other commands' parsers -------------------------------------------------------------------

def test_os_release():
    text = 'PRETTY_NAME="Ubuntu 24.04.3 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\n'
    assert hostinfo.parse_os_release(text) == {"PRETTY_NAME": "Ubuntu 24.04.3 LTS", "NAME": "Ubuntu",
                                            "VERSION_ID": "24.04", "ID": "ubuntu"}


def test_df_rows_follow_the_paths_asked():
    text = ("path root /\npath venv /opt/my venv\n"
            "Filesystem     1024-blocks     Used Available Capacity Mounted on\n"
            "/dev/vda         264212084 16881944  67091628      21% /\n"
            "/dev/nvme0n1p1  1000 10  990      1% /mnt/with space\n")
    got = hostinfo.parse_df(text)
    assert got["root"].model_dump() == {"path": "/", "mount": "/", "total_kib": 264212084,
                                        "avail_kib": 67091628}
    venv = got["venv"]
    assert (venv.path, venv.mount, venv.avail_kib) == ("/opt/my venv", "/mnt/with space", 990)


def test_df_that_lost_a_row_reports_nothing_rather_than_shifted_rows():
    got = hostinfo.parse_df("path root /\npath venv /x\n"
                         "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda 10 5 5 50% /\n")
    assert got["root"].avail_kib is None and got["venv"].avail_kib is None


def test_metadata_header_only():
    text = "Metadata-Version: 2.4\nName: torch\nVersion: 2.11.0\nSummary: x\n\nName: not-this\n"
    assert hostinfo.parse_metadata(text) == ("torch", "2.11.0")


def test_packages_section_with_editable_install():
    sp = "/v/lib/python3.12/site-packages"
    text = "\n".join([
        f"@sp {sp}", f"@dir {sp}/torch", f"@dir {sp}/nvidia/nccl",
        f"@file {sp}/torch-2.11.0.dist-info/METADATA", "Name: torch", "Version: 2.11.0",
        f"@file {sp}/nvidia_nccl_cu13-2.28.9.dist-info/METADATA", "Name: nvidia-nccl-cu13", "Version: 2.28.9",
        f"@file {sp}/sglang-0.5.9.dist-info/METADATA", "Name: sglang", "Version: 0.5.9",
        f"@file {sp}/sglang-0.5.9.dist-info/direct_url.json",
        '{"dir_info": {"editable": true}, "url": "file:///root/sglang/python"}',
        f"@file {sp}/flashinfer_python-0.6.3.dist-info/METADATA", "Name: flashinfer-python", "Version: 0.6.3",
    ])
    packages, warnings = hostinfo.parse_packages(text)
    assert {k: v.model_dump() for k, v in packages.items()} == {
        "torch": {"version": "2.11.0", "path": f"{sp}/torch", "editable": False},
        "nvidia-nccl-cu13": {"version": "2.28.9", "path": f"{sp}/nvidia/nccl", "editable": False},
        "sglang": {"version": "0.5.9", "path": "/root/sglang/python", "editable": True},
        "flashinfer-python": {"version": "0.6.3", "path": None, "editable": False},
    }
    assert warnings == [f"flashinfer-python 0.6.3: metadata found but no package folder in {sp}"]


def test_torch_version_py():
    text = ("__version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\n"
            "git_version = '70d9'\nhip: Optional[str] = None\n")
    assert hostinfo.parse_torch_version(text) == ("2.11.0+cu130", "13.0")
    assert hostinfo.parse_torch_version("__version__ = '2.4.0+cpu'\ncuda: Optional[str] = None\n") == (
        "2.4.0+cpu", None)
    assert hostinfo.parse_torch_version("__version__ = '2.1.0'\ncuda = '12.1'\n") == ("2.1.0", "12.1")


def test_torch_archs_as_found_in_libtorch_python():
    # exactly what grep found in torch 2.11.0+cu130 on the H200 device; torch.cuda.get_arch_list() agreed
    assert hostinfo.parse_torch_archs("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120\n") == [
        "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert hostinfo.parse_torch_archs("") is None


@pytest.mark.parametrize("archs, sm, runs", [
    (["sm_80", "sm_90"], 120, False), (["sm_90", "sm_100", "sm_120"], 120, True), (["sm_120"], 121, True),
    (["sm_90a"], 90, True), (["sm_90a"], 100, False), (["sm_80", "compute_90"], 120, True),
])
def test_torch_runs_on(archs, sm, runs):
    assert F.torch_runs_on(archs, sm) is runs


@pytest.mark.parametrize("text, dmi", [
    ("source=sysfs\nvendor=QEMU\nproduct=Standard PC (Q35 + ICH9, 2009)\n",
     ("QEMU", "Standard PC (Q35 + ICH9, 2009)", "sysfs")),
    ("source=dmidecode\nvendor=Supermicro\nproduct=SYS-821GE-TNHR\n",
     ("Supermicro", "SYS-821GE-TNHR", "dmidecode")),
    ("source=dmidecode\nvendor=/dev/mem: Permission denied\nproduct=/dev/mem: Permission denied\n",
     (None, None, "dmidecode")),
    ("source=hostnamectl\n Static hostname: h\n Hardware Vendor: QEMU\n"
     " Hardware Model: Standard PC _Q35 + ICH9, 2009_\n",
     ("QEMU", "Standard PC _Q35 + ICH9, 2009_", "hostnamectl")),
    ("", (None, None, None)),
])
def test_dmi_sources(text, dmi):
    got = hostinfo.parse_dmi(text)
    assert (got.vendor, got.product, got.source) == dmi


def test_unit_state():
    text = ("Unit=sglang.service\nLoadState=loaded\nActiveState=failed\nSubState=failed\n"
            "UnitFileState=enabled\nMainPID=0\n")
    assert hostinfo.parse_unit(text).model_dump() == {
        "name": "sglang.service", "load_state": "loaded", "active_state": "failed", "sub_state": "failed",
        "unit_file_state": "enabled", "main_pid": None}


def test_flashinfer_cache_listing():
    text = ("path /root/.cache/flashinfer\nexists\nws 0.6.3/120a\nop 0.6.3/120a/cached_ops/trtllm_comm\n"
            "ws cubins/abc\n")
    got = hostinfo.parse_flashinfer_cache(text)
    assert got.model_dump() == {"path": "/root/.cache/flashinfer", "exists": True,
                                "workspaces": ["0.6.3/120a"], "modules": ["0.6.3/120a/trtllm_comm"]}


@pytest.mark.parametrize("virt, vendor, product, verdict", [
    ("kvm", "QEMU", "Standard PC (Q35 + ICH9, 2009)", "KVM guest (QEMU Q35: Proxmox-style)"),
    ("kvm", "QEMU", "Standard PC (i440FX + PIIX, 1996)", "KVM guest (QEMU i440FX: no PCIe passthrough)"),
    ("none", "Supermicro", "SYS-821GE-TNHR", "bare metal"),
    ("microsoft", "QEMU", "Standard PC (Q35 + ICH9, 2009)", "microsoft guest (QEMU Q35: Proxmox-style)"),
    ("amazon", "Amazon EC2", "g6.48xlarge", "amazon guest"),
    ("systemd-nspawn", None, None, "container (systemd-nspawn)"),
    (None, "QEMU", "Standard PC (Q35 + ICH9, 2009)", "QEMU guest per DMI (QEMU Q35: Proxmox-style)"),
    (None, None, None, None),
])
def test_virt_verdict(virt, vendor, product, verdict):
    assert F.virt_verdict(virt, F.Dmi(vendor=vendor, product=product)) == verdict


# --- assembly: sections in, HostFacts out --------------------------------------------------------------

def sections(**named: tuple[int, str]) -> str:
    """Probe output as the script prints it, from {section name: (rc, text)}."""
    out = []
    for key, (rc, text) in named.items():
        name = key.replace("_", "-")
        out.append(f"@@fleet:begin {name}@@\n{text}\n@@fleet:end {name} rc={rc}@@")
    return "\n".join(out) + "\n" + probe.DONE + "\n"


def test_split_sections_keeps_text_exactly_and_marks_a_cut():
    out = "junk\n@@fleet:begin a@@\nx\n\n@@fleet:end a rc=0@@\n@@fleet:begin b@@\ny\n\n@@fleet:end b rc=3@@\n"
    out += "@@fleet:begin c@@\npartial"
    got = probe.split_sections(out)
    assert [(s.name, s.rc, s.text) for s in got] == [("a", 0, "x\n"), ("b", 3, "y\n"), ("c", None, "partial")]


def test_h200_sections_parse_to_facts():
    f = probe.parse(sections(query_gpu=(0, H200_QUERY), topo_m=(0, H200_TOPO), topo_p2p_r=(0, H200_P2P),
                             smi_version=(0, H200_VERSION), proc_driver=(0, H200_PROC),
                             virt=(127, "sh: 6: systemd-detect-virt: not found")), "h", "10.0.0.9")
    assert (f.ok, len(f.gpus), f.gpus[0].sm, f.arch_family) == (True, 1, 90, "hopper")
    assert (f.driver_version, f.cuda_version, f.interconnect, f.p2p) == ("580.159.04", "13.0", "none", "n/a")
    assert f.virtualization is None
    assert "virtualization unknown: systemd-detect-virt: command not found" in f.warnings


def test_old_driver_falls_back_to_name_table_banner_and_proc():
    rejected = 'Field "compute_cap" is not a valid field to query.\n'
    query = ("index, name, uuid, pci.bus_id, memory.total [MiB], power.draw [W], power.limit [W], "
             "driver_version, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, "
             "pcie.link.width.max\n"
             "0, NVIDIA A100-SXM4-40GB, GPU-1, 00000000:07:00.0, 40536, 52.10, 400.00, 470.82.01, "
             "4, 4, 16, 16\n"
             "1, NVIDIA A100-SXM4-40GB, GPU-2, 00000000:0F:00.0, 40536, 50.00, 400.00, 470.82.01, "
             "4, 4, 16, 16")
    topo = "        GPU0    GPU1    CPU Affinity\nGPU0     X      NV12    0-7\nGPU1    NV12     X      0-7\n"
    banner = "| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |"
    proc = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01  Thu Oct 28 2021\n"
    out = "\n".join([
        sections(query_gpu=(2, rejected)).replace(probe.DONE + "\n", ""),
        sections(query_gpu=(0, query), topo_m=(0, topo),
                 smi_version=(2, 'Option "--version" is not recognized.'),
                 smi_plain=(0, banner), proc_driver=(0, proc)),
    ])
    f = probe.parse(out, "old", "10.0.0.2")
    assert [(g.compute_cap, g.sm, g.compute_cap_source) for g in f.gpus] == [("8.0", 80, "name-table")] * 2
    got = (f.driver_version, f.cuda_version, f.arch_family, f.interconnect)
    assert got == ("470.82.01", "11.4", "ampere", "nvlink")
    assert "the driver's nvidia-smi rejects the field 'compute_cap'" in f.warnings
    assert any("taken from fleet's table of known names" in w for w in f.warnings)
    assert f.p2p == "unknown" and "no nvidia-smi topo -p2p r output" in f.warnings


def test_unknown_gpu_without_compute_cap_stays_none():
    query = "index, name, driver_version\n0, NVIDIA Mystery 9000, 470.82.01"
    f = probe.parse(sections(query_gpu=(0, query)), "h", "a")
    assert (f.gpus[0].compute_cap, f.gpus[0].sm, f.arch_family) == (None, None, "unknown")
    assert any("compute capability unknown" in w for w in f.warnings)


def test_gb10_memory_na_is_none_with_a_warning():
    query = "index, name, compute_cap, memory.total [MiB]\n0, NVIDIA GB10, 12.1, [N/A]"
    f = probe.parse(sections(query_gpu=(0, query)), "spark", "a")
    assert (f.gpus[0].memory_total_mib, f.gpus[0].sm, f.arch_family) == (None, 121, "blackwell-consumer")
    assert "nvidia-smi reports no memory.total for GPU 0" in f.warnings


def test_missing_nvidia_smi_is_one_warning():
    missing = "sh: 1: nvidia-smi: not found"
    out = sections(query_gpu=(127, missing), topo_m=(127, missing))
    f = probe.parse(out, "h", "a")
    assert f.ok and f.gpus == [] and "nvidia-smi not found: no GPU facts" in f.warnings
    assert not any("topo" in w for w in f.warnings)


def test_output_cut_short_is_a_warning_not_a_failure():
    out = sections(query_gpu=(0, H200_QUERY)).replace(probe.DONE, "") + "@@fleet:begin topo-m@@\n\tGPU0"
    f = probe.parse(out, "h", "a")
    assert f.ok and len(f.gpus) == 1
    assert any("ended early" in w for w in f.warnings)
    assert "nvidia-smi topo -m: output cut short" in f.warnings


def test_no_sections_is_a_failed_host():
    f = probe.parse("bash: sh: command not found\n", "h", "a")
    assert (f.ok, f.error) == (False, "probe printed no sections: 'bash: sh: command not found'")


def test_driver_library_mismatch_is_warned():
    out = sections(query_gpu=(0, H200_QUERY), proc_driver=(0, H200_PROC.replace("580.159.04", "580.126.20")))
    f = probe.parse(out, "h", "a")
    assert any("driver/library mismatch" in w for w in f.warnings)


def _blackwell_with(**versions: str) -> F.HostFacts:
    sp = "/v/lib/python3.12/site-packages"
    lines = [f"@sp {sp}"]
    for name, version in versions.items():
        dist = name.replace("-", "_")
        lines += [f"@file {sp}/{dist}-{version}.dist-info/METADATA", f"Name: {name}", f"Version: {version}"]
        lines += [f"@dir {sp}/{hostinfo.PACKAGE_DIRS[name]}"]
    query = "index, name, compute_cap\n0, NVIDIA GeForce RTX 5090, 12.0\n1, NVIDIA GeForce RTX 5090, 12.0"
    out = sections(query_gpu=(0, query), smi_version=(0, H200_VERSION.replace("13.0", "12.8")),
                   packages=(0, "\n".join(lines)), torch_version=(0, "cuda: Optional[str] = '12.6'\n"),
                   torch_archs=(0, "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90\n"))
    return probe.parse(out, "h", "a")


def test_known_bad_combinations_are_warned():
    f = _blackwell_with(**{"torch": "2.6.0", "nvidia-nccl-cu12": "2.26.2", "flashinfer-python": "0.6.3",
                           "flashinfer-jit-cache": "0.6.3"})
    assert (f.torch_cuda, f.nccl_version, f.flashinfer_jit_cache) == ("12.6", "2.26.2", True)
    assert f.torch_cuda_archs[-1] == "sm_90"
    text = "\n".join(f.warnings)
    assert "torch is built for CUDA 12.6: Blackwell (SM 10.x/12.x) needs CUDA >= 12.8" in text
    assert "torch was not built for SM 120" in text
    assert "NCCL 2.26.2 is known to break multi-GPU on Blackwell" in text
    assert "flashinfer-jit-cache is installed" in text and "source patches" in text


def test_torch_newer_than_the_driver_is_warned():
    f = _blackwell_with(torch="2.9.0")
    f.torch_cuda = "13.0"
    assert any("the driver supports CUDA 12.8 at most" in w for w in F.known_bad(f))
