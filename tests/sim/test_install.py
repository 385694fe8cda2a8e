"""The installer, the installed metadata and the files that must sit where the real ones do."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

from simhost import REPO

from sandbox.sim import install as installer

CONDITIONS = REPO / "sandbox/sim/data/flashinfer_arch_conditions.txt"
GREP = re.compile(r"__CUDA_ARCH__|SM >= |supported_major_versions")


def _metadata(site: Path) -> dict:
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d: [m.version(d), m.distribution(d).read_text('top_level.txt').split()] "
        "for d in ['sglang', 'flashinfer-python', 'torch', 'sglang-sim-core']}))"
    )
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(site)}, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def test_installed_packages_report_the_real_release_versions(sim_site):
    assert _metadata(sim_site) == {
        "sglang": ["0.5.9", ["sglang"]],
        "flashinfer-python": ["0.6.3", ["flashinfer"]],
        "torch": ["2.9.1+cu130", ["torch"]],
        "sglang-sim-core": ["0.1.0", ["sglang_sim_core"]],
    }
    meta = (sim_site / "sglang-0.5.9.dist-info" / "METADATA").read_text()
    assert "SIMULATED" in meta


def test_record_lists_every_installed_file_with_its_hash(sim_site):
    for info in sim_site.glob("*.dist-info"):
        package = (info / "top_level.txt").read_text().strip()
        listed = {}
        for line in (info / "RECORD").read_text().splitlines():
            path, digest, size = line.rsplit(",", 2)
            listed[path] = (digest, size)
        files = {str(p.relative_to(sim_site)) for p in (sim_site / package).rglob("*") if p.is_file()}
        assert files <= set(listed), files - set(listed)
        for path, (digest, size) in listed.items():
            if not digest:
                continue
            data = (sim_site / path).read_bytes()
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data), path


def test_cli_installs_into_a_venv_with_the_flashinfer_console_script(tmp_path):
    venv = tmp_path / "ml-env"
    site = venv / "lib" / "python3.11" / "site-packages"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    old = site / "sglang-0.5.8.dist-info"
    old.mkdir(parents=True)
    (old / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.8\n")
    for _ in range(2):  # reinstalling replaces, never duplicates
        proc = subprocess.run([sys.executable, "-m", "sandbox.sim.install", str(site)], cwd=REPO,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in site.glob("*.dist-info")) == [
        "flashinfer_python-0.6.3.dist-info", "sglang-0.5.9.dist-info",
        "sglang_sim_core-0.1.0.dist-info", "torch-2.9.1+cu130.dist-info",
    ]
    script = venv / "bin" / "flashinfer"
    assert script.read_text().startswith(f"#!{venv / 'bin' / 'python'}\n")
    assert "../../../bin/flashinfer" in (site / "flashinfer_python-0.6.3.dist-info" / "RECORD").read_text()
    usage = subprocess.run([sys.executable, "-m", "sandbox.sim.install"], cwd=REPO, capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def _listing(version: str) -> dict[str, list[str]]:
    """`grep -n` lines per header (and comm.py) of one release in flashinfer_arch_conditions.txt."""
    text = CONDITIONS.read_text()
    section = text.split(f"================ {version} ")[1].split("================")[0]
    out: dict[str, list[str]] = {}
    current = None
    for line in section.splitlines():
        m = re.match(r"--- (?:include/flashinfer/comm/(\S+)|flashinfer/jit/comm\.py)", line)
        if m:
            current = m.group(1) or "comm.py"
            out[current] = []
        elif current and re.match(r"\d+[:-]", line):
            out[current].append(line)
    return out


def test_headers_carry_flashinfer_063_gates_verbatim_on_upstream_line_numbers(sim_site):
    listing = _listing("v0.6.3")
    comm = sim_site / "flashinfer/data/include/flashinfer/comm"
    for name in ("trtllm_allreduce.cuh", "trtllm_allreduce_fusion.cuh", "trtllm_moe_allreduce_fusion.cuh"):
        lines = (comm / name).read_text().splitlines()
        ours = [f"{i}:{line}" for i, line in enumerate(lines, 1) if GREP.search(line)]
        upstream = [ln for ln in listing[name] if GREP.search(ln)]
        assert ours == upstream, name
        for entry in listing[name]:
            number, _, text = entry.partition(":")
            assert lines[int(number) - 1] == text, entry
    assert sum("< 1200" in ln for ln in (comm / "trtllm_allreduce.cuh").read_text().splitlines()) == 13


def test_jit_gate_sits_at_line_61_of_flashinfer_jit_comm_py(sim_site):
    lines = (sim_site / "flashinfer/jit/comm.py").read_text().splitlines()
    assert lines[58] == "def gen_trtllm_comm_module() -> JitSpec:"
    assert lines[59] == "    nvcc_flags = current_compilation_context.get_nvcc_flags_list("
    assert lines[60] == "        supported_major_versions=[9, 10]"
    assert sum("supported_major_versions=[" in ln for ln in lines) == 1


def test_sglang_gates_sit_on_v059_line_numbers(sim_site):
    comm = (sim_site / "sglang/srt/layers/communicator.py").read_text().splitlines()
    assert comm[71] == "_is_sm90_supported = _is_cuda and is_sm90_supported()"
    assert comm[72] == "_is_sm100_supported = _is_cuda and is_sm100_supported()"
    assert comm[87] == "FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048"
    assert comm[90] == "def apply_flashinfer_allreduce_fusion(batch_size: int):"
    assert comm[94] == "        (_is_sm90_supported or _is_sm100_supported)"
    server_args = (sim_site / "sglang/srt/server_args.py").read_text()
    assert server_args.count("and (is_sm90_supported() or is_sm100_supported())") == 1


def test_kernel_markers_of_the_pristine_headers_match_the_simulators_list(sim_site):
    sys.path.insert(0, str(REPO / "sandbox/sim/pkgs"))
    try:
        from sglang_sim_core import kernels
    finally:
        sys.path.pop(0)
    found = {}
    for path in (sim_site / "flashinfer/data/include/flashinfer/comm").glob("*.cuh"):
        for m in kernels.MARKER.finditer(path.read_text()):
            found[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    assert found == kernels.PRISTINE


def test_installer_has_the_agreed_signature():
    import inspect

    sig = inspect.signature(installer.install)
    assert list(sig.parameters) == ["site_packages"]
    assert sig.return_annotation in (None, "None")
