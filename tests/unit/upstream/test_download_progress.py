"""The controller's download of a locked wheel the wheelhouse lacks says where it stands while it goes on (issue 46,
finding 5; the fifteenth newcomer's hour): a deploy whose playbook pins torch said `downloading torch-...whl ...`
once, then nothing for as long as pip took (its budget: 30 minutes), before any host was touched."""

from __future__ import annotations

import subprocess

import pytest
from ticking import Said

from fleet.progress import Live
from fleet.upstream import lockfile, wheelhouse
from fleet.upstream.wheelhouse import Target


def test_a_locked_wheels_download_says_where_it_stands(tmp_path, monkeypatch):
    monkeypatch.delenv("FLEET_SANDBOX_ONLY", raising=False)  # the index is never reached: pip is a stand-in
    say = Said()
    said, ticked = say, say.ticked

    def pip(cmd, **kwargs):
        assert ticked.wait(10), said  # where the download stands was said while pip ran
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: the stand-in index has nothing")

    w = lockfile.Locked("torch", "2.9.1", "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl", "0" * 64)
    with pytest.raises(lockfile.LockError):
        lockfile.fetch(w, tmp_path / "p.lock", Target("3.11", "x86_64", "2.36", "3.11.2"), tmp_path / "house", say,
                       run=pip)
    assert said[0].startswith(f"downloading {w.file} (locked in "), said
    assert any(isinstance(m, Live) and m.startswith(f"phase download {w.file}: ") and
               f"of {wheelhouse.FETCH_TIMEOUT_S}s budget" in m for m in said), said
