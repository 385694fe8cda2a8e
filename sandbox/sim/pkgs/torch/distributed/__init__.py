"""SIMULATED torch.distributed: only the error classes sglang's multi-node start-up raises (torch 2.9).

Not PyTorch. The classes print as `torch.distributed.DistStoreError` etc., as the real ones do
(torch/distributed/__init__.py re-exports them from torch._C._distributed_c10d).
"""


class DistError(RuntimeError):
    pass


class DistBackendError(DistError):
    pass


class DistNetworkError(DistError):
    pass


class DistStoreError(DistError):
    pass


for _cls in (DistError, DistBackendError, DistNetworkError, DistStoreError):
    _cls.__module__ = "torch.distributed"

__all__ = ["DistBackendError", "DistError", "DistNetworkError", "DistStoreError"]
