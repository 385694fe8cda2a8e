"""SIMULATED torch for fleet's sandbox hosts: metadata and the few CUDA queries sglang's gates use.

Not PyTorch. `torch.version.cuda` says which CUDA the build "has"; `torch.cuda` answers from the
host's nvidia-smi (the sandbox stand-in) with CUDA_VISIBLE_DEVICES applied.
"""

from torch import cuda, version
from torch.version import __version__

OutOfMemoryError = cuda.OutOfMemoryError  # prints as torch.OutOfMemoryError, like real torch

class AcceleratorError(RuntimeError):
    pass


AcceleratorError.__module__ = "torch"

float16 = "torch.float16"
bfloat16 = "torch.bfloat16"
float32 = "torch.float32"

__all__ = ["AcceleratorError", "OutOfMemoryError", "__version__", "cuda", "version"]
