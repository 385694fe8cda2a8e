"""A stop mark as a hostile host writes it (found by review): a mark naming another unit than the host's starts
nothing; a deeply nested one is removed and the run goes on."""
from __future__ import annotations

import pytest
from fakesession import FakeSession

from fleet.deploy import hostrun
from fleet.errors import FleetError
from fleet.host.releases import STOPPED_MARK
from fleet.progress import quiet


@pytest.mark.parametrize("unit", ["poweroff.target", "reboot.target", "rescue.target"])
def test_a_mark_naming_another_unit_starts_nothing(unit):
    s = FakeSession(answer=lambda c: (0, "ActiveState=inactive\n") if c.startswith("systemctl show") else (0, ""),
                    files={STOPPED_MARK: b'{"units": ["%s"]}' % unit.encode()})
    with hostrun.host_run(s.host, None, "deploy", unit=None, recover=hostrun.lock_only(quiet), session=s) as run:
        said = "after a dead run: removed a stop mark fleet did not write"
        assert run.recovered and run.recovered[0].startswith(said), run.recovered
    assert f"systemctl start {unit}" not in s.sent, s.sent


def test_a_deeply_nested_mark_is_one_line_and_the_run_goes_on():
    s = FakeSession(files={STOPPED_MARK: b"[" * 100_000})
    try:
        with hostrun.host_run(s.host, None, "deploy", unit=None, recover=hostrun.lock_only(quiet), session=s):
            pass
    except FleetError:
        pass  # said in one line is acceptable
    assert STOPPED_MARK not in s.files
