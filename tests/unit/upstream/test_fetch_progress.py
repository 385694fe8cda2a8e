"""A fetch of upstream releases says what it fetches and, while it goes on, where it stands (issue 46, finding 5;
the fifteenth newcomer's hour): `inv upstream --sglang 0.5.9` against an index that took the connection and never
answered said nothing on stderr for 75 s, with or without --json, until Ctrl-C (`interrupted`); pip may take 900 s
a wheel. `inv audit`/`inv patch --against` said `fetching ...` once, then nothing until it ended."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from loopback import silent
from ticking import Said

from fleet.cli import liveline
from fleet.progress import Live
from fleet.upstream import corpus

BIN = Path(sys.executable).parent


def test_fetch_all_says_each_fetch_and_where_it_stands_while_a_download_goes_on(tmp_path, monkeypatch):
    say = Said()
    said, ticked = say, say.ticked

    def download(dist: str, version: str, dest: Path, python: str, platform: str) -> Path:
        assert ticked.wait(10), said  # where it stands was said while the download went on
        dest.mkdir(parents=True)
        wheel = dest / f"{dist}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as z:
            z.writestr(f"{dist}-{version}.dist-info/METADATA", "Name: x\n")
        return wheel

    monkeypatch.setattr(corpus, "registry_sha256", lambda dist, name, index=None: corpus._sha256(
        next((tmp_path / "cache" / "sglang").glob(".*/wheel/*.whl"))))
    rels = corpus.fetch_all(corpus.load_matrix(), [("sglang", "0.5.9")], cache=tmp_path / "cache", say=say,
                            download=download)
    assert [r.version for r in rels] == ["0.5.9"]
    assert said[0].startswith("fetching sglang==0.5.9 from "), said
    assert any(isinstance(m, Live) and m.startswith("phase fetch of 1 release(s): ") for m in said), said
    assert said[-1].startswith("fetched sglang==0.5.9: "), said


def test_off_a_terminal_where_it_stands_is_a_line_now_and_then_never_each_second(monkeypatch):
    now = [0.0]
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    say = liveline.progress_on_stderr(liveline.Heartbeat(every=30, clock=lambda: now[0]))
    say("fetching x")
    for t in range(1, 62):
        now[0] = float(t)
        say(Live(f"phase fetch: {t}s of 900s budget"))
    lines = err.getvalue().splitlines()
    assert [line.partition(": ")[2] for line in lines] == ["fetching x", "phase fetch: 30s of 900s budget",
                                                            "phase fetch: 60s of 900s budget"], lines


@pytest.mark.parametrize("json", [True, False])
def test_inv_upstream_against_an_index_that_never_answers_says_what_it_fetches_at_once(tmp_path, json):
    with silent() as index:
        env = {**os.environ, "FLEET_UPSTREAM_CACHE": str(tmp_path / "cache"),
               "PIP_INDEX_URL": f"http://127.0.0.1:{index.port}/simple"}
        with subprocess.Popen([str(BIN / "inv"), "upstream", "--sglang", "0.5.9", *(["--json"] if json else [])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                              stdin=subprocess.DEVNULL) as proc:
            try:
                assert proc.stderr is not None
                line = proc.stderr.readline()  # before: nothing until the fetch failed or Ctrl-C
                assert f"fetching sglang==0.5.9 from http://127.0.0.1:{index.port}/simple" in line, line
            finally:
                proc.kill()
