"""A site's `offline: true` (fleet-site.yaml) is named as what forbids a fetch: `inv audit --sglang 0.5.9` and `inv
patch --check --against ...` in such a site said `--offline forbids fetching it`, an option the operator never
typed, and nothing of the site's file that decided it (issue 46, finding 8, an override unsaid; the fifteenth
newcomer's hour)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


@pytest.mark.parametrize("args", [["audit", "--sglang", "0.5.9", "--sm", "120"],
                                  ["patch", "--check", "--against", "sglang==0.5.9,flashinfer-python==0.6.3",
                                   "--set", "sm120-allreduce-fusion"]])
def test_a_sites_offline_is_named_with_its_file_and_the_option_as_the_option(tmp_path, args):
    (tmp_path / "fleet-site.yaml").write_text("offline: true\n")
    env = {**os.environ, "FLEET_SITE": str(tmp_path), "FLEET_UPSTREAM_CACHE": str(tmp_path / "empty-cache")}
    done = subprocess.run([str(BIN / "inv"), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done
    assert f"and offline: true in {tmp_path / 'fleet-site.yaml'} forbids fetching it" in done.stderr, done.stderr
    given = subprocess.run([str(BIN / "inv"), *args, "--offline"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert "and --offline forbids fetching it" in given.stderr, given.stderr
