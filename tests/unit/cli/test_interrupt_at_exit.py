"""A Ctrl-C once the task has ended (its output written, its exit code chosen) is no interrupt (issue 46, finding 4,
a form nobody tried). In the ~0.2 s the process takes to exit (paramiko's clean-up, the interpreter's), Python had
put SIGINT's default action back, so a Ctrl-C there killed the process silently: exit 130 and nothing said after
an `inv audit` (or an `inv patch`, which had patched and recorded a release) that had printed its whole result."""

from __future__ import annotations

import signal
import sys

import pytest

from fleet.cli import program


def test_once_a_task_has_ended_its_exit_is_not_ended_by_a_ctrl_c(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["inv", "--version"])
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with pytest.raises(SystemExit) as done:
            program.main()
        assert done.value.code in (0, None)
        assert {signal.getsignal(sig) for sig in before} == {signal.SIG_IGN}
    finally:  # an ignored signal is inherited by every process this worker starts after (a probe test's
        # `kill` of a stuck job then did nothing, and the job held the probe's pipe for a minute)
        for sig, handler in before.items():
            signal.signal(sig, handler)
