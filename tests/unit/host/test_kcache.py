"""fleet.host.kcache's command lines: every step in the server's user's folders runs as that user (issue 49, the
privilege drop), through a fake runner that records what the host would be asked."""

from __future__ import annotations

import shlex
from types import SimpleNamespace
from typing import Any

import pytest
from fakesession import HOST

from fleet.host import kcache, programs
from fleet.ssh.remote import BytesResult, CommandTimedOut, use_runner


class _Asked:
    """fleet.ssh.remote's Runner: records each command, answers as kcache.py does when it finds nothing."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def run_bytes(self, conn: Any, host: Any, command: str, data: Any, timeout: float,
                  max_output: int) -> BytesResult:
        self.commands.append(shlex.split(command))
        return BytesResult(0, b"", b"")


def _every_step(user: str) -> list[list[str]]:
    asked = _Asked()
    conn = SimpleNamespace(transport=SimpleNamespace())
    use_runner(conn, asked)  # type: ignore[arg-type]
    venv, folders = "/home/llm/ml-env", ["/home/llm/.cache/flashinfer/0.6.3/120a/cached_ops"]
    kcache.collect(conn, HOST, venv, folders, 1 << 20, user)  # type: ignore[arg-type]
    kcache.place(conn, HOST, venv, b"", "0" * 64, folders, user)  # type: ignore[arg-type]
    kcache.clear(conn, HOST, venv, folders, user)  # type: ignore[arg-type]
    kcache.unproven(conn, HOST, venv, user)  # type: ignore[arg-type]
    kcache.modules(conn, HOST, venv, folders, user)  # type: ignore[arg-type]
    return asked.commands


def test_every_step_runs_as_the_servers_user_and_the_name_is_one_argument() -> None:
    steps = _every_step("llm")
    verbs = [next(w for w in _args(argv) if not w.startswith("--")) for argv in steps]
    assert verbs == ["collect", "place", "clear", "unproven", "modules"]
    assert all("--user=llm" in argv[:argv.index(verb)] for argv, verb in zip(steps, verbs, strict=True)), steps
    # root runs it until the drop: on the host's own python3 (checked first), isolated, never the venv the user may own
    assert all(argv[3:8] == ["fleet-interpreter", "/usr/bin/python3", "-I", "-S", "-c"] for argv in steps), steps


def test_a_root_unit_stays_root_on_the_hosts_own_python_never_the_venvs() -> None:
    # a unit with no User= (or root): kcache.py stays root, and root runs the host's python3, isolated, never the
    # venv's bin/python (before: the venv's python ran as root, whoever owned it)
    steps = _every_step("root") + _every_step("")
    assert not [w for argv in steps for w in argv if w.startswith("--user")]
    assert all(argv[3:8] == ["fleet-interpreter", "/usr/bin/python3", "-I", "-S", "-c"] for argv in steps), steps
    assert not [w for argv in steps for w in argv if w.endswith("/bin/python")]
    assert all(argv[argv.index(programs.text("kcache.py")) + 1] == "--venv=/home/llm/ml-env" for argv in steps)


def _args(argv: list[str]) -> list[str]:
    """kcache.py's arguments: the words after its text."""
    return argv[argv.index(programs.text("kcache.py")) + 1:]


@pytest.mark.parametrize("name", ["llm; rm -rf /", "-ollm", "Llm", "a" * 33, "llm\n", "../root"])
def test_a_name_that_is_no_account_name_is_never_sent(name: str) -> None:
    with pytest.raises(ValueError, match="is no user name"):
        _every_step(name)


def test_a_put_back_removes_marked_folders_as_the_units_user() -> None:
    assert "r='runuser -u llm --'" in kcache.drop_unproven(user="llm")
    assert "runuser" not in kcache.drop_unproven(user="root") + kcache.drop_unproven()
    with pytest.raises(ValueError, match="is no user name"):
        kcache.drop_unproven(user="llm; reboot")


class _NoPython(_Asked):
    def run_bytes(self, conn: Any, host: Any, command: str, data: Any, timeout: float,
                  max_output: int) -> BytesResult:
        super().run_bytes(conn, host, command, data, timeout, max_output)
        return BytesResult(127, b"", b"sh: 1: /usr/bin/python3: not found\n")


def test_a_host_without_python3_refuses_plainly_nothing_changed() -> None:
    # a user's unit runs kcache.py on /usr/bin/python3: a host without it changed nothing (no clear, no guess that
    # caches may be in place)
    conn = SimpleNamespace(transport=SimpleNamespace())
    use_runner(conn, _NoPython())  # type: ignore[arg-type]
    folders = ["/home/llm/.cache/flashinfer/0.6.3/120a/cached_ops"]
    placed = kcache.place(conn, HOST, "/v", b"", "0" * 64, folders, "llm")  # type: ignore[arg-type]
    gone = kcache.unproven(conn, HOST, "/v", "llm")  # type: ignore[arg-type]
    assert isinstance(placed, kcache.HostRefused) and not placed.unknown and not placed.bad_entry, placed
    assert isinstance(gone, kcache.HostRefused) and not gone.unknown and "not found" in gone.reason, gone


def test_a_users_home_is_its_passwd_lines_plain_absolute_folder_or_unknown():
    """The warm start's folders are under the home systemd gives the unit (the passwd entry's), never a guessed
    /home/NAME: a service account's is /var/lib/NAME (useradd -r -d, adduser --system). A host's odd answer is no
    home (the start goes cold), never a folder to act in. Found by review (h-adv15, stop 54)."""
    line = "sglang:x:998:998::/var/lib/sglang:/usr/sbin/nologin\n"
    assert kcache.parse_home("sglang", line) == "/var/lib/sglang"
    assert kcache.parse_home("llm", "llm:x:1000:1000:LLM,,,:/home/llm:/bin/bash") == "/home/llm"
    for odd in ("", "\n", "root:x:0:0:root:/root:/bin/bash\n", line + line, "sglang:x:998:998::/:/bin/sh",
                "sglang:x:998:998::/srv:/bin/sh", "sglang:x:998:998::/var/../etc:/bin/sh",
                "sglang:x:998:998::var/lib/x:/bin/sh", "sglang:x:998:998::/var/lib/a b:/bin/sh",
                "sglang:x:998:998::/var/lib/x\x1b[2J:/bin/sh", "sglang:x:998:998:/var/lib/x:/bin/sh"):
        assert kcache.parse_home("sglang", odd) is None, odd


class _Says:
    """A Runner that answers every command with one result, or raises one error."""

    def __init__(self, answer: BytesResult | Exception) -> None:
        self.answer, self.commands = answer, []  # type: ignore[var-annotated]

    def run_bytes(self, conn: Any, host: Any, command: str, data: Any, timeout: float,
                  max_output: int) -> BytesResult:
        self.commands.append(command)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _home(user: str, answer: BytesResult | Exception) -> tuple[str | None, list[str]]:
    says = _Says(answer)
    conn = SimpleNamespace(transport=SimpleNamespace())
    use_runner(conn, says)  # type: ignore[arg-type]
    return kcache.home(conn, HOST, user), says.commands  # type: ignore[arg-type]


def test_the_home_is_asked_of_the_host_for_a_user_and_a_failure_is_no_home() -> None:
    line = b"sglang:x:998:998::/var/lib/sglang:/usr/sbin/nologin\n"
    assert _home("sglang", BytesResult(0, line, b"")) == ("/var/lib/sglang", ["getent passwd sglang"])
    assert _home("root", BytesResult(0, line, b"")) == ("/root", [])  # root's: asked nothing
    assert _home("sglang", BytesResult(2, b"", b""))[0] is None  # getent: no such account
    assert _home("sglang", CommandTimedOut("getent passwd sglang: no answer in 30 s"))[0] is None
    with pytest.raises(ValueError):
        _home("x; rm -rf /", BytesResult(0, line, b""))  # no account name: refused before anything is sent
