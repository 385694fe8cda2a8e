"""`ladder:` written as one rung without its dash (`ladder: {name: r, flags: {...}}`, a YAML mapping where a list
was meant) was said `ladder: Input should be a valid list`, and nothing of the rung: with the dash added, the
next `inv check` brought out `--nosuch is in no sglang release` (issue 46, finding 7, in rounds; the fifteenth
newcomer's hour). The rung is now checked as the rung it is, in the same pass."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import yaml

from fleet.cli import check

BOOK: dict[str, Any] = {"name": "t", "model": {"path": "/models/m"}, "flags": {"tp-size": 8}}
RUNG = {"name": "r", "flags": {"nosuch-flag": 1}, "after": ["NOPE"]}


def _report(root: Path, book: dict[str, Any]) -> list[str]:
    (root / "t.yaml").write_text(yaml.safe_dump(book, sort_keys=False))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check.command([str(root / "t.yaml")], None, True)
    found = json.loads(out.getvalue())["playbooks"][0]
    return [*found["errors"], *found["warnings"]]


def test_a_ladder_of_one_rung_without_its_dash_has_the_rung_checked_in_the_same_pass(tmp_path):
    fixed = _report(tmp_path, {**BOOK, "ladder": [RUNG]})
    assert any("--nosuch-flag is in no sglang release" in p for p in fixed), fixed
    assert any("unknown failure class 'NOPE'" in p for p in fixed), fixed
    slipped = _report(tmp_path, {**BOOK, "ladder": RUNG})
    assert any("ladder: Input should be a valid list" in p for p in slipped), slipped
    assert any("--nosuch-flag is in no sglang release" in p for p in slipped), slipped
    assert any("unknown failure class 'NOPE'" in p for p in slipped), slipped
