"""The real sites tests/unit/logs/test_bysite.py classifies by meaning are where it says, with the words it says,
in the released wheels (the corpus), as fleet's own site reader finds them: a case the classifier is judged on is
never an invented message."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fleet.upstream import corpus as upstream
from fleet.upstream import sourcetext

_CASES = Path(__file__).resolve().parents[1] / "unit" / "logs" / "test_bysite.py"
_spec = importlib.util.spec_from_file_location("bysite_cases", _CASES)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
BY_MEANING = _module.BY_MEANING


@pytest.mark.parametrize("site", [s for s, _, _ in BY_MEANING],
                         ids=[f"{s.version}:{s.module.rsplit('/', 1)[-1]}:{s.line}" for s, _, _ in BY_MEANING])
def test_each_case_is_a_real_site_of_its_release(site):
    source = (Path(upstream.require(site.package, site.version).root) / site.module).read_text(encoding="utf-8")
    found = {(s.line, s.text) for s in sourcetext.sites(source)}
    assert (site.line, site.text) in found, sorted(t for t in found if abs(t[0] - site.line) < 20)
