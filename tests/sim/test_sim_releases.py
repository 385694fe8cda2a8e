"""The simulated stack plays the release it is installed as (sandbox/sim/releases.py): sglang 0.5.23's wheel takes
0.5.23's flags and refuses 0.5.9's removed ones with argparse's own words, prints 0.5.21+'s phase lines, keeps its
fusion gates where 0.5.23 keeps them (so the patch set's 0.5.22+ variant is what lifts them), and the seed's story
(fusion -> TMA failure in capture) runs on it as on 0.5.9. No sandbox: each host is a folder the wheels unpack into."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest
import yaml
from simhost import REPO, SimHost

from fleet.logs.classify import classify_text
from fleet.patches import plan as patchplan
from fleet.patches import sets as patchsets
from sandbox.sim import releases, wheels

GLM5 = ["--model-path", "/models/GLM-5-NVFP4", "--tp-size", "8", "--quantization", "modelopt_fp4",
        "--moe-runner-backend", "flashinfer_cutlass", "--max-running-requests", "1024", "--trust-remote-code"]
NEW = ("0.5.23", "0.7.2", "2.14.1+cu130")


@pytest.fixture(scope="module")
def new_site(tmp_path_factory) -> Path:
    """sglang 0.5.23 + flashinfer-python 0.7.2 + torch 2.14.1 as the wheels unpack (what pip installs)."""
    root = tmp_path_factory.mktemp("s0523")
    house = root / "wheels"
    wheels.build(house)
    site = root / "site-packages"
    sglang, flashinfer, torch = NEW
    for name in (f"sglang-{sglang}", f"flashinfer_python-{flashinfer}", f"torch-{torch}", "sglang_sim_core-0.1.0"):
        with zipfile.ZipFile(house / f"{name}-py3-none-any.whl") as zf:
            zf.extractall(site)
    return site


@pytest.fixture
def new_host(tmp_path, new_site, smi):
    host = SimHost(tmp_path / "host", new_site, "rtx-pro-6000-x8-proxmox", smi)
    yield host
    host.cleanup()


def _phase_regex(name: str) -> re.Pattern[str]:
    doc = yaml.safe_load((REPO / "playbooks/phases/startup.yaml").read_text())
    return re.compile(next(p["regex"] for p in doc["phases"] if p["name"] == name))


def _apply(host: SimHost, set_name: str, versions: dict[str, str | None]) -> list[str]:
    """What fleet's patch engine writes on a host, done here with its pure planner over the host's files."""
    chosen = patchsets.load_sets([set_name])[0]
    edits = chosen.select(versions).edits
    done = []
    for (package, file) in dict.fromkeys((e.package, e.file) for e in edits):
        path = host.site / package / file
        data = path.read_bytes()
        for edit in (e for e in edits if (e.package, e.file) == (package, file)):
            check = patchplan.plan_edit(data, edit)
            assert check.state == patchplan.APPLICABLE, (file, edit.name, check.reason)
            data = check.apply(data, edit)[0]
        path.write_bytes(data)
        done.append(f"{package}/{file}")
    return done


def test_0_5_23_refuses_the_flag_0_5_20_removed_with_argparses_words(new_host):
    server = new_host.start(*GLM5, "--cuda-graph-max-bs", "256")
    assert server.wait_exit() == 2
    assert ("sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
            "--cuda-graph-max-bs-prefill") in server.log(), server.tail()
    assert classify_text(server.log()).log_class == "CONFIG_REFUSED"  # what fleet's watcher makes of it
    server = new_host.start(*GLM5, "--no-such-flag")
    assert server.wait_exit() == 2 and "sglang serve: error: unrecognized arguments: --no-such-flag" in server.log()


def test_0_5_23_serves_with_its_own_spellings_and_prints_its_phase_lines(new_host):
    server = new_host.start(*GLM5, "--cuda-graph-max-bs-decode", "256", "--mem-fraction-static", "0.8")
    server.wait_ready(timeout=60)
    log = server.log()
    assert "Init parallel begin." in log and "Init torch distributed begin." not in log
    assert re.search(r"Capture decode CUDA graph begin\. backend=full, num_tokens=256, avail mem=[\d.]+ GB", log)
    assert "Capture cuda graph bs" not in log  # 0.5.23 has no such line
    begin = next(ln for ln in log.splitlines() if "Init parallel begin." in ln)
    assert _phase_regex("start").search(begin) and _phase_regex("graph_capture").search(log)


def test_the_seed_story_on_0_5_23_its_gates_where_0_5_23_keeps_them(new_host):
    """Unpatched, SM120 is refused by 0.5.23's own backend check; with the patch set (its 0.5.22+ variant: nothing
    in flashinfer 0.7.2, which ships the fix) fusion is applied, the JIT build passes and capture dies of TMA."""
    fusion = [*GLM5, "--flashinfer-allreduce-fusion-backend", "auto"]
    server = new_host.start(*fusion)
    assert server.wait_exit(timeout=60) == 1
    assert "ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs." in server.log(), server.tail()

    touched = _apply(new_host, "sm120-allreduce-fusion", {"sglang": "0.5.23", "flashinfer-python": "0.7.2"})
    assert touched == ["sglang/srt/arg_groups/overrides.py", "sglang/srt/layers/flashinfer_comm_fusion.py",
                       "sglang/srt/layers/layer_boundary/residual/add_norm.py"]
    server = new_host.start(*fusion)
    assert server.wait_exit(timeout=90) == 1
    log = server.log()
    assert "FlashInfer workspace initialized for rank 0, world_size 8" in log  # fusion applied, the JIT gate passed
    assert "Failed to initialize cutlass TMA WS grouped gemm" in log and "Capture cuda graph failed" in log, \
        server.tail()


def test_a_release_the_corpus_lacks_is_refused_at_build_time_with_what_to_run():
    with pytest.raises(releases.ReleaseMissing, match=r"sglang 0\.5\.99 is not in the upstream corpus .*inv upstream"):
        releases.sglang_files("0.5.99")
    with pytest.raises(releases.ReleaseMissing, match="0.6.99"):
        releases.flashinfer_files("0.6.99", {})
