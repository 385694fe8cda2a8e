"""SIMULATED flashinfer 0.6.3 for fleet's sandbox hosts (not the real FlashInfer).

The files that matter sit where the real package keeps them: the JIT gates in flashinfer/jit/*.py,
the compilation context in flashinfer/compilation_context.py and the CUDA headers under
flashinfer/data/include/flashinfer/. The simulated sglang runs those gates and preprocesses those
headers, so an edit to them changes what the server does.
"""

__version__ = "0.6.3"
__git_version__ = "d0886ce2b"
