"""Kernel builds decided by the real C preprocessor.

A simulated JIT build runs `cpp -P -D__CUDA_ARCH__=<arch> -I <flashinfer/data/include>` over each
source of the module (for every arch the JIT gate handed out), exactly the files a patch would have
edited, and collects the FLASHINFER_SIM_KERNEL markers that survive. A kernel is complete for an arch
when every marker whose range covers that arch (see PRISTINE) is present: a body compiled out by an
`#if` that excludes the arch means a kernel that launches and does nothing (garbage, no error).
A preprocessor error (a broken patch) is a failed build, as `ninja` would report it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

MARKER = re.compile(r"FLASHINFER_SIM_KERNEL\(\s*(\w+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")

# Every marker of the pristine 0.6.3 headers: name -> [lo, hi) range of archs that need the code.
# (tests/sim checks this list against the shipped headers.)
PRISTINE: dict[str, tuple[int, int]] = {
    "ar_st_flag_release": (700, 9999),
    "ar_st_flag_volatile": (0, 700),
    "ar_ld_flag_acquire": (700, 9999),
    "ar_ld_flag_volatile": (0, 700),
    "ar_oneshot_pdl_wait": (900, 9999),
    "ar_oneshot_pdl_trigger": (900, 9999),
    "ar_twoshot_pdl_wait": (900, 9999),
    "ar_twoshot_pdl_trigger": (900, 9999),
    "ar_lamport_oneshot_norm_body": (900, 9999),
    "ar_rms_norm_pdl_wait": (900, 9999),
    "ar_rms_norm_pdl_trigger": (900, 9999),
    "ar_rms_pre_post_norm_pdl_wait": (900, 9999),
    "ar_rms_pre_post_norm_pdl_trigger": (900, 9999),
    "ar_lamport_init_pdl_wait": (900, 9999),
    "ar_lamport_init_pdl_trigger": (900, 9999),
    "ar_oneshot_prenorm_pdl_wait": (900, 9999),
    "ar_oneshot_prenorm_pdl_trigger": (900, 9999),
    "fus_bf16_helper_0_fallback": (0, 800),
    "fus_bf16_helper_0_native": (800, 9999),
    "fus_bf16_helper_1_fallback": (0, 800),
    "fus_bf16_helper_1_native": (800, 9999),
    "fus_bf16_helper_2_fallback": (0, 800),
    "fus_bf16_helper_2_native": (800, 9999),
    "fus_bf16_helper_3_fallback": (0, 800),
    "fus_bf16_helper_3_native": (800, 9999),
    "fus_vec_ops": (800, 9999),
    "fus_bf16x2_add": (800, 9999),
    "fus_fp4_quant_0": (1000, 9999),
    "fus_fp4_quant_1": (1000, 9999),
    "fus_fp4_quant_2": (1000, 9999),
    "fus_fp4_quant_3": (1000, 9999),
    "fus_fp4_quant_4": (1000, 9999),
    "fus_sm90_section_0": (900, 9999),
    "fus_sm90_section_1": (900, 9999),
    "fus_sm90_section_2": (900, 9999),
    "fus_sm90_section_3": (900, 9999),
    "fus_sm90_section_4": (900, 9999),
    "fus_sm90_section_5": (900, 9999),
    "moe_bf16_helper_0_fallback": (0, 800),
    "moe_bf16_helper_0_native": (800, 9999),
    "moe_bf16_helper_1_fallback": (0, 800),
    "moe_bf16_helper_1_native": (800, 9999),
    "moe_bf16_helper_2_fallback": (0, 800),
    "moe_bf16_helper_2_native": (800, 9999),
    "moe_bf16_helper_3_fallback": (0, 800),
    "moe_bf16_helper_3_native": (800, 9999),
    "moe_vec_ops": (800, 9999),
    "moe_bf16x2_add": (800, 9999),
    "moe_fp4_quant_0": (1000, 9999),
    "moe_fp4_quant_1": (1000, 9999),
    "moe_fp4_quant_2": (1000, 9999),
    "moe_fp4_quant_3": (1000, 9999),
    "moe_sm90_section_0": (900, 9999),
    "moe_sm90_section_1": (900, 9999),
    "moe_sm90_section_2": (900, 9999),
    "moe_sm90_section_3": (900, 9999),
}


@dataclass
class BuildResult:
    ok: bool
    log: str = ""
    present: dict[int, set[str]] = field(default_factory=dict)  # arch (e.g. 1200) -> markers

    def missing(self, arch: int) -> list[str]:
        """Markers the kernels need on `arch` that the build compiled out."""
        have = self.present.get(arch, set())
        return sorted(n for n, (lo, hi) in PRISTINE.items() if lo <= arch < hi and n not in have)


def arch_number(arch: str) -> int:
    """'120a' / '90a' / '100f' -> the __CUDA_ARCH__ value (1200, 900, 1000)."""
    digits = re.match(r"\d+", arch)
    if digits is None:
        raise ValueError(f"bad arch {arch!r}")
    return int(digits.group(0)) * 10


def preprocess(sources: list[Path], include_dir: Path, archs: list[int]) -> BuildResult:
    cpp = shutil.which("cpp")
    if cpp is None:
        return BuildResult(ok=False, log="/bin/sh: 1: cpp: not found\n")
    result = BuildResult(ok=True)
    for arch in archs:
        found: set[str] = set()
        for src in sources:
            proc = subprocess.run(
                [cpp, "-P", f"-D__CUDA_ARCH__={arch}", "-I", str(include_dir), str(src)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if proc.returncode != 0:
                result.ok = False
                result.log += proc.stderr
                continue
            found.update(m.group(1) for m in MARKER.finditer(proc.stdout))
        result.present[arch] = found
    return result
