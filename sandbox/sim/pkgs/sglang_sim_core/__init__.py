"""sglang_sim_core: the engine room of the SIMULATED sglang 0.5.9 / flashinfer 0.6.3 stack.

Installed next to the simulated ``sglang``, ``flashinfer`` and ``torch`` packages on sandbox hosts by
``sandbox/sim/install.py``. Nothing here talks to a GPU: it reads the host's GPUs from ``nvidia-smi``
(a stand-in that answers from the host's profile), decides behaviour from the table in
``behaviour.py`` and keeps the live GPU state (``livestate.py``) that the stand-in reports.
Standard library only.
"""

__version__ = "0.1.0"
