"""`--wide` on the views of probe, history, deploy and its rollout and router, bench, tune and exec: without it no
line is longer than the terminal (60, 80 or 200 columns); with it nothing is cut or shortened, however narrow the
terminal: the long host name, rung, playbook, evidence line or output line appears whole on one line. Results are
built from recorded outputs: the shipped hardware profiles' probe output, tests/fixtures/status and bench, the
profile's `nvidia-smi -L`."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from fleet.cli import deploy_view, execute, fit, probe_view
from fleet.cli.deploy import render_router
from fleet.deploy import bench
from fleet.deploy.noise import Runs
from fleet.deploy.results import Attempt, DeployResult
from fleet.host import facts as F
from fleet.host import probe
from fleet.host.releases import Release
from fleet.inventory import Host
from fleet.multihost.router_report import RouterReport, RouterRun
from fleet.multihost.tune import TuneResult
from fleet.outcomes import DeployStatus
from fleet.parallel import HostOutcome
from fleet.ssh.remote import CommandResult

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests/fixtures"
PROFILES = REPO / "sandbox/profiles"
LONG_HOST = "gpu-node-rtx-pro-6000-blackwell-rack07-slot03.site.example"  # past every host column's cap
LONG_RUNG = "fusion-sm120-allreduce-with-a-long-rung-name"
LONG_BOOK = "glm5-nvfp4-blackwell-pcie-site-playbook"


def _profiles_module():
    """The probe-output assembler of the profile tests (the script's output on a host of a shipped profile)."""
    spec = importlib.util.spec_from_file_location("probe_profiles_under_test",
                                                  REPO / "tests/unit/host/test_probe_profiles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETTINGS = bench.BenchSettings(playbook="glm5", model="/models/m", backend="sglang", dataset="random-ids",
                               input_len=128, output_len=64, num_prompts=128, max_concurrency=64)


def drawn(width: int, draw: Callable[[Console], None]) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    draw(console)
    return console.export_text().splitlines()


def one_line_with(lines: list[str], *whole: str) -> None:
    for text in whole:
        assert any(text in line for line in lines), f"{text!r} not whole on one line of:\n" + "\n".join(lines)


def probed() -> list[F.HostFacts]:
    assemble = _profiles_module().assemble
    seed = probe.parse(assemble(PROFILES / "rtx-pro-6000-x8-proxmox"), LONG_HOST, "10.0.0.1")
    h100 = probe.parse(assemble(PROFILES / "h100-sxm-x8"), "h100", "10.0.0.2")
    down = F.HostFacts.failed("down", "10.0.0.3", "10.0.0.3:22: connection timed out after 5 s [/] (no answer "
                                                  "to the SSH banner; the host may be down or the port filtered)")
    return [seed, h100, down]


def recorded_deploy(host: str = LONG_HOST) -> DeployResult:
    d = json.loads((FIXTURES / "status/deploy-sbx0.json").read_text())
    return DeployResult(host=host, status=d["status"], release=d["release"], config={**d["config"], "rung": LONG_RUNG},
                        attempts=[Attempt(LONG_RUNG if a["rung"] == "no-fusion" else a["rung"], a["outcome"],
                                          a["evidence"], a["seconds"], bench.stored(a.get("bench")))
                                  for a in d["attempts"]],
                        error=d["error"])


def releases() -> list[Release]:
    d = json.loads((FIXTURES / "status/deploy-sbx0.json").read_text())
    older = Release(id=d["release"], host="sbx0", playbook=LONG_BOOK, playbook_sha256="x",
                    created="2026-12-02T14:33:05+00:00", status="ok", rung=LONG_RUNG, attempts=d["attempts"],
                    facts={"versions": {"sglang": "0.5.12.post1", "flashinfer-python": "0.6.15.post1"}})
    broken = Release(id="20261202T151500Z-0001", host="sbx0", playbook="glm5-nvfp4", playbook_sha256="x",
                     created="2026-12-02T15:15:00+00:00", status="rolled_back", rung=None,
                     attempts=[{"rung": "fusion-sm120", "outcome": "TMA_FAILURE"}])
    return [older, broken]


def bench_record() -> bench.BenchRecord:
    result = bench.parse((FIXTURES / "bench/sglang-v0.5.9.txt").read_text())
    power = bench.parse_power((FIXTURES / "bench/nvidia-smi-samples.txt").read_text())
    return bench.BenchRecord(result=result, power=power, settings=SETTINGS)


def tuned() -> TuneResult:
    record = bench_record()
    attempts = [Attempt("fusion-sm120", "TMA_FAILURE", recorded_deploy().attempts[0].evidence, 8.9),
                Attempt(LONG_RUNG, "READY", "healthy", 9.2,
                        replace(record, runs=Runs((3521, 3553, 3611), 3300)))]
    return TuneResult(LONG_HOST, DeployStatus.OK, "20261202T143305Z-2707", LONG_RUNG, 3553.0, 45.0,
                      (f"{LONG_RUNG}: the first to serve, 3,553 tok/s",), attempts, fingerprint="9f3c1a2b")


def host(name: str, address: str) -> Host:
    return Host(name=name, address=address, port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
                source=Path("hosts.yaml"))


L_TXT = (PROFILES / "rtx-pro-6000-x8-proxmox/nvidia-smi/L.txt").read_text()
EXECUTED = [HostOutcome(host(LONG_HOST, "10.0.0.1"), True, CommandResult("nvidia-smi -L", 0, L_TXT, ""), None, 0.4),
            HostOutcome(host("sbx1", "10.0.0.2"), False, None,
                        "10.0.0.2:22: connection refused (is sshd running on the host, and is the port right?)", 0.1)]
ROUTER = RouterReport(RouterRun.DRY_RUN, "router-node", DeployStatus.DRY_RUN, "sglang-router",
                      config={"workers": [f"http://10.0.0.{i}:30000" for i in range(1, 9)]},
                      diff="+ExecStart=/opt/venv/bin/python -m sglang_router.launch_router --host 0.0.0.0 --port "
                           "30000 --worker-urls http://10.0.0.1:30000 http://10.0.0.2:30000 --policy cache_aware\n")


def _rollout(console: Console, wide: bool) -> None:
    skipped = DeployResult(host="sbx-second-host-of-batch-two-in-rack07", status=DeployStatus.SKIPPED,
                           error="not deployed: the rollout stopped after batch 1 (more than 0 hosts failed, "
                                 "--max-fail 0)")
    deploy_view.render_rollout([recorded_deploy(), skipped], {LONG_HOST: 1, skipped.host: 2}, {LONG_HOST: 18.1},
                               "batch 1: 1 host failed", console, wide)


# view -> (draw(console, wide), what a narrow view may shorten or fold, which --wide must show whole on one line)
VIEWS: dict[str, tuple[Callable[[Console, bool], None], list[str]]] = {
    "probe": (lambda c, w: probe_view.render(probed(), c, w),
              [LONG_HOST, "8x RTX PRO 6000 Blackwell (SM 12.0), PCIe only (PHB), P2P refused (CNS), KVM guest",
               "down: 10.0.0.3:22: connection timed out after 5 s [/] (no answer to the SSH banner; the host may be "
               "down or the port filtered)"]),
    "history": (lambda c, w: deploy_view.render_history("sbx0", releases(), releases()[0].id, c, True, w),
                [LONG_RUNG, LONG_BOOK, "0.5.12.post1/0.6.15.post1", "TMA_FAILURE"]),
    "deploy": (lambda c, w: deploy_view.render(recorded_deploy(), c, w),
               [f"{LONG_HOST}: ok, release 20261202T143305Z-2707, rung {LONG_RUNG}", LONG_RUNG,
                "1. fusion-sm120: " + recorded_deploy().attempts[0].evidence,
                "next: run MoE on triton (--moe-runner-backend triton) or disable flashinfer autotune"]),
    "rollout": (_rollout, [LONG_HOST, "20261202T143305Z-2707", "sbx-second-host-of-batch-two-in-rack07: not "
                           "deployed: the rollout stopped after batch 1 (more than 0 hosts failed, --max-fail 0)",
                           "2 hosts in 2 batches: 1 ok, 1 skipped; stopped: batch 1: 1 host failed"]),
    "router": (lambda c, w: render_router(ROUTER, c, w),
               ["workers: " + " ".join(ROUTER.shown_workers()), ROUTER.diff.strip()]),
    "bench": (lambda c, w: deploy_view.render_bench(LONG_HOST, "20261202T143305Z-2707", LONG_RUNG, bench_record(),
                                                    None, c, w),
              [f"{LONG_HOST}: release 20261202T143305Z-2707, rung {LONG_RUNG}: ", "prompts of 128+64 tokens, "
               "concurrency 64", f"{LONG_HOST}: GPUs during the run"]),
    "tune": (lambda c, w: deploy_view.render_tune(tuned(), c, wide=w),
             [f"{LONG_HOST}: ok, winner {LONG_RUNG} at 3,553 tok/s", LONG_RUNG, "TMA_FAILURE",
              "1. fusion-sm120: " + recorded_deploy().attempts[0].evidence]),
    "exec": (lambda c, w: execute.report(EXECUTED, False, w, c),
             [LONG_HOST, *L_TXT.splitlines(), "10.0.0.2:22: connection refused (is sshd running on the host, and is "
                                              "the port right?)"]),
}


@pytest.mark.parametrize("width", [60, 80, 200])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_without_wide_no_line_is_longer_than_the_terminal(view, width):
    draw, _ = VIEWS[view]
    lines = drawn(width, lambda c: draw(c, False))
    assert lines and max(len(line) for line in lines) <= width, "\n".join(line for line in lines if len(line) > width)


@pytest.mark.parametrize("width", [60, 200])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_with_wide_nothing_is_cut_however_narrow_the_terminal(view, width):
    draw, whole = VIEWS[view]
    lines = drawn(width, lambda c: draw(c, True))
    assert not any("…" in line for line in lines), "\n".join(lines)
    one_line_with(lines, *whole)
    if width == 60:  # it took the room it needed instead of folding
        assert max(len(line) for line in lines) > 60


def test_the_narrow_views_shorten_or_fold_what_wide_shows_whole():
    """The test above would pass on a view that ignored --wide and printed everything whole at any width."""
    for view in ("probe", "history", "deploy", "exec"):
        draw, whole = VIEWS[view]
        lines = drawn(60, lambda c, draw=draw: draw(c, False))
        assert not all(any(text in line for line in lines) for text in whole), view


@pytest.mark.parametrize("width", [60, 80])
def test_the_rollout_keeps_each_release_id_whole_at_any_width(width):
    lines = drawn(width, lambda c: _rollout(c, False))
    table = lines[next(i for i, line in enumerate(lines) if line.strip() == "rollout"):]
    row = next(line for line in table if line.startswith("gpu-node-rtx-pro-6000-"))
    assert "20261202T143305Z-2707" in row.split() and "ok" in row.split()


def test_wide_exec_prints_a_hosts_lines_as_sent_and_never_pads_them_to_its_longest():
    """A host's one very long line among many short ones: each line once, prefixed by the host, not a table
    padding every line to the longest (100 kB x 2,000 lines would be 200 MB); its escapes and markup shown, not
    obeyed."""
    hostile = "x" * 100_000 + "\n" + "\n".join(f"short {i} [red]\x1b[2J" for i in range(2000)) + "\n"
    outcome = HostOutcome(host("evil", "10.0.0.9"), True, CommandResult("cat", 3, hostile, "boom\n"), None, 0.1)
    err = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    lines = drawn(80, lambda c: execute.report([outcome], False, True, c, err))
    assert sum(len(line) for line in lines) < 200_000
    assert lines[:2] == ["0/1 hosts ok", "evil (10.0.0.9): exit 3"] and lines[2] == "evil: " + "x" * 100_000
    assert lines[3] == "evil: short 0 [red]\\x1b[2J" and len(lines) == 2003
    # the command's stderr on stderr, as pdsh keeps them apart (it was on stdout: `inv exec --wide > f` got it)
    assert lines[-1] == "evil: short 1999 [red]\\x1b[2J" and err.export_text().splitlines() == ["evil: boom"]


def test_wide_history_bounds_a_huge_value_a_host_sent_instead_of_padding_every_row_to_it():
    """A manifest naming a 1 MB playbook beside 500 releases: its cell is cut at fit.WIDE_MAX, not 500 MB drawn."""
    base = releases()[1]
    many = [Release(id=f"20261202T15{i // 60 % 60:02d}{i % 60:02d}Z-{i:04x}", host="sbx0", playbook="p",
                    playbook_sha256="x", created=base.created, status="ok", rung="r", attempts=[]) for i in range(500)]
    many[0].playbook = "p" * 1_000_000
    lines = drawn(80, lambda c: deploy_view.render_history("sbx0", many, None, c, False, True))
    assert len(lines) == 502 and max(len(line) for line in lines) < fit.WIDE_MAX + 200
    assert "p" * (fit.WIDE_MAX - 1) + "…" in lines[2]


def test_a_raw_table_is_printed_at_its_full_measured_width_title_and_caption_included():
    from rich.table import Table

    table = Table(title="t" * 70, caption="c" * 90)
    table.add_column("a")
    table.add_row("x" * 75)
    console = Console(width=40, record=True, file=io.StringIO(), color_system=None)
    assert fit.measured(console, table) == 90
    fit.emit(console, table, wide=True)
    lines = console.export_text().splitlines()
    assert "t" * 70 in lines[0] and any("x" * 75 in line for line in lines) and any("c" * 90 in line for line in lines)
    assert console.width == 40  # the console's own width is given back
    fit.emit(console, table)
    assert all(len(line) <= 40 for line in console.export_text().splitlines())


def test_a_long_caption_never_pads_out_the_columns_with_wide():
    """The newcomer's second hour: `inv probe --wide` with one host unreachable drew every row 174 columns wide,
    each column padded out to the length of the error sentence under the table."""
    from rich.table import Table

    table = Table(caption="sbx1: " + "timed out " * 16, box=None)
    table.add_column("host")
    table.add_column("GPUs")
    table.add_row("sbx0", "8x B200")
    console = Console(width=40, record=True, file=io.StringIO(), color_system=None)
    fit.emit(console, table, wide=True)
    lines = console.export_text().splitlines()
    row = next(line for line in lines if line.strip().startswith("sbx0"))
    assert len(row) < 20, row
    assert any(line.startswith("sbx1: timed out") and len(line.rstrip()) > 150 for line in lines), lines


def test_a_probe_error_that_looks_like_markup_is_shown_as_sent():
    """Host text in the caption is data: `[/]` from a host neither vanishes nor raises a MarkupError."""
    assert "connection timed out after 5 s [/] (no" in "\n".join(drawn(80, lambda c: probe_view.render(probed(), c)))
    one_line_with(drawn(80, lambda c: probe_view.render(probed()[2:], c, True)), VIEWS["probe"][1][2])


def test_every_task_with_a_table_offers_wide_with_the_same_help():
    spec = importlib.util.spec_from_file_location("fleet_tasks_wide", REPO / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for task in ("probe", "history", "deploy", "rollback", "bench", "tune", "exec", "upstream"):
        wide = next((a for a in module.ns[task].get_arguments() if a.name == "wide"), None)
        assert wide is not None and wide.help == module.WIDE_HELP and wide.kind is bool, task
    done = subprocess.run([str(Path(sys.executable).parent / "inv"), "probe", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and "--wide" in done.stdout and "less -S" in done.stdout, done.stderr


def test_the_sentences_under_a_narrow_table_fold_at_the_terminal_not_the_table():
    """A newcomer's `inv probe` of three hosts that failed: the table is 66 columns wide and each host's error under
    it folded at 66 of a 120-column terminal, a long sentence cut into five short lines."""
    import io

    from rich.console import Console

    from fleet.cli import fit
    said = ("silent (root@127.0.0.1:22999): took the connection but sent no SSH banner within 10s (a wedged sshd, "
            "MaxStartups, a middlebox, or no SSH server on that port); check sshd there (its console), then retry")
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False, color_system=None)
    table = fit.table([fit.Col("host", [("silent", "")]), fit.Col("GPUs", [("probe failed", "red")])], "probe", said)
    fit.emit(console, table)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines[:3]) < 30  # the table: title, header, row
    under = [line.rstrip() for line in lines[3:]]
    assert " ".join(under) == said and len(under) == 2 and all(len(line) <= 120 for line in under), under
