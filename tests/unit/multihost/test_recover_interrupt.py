"""Ctrl-C in `inv recover`'s wait for the host's next boot (issue 46, finding 4; newcomer h-new17): it ended at once
with a bare `interrupted`, the host's lock kept through the reboot left held (`inv status`: left half-done by a run
that died) and nothing said of it. Now the first Ctrl-C says what the wait is for and goes on waiting; a second
stops waiting and says what it left: the reboot goes on, the lock stays for the next run to take over."""

from __future__ import annotations

import pytest
from fakesession import HOST
from test_recover_hostile import Api, Link, client, closer, host_at, serve, wants_reset  # noqa: F401 (fixtures)

from fleet.errors import ConnectError
from fleet.multihost import recover as rec
from fleet.ssh.connect import ConnectOptions


class CtrlC:
    """The wait's pause between looks: the operator presses Ctrl-C at the `at`-th pauses."""

    def __init__(self, *at: int) -> None:
        self.at, self.calls = set(at), 0

    def __call__(self, seconds: float) -> None:
        self.calls += 1
        if self.calls in self.at:
            raise KeyboardInterrupt


def test_a_first_ctrl_c_in_the_wait_for_the_next_boot_says_so_and_a_second_says_what_it_left():
    link = Link(comes_back=False)  # the host is still rebooting
    link.facts = iter([wants_reset("reboot")])
    said: list[str] = []
    pauses = CtrlC(1, 3)
    with pytest.raises(KeyboardInterrupt):
        rec.recover(HOST, ConnectOptions(), None, wait_s=600, sessions=link.open, sleep=pauses, say=said.append)
    lines = [str(m) for m in said if str(m).startswith("Ctrl-C")]
    assert lines == [
        f"Ctrl-C: waiting for {HOST.name}'s next boot to release its lock; Ctrl-C again to stop waiting (the reboot "
        "goes on there)",
        f"Ctrl-C again: stopped waiting for {HOST.name}'s next boot; the reboot goes on there; its lock stays until "
        f"the next deploy, rollback or `inv recover --host {HOST.name}` there takes it over"]
    assert pauses.calls == 3  # it went on looking after the first
    assert "unlock" not in link.calls  # the lock kept through the reboot, for the next run


def refused(host, opts):
    raise ConnectError(f"{host.name}: connection refused")


def test_the_wait_without_an_answer_for_ctrl_c_ends_at_the_first():
    with pytest.raises(KeyboardInterrupt):
        rec.wait_for_ssh(HOST, ConnectOptions(), 600, "old", refused, sleep=CtrlC(1))


def test_a_guest_reset_through_the_api_says_what_is_left_when_the_wait_is_stopped(serve, closer, tmp_path):  # noqa: F811
    api = serve(Api)
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        rec.recover(host_at(closer, tmp_path), ConnectOptions(attempts=1), client(api), wait_s=600, unreachable=True,
                    sleep=CtrlC(1, 2), say=said.append)
    assert Api.posts == ["/api2/json/nodes/pve1/qemu/101/status/reset"]
    assert [str(m) for m in said if str(m).startswith("Ctrl-C")] == [
        "Ctrl-C: waiting for h1's next boot to probe it; Ctrl-C again to stop waiting (the reboot goes on there)",
        "Ctrl-C again: stopped waiting for h1's next boot; the reboot goes on there; `inv probe --host h1` once it "
        "is back"]
