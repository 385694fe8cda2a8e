"""Source patches: the edits that lift SM90/SM100-only gates in installed sglang and flashinfer.

Holds the sets as data (sets: playbooks/patches/*.yaml), planning from a host's state (plan, pure), the engine
that checks, applies and reverts them on hosts (engine, with host/programs/patch_host.py), the audit of which
architecture gates still exclude an SM (audit, with host/programs/scan.py; kept: the gates upstream keeps off
an SM on purpose, as data), and both against upstream releases no host has yet (offline).

May use: fleet.host, fleet.ssh, fleet.upstream and the primitives; never fleet.logs.
"""
