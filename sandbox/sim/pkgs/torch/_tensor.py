"""SIMULATED tensors on the sandbox host's GPUs: what fleet's P2P data check does with them (arange, empty, integer
arithmetic with a scalar, a copy from one GPU to another, compare, sum). Not PyTorch.

A tensor keeps the recipe of its values (a function of the element's index), never the values: a 64 MiB buffer
copied between 8 GPUs costs nothing. Whether GPUs reach each other peer to peer is the profile's
`nvidia-smi topo -p2p r` (sglang_sim_core.device), as the driver would say it; on a profile with `p2p_broken: true`
a peer copy hangs, as such VFIO setups do (FORMAT.md). Copies that go through the host are right.
"""

from __future__ import annotations

import threading

_INT32 = 1 << 32


def _wrap32(value: int) -> int:
    """int32 arithmetic as the GPU does it: two's complement, wrapping."""
    value %= _INT32
    return value - _INT32 if value >= 1 << 31 else value


class Tensor:
    def __init__(self, numel: int, device: int, dtype: str, recipe: tuple) -> None:
        self.numel, self.device, self.dtype, self._recipe = numel, device, dtype, recipe

    def __repr__(self) -> str:
        return f"tensor(<{self.numel} values>, device='cuda:{self.device}', dtype={self.dtype})"

    def _value(self, i: int) -> int:
        return _evaluate(self._recipe, i)

    def _scalar(self, op: str, k: int) -> Tensor:
        return Tensor(self.numel, self.device, self.dtype, (op, self._recipe, int(k)))

    def __mul__(self, k: int) -> Tensor:
        return self._scalar("mul", k)

    def __add__(self, k: int) -> Tensor:
        return self._scalar("add", k)

    def __and__(self, k: int) -> Tensor:
        return self._scalar("and", k)

    __rmul__, __radd__, __rand__ = __mul__, __add__, __and__

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]
        if not isinstance(other, Tensor):
            return NotImplemented
        _same_device(self, other)
        if self.numel != other.numel:
            raise RuntimeError(f"The size of tensor a ({self.numel}) must match the size of tensor b ({other.numel}) "
                               "at non-singleton dimension 0")
        return Tensor(self.numel, self.device, "torch.bool", ("ne", self._recipe, other._recipe))

    def sum(self) -> Tensor:
        return Tensor(1, self.device, "torch.int64", ("sum", self._recipe, self.numel))

    def item(self) -> int:
        if self.numel != 1:
            raise RuntimeError(f"a Tensor with {self.numel} elements cannot be converted to Scalar")
        return self._value(0)

    def tolist(self) -> list[int]:
        return [self._value(i) for i in range(self.numel)]

    def copy_(self, src: Tensor) -> Tensor:
        if src.numel != self.numel:
            raise RuntimeError(f"The size of tensor a ({self.numel}) must match the size of tensor b ({src.numel}) "
                               "at non-singleton dimension 0")
        if src.device != self.device:
            _hang_if_broken(src.device, self.device)
        self._recipe = src._recipe
        return self

    def to(self, device: object) -> Tensor:
        target = _device_index(device)
        if target != self.device:
            _hang_if_broken(self.device, target)
        return Tensor(self.numel, target, self.dtype, self._recipe)


def _evaluate(recipe: tuple, i: int) -> int:
    op = recipe[0]
    if op == "arange":
        return _wrap32(i)
    if op == "fill":
        return recipe[1]
    if op == "mul":
        return _wrap32(_evaluate(recipe[1], i) * _wrap32(recipe[2]))
    if op == "add":
        return _wrap32(_evaluate(recipe[1], i) + recipe[2])
    if op == "and":
        return _evaluate(recipe[1], i) & recipe[2]
    if op == "ne":
        return int(recipe[1] != recipe[2] and _evaluate(recipe[1], i) != _evaluate(recipe[2], i))
    if op == "sum":  # a tensor compared with a copy of itself has nothing to count; else element by element
        inner = recipe[1]
        if inner[0] == "ne" and inner[1] == inner[2]:
            return 0
        return sum(_evaluate(inner, k) for k in range(recipe[2]))
    raise RuntimeError(f"simulated torch: no value for {op}")


def _device_index(device: object) -> int:
    from torch import cuda

    text = str(device)
    index = int(text.partition(":")[2] or cuda.current_device()) if text.startswith("cuda") else int(text)
    cuda.physical_index(index)  # an ordinal the host does not have fails as CUDA says it
    return index


def _same_device(a: Tensor, b: Tensor) -> None:
    if a.device != b.device:
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                           f"{_cuda(a.device)} and {_cuda(b.device)}!")


def _cuda(index: int) -> str:
    return f"cuda:{index}"


def _hang_if_broken(src: int, dst: int) -> None:
    """A peer copy on a host whose P2P reads OK but is broken never ends (the check's timeout kills it)."""
    from sglang_sim_core import env

    from torch import cuda

    if env.profile_switches().get("p2p_broken") and cuda.can_device_access_peer(src, dst):
        threading.Event().wait()


def arange(end: int, dtype: str = "torch.int64", device: object = "cpu") -> Tensor:
    return Tensor(int(end), _device_index(device), dtype, ("arange",))


def empty(numel: int, dtype: str = "torch.float32", device: object = "cpu") -> Tensor:
    return Tensor(int(numel), _device_index(device), dtype, ("fill", 0))  # uninitialised memory: zeros here
