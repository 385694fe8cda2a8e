"""Secrets in journal lines are masked before fleet prints them (fleet.logs.redact)."""

from __future__ import annotations

import pytest

from fleet.logs import redact


@pytest.mark.parametrize("raw,masked", [
    ("server_args=ServerArgs(model_path='/m', api_key='sk-123', port=30000)",
     "server_args=ServerArgs(model_path='/m', api_key='<secret>', port=30000)"),
    ('ServerArgs(api_key="sk-1 2")', 'ServerArgs(api_key="<secret>")'),
    ("launch_server --api-key sk-123 --port 1", "launch_server --api-key <secret> --port 1"),
    ("--api-key=sk-123", "--api-key=<secret>"),
    ("curl -H 'Authorization: Bearer sk-123'", "curl -H 'Authorization: Bearer <secret>'"),
    ("FLEET_SGLANG_API_KEY=sk-123", "FLEET_SGLANG_API_KEY=<secret>"),
])
def test_secrets_are_masked(raw, masked):
    assert redact.line(raw) == masked


@pytest.mark.parametrize("kept", ["ServerArgs(api_key=None, port=30000)",
                                  "ExecStart=/v/bin/python /var/lib/fleet/bin/fleet-launch api-key flag:api-key m",
                                  "Load weight end. mem usage=1.00 GB"])
def test_lines_without_a_secret_are_unchanged(kept):
    assert redact.line(kept) == kept
