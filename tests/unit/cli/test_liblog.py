"""Libraries' log records (paramiko's transport threads) are held for -v, never printed by Python's last-resort
handler; -v gets one line per record, tracebacks left out, repeats counted."""

from __future__ import annotations

import logging

import pytest

from fleet.cli import liblog

PARAMIKO_BANNER = [  # what paramiko's transport thread logs, record by record, for a host that closes before its banner
    "Exception (client): Error reading SSH protocol banner",
    "Traceback (most recent call last):",
    '  File "/x/paramiko/transport.py", line 2369, in _check_banner',
    "    buf = self.packetizer.readline(timeout)",
    "EOFError",
    "",
    "During handling of the above exception, another exception occurred:",
    "paramiko.ssh_exception.SSHException: Error reading SSH protocol banner",
]


@pytest.fixture
def held(monkeypatch):
    monkeypatch.setattr(liblog.HELD, "records", type(liblog.HELD.records)(maxlen=liblog.KEPT))
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [h for h in root.handlers if h is not liblog.HELD])
    liblog.install()
    liblog.install()
    assert root.handlers.count(liblog.HELD) == 1
    return liblog.HELD


def test_a_paramiko_traceback_is_one_line_for_verbose_and_nothing_on_stderr(held, capsys):
    log = logging.getLogger("paramiko.transport")
    for _ in range(3):  # one per connect attempt
        for line in PARAMIKO_BANNER:
            log.error(line)
    logging.getLogger("urllib3").debug("not kept: below WARNING")
    assert capsys.readouterr().err == ""
    assert liblog.lines() == ["paramiko.transport: Exception (client): Error reading SSH protocol banner (x3)"]

