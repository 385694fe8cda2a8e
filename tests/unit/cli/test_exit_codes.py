"""Exit codes follow docs/cli.md in every task, one table over tasks and their outcomes: 0 all done, 1 some host
failed or what the task checks is not clean (a stopped or killed unit, drift, fatal log lines), 2 refused before
anything changed (a `--to` that is no release id), 130 interrupted."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from fleet.cli import logs, status
from fleet.errors import NotReached
from fleet.host.facts import HostFacts
from fleet.host.gpuhealth import LostGpu
from fleet.host.p2pcheck import P2PCheck, PairCheck
from fleet.logs.follow import LogLine
from fleet.logs.rules import Severity
from fleet.multihost.status import HostStatus, RouterStatus

BIN = Path(sys.executable).parent
RELEASE = "20261202T142659Z-ab12"
SERVING = {"ActiveState": "active", "SubState": "running"}


def row(**kw: object) -> HostStatus:
    base: dict[str, object] = {"host": "sbx0", "address": "172.30.78.10", "unit": SERVING, "release": RELEASE,
                               "health": "200"}
    return HostStatus(**{**base, **kw})  # type: ignore[arg-type]


STATUS = [
    ("serving its release", [row()], 0, None),
    ("never deployed, unit inactive", [row(release=None, unit={"ActiveState": "inactive"}, health=None)], 0, None),
    ("unit stopped", [row(unit={"ActiveState": "inactive", "SubState": "dead"}, health=None)], 1,
     "sbx0: unit inactive (dead)"),
    ("unit killed", [row(unit={"ActiveState": "failed", "SubState": "failed"}, health=None)], 1,
     "sbx0: unit failed (failed)"),
    ("active, /health not answering", [row(health=None)], 1, "sbx0: health no answer"),
    ("drift", [row(drift=["/etc/systemd/system/sglang.service"])], 1, "sbx0: drift in 1 file"),
    ("a GPU fault", [row(gpu_faults=["GPU 3 fell off the bus"])], 1, "sbx0: GPU fault"),
    ("router down", [row(router=RouterStatus("r1", "sglang-router", "failed", None, 2))], 1, "sbx0: router failed"),
    ("unreachable", [row(ok=False, error="sbx0: timed out", unreached=NotReached.UNREACHABLE)], 1, "sbx0: unreachable"),
    ("one bad among good", [row(host="a"), row(host="b", drift=["/x", "/y"])], 1, "b: drift in 2 files"),
]


@pytest.mark.parametrize(("case", "rows", "code", "said"), STATUS, ids=[c[0] for c in STATUS])
def test_status_exits_1_when_a_host_is_not_clean_and_says_which(case, rows, code, said, capsys):
    assert status.exit_code(rows) == code
    err = capsys.readouterr().err
    assert (said in err) if said else err == ""


def _event(severity: Severity) -> SimpleNamespace:
    return SimpleNamespace(severity=severity, log_class="TMA_FAILURE", explanation="why", remedy=None, rule="r",
                           source=None)


FATAL = LogLine("sbx0", None, "RuntimeError: TMA", _event(Severity.FATAL))  # type: ignore[arg-type]
WARNING = LogLine("sbx0", None, "slow", _event(Severity.WARNING))  # type: ignore[arg-type]
PLAIN = LogLine("sbx0", None, "serving", None)

LOGS = [
    ("nothing classified", [PLAIN], None, 0),
    ("a warning", [PLAIN, WARNING], None, 0),
    ("a warning, --only warning", [WARNING], "warning", 0),
    ("a fatal line", [PLAIN, FATAL], None, 1),
    ("a fatal line, --only fatal", [FATAL, PLAIN], "fatal", 1),
    ("a fatal line, --only warning", [FATAL], "warning", 1),
    ("no fatal line, --only fatal", [WARNING, PLAIN], "fatal", 0),
]


@pytest.mark.parametrize(("case", "lines", "only", "code"), LOGS, ids=[c[0] for c in LOGS])
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_logs_exit_1_when_they_show_a_fatal_line(case, lines, only, code, as_json, monkeypatch, capsys):
    def stream(host, opts, follow, since, emit, stop: threading.Event, count=None) -> None:
        for line in lines:
            emit(line)

    console = SimpleNamespace(print=lambda *a, **k: None)
    assert logs.run([SimpleNamespace(name="sbx0")], None, False, None, only, as_json, console,  # type: ignore[list-item, arg-type]
                    read=stream) == code
    err = capsys.readouterr().err
    assert ("fatal lines (exit 1): sbx0: " in err) == (code == 1)


def test_logs_count_the_fatal_lines_they_show_not_each_rank_s_copy(capsys):
    """The README tour's crash: 8 processes' copies of the TMA error, shown as one line, were said as 8."""
    copies = [LogLine("sbx0", None, "RuntimeError: TMA", _event(Severity.FATAL), f"python[{pid}]")  # type: ignore[arg-type]
              for pid in range(340, 348)]

    def stream(host, opts, follow, since, emit, stop: threading.Event, count=None) -> None:
        for line in copies:
            emit(line)

    console = SimpleNamespace(print=lambda *a, **k: None)
    assert logs.run([SimpleNamespace(name="sbx0")], None, False, None, "fatal", False, console,  # type: ignore[list-item, arg-type]
                    read=stream) == 1
    assert capsys.readouterr().err == "fleet: fatal lines (exit 1): sbx0: 1\n"


@pytest.mark.parametrize("to", ["nonsense", "", "../../../../tmp/x", "2026-12-02", "latest", "before_fleet",
                                f"{RELEASE} ", "20261202T142659Z"])
def test_rollback_to_a_value_that_is_no_release_id_is_exit_2_before_any_host(to, tmp_path):
    """The host listens nowhere (port 9 of loopback): contacting it would fail the host, exit 1."""
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("hosts:\n  sbx0: {address: 127.0.0.1, port: 9, user: root, venv: /opt/v, unit: sglang}\n")
    done = subprocess.run([str(BIN / "inv"), "rollback", "-H", "sbx0", "-i", str(inventory), "--to", to],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    said = "error: inv rollback: --to '': an empty value" if to == "" else f"error: --to not a release id: {to!r}"
    assert done.stderr.startswith(said) and done.stderr.count("\n") == 1
    assert "127.0.0.1" not in done.stderr and "sbx0" not in done.stderr


PROBES = [
    ("every host healthy", {"a": [], "b": []}, 0),
    ("a GPU off the bus", {"a": [], "b": [LostGpu(pci_bus_id="0000:01:00", reason="fell off the bus")]}, 1),
    ("unreachable", {"a": None}, 1),
]


@pytest.mark.parametrize(("case", "faults", "code"), PROBES, ids=[c[0] for c in PROBES])
def test_probe_exits_1_when_a_gpu_cannot_serve(case, faults, code, monkeypatch, capsys):
    """What the probe checks (GPU health) not clean is 1, as `inv status` with a GPU fault is."""
    from fleet.cli import probe

    facts = [HostFacts(host=h, address="10.0.0.1", ok=f is not None, error=None if f is not None else "down",
                       lost_gpus=f or []) for h, f in faults.items()]
    monkeypatch.setattr(probe.probe_run, "probe_hosts", lambda hosts, opts, p2p_check=False, progress=None: facts)
    assert probe.command([], None, True) == code  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert ("GPU fault (1)" in err) == (case == "a GPU off the bus")


MISMATCH = P2PCheck(verdict="mismatch", gpus=2, pairs=[
    PairCheck(src=0, dst=1, peer_access=True, mib=64, mismatched=7),
    PairCheck(src=1, dst=0, peer_access=True, mib=64, mismatched=0)])
NOT_CLEAN = [
    ("p2p mismatch", [HostFacts(host="a", address="10.0.0.1"),
                      HostFacts(host="b", address="10.0.0.2", p2p_check=MISMATCH)],
     "b: P2P data check: 1 GPU pair mismatched"),
    ("p2p check failed", [HostFacts(host="a", address="10.0.0.1", p2p_check=P2PCheck(
        verdict="failed", error="no answer from the check (timed out)\nmore"))],
     "a: P2P data check failed (no answer from the check (timed out))"),
    ("unreachable", [HostFacts.failed("a", "10.0.0.1", "timed out", NotReached.UNREACHABLE)], "a: unreachable"),
    ("probe failed", [HostFacts.failed("a", "10.0.0.1", "rc=2: parse error")], "a: probe failed"),
    ("fault and mismatch on one host, another unreached",
     [HostFacts(host="a", address="10.0.0.1", p2p_check=MISMATCH,
                lost_gpus=[LostGpu(pci_bus_id="0000:01:00", reason="fell off the bus")]),
      HostFacts.failed("b", "10.0.0.2", "refused", NotReached.UNREACHABLE)],
     "a: GPU fault (1), P2P data check: 1 GPU pair mismatched; b: unreachable"),
]


@pytest.mark.parametrize(("case", "facts", "line"), NOT_CLEAN, ids=[c[0] for c in NOT_CLEAN])
def test_every_reason_probe_exits_1_is_one_not_clean_line_naming_the_host(case, facts, line, capsys):
    """A P2P mismatch or failed check, a host not reached or a failed probe is said as a GPU fault is (exit 1)."""
    from fleet.cli import probe

    assert probe.exit_code(facts) == 1
    assert capsys.readouterr().err == f"fleet: not clean (exit 1): {line}\n"


def test_a_clean_probe_says_nothing_on_stderr(capsys):
    from fleet.cli import probe

    ok = P2PCheck(verdict="ok", gpus=2, pairs=[PairCheck(src=0, dst=1, peer_access=True, mib=64, mismatched=0)])
    assert probe.exit_code([HostFacts(host="a", address="10.0.0.1", p2p_check=ok)]) == 0
    assert capsys.readouterr().err == ""


def test_a_host_logs_cannot_be_read_from_is_said_folded_to_the_terminal():
    """The newcomer's second hour: a host that took the connection and sent no banner was one 200-column line in
    `inv logs` (every other task folds its sentences to the terminal, docs/cli.md#width)."""
    from rich.console import Console

    from fleet.errors import FleetError

    def stream(host, opts, follow, since, emit, stop: threading.Event, count=None) -> None:
        raise FleetError("mute (root@127.0.0.1:2299): took the connection but sent no SSH banner within 10s (a "
                         "wedged sshd, MaxStartups, a middlebox, or no SSH server on that port); check sshd there")

    data, err = (Console(width=80, record=True, file=io.StringIO(), color_system=None) for _ in range(2))
    assert logs.run([SimpleNamespace(name="mute")], None, False, None, None, False, data,  # type: ignore[list-item, arg-type]
                    read=stream, err=err) == 1
    lines = err.export_text().splitlines()  # on stderr: no error among the journal's lines (stdout)
    assert len(lines) > 1 and max(len(line) for line in lines) <= 80 and "no SSH banner" in " ".join(lines)
    assert lines[0].startswith("error: mute (root@") and data.export_text() == ""


def test_a_host_logs_f_cannot_reach_is_said_at_once_while_the_others_are_followed():
    """The sixth newcomer's hour: `inv logs -f` over two hosts, one of them wedged (sshd stopped): the other's lines
    came, and the wedged one was never named, neither after its 10 s nor at Ctrl-C (exit 130): the error waited
    for every stream to end, which a followed one never does. A line still held for its ranks' copies (half a
    second) is shown at Ctrl-C too, not dropped."""
    import _thread

    from rich.console import Console

    from fleet.errors import FleetError

    data, err = (Console(width=80, record=True, file=io.StringIO(), color_system=None) for _ in range(2))

    def stream(host, opts, follow, since, emit, stop: threading.Event, count=None) -> None:
        if host.name == "mute":
            raise FleetError("mute (root@127.0.0.1:2299): took the connection but sent no SSH banner within 10s")
        emit(LogLine("sbx0", "2026-12-05T15:38:41+0000", "GET /health 200", None, "python3[2685]"))
        for _ in range(100):  # following: the operator reads on until Ctrl-C
            if "no SSH banner" in err.export_text(clear=False) or stop.wait(0.02):
                break
        _thread.interrupt_main()
        stop.wait(5)

    hosts = [SimpleNamespace(name="sbx0"), SimpleNamespace(name="mute")]
    assert logs.run(hosts, None, True, None, None, False, data,  # type: ignore[arg-type]
                    read=stream, err=err) == 130
    said = err.export_text()
    assert said.startswith("error: mute (root@") and said.count("no SSH banner") == 1, said
    assert "GET /health 200" in data.export_text()


def test_lines_with_only_are_the_last_n_lines_only_shows_as_journalctl_p_n_counts():
    """Newcomer's third hour: `inv logs --only fatal -n 2` read the journal's last 2 lines (two health checks), showed
    nothing and exited 0, while the journal held 22 fatal lines: -n counted lines before --only kept any, where
    `journalctl -p err -n 2` (the habit --lines is named after) gives the last 2 matching lines."""
    journal = [LogLine("sbx0", None, f"RuntimeError: TMA {i}", _event(Severity.FATAL), f"python[{i}]")  # type: ignore[arg-type]
               for i in range(3)] + [PLAIN, PLAIN]
    asked = []

    def stream(host, opts, follow, since, emit, stop: threading.Event, count=None) -> None:
        asked.append(count)
        for line in journal[-count:] if count else journal:
            emit(line)

    shown: list[str] = []
    console = SimpleNamespace(print=lambda text, **k: shown.append(text))
    assert logs.run([SimpleNamespace(name="sbx0")], None, False, None, "fatal", False, console,  # type: ignore[list-item, arg-type]
                    lines=2, read=stream) == 1
    assert asked == [None] and len(shown) == 2 and "TMA 1" in shown[0] and "TMA 2" in shown[1]
    assert logs.run([SimpleNamespace(name="sbx0")], None, False, None, None, False, console,  # type: ignore[list-item, arg-type]
                    lines=2, read=stream) == 0 and asked[-1] == 2  # without --only: journalctl's own -n


def test_recover_json_with_the_host_unreachable_is_still_a_json_document(tmp_path):
    """Newcomer's third hour: `inv recover -H H --dry-run --json` on a host that could not be reached printed nothing on
    stdout (its error on stderr only), where every other task's --json names the host's error in its document."""
    import json

    (tmp_path / "hosts.yaml").write_text("hosts:\n  sbx0: {address: 127.0.0.1, port: 9, user: root}\n")
    done = subprocess.run([str(BIN / "inv"), "recover", "-H", "sbx0", "-i", "hosts.yaml", "--dry-run", "--json"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=tmp_path)
    data = json.loads(done.stdout)
    assert done.returncode == 1 and data["host"] == "sbx0" and not data["ok"] and data["action"] == "none"
    assert "127.0.0.1" in data["error"] and done.stderr == "", (done.stdout, done.stderr)


# Every host task with its one host unreachable (nothing listens on 127.0.0.1:9), without --json: where its error
# is said. "stderr": the task's data is what it read from the host (journal lines, releases, gates), so a host
# that gave none is an error on stderr, and stdout holds no sentence of it (`inv logs > f`, `| grep` see data
# only). "report": the task reports a result per host, a failed one included (its row or line names the host and
# why, as its --json document does), on stdout. A newcomer's pass: `inv logs`, `inv history` and `inv audit`
# printed the unreached host's error on stdout, where only journal lines, releases and gates belong.
UNREACHED = [
    (["logs"], "stderr"),
    (["history"], "stderr"),
    (["audit"], "stderr"),
    (["probe"], "report"),
    (["status"], "report"),
    (["exec", "-H", "sbx0", "-c", "true"], "report"),
    (["deploy", "-H", "sbx0", "-p", "glm5-nvfp4", "--dry-run"], "report"),
    (["rollback", "-H", "sbx0", "-y"], "report"),
    (["bench", "-H", "sbx0", "-p", "glm5-nvfp4", "-y"], "report"),
]


@pytest.mark.parametrize(("args", "where"), UNREACHED, ids=[a[0] for a, _ in UNREACHED])
def test_an_unreached_hosts_error_is_on_stderr_unless_the_task_reports_each_host(args, where, tmp_path):
    (tmp_path / "hosts.yaml").write_text("hosts:\n  sbx0: {address: 127.0.0.1, port: 9, user: root}\n")
    done = subprocess.run([str(BIN / "inv"), *args, "-i", "hosts.yaml"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "COLUMNS": "300",
                                                                       "HOME": str(tmp_path)})
    error = "sbx0 (root@127.0.0.1:9): connection refused"
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    if where == "stderr":
        assert done.stdout == "" and f"error: {error}" in done.stderr, (done.stdout, done.stderr)
    else:
        assert "sbx0" in done.stdout and error in done.stdout + done.stderr, (done.stdout, done.stderr)


def test_logs_of_a_span_with_no_entries_say_so_once_on_stderr_and_print_no_line(capsys):
    """journalctl's `-- No entries --` is dropped by the reader (fleet.logs.follow.is_separator): the host gave no
    line, and stderr says so once, naming it; stdout stays empty; nothing failed (exit 0)."""
    def stream(host, opts, follow, since, emit, stop: threading.Event, count=None) -> None:
        if host.name == "sbx1":
            emit(LogLine("sbx1", "2026-12-05T02:56:32+0000", "ready", None))

    printed: list[str] = []
    console = SimpleNamespace(print=lambda *a, **k: printed.append(a[0]))
    hosts = [SimpleNamespace(name="sbx0"), SimpleNamespace(name="sbx1")]
    assert logs.run(hosts, None, False, "2099-01-01", None, False, console, read=stream) == 0  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert err.count("no journal lines") == 1 and "no journal lines since 2099-01-01: sbx0" in err
    assert len(printed) == 1 and "ready" in printed[0]


def _leftovers_row(lock_pid: int) -> HostStatus:
    """A host a first deploy left mid-step (killed, or a second Ctrl-C): its unit runs the attempt, no release is
    current yet, the lock and the release in progress are still there; status.sh's sections as status reads them."""
    import dataclasses
    import json
    import socket

    from fleet.host import lock as hostlock
    from fleet.inventory import Host
    from fleet.multihost import status as host_status

    owner = dataclasses.replace(hostlock.LockOwner.mine("deploy glm5-nvfp4"), owner="me@" + socket.gethostname(),
                                pid=lock_pid)
    m = "@@fleet-status@@\n"
    left = f'release 20261206T074310Z-4054 {{"step": "restarted"}}\nlock {json.dumps(owner.to_json())}\n'
    host = Host(name="sbx3", address="172.30.78.13", port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                source=Path("x"))
    return host_status.parse(host, "ActiveState=active\nSubState=running\n" + m + "\n" + m + "000\n" + m + m + m + m
                             + left)


def test_status_exits_1_where_a_run_that_died_left_the_host_half_done(capsys):
    """newcomer h-new14: after a deploy's second Ctrl-C (or a kill) mid-step, `inv status` said exit 0 and a clean
    row, though `--detail` read `lock left by a dead run ...; release ... was interrupted after step restarted`."""
    from fleet.host import lock as hostlock

    assert status.exit_code([_leftovers_row(hostlock.PID_MAX)]) == 1  # pids stay below pid_max: a dead owner
    assert "sbx3: left half-done by a run that died" in capsys.readouterr().err
    import os
    assert status.exit_code([_leftovers_row(os.getpid())]) == 0  # a live run's lock: a deploy under way
