"""The SIMULATED sglang 0.5.9 / flashinfer 0.6.3 stack of the sandbox hosts (see README.md)."""
