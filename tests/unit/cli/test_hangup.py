"""SIGHUP, the terminal fleet ran in gone (the ssh session to the bastion dropped, the window closed), killed the
run silently: a deploy's host left mid-step with its lock held, nothing recorded of how it ended. It is a Ctrl-C
now, as SIGTERM is; what went to the terminal goes nowhere (a write to a hung-up terminal fails), what went to a
file or a pipe is whole. Under nohup, SIGHUP stays ignored. A real `inv probe` of a host that never sends an SSH
banner, a real pty."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import time

import pytest
from test_interrupt_any_task import INV, REPO, _probe, mute  # noqa: F401 (mute: a fixture)


def test_a_terminal_that_hung_up_costs_nothing_written_to_a_file(mute, tmp_path):  # noqa: F811
    """stderr on a pty whose other end closed (the terminal gone): the run still ends as Ctrl-C, its --json whole
    in the file it was sent to, no traceback (a write to the dead terminal is EIO)."""
    port, taken = mute
    master, slave = pty.openpty()
    inv = _probe(tmp_path, port, stderr=slave)
    os.close(slave)
    try:
        assert taken.wait(60), "the probe never connected"
        os.close(master)  # the terminal is gone: the kernel hangs the pty up
        inv.send_signal(signal.SIGHUP)
        time.sleep(1)
        inv.send_signal(signal.SIGHUP)  # a second: stop waiting for the wedged host
        assert inv.wait(30) == 130
        out, _ = inv.communicate()
    finally:
        inv.kill()
    [row] = json.loads(out)["hosts"]
    assert row["host"] == "wedged" and "interrupted" in row["error"], row


def test_under_nohup_a_hangup_is_ignored(mute, tmp_path):  # noqa: F811
    port, taken = mute
    inv = _probe(tmp_path, port, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        assert taken.wait(60), "the probe never connected"
        inv.send_signal(signal.SIGHUP)
        with pytest.raises(subprocess.TimeoutExpired):
            inv.wait(2)  # still running: nohup's choice stands
        inv.send_signal(signal.SIGINT)
        inv.send_signal(signal.SIGINT)
        assert inv.wait(30) == 130
    finally:
        inv.kill()
        inv.communicate()


def test_a_terminal_that_hangs_up_at_the_prompt_ends_the_run_with_nothing_changed_and_no_traceback(tmp_path):
    """`inv exec --all` without --yes asks on the terminal; the terminal goes (the ssh session to the bastion
    dropped) while it waits. The read failed (EIO) with a traceback, then the SIGHUP's KeyboardInterrupt came in
    main's exit and the process died of SIGINT (status -2). Now it ends as a Ctrl-C at the prompt does, nothing run."""
    (tmp_path / "hosts.yaml").write_text("hosts:\n  a:\n    address: 127.0.0.1\n    port: 9\n"
                                         "  b:\n    address: 127.0.0.1\n    port: 9\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "FLEET_SANDBOX_ONLY": "1", "PYTHONPATH": str(REPO),
           "FLEET_STATE_DIR": str(tmp_path / "state")}
    master, slave = pty.openpty()
    name = os.ttyname(slave)
    err = tmp_path / "stderr"
    with err.open("w") as errfile:
        inv = subprocess.Popen([str(INV), "exec", "-i", str(tmp_path / "hosts.yaml"), "--all", "--cmd", "true"],
                               cwd=REPO, env=env, stdin=slave, stdout=slave, stderr=errfile, start_new_session=True,
                               preexec_fn=lambda: os.close(os.open(name, os.O_RDWR)))  # the terminal its session's
    os.close(slave)
    try:
        deadline = time.monotonic() + 60
        while "Go ahead? [y/N]" not in err.read_text():
            assert time.monotonic() < deadline and inv.poll() is None, err.read_text()
            time.sleep(0.05)
        os.close(master)  # the terminal is gone: the kernel hangs it up and sends SIGHUP to its session's leader
        rc = inv.wait(30)
    finally:
        inv.kill()
    said = err.read_text()
    assert rc in (130, 2) and "Traceback" not in said, (rc, said)  # before: -2, OSError EIO then KeyboardInterrupt
