"""A deploy that preflight refused on every rung says its next step once: issue 46, finding 11, a newcomer's form
(h-new19). `inv deploy -H sbx2 -p glm5-nvfp4` on a 2-GPU host: `nothing changed`, then 8 paragraphs, one per rung,
each `expected READY, got PREFLIGHT; next: the evidence names the check (GPU arch missing from torch, disk full,
...)` (24 lines at 80 columns)."""

from __future__ import annotations

from fleet.cli import deploy_view
from fleet.deploy.results import Attempt, DeployResult

RUNGS = ["fusion-sm120", "no-fusion", "triton-moe", "no-custom-allreduce", "lower-mem-fraction",
         "higher-mem-fraction", "tp4-pp2", "safe"]


def test_rungs_refused_alike_share_one_next_step_naming_them_all():
    result = DeployResult("sbx2", "failed", error="sbx2: no rung of glm5-nvfp4 can run here; nothing was changed",
                          attempts=[Attempt(r, "PREFLIGHT", "TP x PP x DP = 8 GPUs, host has 2", 0) for r in RUNGS])
    (line,) = deploy_view.next_steps(result)
    assert line.startswith(f"[bold]sbx2[/] rungs {', '.join(RUNGS)}: expected READY, got [red]PREFLIGHT[/]; next: ")


def test_a_refusal_before_any_rung_names_the_host_not_a_rung_called_dash():
    result = DeployResult("sbx2", "failed", attempts=[Attempt("-", "PREFLIGHT", "packages: the playbook pins ...", 0)])
    (line,) = deploy_view.next_steps(result)
    assert line.startswith("[bold]sbx2[/]: expected READY, got [red]PREFLIGHT[/]; next: the evidence names")


def test_failures_of_other_classes_keep_a_line_each():
    result = DeployResult("sbx0", "failed", attempts=[
        Attempt("a", "HANG", "no progress for 12s in phase weight_load", 12.0),
        Attempt("b", "PREFLIGHT", "disk full: 0.1 GiB free on /", 0)])
    assert [line.split(":")[0] for line in deploy_view.next_steps(result)] == ["[bold]sbx0[/] rung a",
                                                                                "[bold]sbx0[/] rung b"]
