"""Found by review (h-adv16, of 8788d47..f7fb7f0): restore.installed_problem, the owner rule of a unit as installed
(asked before the run skeleton, recover and before-fleet start a unit again), read /etc/systemd/system/UNIT.service
and /etc/fleet/UNIT.env alone. systemd runs the unit with its drop-ins (`systemctl edit`), whose User=, ExecStart=
and Environment= win, and from wherever its file is (/lib/systemd/system for a unit fleet never wrote): a drop-in's
PYTHONPATH naming a user's folder was never judged, and a unit with no file at fleet's path was started unasked.
tests/integration/test_owner_boot.py shows the first end to end (uids ['0'])."""
from __future__ import annotations

from fakesession import FakeSession

from fleet.deploy import restore
from fleet.host import service

UNIT = ("# /etc/systemd/system/sglang.service\n[Service]\nUser=fleet\nEnvironmentFile=/etc/fleet/sglang.env\n"
        "ExecStart=/home/fleet/venv/bin/python -m sglang.launch_server --port 30000\n")
DROPIN = ("\n# /etc/systemd/system/sglang.service.d/override.conf\n[Service]\nUser=root\n"
          "Environment=\"PYTHONPATH=/home/fleet/pp\" NCCL_P2P_DISABLE=1\n")


def judged(monkeypatch, answer, files):
    """What the owner rule was asked of: (user, venv) the unit runs, and its environment's lines; None: not asked."""
    asked = []

    def rule(conn, host, unit_text, env_text=""):
        from fleet.host.render import env_file_values, unit_runs
        asked.append((unit_runs(unit_text), env_file_values(env_text)))
        return None

    monkeypatch.setattr(restore, "unit_owner_problem", rule)
    restore.installed_problem(FakeSession(answer=answer, files=files), "sglang")
    return asked[0] if asked else None


def cat(text):
    return lambda command: (0, text) if command.startswith("systemctl cat") else (0, "")


def test_a_drop_ins_user_and_environment_are_what_the_rule_judges(monkeypatch):
    files = {"/etc/systemd/system/sglang.service": UNIT.encode(), "/etc/fleet/sglang.env": b'HOME="/var/lib/x"\n'}
    runs, env = judged(monkeypatch, cat(UNIT + DROPIN), files)
    assert runs == ("root", "/home/fleet/venv")  # before: ('fleet', ...), the drop-in's User=root unseen
    assert env["PYTHONPATH"] == "/home/fleet/pp" and env["HOME"] == "/var/lib/x"  # before: no PYTHONPATH


def test_a_unit_whose_file_is_not_at_fleets_path_is_judged_too(monkeypatch):
    lib = UNIT.replace("/etc/systemd/system/", "/lib/systemd/system/")
    runs, env = judged(monkeypatch, cat(lib), {})  # before: not asked (no /etc file): started unasked
    assert runs == ("fleet", "/home/fleet/venv")


def test_an_env_file_wins_over_environment_and_an_empty_one_resets(monkeypatch):
    text = UNIT + "Environment=PYTHONPATH=/a\nEnvironment=\nEnvironment=LD_PRELOAD=/b\nEnvironmentFile=-/etc/x.env\n"
    files = {"/etc/fleet/sglang.env": b'LD_PRELOAD="/c"\n', "/etc/x.env": b"CC=/d\n"}
    _, env = judged(monkeypatch, cat(text), files)
    assert "PYTHONPATH" not in env and env["LD_PRELOAD"] == "/c" and env["CC"] == "/d"


def test_where_systemctl_says_nothing_fleets_files_are_read_as_before(monkeypatch):
    files = {"/etc/systemd/system/sglang.service": UNIT.encode(), "/etc/fleet/sglang.env": b'PYTHONPATH="/p"\n'}
    runs, env = judged(monkeypatch, cat(""), files)
    assert runs == ("fleet", "/home/fleet/venv") and env["PYTHONPATH"] == "/p"
    assert judged(monkeypatch, cat(""), {}) is None  # no unit at all: nothing to start


def test_a_systemctl_that_cannot_say_the_unit_is_a_refusal_not_the_file_without_its_drop_ins(monkeypatch):
    """`systemctl cat` failing for another reason than no such unit (no bus) was read as "no unit": the file at
    fleet's path was judged without the drop-ins over it (h-adv18's finding, left by it)."""
    monkeypatch.setattr(service, "DROP_INS_AGAIN_S", 0)
    files = {"/etc/systemd/system/sglang.service": UNIT.encode()}
    bus = lambda command: (1, "Failed to connect to bus: No such file or directory") \
        if command.startswith("systemctl cat") else (0, "")  # noqa: E731
    assert judged(monkeypatch, bus, files) is None  # not asked: refused before
    why = restore.installed_problem(FakeSession(answer=bus, files=files), "sglang")
    assert why is not None and why.startswith("fleet cannot read the unit as systemd would run it: h1: `systemctl cat")
    assert why.endswith("Failed to connect to bus: No such file or directory")
    gone = lambda command: (1, "No files found for sglang.service.") \
        if command.startswith("systemctl cat") else (0, "")  # noqa: E731
    assert judged(monkeypatch, gone, files) == (("fleet", "/home/fleet/venv"), {})  # no such unit: fleet's file


def test_a_systemctl_cat_that_fails_once_is_asked_again(monkeypatch):
    """One refused answer (systemd re-executing) left a recovered host stopped (tests/unit/multihost/
    test_recover_points.py, a fault at `systemctl cat`): asked once more, as drop_ins asks."""
    monkeypatch.setattr(service, "DROP_INS_AGAIN_S", 0)
    asked = []

    def once(command):
        if command.startswith("systemctl cat"):
            asked.append(command)
            return (1, "Failed to connect to bus") if len(asked) == 1 else (0, UNIT + DROPIN)
        return 0, ""
    assert judged(monkeypatch, once, {})[0] == ("root", "/home/fleet/venv") and len(asked) == 2
