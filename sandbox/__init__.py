"""The sandbox fleet: real systemd + OpenSSH hosts in network namespaces, with simulated GPUs.

fleet's own code never imports this package; only tasks.py and the tests do.
"""
