"""SIMULATED torch for fleet's sandbox hosts: metadata, the few CUDA queries sglang's gates use, and the tensors
fleet's P2P data check moves between GPUs (torch._tensor).

Not PyTorch. `torch.version.cuda` says which CUDA the build "has"; `torch.cuda` answers from the
host's nvidia-smi (the sandbox stand-in) with CUDA_VISIBLE_DEVICES applied.
"""

from torch import cuda, version
from torch._tensor import Tensor, arange, empty
from torch.version import __version__

OutOfMemoryError = cuda.OutOfMemoryError  # prints as torch.OutOfMemoryError, like real torch

class AcceleratorError(RuntimeError):
    pass


AcceleratorError.__module__ = "torch"

float16 = "torch.float16"
bfloat16 = "torch.bfloat16"
float32 = "torch.float32"
int32 = "torch.int32"
int64 = "torch.int64"

__all__ = ["AcceleratorError", "OutOfMemoryError", "Tensor", "__version__", "arange", "cuda", "empty", "version"]
