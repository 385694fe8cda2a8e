"""fleet.ssh.become: the sudo line and its stdin for each way a connection reaches root."""

from __future__ import annotations

import shlex
import subprocess

from fleet.ssh import become
from fleet.ssh.become import Become, Mode

CMD = "echo 'a b' $(id -u); rm x"


def test_no_become_sends_the_command_as_it_is_with_nothing_on_stdin():
    assert become.NONE.wrap(CMD) == CMD and become.NONE.stdin() == b""


def test_nopasswd_never_prompts_and_quotes_the_command_whole():
    how = Become(Mode.NOPASSWD)
    assert how.wrap(CMD) == "sudo -n -- sh -c 'echo '\"'\"'a b'\"'\"' $(id -u); rm x'"
    assert shlex.split(how.wrap(CMD))[-1] == CMD and how.stdin() == b""


def test_the_password_goes_on_stdin_never_in_the_command_line():
    how = Become(Mode.PASSWORD, "s3cr'et $x")
    line = how.wrap(CMD)
    assert shlex.split(line)[:6] == ["sudo", "-k", "-S", "-p", "", "--"]
    assert shlex.split(line)[-1] == become.GUARD + CMD
    assert "s3cr" not in line and how.stdin() == b"s3cr'et $x\n" + become.MARKER.encode() + b"\n"
    assert "s3cr" not in repr(how)


def test_sudo_answers_are_told_apart_as_sudo_prints_them():
    assert become.needs_password("sudo: a password is required\n")
    assert not become.needs_password("sudo: unknown user")
    assert become.password_refused("sudo: 1 incorrect password attempt\n")
    assert become.password_refused("Sorry, try again.\nsudo: 3 incorrect password attempts")
    assert not become.password_refused("sudo: a password is required")


def _sudo(tmp_path, reads_password: bool):
    """A stand-in for sudo: skips its options, reads the password line (as sudo does when it asks) or not
    (as sudo does when a NOPASSWD rule matches), then runs the command."""
    fake = tmp_path / "sudo"
    eat = "IFS= read -r _pw; " if reads_password else ""
    fake.write_text(f'#!/bin/sh\n{eat}while [ "$1" != "--" ]; do shift; done; shift; exec "$@"\n')
    fake.chmod(0o755)
    return {"PATH": f"{tmp_path}:/usr/bin:/bin"}


def test_the_command_line_runs_as_written_under_a_real_shell(tmp_path):
    """What the host's sh gets after sudo took the password: the same words, and only its own input."""
    how = Become(Mode.PASSWORD, "pw")
    out = subprocess.run(["sh", "-c", how.wrap("printf '%s|' \"$0\" 'a b'; cat")], input=how.stdin() + b"rest",
                         capture_output=True, env=_sudo(tmp_path, reads_password=True), check=True).stdout
    assert out == b"sh|a b|rest"


def test_a_command_sudo_ran_without_asking_never_reads_the_password(tmp_path):
    how = Become(Mode.PASSWORD, "pw-secret")
    res = subprocess.run(["sh", "-c", how.wrap(f"cat > {tmp_path}/out")], input=how.stdin() + b"data",
                         capture_output=True, env=_sudo(tmp_path, reads_password=False))
    assert become.guard_refused(res.returncode, res.stderr.decode())
    assert not (tmp_path / "out").exists() and b"pw-secret" not in res.stdout + res.stderr


def test_the_check_has_the_shape_of_every_command():
    assert become.CHECK == Become(Mode.NOPASSWD).wrap("true") == "sudo -n -- sh -c true"


def test_a_connection_remembers_its_way_and_defaults_to_sudo_n_for_become_hosts():
    class Conn:
        class transport:  # noqa: N801 - stands for paramiko's Transport object
            pass

    c = Conn()
    assert become.of(c, False) is become.NONE
    assert become.of(c, True) == Become(Mode.NOPASSWD)
    become.attach(c, Become(Mode.PASSWORD, "pw"))
    assert become.of(c, True).mode is Mode.PASSWORD
