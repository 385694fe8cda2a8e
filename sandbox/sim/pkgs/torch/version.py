"""SIMULATED torch build metadata (fleet sandbox)."""

__version__ = "2.9.1+cu130"
cuda = "13.0"
git_version = "0000000000000000000000000000000000000000"
hip = None
debug = False
