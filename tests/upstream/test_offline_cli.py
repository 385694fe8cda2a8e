"""`inv audit --sglang/--flashinfer` and `inv patch --check --against`: what an upgrade does, no host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INV = str(Path(sys.executable).parent / "inv")


def inv(*args):
    return subprocess.run([INV, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_audit_of_releases_names_the_gates_and_what_lifts_them(matrix):
    p = inv("audit", "--sglang", "0.5.23", "--flashinfer", "0.7.4", "--sm", "120", "--set", "sm120-allreduce-fusion",
            "--json")
    assert p.returncode == 0, p.stderr  # what remains is only what upstream keeps on purpose: usable in CI
    (res,) = json.loads(p.stdout)["hosts"]
    lifted = {(g["file"], g["where"]): (g["lifted_by"], (g["kept"] or {}).get("name")) for g in res["excluding"]}
    assert lifted == {  # mnnvl and mixed_comm: not the fusion path, kept off SM12x by upstream on purpose
        ("flashinfer/jit/comm.py", "gen_trtllm_mnnvl_comm_module"): ([], "flashinfer-mnnvl-allreduce"),
        ("flashinfer/jit/comm.py", "gen_mixed_comm_module"): ([], "flashinfer-mixed-comm"),
        ("sglang/srt/arg_groups/overrides.py", "_flashinfer_allreduce_fusion_auto_enable"):
            (["sm120-allreduce-fusion"], None),
        ("sglang/srt/layers/flashinfer_comm_fusion.py", "_resolve_backend"): (["sm120-allreduce-fusion"], None),
        ("sglang/srt/layers/layer_boundary/residual/add_norm.py", "flashinfer_ar_fusion_applies"):
            (["sm120-allreduce-fusion"], None)}
    assert (res["remaining"], res["kept_by_upstream"]) == (0, 2)
    p = inv("audit", "--flashinfer", "0.7.4", "--sm", "100", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["hosts"][0]["excluding"] == []


def test_patch_check_against_releases(matrix):
    p = inv("patch", "--check", "--against", "sglang==0.5.23,flashinfer-python==0.7.2", "--set",
            "sm120-allreduce-fusion", "--json")
    assert p.returncode == 0, p.stderr
    (res,) = json.loads(p.stdout)["hosts"]
    (sp,) = res["sets"]
    assert sp["state"] == "applicable" and "0.6.17 ships upstream's fix" in sp["not_needed"][0]
    assert {e["file"] for e in sp["edits"]} == {"srt/arg_groups/overrides.py", "srt/layers/flashinfer_comm_fusion.py",
                                                "srt/layers/layer_boundary/residual/add_norm.py"}
    p = inv("patch", "--check", "--against", "sglang==0.5.9,flashinfer-python==0.6.16", "--set",
            "trtllm-custom-allreduce-fixes", "--json", "--no-deps")  # flashinfer installed by hand beside it
    (sp,) = json.loads(p.stdout)["hosts"][0]["sets"]
    assert p.returncode == 0 and [e["label"] for e in sp["edits"]][:2] == ["lamport pointer stride (set 1)",
                                                                           "lamport pointer stride (set 2)"]


def test_a_pair_whose_requires_dist_disagree_is_refused_in_one_line(matrix):
    for fi in ("0.7.4", "0.7.1"):
        against = f"sglang==0.5.23,flashinfer-python=={fi}"
        p = inv("patch", "--check", "--against", against, "--set", "sm120-allreduce-fusion", "--json")
        assert p.returncode == 2 and p.stdout == "", p.stderr
        assert p.stderr.strip().splitlines() == [
            f"error: --against {against}: sglang 0.5.23 requires flashinfer-python==0.7.2; --against pins {fi}"]
    p = inv("patch", "--check", "--against", "sglang==0.5.9,flashinfer-python==0.6.16", "--set",
            "trtllm-custom-allreduce-fixes")
    assert p.returncode == 2 and "sglang 0.5.9 requires flashinfer-python==0.6.3; --against pins 0.6.16" in p.stderr


def test_bad_input_is_one_line_and_exit_2(matrix):
    for args, want in [
        (("patch", "--check", "--against", "sglang=0.5.23"), "--against 'sglang=0.5.23'"),
        (("patch", "--against", "sglang==0.5.23"), "use it with --check"),
        (("audit", "--sglang", "0.5.23"), "--sm: name the SM"),
        (("patch", "--check", "--against", "sglang==0.5.23", "--set", "sm120-allreduce-fusion"),
         "set sm120-allreduce-fusion depends on the flashinfer-python release: add flashinfer-python==VERSION"),
        (("audit", "--sglang", "0.5.23", "--sm", "120", "--host", "sbx0"), "drop --host/--group"),
    ]:
        p = inv(*args)
        assert p.returncode == 2 and want in p.stderr and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)


def _empty_cache(tmp_path, **extra):
    """An empty upstream cache and a package index on a closed loopback port: nothing leaves this machine."""
    import os

    return {**os.environ, "FLEET_UPSTREAM_CACHE": str(tmp_path / "cache"), "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
            "PIP_RETRIES": "0", "PIP_TIMEOUT": "2", "PIP_NO_CACHE_DIR": "1", **extra}


def test_offline_refuses_a_release_not_in_the_cache_in_one_line(tmp_path):
    for args in (("audit", "--sglang", "0.5.5", "--sm", "120", "--offline"),
                 ("patch", "--check", "--against", "sglang==0.5.5,flashinfer-python==0.6.3", "--set",
                  "sm120-allreduce-fusion", "--offline")):
        p = subprocess.run([INV, *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                           env=_empty_cache(tmp_path))
        assert p.returncode == 2 and p.stdout == "", p.stderr
        assert p.stderr.strip().splitlines() == [
            f"error: sglang 0.5.5 is not in the upstream cache {tmp_path / 'cache'} and --offline forbids fetching it: "
            "run `inv upstream --sglang 0.5.5` where http://127.0.0.1:9/simple is reachable"]


def test_fetching_an_uncached_release_says_so_on_stderr_first(tmp_path):
    p = subprocess.run([INV, "audit", "--sglang", "0.5.5", "--sm", "12.0", "--json"], cwd=REPO, capture_output=True,
                       text=True, timeout=120, env=_empty_cache(tmp_path))
    first = p.stderr.splitlines()[0]
    assert first == (f"fleet: fetching sglang==0.5.5 from http://127.0.0.1:9/simple (not in the cache "
                     f"{tmp_path / 'cache'}; --offline refuses instead)")
    assert p.returncode == 1 and p.stdout == "" and "pip download sglang==0.5.5 failed" in p.stderr


def test_an_all_clear_audit_is_one_sentence(matrix):
    p = subprocess.run([INV, "audit", "--flashinfer", "0.7.4", "--sm", "90", "--offline"], cwd=REPO,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["flashinfer-python 0.7.4: none of the 38 gates seen excludes SM 90"]


def test_sets_that_lift_every_gate_make_the_verdict_and_the_exit_code_clear(matrix):
    args = ["audit", "--sglang", "0.5.9", "--flashinfer", "0.6.3", "--sm", "120", "--offline"]
    p = inv(*args, "--json")
    assert p.returncode == 1 and json.loads(p.stdout)["hosts"][0]["remaining"] == 16
    p = inv(*args, "--set", "sm120-allreduce-fusion", "--json")
    (res,) = json.loads(p.stdout)["hosts"]
    assert p.returncode == 0 and res["remaining"] == 0 and len(res["excluding"]) == 16
    assert res["verdict"] == ("sglang 0.5.9, flashinfer-python 0.6.3: 16 of 36 gates exclude SM 120; "
                              "the sets lift 16, 0 remain")


def test_gates_upstream_keeps_on_purpose_are_shown_with_reason_and_source_and_do_not_fail_the_audit(matrix):
    args = ["audit", "--sglang", "0.5.23", "--flashinfer", "0.7.4", "--sm", "120", "--offline", "--wide"]
    p = inv(*args)
    assert p.returncode == 1, p.stderr  # the three sglang fusion gates remain without the set: those are real
    out = p.stdout.splitlines()
    assert out[0].startswith("sglang 0.5.23, flashinfer-python 0.7.4: 5 of 43 gates exclude SM 120; upstream keeps 2 "
                             "on purpose, 3 remain")
    kept = out[out.index("kept by upstream on purpose (2; they do not fail the audit):"):]
    assert kept[1] == "  flashinfer/jit/comm.py:49 in gen_trtllm_mnnvl_comm_module: supported_major_versions=[9, 10]"
    assert kept[2].startswith("    MNNVL allreduce needs a (multi-node) NVLink fabric")
    assert "    source: https://github.com/flashinfer-ai/flashinfer/pull/3385" in kept
    assert "  flashinfer/jit/comm.py:184 in gen_mixed_comm_module: supported_major_versions=[9, 10]" in kept
    assert "    source: https://github.com/flashinfer-ai/flashinfer/pull/2563" in kept
    table = out[1:out.index(kept[0])]  # the gates that count: the three sglang ones, none of the kept
    assert len(table) == 4 and not any("flashinfer/jit/comm.py" in line for line in table)
    p = inv(*args, "--set", "sm120-allreduce-fusion")
    assert p.returncode == 0 and p.stdout.splitlines()[0].rstrip().endswith("the sets lift 3, 0 remain")


def test_upstream_json_that_cannot_fetch_still_prints_a_json_document(tmp_path):
    """A release the index does not give (9.9.9, or an index not reached: pip says the same for both) is a failed
    fetch, exit 1, and --json's stdout is a document naming the error, as a failed host's row is elsewhere."""
    p = subprocess.run([INV, "upstream", "--json", "--sglang", "9.9.9"], cwd=REPO, capture_output=True, text=True,
                       timeout=120, env=_empty_cache(tmp_path))
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["releases"] == [] and doc["cache"] == str(tmp_path / "cache")
    assert doc["error"].startswith("pip download sglang==9.9.9 failed")
    assert p.stderr.strip().splitlines()[-1] == f"error: {doc['error']}"
