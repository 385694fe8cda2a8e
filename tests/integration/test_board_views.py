"""The board as a person sees it: drawn in a real terminal (tmux) at 80x24 and 200x50, read back with
capture-pane. Rows are recorded `inv status --json` output of the sandbox (tests/fixtures/status/): 4 hosts,
one drifted (2 files), one cut; repeated to make 64. The live `inv status` against sandbox hosts is tested the
same way at the end."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "tests/fixtures/status/board-4-hosts.json"
DRAW = REPO / "tests/tools/draw_board.py"

@pytest.fixture(autouse=True)
def _tmux():
    """These tests are the only check of what a person sees: without tmux they fail, never skip."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed (Debian: tmux); bootstrap.sh installs it")


def screen(command: list[str], width: int, height: int, env: dict[str, str] | None = None,
           marker: str = "@@drawn@@", timeout: float = 60.0) -> tuple[list[str], str]:
    """Run command in a fresh tmux server at width x height; (the lines as shown, wrapped lines joined back
    into one logical line each) and the raw screen with escape sequences, once marker appears."""
    sock = f"fleet-board-{os.getpid()}-{time.monotonic_ns()}"
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    environ = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), "TERM": "xterm-256color",
               "LANG": "C.UTF-8", **{k: v for k, v in os.environ.items() if k.startswith("FLEET_")}, **(env or {})}
    shell = " ".join(f"{k}={_q(v)}" for k, v in environ.items()) + " " + " ".join(map(_q, command))
    subprocess.run([*tmux, "new-session", "-d", "-x", str(width), "-y", str(height), f"{shell}; sleep 600"],
                   check=True, env={"PATH": os.environ["PATH"]})
    try:
        subprocess.run([*tmux, "set-option", "-g", "history-limit", "5000"], check=True)
        deadline = time.monotonic() + timeout
        while True:
            raw = subprocess.run([*tmux, "capture-pane", "-p", "-e", "-S", "-", "-E", "-"], capture_output=True,
                                 text=True, check=True).stdout
            if marker in raw or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        joined = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-", "-E", "-"], capture_output=True,
                                text=True, check=True).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
    assert marker in raw, raw[-2000:]
    lines = joined.split(marker)[0].rstrip("\n").splitlines()
    return [line.rstrip() for line in lines], raw


def _q(text: str) -> str:
    import shlex

    return shlex.quote(text)


def board(width: int, height: int, hosts: int | None = None, *extra: str, env: dict[str, str] | None = None):
    cmd = [sys.executable, str(DRAW), str(ROWS), *(["--hosts", str(hosts)] if hosts else []), *extra]
    return screen(cmd, width, height, env)


def host_lines(lines: list[str], names: list[str]) -> dict[str, list[str]]:
    """The board's rows of each host (a sentence below the table that names the host is not a row)."""
    return {n: [line for line in lines if line.split(" ", 1)[0] == n and not line.startswith(f"{n} (")]
            for n in names}


@pytest.mark.parametrize("width,height", [(80, 24), (200, 50)])
@pytest.mark.parametrize("hosts", [None, 64])
def test_the_board_is_one_line_per_host_and_no_line_is_wider_than_the_terminal(width, height, hosts):
    lines, _ = board(width, height, hosts)
    names = [f"gpu-node-{i:02d}" for i in range(hosts)] if hosts else ["sbx0", "sbx1", "sbx2", "sbx3"]
    assert max(len(line) for line in lines) <= width
    per_host = host_lines(lines, names)
    assert all(len(found) == 1 for found in per_host.values()), {n: f for n, f in per_host.items() if len(f) != 1}
    header = next(line for line in lines if line.startswith("host "))
    for column in ("unit", "health", "release", "rung", "drift"):
        assert column in header.split()
    drifted = per_host[names[0]][0]
    assert "2 files" in drifted and "1202T1427-77ca" in drifted  # drift counted, the release id shortened
    cut = per_host[names[3]][0]
    assert "unreachable" in cut
    # why the cut host is unreachable: a sentence below the table, not in a cell
    assert any(line.startswith(f"{names[3]} (root@") and "timed out" in line for line in lines)
    if width >= 200:
        assert all(c in header for c in ("failure", "bench tok/s", "power", "GPUs"))


def test_the_terminal_widening_adds_columns_and_wide_shows_every_value_in_full():
    narrow, _ = board(80, 24)
    wide_terminal, _ = board(200, 24)
    assert len(narrow[1].split()) < len(wide_terminal[1].split())
    full, _ = board(80, 24, None, "--wide")
    assert any("20261202T142750Z-77ca" in line for line in full)  # the whole release id
    assert any("/etc/fleet/sglang.env (changed)" in line for line in full)  # every drifted file


def test_detail_prints_one_host_in_full():
    lines, _ = board(80, 24, None, "--detail", "sbx0")
    text = "\n".join(lines)
    assert "release:" in text and "20261202T142750Z-77ca" in text
    assert "drift:                 2 files" in text
    assert "/etc/fleet/sglang.env (changed)" in text and "flashinfer/jit/comm.py (changed)" in text
    assert "last failure:          TMA_FAILURE" in text and "next: " in text
    assert max(len(line) for line in lines) <= 80


def test_no_color_and_the_c_locale_get_no_colour_and_ascii_only():
    _, raw = board(80, 24, None, env={"NO_COLOR": "1", "LANG": "C", "LC_ALL": "C"})
    shown = raw.split("@@drawn@@")[0]
    assert not re.search(r"\x1b\[[0-9;]*3[0-7]m|\x1b\[[0-9;]*38;", shown)  # no foreground colour
    assert all(ord(ch) < 128 for ch in shown), {ch for ch in shown if ord(ch) >= 128}
    _, coloured = board(80, 24)
    assert re.search(r"\x1b\[[0-9;]*3[0-7]m|\x1b\[[0-9;]*38;", coloured)  # the control: colour on a terminal


def test_inv_status_on_sandbox_hosts_at_80_columns(sandbox, sandbox_inventory, tmp_path):
    """The real task on a terminal: sbx2 deployed then drifted by hand, sbx4 cut, sbx1 as earlier tests left it."""
    from fleetcli import inv, llama_playbook, sh

    book = llama_playbook(tmp_path, [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}], name="llama-board")
    proc = inv(sandbox, "deploy", "--host", "sbx2", "--playbook", str(book), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    sh(sandbox_inventory, "sbx2", "echo '# by hand' >> /etc/fleet/sglang.env")
    sandbox.cut("sbx4")
    try:
        cmd = [str(REPO / ".venv/bin/inv"), "status", "-i", str(sandbox.cfg.inventory_path),
               "--host", "sbx1", "--host", "sbx2", "--host", "sbx4"]
        lines, _ = screen(["sh", "-c", " ".join(map(_q, cmd)) + "; echo @@drawn@@"], 80, 24)
    finally:
        sandbox.heal("sbx4")
    assert max(len(line) for line in lines) <= 80
    rows = host_lines(lines, ["sbx1", "sbx2", "sbx4"])
    assert all(len(r) == 1 for r in rows.values()), lines
    assert "active" in rows["sbx2"][0] and "1 file" in rows["sbx2"][0] and "plain" in rows["sbx2"][0]
    assert "unreachable" in rows["sbx4"][0]
    assert rows["sbx1"][0].split()[1] in {"active", "inactive", "failed", "activating", "deactivating"}
    assert any(line.startswith("sbx4 (root@") for line in lines)


def test_watch_without_a_terminal_prints_whole_boards_not_a_live_one(sandbox):
    """A pipe or a CI log gets plain boards, one per round that changed something: no cursor movement, no
    colour, each host on one line; Ctrl-C ends it with 130 as on a terminal."""
    import signal

    proc = subprocess.Popen([str(REPO / ".venv/bin/inv"), "status", "-i", str(sandbox.cfg.inventory_path),
                             "--host", "sbx0", "--host", "sbx1", "--watch", "--interval", "1"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "80"})
    said: dict[str, list[str]] = {"out": [], "err": []}
    readers = [threading.Thread(target=lambda k=k, s=s: said[k].extend(s), daemon=True)
               for k, s in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    # Ctrl-C once the first whole board is out (its two rows), however long a loaded machine takes to get there
    header, deadline = "fleet status, every 1s (Ctrl-C ends)", time.monotonic() + 120
    while not _board_rows(list(said["out"]), header, ("sbx0", "sbx1")):
        assert proc.poll() is None and time.monotonic() < deadline, "".join(said["out"] + said["err"])[-2000:]
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    for r, stream in zip(readers, (proc.stdout, proc.stderr), strict=True):
        r.join(30)
        stream.close()
    out, err = "".join(said["out"]), "".join(said["err"])
    assert proc.returncode == 130, err[-2000:]
    assert "\x1b[" not in out
    boards = out.split("fleet status, every 1s (Ctrl-C ends)")
    assert len(boards) >= 2, out
    first = boards[1].splitlines()
    assert len([line for line in first if line.split(" ", 1)[0] in ("sbx0", "sbx1")]) == 2
    assert max(len(line) for line in out.splitlines()) <= 80


def _board_rows(lines: list[str], header: str, hosts: tuple[str, ...]) -> bool:
    """Whether a board after `header` has a row for each of `hosts`."""
    after = "".join(lines).split(header, 1)
    return len(after) == 2 and all(any(line.split(" ", 1)[0] == h for line in after[1].splitlines()) for h in hosts)
