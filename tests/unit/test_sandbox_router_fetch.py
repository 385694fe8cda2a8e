"""Two sandboxes brought up at once share the router cache's fetch: the second waits for the first, then
finds the release there instead of installing it into the same `.tmp` folder (which crashed one of them)."""
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_fetch_waits_for_the_one_in_flight_then_finds_its_release(tmp_path):
    cache = tmp_path / "router"
    cache.mkdir()
    env = {**os.environ, "FLEET_ROUTER_CACHE": str(cache), "PYTHONPATH": str(REPO),
           "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0"}
    code = "from sandbox import router; print(router.fetch(('9.9.9',), say=print))"
    with open(cache / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the first fetch, still installing
        second = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        time.sleep(2)  # long enough for an unlocked fetch to start its own download
        site = cache / "site-9.9.9"
        site.mkdir()
        (site / ".complete").write_text("9.9.9\n")
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 0, out
    assert "fetching" not in out
    assert str(site) in out
