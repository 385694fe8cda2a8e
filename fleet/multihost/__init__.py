"""Many hosts as one: rolling deploys, multi-node servers, router replicas, tune, status, patch runs.

Holds rolling deploys in batches (rolling; rollout: its pure plan), one server over N hosts (multinode), replicas
behind sglang's router (router; router_plan: pure; router_report: what a run did to the router, typed;
router_rollback: `inv rollback --router`), `inv bench` and `inv tune` (tune; `--slo`: slotune), `inv status` and its
watch (status, status_watch), and `inv patch` across hosts (patch).

May use: fleet.deploy and everything below it; never fleet.cli.
"""
