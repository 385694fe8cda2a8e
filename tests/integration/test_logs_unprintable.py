"""`inv logs` of journal lines that hold a carriage return (tqdm's progress bar, as sglang's `Loading safetensors
checkpoint shards` writes it to a journal: every update after a `\\r`, one line at the end) or a colour code, on a
real journal: journalctl shows such a line only as `[82B blob data]` unless asked for it whole (`--all`)."""

from __future__ import annotations

import json

import pytest
from fleetcli import inv, sh

BAR = "\\r".join(f"Loading safetensors checkpoint shards: {p:3d}% Completed | {n}/88" for p, n in
                 ((0, 0), (50, 44), (100, 88)))
RED = "\\0033[31mERROR\\0033[0m: the red one"


def _journal(sandbox_inventory, host: str, text: str) -> None:
    """A line in the sglang unit's journal as root's process writes it (journalctl -u matches a root message that
    names the unit as its object)."""
    sh(sandbox_inventory, host, "printf 'MESSAGE=%b\\nOBJECT_SYSTEMD_UNIT=sglang.service\\n"
                                f"SYSLOG_IDENTIFIER=python3\\n' '{text}' | logger --journald")


@pytest.mark.timeout(120)
def test_a_progress_bar_or_a_coloured_line_is_shown_as_a_terminal_shows_it_never_as_blob_data(sandbox,
                                                                                           sandbox_inventory):
    """A newcomer's `inv logs` (issue 46, 9, a new form): both lines read `[82B blob data]` and `[33B blob data]`,
    their words gone, the deploy's watcher blind to them too (it reads the same journalctl)."""
    _journal(sandbox_inventory, "sbx2", BAR)
    _journal(sandbox_inventory, "sbx2", RED)
    shown = inv(sandbox, "logs", "--host", "sbx2", "-n", "2")
    assert shown.returncode == 0, shown.stderr
    assert "blob data" not in shown.stdout, shown.stdout
    bar, red = shown.stdout.splitlines()
    assert bar.endswith(" Loading safetensors checkpoint shards: 100% Completed | 88/88"), bar  # the bar's last state
    assert red.endswith(" ERROR: the red one"), red  # the colour left out, never obeyed
    as_json = inv(sandbox, "logs", "--host", "sbx2", "-n", "2", "--json")
    lines = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [line["text"] for line in lines] == [BAR.replace("\\r", "\r"), "\x1b[31mERROR\x1b[0m: the red one"]
