"""`inv classify`: run as a user would, from the repository root, as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
LOGS = REPO / "tests" / "fixtures" / "logs"
INV = Path(sys.executable).parent / "inv"


def inv(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(INV), "classify", *args], cwd=REPO, input=stdin, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("log", "verdict", "code"), [
    ("sglang_startup_ready.log", "READY", 0),
    ("sglang_startup_ready_sm120_warnings.log", "READY", 0),
    ("sglang_sm120_allreduce_fusion_crash.log", "ARCH_UNSUPPORTED", 1),
    ("sglang_kv_pool_too_small.log", "KV_CACHE_TOO_SMALL", 1),
])
def test_json_is_pure_and_the_exit_code_follows_the_verdict(log, verdict, code):
    done = inv(str(LOGS / log), "--json")
    data = json.loads(done.stdout)  # the whole of stdout, nothing around it
    assert (data["verdict"], done.returncode) == (verdict, code), done.stderr
    assert set(data) - {"release"} == {"verdict", "fatal", "decided_by", "events"}  # release: when the log says
    assert data["events"] and all({"line", "class", "severity", "text", "explanation", "remedy", "source"} <= set(e)
                                  for e in data["events"])
    assert data["decided_by"]["class"] == verdict and data["decided_by"]["explanation"]
    assert done.stderr == ""


def test_stdin_with_dash_and_a_warning_only_log_exits_zero():
    text = "[2026-03-02 10:02:21 TP0] Custom allreduce is disabled because your platform lacks GPU P2P capability.\n"
    done = inv("-", "--json", stdin=text)
    assert done.returncode == 0
    data = json.loads(done.stdout)
    (event,) = data["events"]
    assert (data["verdict"], data["fatal"], data["decided_by"]) == ("P2P_UNAVAILABLE", False, event)
    assert {k: event[k] for k in ("line", "class", "severity", "text", "rule")} == {
        "line": 1, "class": "P2P_UNAVAILABLE", "severity": "warning", "rule": "p2p_disabled",
        "text": "Custom allreduce is disabled because your platform lacks GPU P2P capability."}
    assert event["remedy"].startswith("nothing needed to serve") and event["source"] is None  # no release given


def test_normal_lines_give_verdict_none_and_exit_zero():
    done = inv("-", "--json", stdin="[2026-03-02 09:14:11 TP0] Load weight begin. avail mem=78.52 GB\n")
    assert (json.loads(done.stdout), done.returncode) == (
        {"verdict": "NONE", "fatal": False, "decided_by": None, "events": []}, 0)


def test_human_output_lists_line_class_severity_and_explanation():
    done = inv(str(LOGS / "sglang_kv_pool_too_small.log"), "--wide")  # every line whole: phrases never folded
    assert done.returncode == 1
    first = done.stdout.splitlines()[0].split()
    assert first[:3] == ["11", "KV_CACHE_TOO_SMALL", "fatal"] and "mem-fraction-static" in done.stdout
    assert "verdict KV_CACHE_TOO_SMALL" in done.stdout and "remedies: raise_mem_fraction" in done.stdout
    assert "next: RAISE --mem-fraction-static" in done.stdout  # what a person tries, from the rule


@pytest.mark.parametrize("args", [("no/such.log",), ("no/such.log", "--json")])
def test_missing_file_is_one_line_naming_it_and_exit_two(args):
    done = inv(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == ["error: no/such.log: no such file"]


def test_bad_rules_folder_is_bad_input(tmp_path):
    (tmp_path / "x.yaml").write_text("rules:\n  - name: a\n    class: NOPE\n")
    done = inv(str(LOGS / "sglang_startup_ready.log"), "--rules", str(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert f"{tmp_path}/x.yaml:3: rule 'a': class: unknown class 'NOPE'" in done.stderr


XID79 = ("Dec 03 11:02:07 gpu7 kernel: NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, "
         "GPU has fallen off the bus.")


def test_a_journal_line_of_a_gpu_off_the_bus_is_gpu_fault_and_outranks_the_cuda_error_beside_it():
    """On the fork point the first said NONE and the second ILLEGAL_ADDRESS, whose remedy is a flag."""
    alone = json.loads(inv("-", "--json", stdin=XID79 + "\n").stdout)
    assert alone["verdict"] == "GPU_FAULT"
    mixed = (f"[2026-12-03 11:02:06 TP0] Load weight begin. avail mem=94.21 GB\n{XID79}\n"
             "RuntimeError: CUDA error: unspecified launch failure\n")
    done = inv("-", "--json", stdin=mixed)
    assert json.loads(done.stdout)["verdict"] == "GPU_FAULT" and done.returncode == 1
    human = inv("-", stdin=mixed).stdout
    assert "verdict GPU_FAULT" in human


def _release(cache: Path, version: str, module: str, text: str) -> None:
    folder = cache / "sglang" / version
    (folder / module).parent.mkdir(parents=True, exist_ok=True)
    (folder / module).write_text(text)
    (folder / "release.json").write_text(json.dumps({
        "dist": "sglang", "version": version, "root": str(folder), "wheel": "w.whl", "sha256": "0",
        "wheel_bytes": 1, "files": 1, "bytes": 1}))


@pytest.fixture
def two_releases(tmp_path):
    """A corpus of two sglang releases raising the same refusal from different lines of server_args.py."""
    refusal = '        raise ValueError(f"--page-size {self.page_size} is not supported by this attention backend")\n'
    _release(tmp_path, "0.5.9", "sglang/srt/server_args.py", "class ServerArgs:\n    def check(self):\n" + refusal)
    _release(tmp_path, "0.5.23", "sglang/srt/server_args.py",
             "class ServerArgs:\n    x = 1\n\n    def check(self):\n" + refusal)
    log = tmp_path / "crash.log"
    log.write_text('Traceback (most recent call last):\n'
                   '  File "/usr/lib/python3.12/site-packages/sglang/srt/server_args.py", line 3, in check\n'
                   '    raise ValueError(f"--page-size {self.page_size} is not supported by this attention backend")\n'
                   'ValueError: --page-size 3 is not supported by this attention backend\n')
    return tmp_path, log


def _classify(cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "FLEET_UPSTREAM_CACHE": str(cache)}
    return subprocess.run([str(INV), "classify", *args], cwd=REPO, capture_output=True, text=True, timeout=60, env=env)


def test_told_no_release_the_log_finds_it_and_classifies_by_its_site(two_releases):
    cache, log = two_releases
    data = json.loads(_classify(cache, str(log), "--json").stdout)
    assert data["release"] == [{"package": "sglang", "used": "0.5.9", "fits": ["0.5.9"],
                                "why": ["1 of 1 traceback frame match"]}]
    assert data["verdict"] == "CONFIG_REFUSED"
    assert data["decided_by"]["source"] == "sglang 0.5.9 srt/server_args.py:3 (check)"
    human = _classify(cache, str(log), "--wide").stdout
    assert "release: sglang 0.5.9 (fits 0.5.9: 1 of 1 traceback frame match)" in human


def test_a_release_named_on_the_command_line_wins_over_the_log(two_releases):
    cache, log = two_releases
    data = json.loads(_classify(cache, str(log), "--json", "--sglang", "0.5.23").stdout)
    assert "release" not in data and data["verdict"] == "CONFIG_REFUSED"
    assert data["decided_by"]["source"] == "sglang 0.5.23 srt/server_args.py:5 (check)"


def test_a_peer_gone_after_another_rank_died_names_the_line_that_caused_it():
    # vllm#47436's DeepGEMM assertion on one rank, then sglang#15792's gloo line on the rank that lost it
    text = ("[2026-07-02 10:00:01 TP1] RuntimeError: Assertion error (/workspace/.deps/deepgemm-src/csrc/apis/"
            "layout.hpp:59): Unknown SF transformation\n"
            "[2026-07-02 10:00:02 TP0] Error receiving requests in scheduler event loop: [/pytorch/third_party/gloo/"
            "gloo/transport/tcp/pair.cc:547] Connection closed by peer [10.244.24.18]:54661\n")
    done = inv("-", "--wide", stdin=text)
    assert done.returncode == 1 and "verdict ARCH_UNSUPPORTED" in done.stdout
    assert "stdin: line 2 (COMM_FAILURE) is a consequence: the cause is line 1" in done.stdout
    data = json.loads(inv("-", "--json", stdin=text).stdout)
    assert (data["decided_by"]["line"], data["consequence"]["line"], data["consequence"]["rule"]) == (
        1, 2, "peer_rank_gone")


def test_told_no_release_a_pasted_line_is_placed_among_every_release_built_on_first_need(tmp_path):
    # sglang 0.5.23's allocation.py in one release; the other release's module raises something else
    source = REPO / "tests" / "fixtures" / "sources" / "sglang-0.5.23-mem_cache-allocation.py.txt"
    _release(tmp_path, "0.5.23", "sglang/srt/mem_cache/allocation.py", source.read_text())
    _release(tmp_path, "0.5.9", "sglang/srt/mem_cache/allocation.py", 'raise RuntimeError("another release")\n')
    env = {**os.environ, "FLEET_UPSTREAM_CACHE": str(tmp_path)}
    line = "RuntimeError: dLLM FDFO retained KV is missing.\n"  # allocation.py:513, in 0.5.16 and later

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([str(INV), "classify", "-", "--json"], cwd=REPO, input=line, capture_output=True,
                              text=True, timeout=60, env=env)
    first = run()
    data = json.loads(first.stdout)  # the progress went to stderr: stdout is the document alone
    assert data["release"] == [{"package": "sglang", "used": "0.5.23", "fits": ["0.5.23"],
                                "why": ["1 of 1 exception line printed by its sites (2 releases indexed)"]}]
    assert data["decided_by"]["source"] == ("sglang 0.5.23 srt/mem_cache/allocation.py:513 "
                                            "(_alloc_extend_loc_with_kv_reuse)")
    assert "fleet: indexed the sites of 2 releases (2 distinct modules of 2) in " in first.stderr
    assert "fleet: joined the site indexes of 2 sglang releases (" in first.stderr  # one union, read next time
    again = run()
    assert (json.loads(again.stdout), again.stderr) == (data, "")  # built once, kept beside each release
