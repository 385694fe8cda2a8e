"""`inv status` parsing of its one-round-trip output (pure)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from fleet import parallel
from fleet.cli.status import watch
from fleet.cli.status_view import table_of
from fleet.errors import NotReached
from fleet.inventory import Host
from fleet.multihost import status

HOST = Host(name="h", address="a", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("x"))
UNIT_SHA, PATCHED_SHA = "a" * 64, "b" * 64


def output(manifest: dict, health: str, hashes: list[str], smi: str) -> str:
    m = "@@fleet-status@@\n"
    return ("ActiveState=active\nSubState=running\nMainPID=42\nResult=success\n" + m + json.dumps(manifest) + "\n"
            + m + health + "\n" + m + "\n".join(hashes) + "\n" + m + smi)


MANIFEST = {
    "id": "r2", "playbook": "glm5-nvfp4", "rung": "no-fusion",
    "files": {"/etc/systemd/system/sglang.service": {"sha256": UNIT_SHA}, "before:/etc/x": {"sha256": "c" * 64}},
    "patches": {"sets": [], "files": {"/venv/sglang/srt/server_args.py": PATCHED_SHA}},
    "attempts": [{"rung": "fusion-sm120", "outcome": "TMA_FAILURE"},
                 {"rung": "no-fusion", "outcome": "READY",
                  "bench": {"result": {"ok": True, "output_throughput": 3540.5}}}],
}


def test_a_healthy_host_without_drift():
    st = status.parse(HOST, output(MANIFEST, "200", [f"{UNIT_SHA} /etc/systemd/system/sglang.service",
                                                     f"{PATCHED_SHA} /venv/sglang/srt/server_args.py"],
                                   "250.10, 600.00\n249.90, 600.00\n"))
    assert (st.unit["ActiveState"], st.release, st.rung, st.health, st.drift) == ("active", "r2", "no-fusion",
                                                                                 "200", [])
    assert (st.gpus, st.power_w, st.power_limit_w, st.bench_tok_s, st.last_failure) == (2, 500.0, 1200.0, 3540.5,
                                                                                        "TMA_FAILURE")


def test_changed_and_missing_managed_files_are_drift_and_no_answer_is_none():
    st = status.parse(HOST, output(MANIFEST, "000", [f"{'d' * 64} /etc/systemd/system/sglang.service"],
                                   "[N/A], 600.00\n"))
    assert st.drift == ["/etc/systemd/system/sglang.service (changed)", "/venv/sglang/srt/server_args.py (missing)"]
    assert st.health is None and st.power_w is None and st.gpus == 1


def test_a_host_never_deployed_has_no_release_and_no_drift():
    st = status.parse(HOST, "ActiveState=inactive\n@@fleet-status@@\n\n@@fleet-status@@\n000\n@@fleet-status@@\n"
                            "@@fleet-status@@\n")
    assert (st.release, st.drift, st.bench_tok_s, st.last_failure, st.gpus) == (None, [], None, None, 0)


# What sglang 0.5.9 serves on /metrics (python/sglang/srt/metrics/collector.py), two DP ranks, after the
# host-side grep kept only the gauges status shows.
METRICS = """sglang:num_running_reqs{dp="0",model_name="glm-5"} 12.0
sglang:num_running_reqs{dp="1",model_name="glm-5"} 3.0
sglang:num_queue_reqs{dp="0",model_name="glm-5"} 4.0
sglang:gen_throughput{dp="0",model_name="glm-5"} 1830.5
sglang:gen_throughput{dp="1",model_name="glm-5"} 1700.0
sglang:token_usage{dp="0",model_name="glm-5"} 0.25
"""


def test_a_tuned_release_shows_its_winners_median_not_the_last_rung_measured():
    """inv tune records every rung it tried, the losers after the winner; the board's bench tok/s is the
    serving rung's median."""
    tuned = {**MANIFEST, "attempts": [
        {"rung": "no-fusion", "outcome": "READY", "bench": {"result": {"ok": True, "output_throughput": 3605.0},
                                                            "runs": {"warmup": 3601.0, "tok_s": [3605, 3623, 3622]}}},
        {"rung": "safe", "outcome": "PERF_REGRESSION", "bench": {"result": {"ok": True, "output_throughput": 872.0}}},
        {"rung": "no-fusion", "outcome": "READY", "final": True}]}
    assert status.parse(HOST, output(tuned, "200", [], "")).bench_tok_s == 3622.0


def test_metrics_series_of_dp_ranks_are_summed_and_other_samples_ignored():
    text = METRICS + "sglang:cache_hit_rate{model_name=\"glm-5\"} 0.5\n# HELP x\nsglang:num_queue_reqs 1e+01\n"
    assert status.parse_metrics(text) == {"sglang:num_running_reqs": 15.0, "sglang:num_queue_reqs": 14.0,
                                          "sglang:gen_throughput": 3530.5, "sglang:token_usage": 0.25}


def test_the_metrics_section_of_the_round_trip_lands_in_the_row_and_the_table():
    st = status.parse(HOST, output(MANIFEST, "200", [], "250.10, 600.00\n") + "@@fleet-status@@\n" + METRICS)
    assert st.metrics["sglang:num_running_reqs"] == 15.0 and st.metrics["sglang:gen_throughput"] == 3530.5
    from rich.console import Console

    console = Console(width=250, record=True)
    gone = status.HostStatus("gone", "10.0.0.9", ok=False, error="gone: timed out", unreached=NotReached.UNREACHABLE)
    console.print(table_of([st, gone], width=250))
    text = console.export_text()
    assert "15/4" in text and "3,530" in text and "unreachable" in text and "gone: timed out" in text


def test_a_server_without_metrics_shows_none():
    st = status.parse(HOST, output(MANIFEST, "000", [], "") + "@@fleet-status@@\n")
    assert st.metrics == {} and st.health is None


def test_the_host_side_filter_keeps_exactly_the_shown_gauges():
    import re
    import shlex

    from fleet.host import programs as hostside

    script = hostside.text("status.sh")
    pattern = shlex.split(script.split("grep -E ", 1)[1].splitlines()[0])[0]
    kept = [line for line in (METRICS + "sglang:num_running_reqs_total 1\nsglang:token_usage_x 2\n").splitlines()
            if re.search(pattern, line)]
    assert kept == METRICS.splitlines()


def test_watch_intervals_are_seconds_within_bounds():
    from fleet.errors import InputError
    from fleet.multihost import status_watch

    assert status_watch.check_interval("0.5") == 0.5 and status_watch.check_interval(5) == 5.0
    for bad in ("soon", "0", "-1", "86400"):
        with pytest.raises(InputError, match=f"--interval {bad}"):
            status_watch.check_interval(bad)


def test_the_watch_board_keeps_inventory_order_and_names_hosts_not_read_yet():
    from fleet.multihost import status_watch

    hosts = [dataclasses.replace(HOST, name=n) for n in ("a", "b", "c")]
    board = status_watch.Board(hosts)
    board.put(status.HostStatus("c", "x"))
    board.put(status.HostStatus("a", "x", ok=False, error="a: timed out"))
    rows, waiting = board.snapshot()
    assert [r.host for r in rows] == ["a", "c"] and waiting == ["b"] and board.changed.is_set()


def test_watch_reads_many_hosts_on_a_bounded_pool_and_a_stuck_host_holds_one_worker(capsys):
    """70 hosts, one that never answers: reads run on at most MAX_WORKERS threads, never two at once for one
    host, and every other host is read again after the interval while the stuck one still hangs."""
    import threading
    import time

    from rich.console import Console

    from fleet import parallel

    hosts = [dataclasses.replace(HOST, name=f"h{i:02}") for i in range(70)]
    reads: dict[str, int] = {}
    running: set[str] = set()
    threads: set[int] = set()
    peak, lock, release = [0], threading.Lock(), threading.Event()

    def collect_one(host, opts, port):
        with lock:
            assert host.name not in running  # never read twice at once
            running.add(host.name)
            threads.add(threading.get_ident())
            peak[0] = max(peak[0], len(running))
        if host.name == "h07":
            release.wait(30)  # a host that does not answer
        time.sleep(0.01)
        with lock:
            running.discard(host.name)
            reads[host.name] = reads.get(host.name, 0) + 1
        return status.HostStatus(host.name, "x")

    stop = threading.Event()
    done = []
    watcher = threading.Thread(target=lambda: done.append(
        watch(hosts, None, 30000, 0.5, True, Console(), stop=stop, read_one=collect_one)))
    watcher.start()
    deadline = time.monotonic() + 20
    while min((reads.get(h.name, 0) for h in hosts if h.name != "h07"), default=0) < 3:
        assert time.monotonic() < deadline, reads
        time.sleep(0.05)
    stop.set()
    release.set()
    watcher.join(10)
    assert done == [0] and "h07" not in reads
    assert peak[0] <= parallel.MAX_WORKERS and len(threads) <= parallel.MAX_WORKERS
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["host"] for r in lines} == {h.name for h in hosts} - {"h07"} and len(lines) >= 69 * 3


def test_the_router_section_reads_the_router_release_and_asks_its_health(tmp_path):
    """The host-side snippet, run here for real: the router release's manifest, a /health that answers 200 on
    the port it names; its line lands in the row, and the table grows a router column."""
    import http.server
    import subprocess
    import threading

    from fleet.host import programs as hostside

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        (tmp_path / "router/current").mkdir(parents=True)
        (tmp_path / "router/current/manifest.json").write_text(json.dumps({"id": "r7", "config": {
            "role": "router", "unit": "sglang-router", "listen": "0.0.0.0", "port": server.server_port,
            "workers": ["http://10.0.0.1:30000", "http://10.0.0.2:30000"]}}))
        script = hostside.text("status.sh")
        # the whole status script, run here against a folder that stands in for /var/lib/fleet
        here = subprocess.run(["sh", "-c", script, "fleet-status", "sglang", "1", str(tmp_path),
                               hostside.SYSTEM_PYTHON],
                              capture_output=True, text=True, timeout=30).stdout
        none = subprocess.run(["sh", "-c", script, "fleet-status", "sglang", "1", str(tmp_path / "absent"),
                               hostside.SYSTEM_PYTHON],
                              capture_output=True, text=True, timeout=30)
    finally:
        server.shutdown()
        server.server_close()
    assert none.returncode == 0 and none.stdout.split("@@fleet-status@@\n")[7] == ""  # no router: nothing said
    line = here.split("@@fleet-status@@\n")[7]
    tail = "@@fleet-status@@\n" + METRICS + "@@fleet-status@@\n\n@@fleet-status@@\n"
    st = status.parse(HOST, output(MANIFEST, "200", [], "") + tail + line)
    assert st.router is not None and (st.router.release, st.router.health, st.router.workers) == ("r7", 200, 2)
    assert status.parse(HOST, output(MANIFEST, "200", [], "") + tail).router is None
    from rich.console import Console

    console = Console(width=300, record=True)
    console.print(table_of([st], width=300, wide=True))
    text = console.export_text()
    assert "router" in text and "health 200, 2 workers (r7)" in text
    console = Console(width=300, record=True)
    console.print(table_of([st], width=300))
    assert ", 2 workers" in console.export_text() and "(r7)" not in console.export_text()
    console = Console(width=300, record=True)
    console.print(table_of([status.parse(HOST, output(MANIFEST, "200", [], ""))]))
    assert "router" not in console.export_text()


GPU_SECTION = (
    "index, pci.bus_id, ecc.errors.uncorrected.volatile.total, remapped_rows.pending, remapped_rows.failure, "
    "retired_pages.pending, gpu_recovery_action\n"
    "0, 00000000:01:00.0, 0, No, No, [N/A], None\n"
    "Unable to determine the device handle for GPU00000000:02:00.0: Unknown Error\n"
    "@xid\nsource journalctl rc=0 lines=0\nsource dmesg rc=0 lines=812\n"
    "xid 0000:02:00 79 1 [ 812.1] NVRM: Xid (PCI:0000:02:00): 79, pid=7, GPU has fallen off the bus.\n")


def test_the_gpu_health_section_lands_in_the_row_the_board_and_the_detail():
    m = "@@fleet-status@@\n"
    st = status.parse(HOST, output(MANIFEST, "000", [], "250.10, 600.00\n") + m + m + m + m + GPU_SECTION)
    assert st.gpu_faults[0] == "GPU 0000:02:00 cannot be opened (Unknown Error)" and len(st.gpu_faults) == 2
    assert [(e.code, e.pci, e.count) for e in st.xid] == [(79, "0000:02:00", 1)] and st.kernel_log == "dmesg"
    from rich.console import Console

    from fleet.cli.status_view import render_detail

    console = Console(width=200, record=True)
    console.print(table_of([st], width=200))
    render_detail(st, console)
    text = console.export_text()
    assert "FAULT (2)" in text and "    GPU 0000:02:00 cannot be opened (Unknown Error)" in text
    assert "Xid 79 on PCI 0000:02:00 x1, last: [ 812.1] NVRM: Xid (PCI:0000:02:00): 79" in text


def test_a_status_without_the_gpu_section_shows_no_gpu_health():
    st = status.parse(HOST, output(MANIFEST, "200", [], "250.10, 600.00\n"))
    assert (st.gpu_faults, st.xid, st.kernel_log) == ([], [], None)


def test_the_current_release_s_versions_are_on_its_status_and_in_its_json():
    manifest = {**MANIFEST, "facts": {"versions": {"sglang": "0.5.23", "flashinfer-python": "0.7.2",
                                                   "torch": "\x1b]0;owned\x07"}}}
    st = status.parse(HOST, output(manifest, "200", [], "250.10, 600.00\n"))
    assert st.versions == {"sglang": "0.5.23", "flashinfer-python": "0.7.2"}
    assert st.to_json()["versions"] == st.versions
    assert status.parse(HOST, output(MANIFEST, "200", [], "250.10, 600.00\n")).versions == {}
    from rich.console import Console

    from fleet.cli.status_view import render_detail

    console = Console(width=120, record=True)
    render_detail(st, console)
    assert "  versions:              sglang 0.5.23, flashinfer-python 0.7.2\n" in console.export_text()


@pytest.mark.parametrize("recorded,seen", [
    ("0.5.23", "0.5.23"), ("0.5.8.post1", "0.5.8.post1"),
    (None, None), (523, None), ("../../etc/passwd", None), ("0.5.23\n", None), ("0." * 400, None), ("", None),
])
def test_the_current_releases_recorded_sglang_is_read_only_when_version_shaped(recorded, seen):
    manifest = {**MANIFEST, "facts": {"gpus": 2, "versions": {"sglang": recorded}}}
    assert status.parse(HOST, output(manifest, "200", [], "")).sglang == seen
    assert status.parse(HOST, output({**MANIFEST, "facts": ["sglang"]}, "200", [], "")).sglang is None


def test_a_router_line_of_other_types_is_read_field_by_field_and_prints_as_fleet_writes_it():
    odd = status.RouterStatus.from_json({"release": ["r"], "unit": "u", "state": 5, "health": "200", "workers": "2"})
    assert odd == status.RouterStatus(None, "u", None, None, 0) and not odd.ok
    assert status.RouterStatus.from_json([1]) is None and status.RouterStatus.from_json({}) is None
    line = {"release": "r7", "unit": "sglang-router", "state": "active", "health": 200, "workers": 2}
    assert status.RouterStatus.from_json(line).to_json() == line  # type: ignore[union-attr]
    assert list(status.RouterStatus.from_json(line).to_json()) == list(line)  # type: ignore[union-attr]


@pytest.mark.parametrize("width", [80, 120])
def test_the_board_names_each_hosts_playbook_and_keeps_one_line_per_host_at_80_columns(width):
    """Issue 46 finding 11: the board had no playbook (model) column, even with --wide."""
    hashes = [f"{UNIT_SHA} /etc/systemd/system/sglang.service", f"{PATCHED_SHA} /venv/sglang/srt/server_args.py"]
    rows = [status.parse(dataclasses.replace(HOST, name=f"pve-gpu-0{i}"),
                         output({**MANIFEST, "playbook": book}, "200", hashes, "250.10, 600.00\n"))
            for i, book in enumerate(["glm5-nvfp4", "llama-3.1-8b-instruct-tp2"])]
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(table_of(rows, width=width))
    lines = console.export_text().splitlines()
    header = next(line for line in lines if line.split()[:1] == ["host"])
    assert "playbook" in header.split() and max(len(line) for line in lines) <= width
    body = [line for line in lines if line.split()[:1] and line.split()[0].startswith("pve-gpu-0")]
    assert len(body) == 2 and "glm5-nvfp4" in body[0] and "llama-3.1-8" in body[1]  # cut to its cap
    wide = Console(width=300, record=True, file=io.StringIO(), color_system=None)
    wide.print(table_of(rows, width=300, wide=True))
    assert "llama-3.1-8b-instruct-tp2" in wide.export_text()


@pytest.mark.parametrize("width", [170, 200])
def test_two_playbooks_that_begin_alike_read_apart_on_a_terminal_wide_enough(width):
    """A newcomer's board after README step 5 (issue 46, 11, a new form): sbx2 on llama-pinned-0.5.23 and sbx3 on
    llama-pinned-0.5.9 both read `llama-pinne…` on a 200-column terminal, the board 160 wide: the playbook column
    was cut at 12 characters whatever room was left."""
    hashes = [f"{UNIT_SHA} /etc/systemd/system/sglang.service", f"{PATCHED_SHA} /venv/sglang/srt/server_args.py"]
    rows = [status.parse(dataclasses.replace(HOST, name=f"sbx{i}"),
                         output({**MANIFEST, "playbook": book}, "200", hashes, "250.10, 600.00\n"))
            for i, book in enumerate(["llama-pinned-0.5.23", "llama-pinned-0.5.9"])]
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(table_of(rows, width=width))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= width
    body = [line.split() for line in lines if line.split()[:1] and line.split()[0].startswith("sbx")]
    assert "llama-pinned-0.5.23" in body[0] and "llama-pinned-0.5.9" in body[1], lines


def test_the_readme_s_board_is_the_board_at_80_columns():
    """The newcomer's second hour: README's board at 80 columns still showed the columns before the playbook one
    (gen tok/s before drift, a failure column that no longer fits); the demo's own board did not look like it."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    block = readme.split("The board at 80 columns", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    hashes = [f"{UNIT_SHA} /etc/systemd/system/sglang.service", f"{PATCHED_SHA} /venv/sglang/srt/server_args.py"]
    served = status.parse(dataclasses.replace(HOST, name="sbx0"),
                          output({**MANIFEST, "id": "20261202T143355Z-2707"}, "200", hashes, "250.10, 600.00\n"))
    served.metrics = {"sglang:gen_throughput": 0.0}
    idle = [status.parse(dataclasses.replace(HOST, name=f"sbx{i}"), "ActiveState=inactive\n@@fleet-status@@\n\n"
                         "@@fleet-status@@\n000\n@@fleet-status@@\n@@fleet-status@@\n") for i in (1, 2, 3)]
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(table_of([served, *idle], width=80))
    drawn = [line.rstrip() for line in console.export_text().splitlines()]
    assert [line.rstrip() for line in block.splitlines()] == drawn


@pytest.mark.parametrize(("kernel_log", "xid", "said"), [
    ("dmesg", [], "none (read from dmesg)"),
    ("journalctl", [], "none (read from journalctl)"),
    ("kernel log not readable: dmesg (permission denied)", [], "kernel log not readable: dmesg (permission denied)"),
    (None, [], "-"),
])
def test_the_detail_says_no_xid_as_none_and_where_it_was_read(kernel_log, xid, said):
    """The newcomer's second hour: `inv status --detail sbx0` said 'Xid since boot: dmesg', the name of the
    kernel log it read, where it means none were found there."""
    from fleet.cli.status_view import render_detail

    st = dataclasses.replace(status.parse(HOST, output(MANIFEST, "200", [], "250.10, 600.00\n")),
                             kernel_log=kernel_log, xid=xid)
    console = Console(width=120, record=True, file=io.StringIO(), color_system=None)
    render_detail(st, console)
    assert f"  Xid since boot:        {said}\n" in console.export_text()


def test_a_release_whose_unit_is_not_enabled_says_a_reboot_would_not_start_it_and_is_not_clean():
    """A host deployed by a fleet that did not enable its unit (or disabled by hand): status says so, with what
    enables it, and exits 1 (fails before: UnitFileState was not read)."""
    from fleet.cli.status import not_clean

    text = output(MANIFEST, "200", [f"{UNIT_SHA} /etc/systemd/system/sglang.service",
                                    f"{PATCHED_SHA} /venv/sglang/srt/server_args.py"], "")
    off = status.parse(HOST, text.replace("Result=success\n", "Result=success\nUnitFileState=disabled\n", 1))
    assert off.boot and "will not start after a reboot" in off.boot and "systemctl enable sglang" in off.boot
    assert not_clean(off) == "unit not enabled (no start after a reboot)"
    on = status.parse(HOST, text.replace("Result=success\n", "Result=success\nUnitFileState=enabled\n", 1))
    assert (on.boot, not_clean(on)) == (None, None)
    assert "-p UnitFileState" in status.command("sglang", 30000)  # the round trip asks it


def test_a_host_with_no_release_has_no_boot_hint_whatever_its_unit():
    st = status.parse(HOST, "ActiveState=inactive\nUnitFileState=disabled\n@@fleet-status@@\n\n@@fleet-status@@\n"
                            "000\n@@fleet-status@@\n@@fleet-status@@\n")
    assert st.boot is None


@pytest.mark.parametrize(("row", "word"), [
    (status.HostStatus("a", "10.0.0.1", ok=False, error="a: gone", unreached=NotReached.UNREACHABLE), "unreachable"),
    (status.HostStatus("b", "10.0.0.2", ok=False, error="b: key", unreached=NotReached.UNKNOWN_KEY), "unknown key"),
    (status.HostStatus("c", "10.0.0.3", ok=False, error=parallel.INTERRUPTED_ROW, unread=True), "interrupted"),
    (status.HostStatus("d", "10.0.0.4", ok=False, error="d: status: Traceback ..."), "failed"),
])
def test_a_row_that_is_not_ok_says_why_in_the_board_and_the_line_under_it(row, word):
    """A host a Ctrl-C left unread, or one that answered and whose status step failed, was `unreachable` on the board
    and under it: an operator reads a network fault into a Ctrl-C."""
    from fleet.cli.status import not_clean

    console = Console(width=200, record=True)
    console.print(table_of([row], width=200))
    assert word in console.export_text()
    assert not_clean(row) == word
    assert row.why_not_ok == word


def test_a_drop_in_fleet_did_not_write_is_drift():
    """`systemctl edit sglang` leaves /etc/systemd/system/sglang.service.d/override.conf, whose Environment=,
    ExecStart= and User= win over fleet's unit: what serves is not what fleet checked, and status said the host was
    clean (fails before: DropInPaths was not asked). A distribution's drop-in for every service is not drift."""
    from fleet.cli.status import not_clean

    text = output(MANIFEST, "200", [f"{UNIT_SHA} /etc/systemd/system/sglang.service",
                                    f"{PATCHED_SHA} /venv/sglang/srt/server_args.py"], "")
    mine = "/etc/systemd/system/sglang.service.d/override.conf"
    distro = "/usr/lib/systemd/system/service.d/10-timeout-abort.conf"
    st = status.parse(HOST, text.replace("Result=success\n", f"Result=success\nDropInPaths={distro} {mine}\n", 1))
    assert st.drift == [f"{mine} (a drop-in fleet did not write)"] and not_clean(st)
    clean = status.parse(HOST, text.replace("Result=success\n", f"Result=success\nDropInPaths={distro}\n", 1))
    assert clean.drift == []
    assert "-p DropInPaths" in status.command("sglang", 30000)


@pytest.mark.parametrize(("width", "left_out"), [(60, "playbook, gen tok/s"), (45, "rung, playbook, gen tok/s")])
def test_a_board_too_narrow_for_its_columns_says_which_it_left_out(width, left_out):
    """Issue 46, finding 11, a newcomer's form (h-new22): in a 60-column pane (tmux split) the board dropped its
    playbook column, the one the issue asked for, and at 45 the rung too, without a word: the operator read a board
    with no model column, as before the fix. Now a line under it names the columns left out and how to see them."""
    hashes = [f"{UNIT_SHA} /etc/systemd/system/sglang.service", f"{PATCHED_SHA} /venv/sglang/srt/server_args.py"]
    served = status.parse(dataclasses.replace(HOST, name="sbx0"),
                          output({**MANIFEST, "id": "20261202T143355Z-2707"}, "200", hashes, "250.10, 600.00\n"))
    served.metrics = {"sglang:gen_throughput": 0.0}
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(table_of([served], width=width))
    text = console.export_text()
    said = " ".join(text.split())
    assert f"a wider terminal (or --wide) adds: {left_out}" in said, said
    assert max(len(line) for line in text.splitlines()) <= width
    wide = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    wide.print(table_of([served], width=200))
    assert "adds:" not in wide.export_text()  # every column fits: nothing to say
