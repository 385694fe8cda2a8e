"""`inv status` and `inv probe` of a host that runs something else in place of fleet's command (a ForceCommand, an
authorized_keys command=, a nologin shell): issue 46, finding 12, a newcomer's form (h-new19)."""

from __future__ import annotations

import pytest
from fakesession import HOST, FakeSession

from fleet.cli.status import not_clean
from fleet.host import probe_run
from fleet.multihost import status
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import CommandResult

NOLOGIN = "This account is currently not available."


@pytest.mark.parametrize("said", [NOLOGIN, ""])
def test_a_status_answer_without_its_sections_is_a_failed_row_that_says_what_ran(monkeypatch, said):
    """sshd's `ForceCommand /usr/sbin/nologin` on the host: the board showed unit `?`, health none, drift none and
    `inv status` exited 0 (`"ok": true`), a host fleet can run nothing on read as clean."""
    monkeypatch.setattr(status.HostSession, "open", classmethod(
        lambda cls, host, opts: FakeSession(host, lambda command: (1, said))))
    row = status.collect_one(HOST, ConnectOptions())
    assert not row.ok and not_clean(row) == "failed"
    assert "status did not run (exit 1" in (row.error or "")
    assert (repr(said) if said else "no output") in (row.error or "")
    assert "ForceCommand" in (row.error or "") and "nologin" in (row.error or "")


def test_a_probe_answer_without_its_sections_names_what_ran_instead(monkeypatch):
    """The probe said `probe printed no sections: ''` (ForceCommand /bin/false): nothing an operator can act on."""
    monkeypatch.setattr(probe_run, "run", lambda conn, host, command, timeout: CommandResult(command, 1, "", ""))
    facts = probe_run.probe_on(None, HOST)  # type: ignore[arg-type]
    assert not facts.ok
    assert facts.error and facts.error.startswith("the probe did not run (exit 1, no output)")
    assert "authorized_keys" in facts.error
