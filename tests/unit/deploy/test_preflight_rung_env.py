"""A rung's own env is judged by the owner rule for that rung only (fleet.deploy.preflight.rung_env_problem): a rung
whose env has the unit's python load from a folder another user may change is refused, and the other rungs go on.
Before (stop 54), every rung's env was judged with the venv at once, so one such rung refused the whole host: no
rung was tried, not even one whose env loads nothing."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fakesession import HOST

from fleet.deploy import preflight
from fleet.host.serverchecks import MARK
from fleet.playbook import Playbook
from fleet.ssh.remote import BytesResult, use_runner

OPS = "/home/ops/pp"  # a folder the user ops owns


class Host:
    """Answers preflight's venv_run as a host where root owns the venv and ops owns OPS."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def run_bytes(self, conn: Any, host: Any, command: str, data: Any, timeout: float,
                  max_output: int) -> BytesResult:
        self.asked.append(command)
        said = "1000:1000" if OPS in command else ""  # the rule's answer: ops owns what the unit loads
        name = "ops" if said else ""
        return BytesResult(0, f"{MARK}\nyes\n0\n0\n{name}\n{said}\n".encode(), b"")


def book(*rungs: dict) -> Playbook:
    return Playbook.model_validate({"name": "p", "model": {"path": "/models/m"}, "ladder": list(rungs)})


def test_a_rung_whose_env_loads_a_users_folder_is_refused_alone():
    fake = Host()
    conn = SimpleNamespace(transport=SimpleNamespace())
    use_runner(conn, fake)  # type: ignore[arg-type]
    b = book({"name": "plain"}, {"name": "ops-path", "env": {"PYTHONPATH": OPS}})
    assert preflight.venv_problem(conn, HOST, b, "/root/ml-env") is None  # type: ignore[arg-type]
    plain, ops = b.ladder
    assert preflight.rung_env_problem(conn, HOST, b, "/root/ml-env", plain) is None  # type: ignore[arg-type]
    why = preflight.rung_env_problem(conn, HOST, b, "/root/ml-env", ops)  # type: ignore[arg-type]
    assert why and "ops (uid 1000)'s, and the unit runs as root" in why, why
    assert len(fake.asked) == 2  # the host's env once, and the one rung that adds to it: never a rung that adds none


def test_a_rung_env_entry_fleet_cannot_place_is_that_rungs_refusal():
    conn = SimpleNamespace(transport=SimpleNamespace())
    use_runner(conn, Host())  # type: ignore[arg-type]
    b = book({"name": "plain"}, {"name": "relative", "env": {"LD_LIBRARY_PATH": "lib"}})
    assert preflight.venv_problem(conn, HOST, b, "/root/ml-env") is None  # type: ignore[arg-type]
    why = preflight.rung_env_problem(conn, HOST, b, "/root/ml-env", b.ladder[1])  # type: ignore[arg-type]
    assert why and why.startswith("env LD_LIBRARY_PATH names 'lib'"), why
