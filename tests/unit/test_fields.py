"""The typed fields every unit, env file, path and shell value passes through, and YAML's own traps."""

from __future__ import annotations

import os

import pytest

from fleet import fields, playbook, yamlfile
from fleet.deploy import inputs
from fleet.errors import InputError


@pytest.mark.parametrize("check,good,bad", [
    (fields.unit_name, ["sglang", "sglang-router", "sglang@1", "a:b_c.d"],
     ["sglang\nUser=root", "sglang\n", "-x", "a b", "x.service", "a/b", "", "a@b@c"]),
    (fields.user_name, ["root", "svc_llm", "_x", "a-b"], ["root\n", "Root", "1abc", "a b", "x" * 33, "root;id"]),
    (fields.name, ["glm5-nvfp4", "tp4-pp2", "a.b"], ["glm5\n", "-a", "A", "a/b", "x" * 64]),
    (fields.abs_path, ["/root/ml-env", "/a/b"], ["root/ml-env", "/a/../b", "/a/", "//a", "/a\n", "/a/./b",
                                                "/'", "/a\"b", "/a\\b", "/a$b"]),
    (fields.host_addr, ["127.0.0.1", "0.0.0.0", "::1", "gpu-1.example.org", "fe80::1%eth0", "fe80::1%enp65s0f1"],
     ["0.0.0.0\nx", "a b", "1.2.3", "-a", "a..b", "", "fe80::1%$(touch X;echo eth0)", "fe80::1%x,gpu-node-2",
      "fe80::1%", "fe80::1%a b", "fe80::1%" + "e" * 16, "10.0.0.1%eth0"]),
    (fields.text, ["a %h $HOME \"q\" 'q' \\ é"], ["a\nb", "a\rb", "a\x00b", "a\x1bb", "a\u2028b", "x" * 5000]),
])
def test_each_field_takes_what_is_legal_and_refuses_what_would_break_out(check, good, bad):
    for value in good:
        assert check(value) == value
    for value in bad:
        with pytest.raises(ValueError):
            check(value)


def _write(tmp_path, data: bytes):
    p = tmp_path / "t.yaml"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("data,expected", [
    (b"a: 1\nb: \"\xff\"\n", r"t\.yaml:2: not UTF-8 text \(byte 0xff\)"),
    (b"ladder: &a [*a]\n", r"t\.yaml:1: ladder\.0: an alias refers to the value that contains it"),
    (b"? [a, b]\n: 1\n", r"t\.yaml:1: document: a key must be a plain value"),
    (b"".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10) if i else 'x'}]\n".encode() for i in range(7)),
     r"aliases expand to more than 100000 values"),
    (b"a: 1\na: 2\n", r"t\.yaml:2: a: duplicate key"),
])
def test_yaml_traps_are_one_line_errors_naming_file_and_line(tmp_path, data, expected):
    with pytest.raises(InputError, match=expected) as err:
        yamlfile.load(_write(tmp_path, data))
    assert "\n" not in str(err.value)


def test_aliases_within_the_bound_still_work(tmp_path):
    doc = yamlfile.load(_write(tmp_path, b"env: &e {A: '1'}\nx: *e\ny: *e\n"))
    assert doc.data == {"env": {"A": "1"}, "x": {"A": "1"}, "y": {"A": "1"}}


def _book_with_key(ref: dict) -> playbook.Playbook:
    return playbook.Playbook.model_validate({"name": "t", "model": {"path": "/m"}, "ladder": [{"name": "r"}],
                                             "serve": {"host": "0.0.0.0", "api_key": ref}})


@pytest.mark.parametrize("content,expected", [
    (b"", "holds no key"), (b"  \n\t\n", "holds no key"), (b"\xff\xfe", "not UTF-8"),
    (b"two words", "spaces or control characters"),
])
def test_an_api_key_file_that_would_turn_auth_off_or_garble_it_is_refused(tmp_path, content, expected):
    key = tmp_path / "key"
    key.write_bytes(content)
    with pytest.raises(InputError, match=expected):
        inputs.secrets_for(_book_with_key({"file": str(key)}))


def test_a_blank_api_key_variable_is_refused_and_a_good_one_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_T_KEY", "   ")
    with pytest.raises(InputError, match=r"\$FLEET_T_KEY is not set or blank"):
        inputs.secrets_for(_book_with_key({"env": "FLEET_T_KEY"}))
    monkeypatch.setenv("FLEET_T_KEY", "sk-good\n")
    assert list(inputs.secrets_for(_book_with_key({"env": "FLEET_T_KEY"})).values()) == ["sk-good"]
    assert os.environ["FLEET_T_KEY"] == "sk-good\n"
