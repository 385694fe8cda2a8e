"""Tests over the real upstream releases (the corpus in ~/.cache/fleet/upstream, fetched by bootstrap.sh).

A release missing from the cache fails the test loudly: these tests never skip and never reach the network.
"""

from __future__ import annotations

import pytest

from fleet.upstream import corpus as upstream


@pytest.fixture(scope="session")
def matrix() -> upstream.Matrix:
    m = upstream.load_matrix()
    missing = [f"{d} {v}" for d, v in m.releases() if upstream.cached(d, v) is None]
    if missing:
        pytest.fail(f"not in the upstream cache {upstream.cache_dir()}: {', '.join(missing)} "
                    f"(run `.venv/bin/inv upstream`, which bootstrap.sh does)")
    return m
