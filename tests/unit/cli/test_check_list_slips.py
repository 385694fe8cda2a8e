"""`inv check` in one pass where a list was written as one value (issue 46, 7, a newcomer's form): `when: {sm:
999}`, `patches: no-such-set`, `after: TMA_FAILUR` (or a list with one wrong item, `p2p: [okk, 5]`) said only
`Input should be a valid list`; once written as lists, a second pass said what was wrong with the values
themselves (an SM no GPU has, an unknown patch set and failure class, a rung that never runs). Each value that
holds up alone is now checked in the first pass."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleet.deploy.inputs import check_playbook

HEAD = "name: slips\nmodel:\n  path: /models/m\nladder:\n  - name: a\n"
SLIPS = {  # the rung's lines as a hurried operator writes them, and as the schema wants them
    "sm": ("    when: {sm: 999}\n", "    when: {sm: [999]}\n"),
    "arch": ("    when: {arch_family: blackwel}\n", "    when: {arch_family: [blackwel]}\n"),
    "p2p": ("    when: {p2p: [okk, 5]}\n", "    when: {p2p: [okk]}\n"),
    "never": ("    when: {sm: 90, arch_family: blackwell-consumer}\n",
              "    when: {sm: [90], arch_family: [blackwell-consumer]}\n"),
    "patches": ("    patches: no-such-set\n", "    patches: [no-such-set]\n"),
    "after": ("    after: TMA_FAILUR\n", "    after: [TMA_FAILUR]\n"),
}


def _problems(path: Path) -> set[str]:
    """Each problem without its file and line (the same problem on another line is the same)."""
    return {re.sub(r"^[^:]*:\d+: ", "", str(p)) for p in check_playbook(path).problems}


@pytest.mark.parametrize("slip", sorted(SLIPS))
def test_a_list_written_as_one_value_hides_no_problem_of_its_values(tmp_path: Path, slip: str) -> None:
    written, meant = SLIPS[slip]
    (tmp_path / "slip.yaml").write_text(HEAD + written)
    (tmp_path / "meant.yaml").write_text(HEAD + meant)
    first, second = _problems(tmp_path / "slip.yaml"), _problems(tmp_path / "meant.yaml")
    assert second, "the fixed form has problems of its own to say"
    assert second <= first, f"said only once the list was fixed: {sorted(second - first)}"
    assert any("valid list" in p or "valid string" in p for p in first), first  # the slip itself is said too
