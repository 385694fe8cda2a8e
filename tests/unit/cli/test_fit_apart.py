"""A table's cut keeps values that differ apart: issue 46, finding 11 (the board's playbook column), a newcomer's
form (h-new19): at 80 columns, with a failure column beside it, sbx1 on llama-pinned-0.5.23 and sbx3 on
llama-pinned-0.5.9 both read `llama-pinned…`, the board's room all taken (no room left to grow the column)."""

from __future__ import annotations

import dataclasses
import io
import json

from fakesession import HOST
from rich.console import Console

from fleet.cli import fit
from fleet.cli.status_view import table_of
from fleet.multihost import status

UNIT_SHA = "a" * 64


def output(book: str) -> str:
    manifest = json.dumps({"id": "r2", "playbook": book, "rung": "plain",
                           "files": {"/etc/systemd/system/sglang.service": {"sha256": UNIT_SHA}}})
    m = "@@fleet-status@@\n"
    return (f"ActiveState=active\nSubState=running\n{m}{manifest}\n{m}200\n{m}{UNIT_SHA} "
            f"/etc/systemd/system/sglang.service\n{m}250.10, 600.00\n")


def test_values_alike_at_their_start_keep_the_end_that_tells_them_apart():
    cut = fit.shorten_apart(["llama-pinned-0.5.23", "llama-pinned-0.5.9", "glm5-nvfp4"], 12)
    assert cut == ["llama…0.5.23", "llama-…0.5.9", "glm5-nvfp4"]
    assert all(len(c) <= 12 for c in cut)


def test_values_that_part_early_or_are_alike_keep_the_plain_cut():
    assert fit.shorten_apart(["glm5-nvfp4-tp8-long", "llama-3.1-8b-instruct"], 12) == ["glm5-nvfp4-…", "llama-3.1-8…"]
    assert fit.shorten_apart(["same-long-name-x", "same-long-name-x"], 12) == ["same-long-n…"] * 2
    assert fit.shorten_apart(["abcdefghijklmn1", "abcdefghijklmn2"], 12, ascii_only=True) == ["abcdefghij~1",
                                                                                           "abcdefghij~2"]


def test_the_board_at_80_columns_tells_two_playbooks_alike_in_their_first_12_characters_apart():
    rows = [status.parse(dataclasses.replace(HOST, name=f"sbx{i}"), output(book))
            for i, book in enumerate(["glm5-nvfp4", "llama-pinned-0.5.23", "llama-pinned-0.5.9"])]
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(table_of(rows, width=80))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    body = {line.split()[0]: line for line in lines if line.split()[:1] and line.split()[0].startswith("sbx")}
    assert "0.5.23" in body["sbx1"] and "0.5.9" in body["sbx2"], lines
