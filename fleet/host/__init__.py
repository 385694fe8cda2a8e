"""One host, as fleet reads and writes it: what is there and what fleet keeps there.

Holds the probe (probe: the one script and its parser; sysinfo and nvsmi: pure parsers of what it prints; facts:
the typed result; probe_run: every host in parallel), the sglang unit (service; render: the unit and env file
from templates/), releases under /var/lib/fleet (releases), the host lock (lock), HTTP on the host (curl), the
journal (journal), what a dead run left (leftovers), the checks before a start (serverchecks), the benchmark's
round trip (benchrun), `inv exec` (execute), and the programs shipped to hosts as text (programs/: probe.sh,
status.sh, write.sh, patch_host.py, scan.py, launch.py).

The shell fleet runs on hosts is written here and in fleet.ssh only: the layers above call the session's verbs.

May use: fleet.ssh, fleet.upstream and the primitives.
"""
