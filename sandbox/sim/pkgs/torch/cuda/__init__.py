"""SIMULATED torch.cuda: device queries answered from nvidia-smi (fleet sandbox)."""

from __future__ import annotations

from sglang_sim_core import device as _device

_CUDA_ERROR_TAIL = (
    "\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
    "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)

_current = 0


def _gpus() -> list[_device.Gpu]:
    return _device.visible_gpus()


def is_available() -> bool:
    return len(_gpus()) > 0


def device_count() -> int:
    return len(_gpus())


def _get(device: int | None) -> _device.Gpu:
    gpus = _gpus()
    if not gpus:
        raise RuntimeError(_device.NO_DRIVER)
    idx = _current if device is None else int(device)
    if idx < 0 or idx >= len(gpus):
        raise RuntimeError("CUDA error: invalid device ordinal" + _CUDA_ERROR_TAIL)
    return gpus[idx]


def get_device_capability(device: int | None = None) -> tuple[int, int]:
    gpu = _get(device)
    return gpu.major, gpu.minor


def get_device_name(device: int | None = None) -> str:
    return _get(device).name


def set_device(device: int) -> None:
    global _current
    _get(int(device))
    _current = int(device)


def current_device() -> int:
    return _current


def physical_index(device: int | None = None) -> int:
    """The nvidia-smi index behind a CUDA ordinal (simulator helper, not a torch API)."""
    return _get(device).index


def can_device_access_peer(device: int, peer_device: int) -> bool:
    """What the driver says of P2P between two GPUs: the profile's `nvidia-smi topo -p2p r` (OK, or CNS, GNS ...)."""
    a, b = _get(device).index, _get(peer_device).index
    return a != b and _device.p2p_ok([a, b])


def synchronize(device: int | None = None) -> None:
    _get(device)  # nothing runs asynchronously here; an ordinal the host lacks still fails


def mem_get_info(device: int | None = None) -> tuple[int, int]:
    from sglang_sim_core import livestate

    gpu = _get(device)
    used = sum(a.used_mib for a in livestate.live_apps() if a.gpu_index == gpu.index)
    total = gpu.memory_mib * 2**20
    return max(0, total - used * 2**20), total


class OutOfMemoryError(RuntimeError):
    """CUDA out of memory."""


OutOfMemoryError.__module__ = "torch"
