"""Common utilities (SIMULATED sglang 0.5.9): the device checks sglang's gates call.

As in v0.5.9 (FACTS.md §1): _check_cuda_device_version compares the device's major with a list
and torch.version.cuda with a minimum. The device is the current CUDA device as the simulated torch
reports it (nvidia-smi with CUDA_VISIBLE_DEVICES applied), so these run for real on each host.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import signal
import traceback

import torch

__all__ = [
    "configure_logger",
    "get_bool_env_var",
    "get_device_memory_capacity",
    "get_device_name",
    "get_device_sm",
    "get_exception_traceback",
    "is_blackwell_supported",
    "is_cuda",
    "is_cuda_alike",
    "is_flashinfer_available",
    "is_hopper_with_cuda_12_3",
    "is_sm90_supported",
    "is_sm100_supported",
    "is_sm120_supported",
    "kill_process_tree",
]


@functools.lru_cache(maxsize=1)
def is_cuda() -> bool:
    return torch.version.cuda is not None and torch.cuda.is_available()


def is_cuda_alike() -> bool:
    return is_cuda()


def get_bool_env_var(name: str, default: str = "false") -> bool:
    value = os.getenv(name, default)
    return value.lower() in ("true", "1")


def get_device_sm() -> int:
    if is_cuda():
        major, minor = torch.cuda.get_device_capability()
        return major * 10 + minor
    return 0


def get_device_name(device_id: int = 0) -> str:
    if is_cuda():
        return torch.cuda.get_device_name(device_id)
    return ""


def get_device_memory_capacity(device: str = "cuda") -> float | None:
    """Total memory of the first visible GPU in MB (None without a GPU)."""
    if not is_cuda():
        return None
    _, total = torch.cuda.mem_get_info(0)
    return total / (1 << 20)


def _check_cuda_device_version(device_capability_majors: list[int], cuda_version: tuple[int, int]) -> bool:
    if not is_cuda_alike():
        return False
    return (
        torch.cuda.get_device_capability()[0] in device_capability_majors
        and tuple(map(int, torch.version.cuda.split(".")[:2])) >= cuda_version
    )


@functools.lru_cache(maxsize=1)
def is_blackwell_supported(device=None) -> bool:
    return _check_cuda_device_version([10, 11, 12], (12, 8))


@functools.lru_cache(maxsize=1)
def is_sm120_supported(device=None) -> bool:
    return _check_cuda_device_version([12], (12, 8))


@functools.lru_cache(maxsize=1)
def is_sm100_supported(device=None) -> bool:
    return _check_cuda_device_version([10], (12, 8))


@functools.lru_cache(maxsize=1)
def is_sm90_supported(device=None) -> bool:
    return _check_cuda_device_version([9], (12, 3))


def is_hopper_with_cuda_12_3() -> bool:
    return is_sm90_supported()


@functools.lru_cache(maxsize=1)
def is_flashinfer_available() -> bool:
    return importlib.util.find_spec("flashinfer") is not None and is_cuda()


def get_exception_traceback() -> str:
    return "".join(traceback.format_exc())


def configure_logger(server_args=None, prefix: str = "") -> None:
    from sglang_sim_core.logs import configure_logger as _configure

    level = getattr(server_args, "log_level", None) or "info"
    _configure(prefix=prefix, level=level)


def kill_process_tree(parent_pid: int, include_parent: bool = True, skip_pid: int | None = None) -> None:
    """SIGKILL every descendant of parent_pid (and the parent itself when asked)."""
    children: list[int] = []
    try:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == parent_pid:
                children.append(int(entry))
    except OSError:
        pass
    for pid in children:
        if pid != skip_pid:
            kill_process_tree(pid, include_parent=True, skip_pid=skip_pid)
    if include_parent:
        try:
            os.kill(parent_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
