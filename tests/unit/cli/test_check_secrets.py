"""Secret references a deploy from this machine cannot resolve (issue 46, finding 7; the eighteenth newcomer's hour):
`inv check` said `0 errors, 0 warnings` for a playbook with three, then `inv deploy` refused them one per run (the
API key's variable, then the token file, then the next variable). `inv check` now warns of each (CI may have none
set), and the deploy names them all in its one line."""

from __future__ import annotations

import pytest

from fleet.deploy import inputs
from fleet.errors import InputError
from fleet.playbook import load

BOOK = """name: sec
model: {path: /models/x}
serve:
  host: 0.0.0.0
  api_key: {env: FLEET_TEST_NO_KEY}
  env:
    HF_TOKEN: {file: /nonexistent/hf.token}
    OTHER: {env: FLEET_TEST_NO_OTHER}
ladder:
  - name: plain
    env: {RUNG_TOKEN: {env: FLEET_TEST_NO_RUNG}}
"""


@pytest.fixture
def book(tmp_path, monkeypatch):
    for name in ("FLEET_TEST_NO_KEY", "FLEET_TEST_NO_OTHER", "FLEET_TEST_NO_RUNG"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "sec.yaml"
    path.write_text(BOOK)
    return path


def test_check_warns_of_every_secret_this_machine_cannot_resolve(book):
    found = inputs.check_playbook(book)
    assert found.errors == []
    said = [p.text for p in found.warnings]
    assert len(said) == 4, said
    for key in ("serve.api_key.env: $FLEET_TEST_NO_KEY", "serve.env.HF_TOKEN.file", "serve.env.OTHER.env",
                "ladder.0.env.RUNG_TOKEN.env: $FLEET_TEST_NO_RUNG"):
        assert any(key in s and s.endswith("(on this machine: a deploy from here refuses it)") for s in said), key


def test_a_deploy_names_every_secret_it_cannot_resolve_at_once(book):
    with pytest.raises(InputError) as refused:
        inputs.secrets_for(load(book))
    said = str(refused.value)
    assert "\n" not in said
    for key in ("$FLEET_TEST_NO_KEY", "/nonexistent/hf.token", "$FLEET_TEST_NO_OTHER", "$FLEET_TEST_NO_RUNG"):
        assert key in said, said


def test_secrets_that_resolve_are_no_warning(book, monkeypatch, tmp_path):
    token = tmp_path / "hf.token"
    token.write_text("hf_x\n")
    book.write_text(BOOK.replace("/nonexistent/hf.token", str(token)))
    for name in ("FLEET_TEST_NO_KEY", "FLEET_TEST_NO_OTHER", "FLEET_TEST_NO_RUNG"):
        monkeypatch.setenv(name, "v")
    assert inputs.check_playbook(book).warnings == []
    assert len(inputs.secrets_for(load(book))) == 4
