"""Unit and env file rendering: systemd's quoting rules, no injection, hardening that GPU servers survive."""

from __future__ import annotations

import shlex

import pytest

from fleet.host.render import (
    FORBIDDEN_HARDENING,
    RenderError,
    UnitSpec,
    envfile_quote,
    exec_start,
    load_credential,
    render_env,
    render_unit,
    server_argv,
    systemd_quote,
)


def spec(**changes) -> UnitSpec:
    base = dict(playbook="glm5-nvfp4", rung="no-fusion", release="r1", user="root", workdir="/root",
                env_file="/etc/fleet/sglang.env",
                argv=["/root/ml-env/bin/python", "-m", "sglang.launch_server", "--tp-size", "8"],
                env={"NCCL_P2P_DISABLE": "1"})
    base.update(changes)
    return UnitSpec(**base)


@pytest.mark.parametrize("arg,quoted", [
    ("--tp-size", "--tp-size"),
    ("/models/GLM-5", "/models/GLM-5"),
    ("a b", '"a b"'),
    ("100%", "100%%"),
    ("$HOME", "$$HOME"),
    ('say "hi"', '"say \\"hi\\""'),
    ("x;rm -rf /", '"x;rm -rf /"'),
    ("`id`", '"`id`"'),
    ("back\\slash", '"back\\\\slash"'),
    ("", '""'),
])
def test_systemd_quote_follows_systemd_rules(arg, quoted):
    assert systemd_quote(arg) == quoted


@pytest.mark.parametrize("bad", ["a\nExecStartPre=/bin/evil", "a\rb", "a\0b"])
def test_newlines_cannot_smuggle_directives(bad):
    with pytest.raises(RenderError):
        systemd_quote(bad)
    with pytest.raises(RenderError):
        envfile_quote(bad)


def test_exec_start_needs_an_absolute_path_and_expands_nothing():
    with pytest.raises(RenderError, match="absolute path"):
        exec_start(["python", "-m", "x"])
    assert exec_start(["/usr/bin/python3", "${KEY}", "100%"]) == "/usr/bin/python3 \"$${KEY}\" 100%%"


def test_a_keyed_server_starts_through_the_launcher_with_its_credential():
    argv = server_argv("/v/bin/python", "sglang.launch_server", ["--port", "1"], keyed=True)
    assert argv == ["/v/bin/python", "/var/lib/fleet/bin/fleet-launch", "api-key", "flag:api-key",
                    "sglang.launch_server", "--port", "1"]
    assert server_argv("/v/bin/python", "m", [], keyed=False) == ["/v/bin/python", "-m", "m"]
    assert load_credential("/etc/fleet/sglang.key") == "api-key:/etc/fleet/sglang.key"
    assert load_credential(None) is None
    assert load_credential("/etc/fleet/a\\x2db%.key") == "api-key:/etc/fleet/a\\x2db%%.key"  # tried on systemd 252
    for bad in ("/etc/fleet/a b.key", "/etc/fleet/a:b.key", "relative.key"):
        with pytest.raises(RenderError):
            load_credential(bad)


def test_envfile_values_are_double_quoted_with_escapes():
    assert envfile_quote('a"b$c`d\\e') == '"a\\"b\\$c\\`d\\\\e"'


def test_rendered_unit_has_the_command_kill_mode_and_no_forbidden_hardening():
    text = render_unit(spec(argv=["/root/ml-env/bin/python", "-m", "sglang.launch_server", "--served-model-name",
                                  "glm 5", "--chat-template", "x%y"]))
    assert "ExecStart=/root/ml-env/bin/python -m sglang.launch_server --served-model-name \"glm 5\" " \
           "--chat-template x%%y\n" in text
    assert "KillMode=control-group\n" in text and "TimeoutStopSec=120\n" in text
    assert "EnvironmentFile=/etc/fleet/sglang.env\n" in text
    for forbidden in FORBIDDEN_HARDENING:
        assert forbidden not in text
    assert "NoNewPrivileges=yes" in text and "{{" not in text


def test_rendered_env_file_round_trips_through_shell_style_parsing():
    text = render_env(spec(env={"A": "1", "B": "two words", "C": 'q"uote'}))
    pairs = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert {k: shlex.split(v)[0] for k, v in pairs.items()} == {"A": "1", "B": "two words", "C": 'q"uote'}
