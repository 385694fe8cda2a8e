"""`inv history` of a host whose releases ran different playbooks says which ran which at 80 columns: issue 46,
finding 11 (the playbook column), a newcomer's form (h-new19). After README step 5 (sbx3: llama-pinned-0.5.9, then
0.5.23, then the rollback) `inv history -H sbx3` listed the releases with no playbook: its column came last and
was left out first, so the release to `rollback --to` was told from the others by its versions alone."""

from __future__ import annotations

import io

from rich.console import Console

from fleet.cli import deploy_view
from fleet.host.releases import Release


def release(rid: str, book: str) -> Release:
    return Release(id=rid, host="sbx3", playbook=book, playbook_sha256="x", created="2026-12-06T11:29:04+00:00",
                   status="ok", rung="plain", attempts=[{"rung": "plain", "outcome": "READY"}],
                   facts={"versions": {"sglang": book.rsplit("-", 1)[1], "flashinfer-python": "0.6.3"}})


def drawn(releases: list[Release], width: int = 80) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    deploy_view.render_history("sbx3", releases, releases[-1].id, console)
    return console.export_text().splitlines()


def test_releases_of_several_playbooks_say_theirs_at_80_columns():
    lines = drawn([release("20261206T112904Z-d657", "llama-pinned-0.5.9"),
                   release("20261206T113400Z-15d8", "llama-pinned-0.5.23")])
    assert "playbook" in lines[1].split() and max(len(line) for line in lines) <= 80
    assert "0.5.9" in lines[2].split("plain", 1)[1].split()[0] and "0.5.23" in lines[3].split("plain", 1)[1].split()[0]


def test_releases_of_one_playbook_keep_the_columns_they_had():
    lines = drawn([release("20261206T112904Z-d657", "llama-pinned-0.5.9"),
                   release("20261206T113400Z-15d8", "llama-pinned-0.5.9")])
    assert "playbook" not in lines[1].split() and "failure" in lines[1].split()
