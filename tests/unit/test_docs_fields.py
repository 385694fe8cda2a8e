"""The docs cannot drift from the schemas: every field of playbooks, rungs, patch sets, rule files and deploy
outcomes is listed in docs/playbooks.md (in its own section), every failure class in docs/troubleshooting.md."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from fleet.logs.remedies import OutcomesFile
from fleet.logs.rules import LogClass, RuleFile, RuleSpec
from fleet.outcomes import DEPLOY_OUTCOMES
from fleet.patches.sets import PatchSet
from fleet.playbook import Playbook

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _models(annotation, key: str = "OUTCOME") -> list[tuple[str, type[BaseModel]]]:
    """(suffix, model) for every pydantic model an annotation holds: `[]` for list items, `.<KEY>` for dicts."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return [m for a in args for m in _models(a, key)]
    if origin is list:
        return [("[]" + s, m) for s, m in _models(args[0], key)]
    if origin is dict:
        return [(f".<{key}>" + s, m) for s, m in _models(args[1], key)]
    return []


def field_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    paths = []
    for name, info in model.model_fields.items():
        if info.exclude:
            continue  # internal (e.g. where a patch set was loaded from), never written by people
        path = prefix + (info.alias or name)
        paths.append(path)
        for suffix, sub in _models(info.annotation, "NAME" if name == "env" else "OUTCOME"):
            paths += field_paths(sub, f"{path}{suffix}.")
    return paths


def section(title: str) -> str:
    text = (DOCS / "playbooks.md").read_text()
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"docs/playbooks.md has no section '## {title}'"
    return m.group(1)


@pytest.mark.parametrize(("title", "paths"), [
    ("Playbooks", field_paths(Playbook)),
    ("Patch sets", field_paths(PatchSet)),
    ("Rule files", field_paths(RuleFile) + field_paths(RuleSpec, "rules[].")),
    ("Deploy outcomes", [p for p in field_paths(OutcomesFile) if p != "outcomes"]),
])
def test_every_schema_field_is_documented_in_its_section_with_an_example(title, paths):
    text = section(title)
    missing = [p for p in paths if f"`{p}`" not in text]
    assert not missing, f"docs/playbooks.md '## {title}' lacks: {', '.join(missing)}"
    rows = {p: line for line in text.splitlines() for p in paths if line.startswith(f"| `{p}` |")}
    # every table row of a field fills its last cell, the example
    empty = [p for p, line in rows.items() if line.rstrip().endswith("| |")]
    assert not empty, f"rows without an example: {empty}"


def test_the_field_walk_sees_nested_fields():
    paths = field_paths(Playbook)
    assert {"serve.api_key.env", "ladder[].when.sm", "bench.floor", "budgets.weight_load"} <= set(paths)
    assert "outcomes.<OUTCOME>.remedy" in field_paths(OutcomesFile)


def test_every_failure_class_and_deploy_outcome_has_its_troubleshooting_section():
    text = (DOCS / "troubleshooting.md").read_text()
    headings = set(re.findall(r"^### `([A-Z0-9_]+)`", text, re.M))
    expected = (set(LogClass) - {LogClass.READY}) | DEPLOY_OUTCOMES
    assert expected <= headings, f"docs/troubleshooting.md lacks: {sorted(expected - headings)}"
    for name in expected:
        body = re.search(rf"^### `{name}`\n(.*?)(?=^#|\Z)", text, re.M | re.S).group(1)
        for part in ("On real hardware", "What fleet does", "By hand"):
            assert f"**{part}**" in body, f"troubleshooting.md {name}: no '{part}'"


def test_every_inventory_key_is_in_the_inventory_readme_s_example():
    """Issue 46 finding 8, the newcomer's second hour: inventory/README.md, the page a new operator copies from,
    still called `vars` free-form and never named `vars.env`, the one key of it fleet reads (it overrides the
    playbook's env). Every key the inventory's schema takes is in its example, `vars.env` with where its
    precedence is stated."""
    from fleet.inventory import GroupEntry, HostEntry, HostVars, InventoryFile

    readme = (DOCS.parent / "inventory" / "README.md").read_text()
    example = re.search(r"```yaml\n(.*?)```", readme, re.S).group(1)
    keys = {*InventoryFile.model_fields, *HostEntry.model_fields, *GroupEntry.model_fields}
    missing = sorted(k for k in keys if not re.search(rf"^\s*(?:# )?{k}:", example, re.M))
    assert not missing, f"inventory/README.md's example lacks: {missing}"
    vars_block = re.search(r"^(\s*)vars:.*\n((?:\1\s+.*\n)*)", example, re.M).group(2)
    for key in HostVars.model_fields:  # the keys of vars fleet itself reads
        assert re.search(rf"^\s*{key}:", vars_block, re.M), f"the example's vars has no {key}: {vars_block!r}"
    assert "playbooks.md#environment-who-wins" in readme
    assert "free-form variables" not in example
