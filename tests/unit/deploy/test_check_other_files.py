"""Another of fleet's files given as a playbook is one line saying what it is and where it goes (issue 46, finding
7; h-new24's hour): `inv check -p inventory/sandbox.yaml` was six schema errors (`name: required key is missing`,
`model: required key is missing`, `defaults: unknown key` ...), a patch set four, a rule file four (`description:
... contains a newline`), the deploy refusing them with the first of them, as if the file were a broken playbook."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_check import BOOK, run

from fleet.deploy import check

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("given,says", [
    ("inventory/hosts.example.yaml", "an inventory file (its keys are defaults:, groups:, hosts:): give it with "
                                     "-i/--inventory"),
    ("playbooks/patches/sm120-allreduce-fusion.yaml", "a patch set (its keys are name:, description:, applies_to:, "
                                                      "variants:): a playbook's rung names it in patches:"),
    ("playbooks/rules/cuda.yaml", "a rule file (its keys are description:, rules:): inv check reads "
                                  "playbooks/rules/*.yaml on every run"),
    ("playbooks/phases/startup.yaml", "one of fleet's own data files (its keys are phases:, counts:)"),
])
def test_another_kind_of_file_is_one_line_naming_it(given, says):
    found = check.check(REPO / given)
    assert [str(p) for p in found.errors] == [f"{REPO / given}: not a playbook: {says}"
                                              + str(found.errors[0]).partition(says)[2]], found.errors
    assert found.book is None


def test_a_site_marker_is_named(tmp_path):
    marker = tmp_path / "fleet-site.yaml"
    marker.write_text("inventory: inventory/hosts.yaml\noffline: true\n")
    assert [str(p) for p in check.check(marker).errors] == [
        f"{marker}: not a playbook: a site's fleet-site.yaml (its keys are inventory:, offline:): fleet reads it "
        "from the site's root"]


@pytest.mark.parametrize("text", ["name: t\nmodle: {path: /m}\n", "hosts: 3\nmodel: {path: /m}\n", "name: t\n"])
def test_a_broken_playbook_is_still_checked_as_one(tmp_path, text):
    errors = [str(p) for p in run(tmp_path, text).errors]
    assert errors and not any("not a playbook" in e for e in errors), errors


def test_a_playbook_is_not_taken_for_another_kind(tmp_path):
    assert run(tmp_path, BOOK).errors == []
