"""sglang's log: every line classified, live or recorded, with the remedy a person should try next.

Holds the rules as data (rules: playbooks/rules/*.yaml), normalising a line (normalise), classification
(classify: lines to events to a verdict), the live watcher fed line by line (watch), startup phases and their
budgets (phases), remedies (remedies), secrets masked in printed lines (redact), the one journal follower on
its own SSH channel (journal), `inv logs` (follow), how much of a release's failures the rules name
(coverage), and which releases wrote a log: its clues (release, pure) matched against the corpus (releasefit); Wilson's
interval of a proportion (proportion: the held-out policy's, and the benches').

May use: fleet.playbook, fleet.host, fleet.ssh, fleet.upstream and the primitives; never fleet.patches.
"""
