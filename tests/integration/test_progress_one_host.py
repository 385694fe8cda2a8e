"""A one-host deploy on a terminal never goes quiet (issue 46 finding 5, beyond the server's start): before, the
line at the bottom moved while the server started, then stood still through the verify (the known answer) and the
bench, however long they took. Now every long step redraws it each second with its phase and its time against its
budget, and it is wiped before the results are printed. The simulated tokens are slowed (the playbook's
SGLANG_SIM_TOKEN_TIME_SCALE) so that the verify and the bench each take seconds, as real ones take minutes."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time

from fleetcli import REPO, llama_playbook

HOST = "sbx2"
BENCH = {"gate": True, "input_len": 16, "output_len": 16, "num_prompts": 8, "max_concurrency": 8, "floor": 0.1,
         "fraction": 0.1, "timeout": 300}
SLOW = "SGLANG_SIM_TOKEN_TIME_SCALE"  # a name fleet takes for a secret's (TOKEN): given from fleet's environment
QUIET_S = 2.5  # the longest the terminal may go without a byte while the deploy runs (Live lines: every second)


def _on_a_terminal(cmd: list[str], env: dict[str, str], limit: float = 420) -> tuple[int, list[tuple[float, str]]]:
    """Run `cmd` with a pseudo-terminal as stdout and stderr: its exit code and what it wrote, chunk by chunk,
    each with when it came."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks: list[tuple[float, str]] = []
    end = time.monotonic() + limit
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append((time.monotonic(), data.decode("utf-8", "replace")))
    finally:
        os.close(master)
    return proc.wait(timeout=60), chunks


def test_a_one_host_deploy_on_a_terminal_says_where_every_long_step_stands(sandbox, tmp_path):
    book = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-progress", bench=BENCH,
                          serve={"env": {SLOW: {"env": SLOW}}})
    env = {**os.environ, "FLEET_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "160", "TERM": "xterm", SLOW: "60"}
    cmd = [str(REPO / ".venv/bin/inv"), "deploy", "-i", str(sandbox.cfg.inventory_path), "--host", HOST,
           "--playbook", str(book), "--force"]
    code, chunks = _on_a_terminal(cmd, env)
    text = "".join(c for _, c in chunks)
    assert code == 0, text[-3000:]
    started = next(i for i, (_, c) in enumerate(chunks) if "started; following the journal" in
                   "".join(x for _, x in chunks[:i + 1]))
    times = [t for t, _ in chunks[started:]]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(gaps) < QUIET_S, (max(gaps), text[-3000:])
    assert "phase bench: 3s of 300s budget" in text, text[-3000:]  # the bench takes about 13 s here
    assert "phase verify: GET /health and the known answer (budget 130s)" in text
    last_live = text.rindex("s of 300s budget")  # the bench's line, wiped before the results
    assert "\r\x1b[2K" in text[last_live:] and "Traceback" not in text
