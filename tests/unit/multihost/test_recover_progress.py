"""`inv recover`'s long waits say where they stand (issue 46, finding 5, a form nobody tried): the wait for the
host's next boot (`--wait`, 600 s by default, 900 in the README's example) said `waiting for SSH` once and then
nothing until the host came back or the wait ran out; with --json nothing at all, and without it its steps went
to stdout, the task's data. Now each look says where the wait stands (a Live line: the terminal redraws it, a
log gets one every 30 s) with the last thing a look was told, and the CLI says every step on stderr."""

from __future__ import annotations

import re

from fakesession import HOST

from fleet.errors import ConnectError
from fleet.multihost import recover as rec
from fleet.progress import Live
from fleet.ssh.connect import ConnectOptions

ORIGINAL = rec.recover  # the loop below patches the module's name with a partial of it


class Back:
    """The host's sshd: refuses `down` looks, then a session in a new boot."""

    def __init__(self, down: int) -> None:
        self.down = down

    def __call__(self, host, opts):
        if self.down:
            self.down -= 1
            raise ConnectError(f"{host.name} ({host.address}): connection refused")
        return NewBoot()


class NewBoot:
    def boot_id(self) -> str:
        return "new"

    def close(self) -> None:
        pass


def test_the_wait_for_the_next_boot_says_where_it_stands_with_the_last_refusal():
    said: list[str] = []
    session = rec.wait_for_ssh(HOST, ConnectOptions(), 600, "old", Back(down=3), sleep=lambda s: None,
                               say=said.append)
    assert session.boot_id() == "new"
    standing = [m for m in said if isinstance(m, Live)]
    assert len(standing) == 3, said
    assert all(re.fullmatch(r"phase next boot: \d+s of 600s budget; last line: .*connection refused", m)
               for m in standing), standing


def test_the_cli_says_each_step_on_stderr_with_json_too_and_stdout_is_the_result_alone(monkeypatch, capsys):
    """Before: with --json every step was dropped (a 900 s wait in silence); without it they went to stdout."""
    import json
    from functools import partial

    from test_recover_hostile import Link, healthy, wants_reset

    from fleet.cli import recover as cli

    for as_json in (True, False):
        link = Link()
        link.facts = iter([wants_reset("reboot"), healthy()])
        monkeypatch.setattr(rec, "recover", partial(ORIGINAL, sessions=link.open, sleep=lambda s: None))
        assert cli.command(HOST, ConnectOptions(), as_json, False, False, 5) == 0
        out, err = capsys.readouterr()
        assert f"{HOST.name} rebooting" in err and f"{HOST.name} waiting for SSH in the next boot (budget 5s)" in err
        assert "rebooting" not in out and "waiting" not in out
        if as_json:
            assert json.loads(out)["action"] == rec.REBOOT
