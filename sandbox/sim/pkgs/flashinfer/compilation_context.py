"""Which CUDA architectures JIT builds target (SIMULATED flashinfer 0.6.3).

TARGET_CUDA_ARCHS comes from FLASHINFER_CUDA_ARCH_LIST (space separated, e.g. "12.0" or "9.0a")
when set, else from torch.cuda.get_device_capability() of every visible device; majors >= 9 get
the `a` suffix. A JIT module asks for the architectures it supports and gets nvcc flags for the
targets among them, or the RuntimeError below when there are none.
"""

from __future__ import annotations

import logging
import os

import torch

logger = logging.getLogger("flashinfer.jit")


class CompilationContext:
    COMMON_NVCC_FLAGS = [
        "-DFLASHINFER_ENABLE_FP8_E8M0",
        "-DFLASHINFER_ENABLE_FP4_E2M1",
    ]

    def __init__(self) -> None:
        self.TARGET_CUDA_ARCHS: set[tuple[int, str]] = set()
        if "FLASHINFER_CUDA_ARCH_LIST" in os.environ:
            for arch in os.environ["FLASHINFER_CUDA_ARCH_LIST"].split(" "):
                if not arch:
                    continue
                major, minor = arch.split(".")
                self.TARGET_CUDA_ARCHS.add((int(major), str(minor)))
        else:
            try:
                for device in range(torch.cuda.device_count()):
                    major, minor = torch.cuda.get_device_capability(device)
                    minor_str = f"{minor}a" if major >= 9 else str(minor)
                    self.TARGET_CUDA_ARCHS.add((int(major), minor_str))
            except Exception as e:  # noqa: BLE001 - as upstream: keep going without targets
                logger.warning(f"Failed to get device capability: {e}.")

    def get_nvcc_flags_list(self, supported_major_versions: list[int] | None = None) -> list[str]:
        if supported_major_versions:
            supported_cuda_archs = [
                (major, minor) for major, minor in self.TARGET_CUDA_ARCHS if major in supported_major_versions
            ]
        else:
            supported_cuda_archs = list(self.TARGET_CUDA_ARCHS)
        if len(supported_cuda_archs) == 0:
            raise RuntimeError(
                f"No supported CUDA architectures found for major versions {supported_major_versions}."
            )
        return [
            f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"
            for major, minor in sorted(supported_cuda_archs)
        ] + self.COMMON_NVCC_FLAGS
