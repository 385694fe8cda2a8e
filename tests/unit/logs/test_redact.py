"""Secrets in journal lines are masked before fleet prints them (fleet.logs.redact)."""

from __future__ import annotations

import pytest

from fleet import secretref
from fleet.logs import redact


@pytest.mark.parametrize("raw,masked", [
    ("server_args=ServerArgs(model_path='/m', api_key='sk-123', port=30000)",
     "server_args=ServerArgs(model_path='/m', api_key='<secret>', port=30000)"),
    ('ServerArgs(api_key="sk-1 2")', 'ServerArgs(api_key="<secret>")'),
    ("launch_server --api-key sk-123 --port 1", "launch_server --api-key <secret> --port 1"),
    ("--api-key=sk-123", "--api-key=<secret>"),
    ("curl -H 'Authorization: Bearer sk-123'", "curl -H 'Authorization: Bearer <secret>'"),
    ("FLEET_SGLANG_API_KEY=sk-123", "FLEET_SGLANG_API_KEY=<secret>"),
    ("env: HF_TOKEN=hf_abc AWS_SECRET_ACCESS_KEY=wJ/x NCCL_P2P_DISABLE=1",
     "env: HF_TOKEN=<secret> AWS_SECRET_ACCESS_KEY=<secret> NCCL_P2P_DISABLE=1"),
])
def test_secrets_are_masked(raw, masked):
    assert redact.line(raw) == masked


@pytest.mark.parametrize("kept", ["ServerArgs(api_key=None, port=30000)",
                                  "ExecStart=/v/bin/python /var/lib/fleet/bin/fleet-launch api-key flag:api-key m",
                                  "Load weight end. mem usage=1.00 GB", "max_total_num_tokens=1234, kv_key=3"])
def test_lines_without_a_secret_are_unchanged(kept):
    assert redact.line(kept) == kept


ENV_FILE = (b'# fleet release r1\n'
            b'NCCL_P2P_DISABLE="1"\n'
            b'HF_TOKEN="hf_abcdef"\n'
            b"AWS_SECRET_ACCESS_KEY='wJalr/XUtnFEMI'\n"
            b'export OPENAI_API_KEY=sk-proj-123\n'
            b'PGPASSWORD=hunter2\n'
            b'MY_BLOB="b l o b"\n')


def test_an_env_file_shows_every_secret_named_value_masked():
    shown = redact.env_text(ENV_FILE, ["MY_BLOB"])
    assert shown == ('# fleet release r1\n'
                     'NCCL_P2P_DISABLE="1"\n'
                     'HF_TOKEN=<secret>\n'
                     'AWS_SECRET_ACCESS_KEY=<secret>\n'
                     'export OPENAI_API_KEY=<secret>\n'
                     'PGPASSWORD=<secret>\n'
                     'MY_BLOB=<secret>\n')
    for secret in ("hf_abcdef", "wJalr", "sk-proj", "hunter2", "b l o b"):
        assert secret not in shown


def test_a_unit_written_by_hand_shows_its_environment_and_command_line_masked():
    unit = (b'[Service]\nEnvironment=HF_TOKEN=hf_x "CUDA_VISIBLE_DEVICES=0,1" "AUTH=two words"\n'
            b'ExecStart=/v/bin/python -m sglang.launch_server --api-key sk-9 --port 1\n')
    shown = redact.env_text(unit)
    assert shown.splitlines()[1:] == ['Environment=HF_TOKEN=<secret> "CUDA_VISIBLE_DEVICES=0,1" "AUTH=<secret>"',
                                      "ExecStart=/v/bin/python -m sglang.launch_server --api-key <secret> --port 1"]


def test_an_env_file_that_is_not_utf8_or_holds_control_characters_is_shown_safely():
    shown = redact.env_text(b'A="caf\xe9"\nB="\x1b[2Jcleared"\nAPI_TOKEN="\xff\xfe"\n')
    assert shown == 'A="caf\\xe9"\nB="\\x1b[2Jcleared"\nAPI_TOKEN=<secret>\n'


@pytest.mark.parametrize("name,secret", [
    ("HF_TOKEN", True), ("HUGGING_FACE_HUB_TOKEN", True), ("AWS_SECRET_ACCESS_KEY", True), ("OPENAI_API_KEY", True),
    ("PGPASSWORD", True), ("GIT_CREDENTIALS", True), ("BASIC_AUTH", True), ("SGLANG_APIKEY", True),
    ("NCCL_P2P_DISABLE", False), ("CUDA_VISIBLE_DEVICES", False), ("NCCL_IB_PKEY", False), ("KEYBOARD", False),
    ("PASSTHROUGH_MODE", False), ("TOKENIZERS_PARALLELISM", False),
])
def test_a_name_says_whether_its_value_is_secret(name, secret):
    assert secretref.is_secret_name(name) is secret
