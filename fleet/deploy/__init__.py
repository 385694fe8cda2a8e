"""One host's deploy, rollback and recovery: the flow of `inv deploy` after its inputs are checked.

Holds the inputs checked before any host is contacted (inputs), preflight, the rung ladder (ladder), a release's
files onto the host and the fall-back (restore), a release's life (release_run), what a dead run left (recovery),
rollback and history (rollback), health, the bench and its gate (bench, perfgate, noise), the known-good rung per
hardware fingerprint (fingerprint), the typed results (results), and the parts of `inv tune --slo`: the promise
and its bootstrap (slo), the load search (loadsearch) and one load point (loadprobe), the search space per release
(searchspace) and the next trial (trials).

May use: fleet.logs, fleet.patches, fleet.playbook, fleet.host, fleet.ssh, fleet.upstream and the primitives.
"""
