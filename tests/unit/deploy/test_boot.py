"""fleet.deploy.boot: what a reboot starts is what serves. Every run that may write a unit ends with the current
release's unit enabled and no other unit it wrote; a run that leaves no current release (a first deploy that
served nothing) leaves its unit disabled; a unit masked by hand is never unmasked."""

from __future__ import annotations

from fakesession import FakeSession

from fleet.deploy import boot, hostrun
from fleet.progress import quiet


def test_the_serving_unit_not_enabled_is_enabled():
    assert boot.plan("sglang", "sglang", {"sglang": "disabled"}) == boot.BootPlan(enable="sglang")


def test_enabled_only_for_this_boot_is_enabled_for_good():
    assert boot.plan("sglang", "sglang", {"sglang": "enabled-runtime"}).enable == "sglang"


def test_an_enabled_serving_unit_is_left_as_it_is():
    assert not boot.plan("sglang", "sglang", {"sglang": "enabled"}).changes


def test_no_current_release_leaves_the_written_unit_disabled():
    """A first deploy that served nothing: its files stay, stopped; a reboot must not start them."""
    assert boot.plan(None, "sglang", {"sglang": "enabled"}) == boot.BootPlan(disable=("sglang",))
    assert not boot.plan(None, "sglang", {"sglang": "disabled"}).changes


def test_a_unit_the_run_wrote_that_no_release_serves_from_is_disabled_beside_the_enable():
    todo = boot.plan("sglang", "sglang-b", {"sglang": "disabled", "sglang-b": "enabled"})
    assert (todo.enable, todo.disable) == ("sglang", ("sglang-b",))


def test_a_masked_unit_is_never_unmasked_and_says_so():
    todo = boot.plan("sglang", "sglang", {"sglang": "masked"})
    assert not todo.changes
    assert "masked" in todo.notes[0] and "will not start after a reboot" in todo.notes[0]


class Host:
    """`current` and the unit's enablement on a modelled host."""

    def __init__(self, current: str | None, state: str) -> None:
        self.current, self.state = current, state

    def answer(self, command: str) -> tuple[int, str]:
        if command.startswith("readlink"):
            return 0, f"releases/{self.current}\n" if self.current else ""
        if "systemctl is-enabled" in command:
            return 0, self.state + "\n"
        if command.startswith("systemctl enable"):
            self.state = "enabled"
        if command.startswith("systemctl disable"):
            self.state = "disabled"
        return 0, ""


def test_a_run_that_writes_the_unit_and_ends_with_nothing_current_leaves_it_disabled():
    """The skeleton settles it at the end of the run, whatever the body was (fails before: no settle)."""
    host = Host(None, "enabled")
    s = FakeSession(answer=host.answer)
    said: list[str] = []
    with hostrun.host_run(s.host, None, "deploy x", unit="sglang", recover=hostrun.lock_only(quiet), session=s,
                          progress=said.append):
        pass
    assert host.state == "disabled"
    assert any("disabled sglang" in line for line in said)


def test_a_run_that_writes_no_unit_never_touches_enablement():
    host = Host(None, "enabled")
    s = FakeSession(answer=host.answer)
    with hostrun.host_run(s.host, None, "bench", unit=None, recover=hostrun.lock_only(quiet), session=s):
        pass
    assert host.state == "enabled" and not any("is-enabled" in c for c in s.sent)
