"""Attention JIT modules (SIMULATED flashinfer 0.6.3)."""
