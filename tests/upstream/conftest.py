"""Tests over the real upstream releases (the corpus in ~/.cache/fleet/upstream, fetched by bootstrap.sh).

A release missing from the cache fails the test loudly: these tests never skip and never reach the network.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from fleet.logs import coverage as rulecoverage
from fleet.logs.classify import LineMatch
from fleet.logs.rules import default_rules
from fleet.upstream import corpus as upstream
from fleet.upstream.sourcetext import Site

Classified = list[tuple[str, Site, LineMatch | None]]


@pytest.fixture(scope="session")
def matrix() -> upstream.Matrix:
    m = upstream.load_matrix()
    missing = [f"{d} {v}" for d, v in m.releases() if upstream.cached(d, v) is None]
    if missing:
        pytest.fail(f"not in the upstream cache {upstream.cache_dir()}: {', '.join(missing)} "
                    f"(run `.venv/bin/inv upstream`, which bootstrap.sh does)")
    return m


@pytest.fixture(scope="session")
def startup_classified(matrix: upstream.Matrix) -> Callable[[str], Classified]:
    """version -> every startup site of that sglang release and what it classifies as (computed once per session:
    the coverage figure and the precision sample read the same)."""
    modules = yaml.safe_load(rulecoverage.MODULES_FILE.read_text())
    done: dict[str, Classified] = {}

    def classified(version: str) -> Classified:
        if version not in done:
            root = Path(upstream.require("sglang", version).root)
            done[version] = rulecoverage.classify_sites(root, modules[version], default_rules())
        return done[version]
    return classified
