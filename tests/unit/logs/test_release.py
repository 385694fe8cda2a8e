"""A log's release clues (fleet/logs/release.py) and the corpus releases they fit (fleet/logs/releasefit.py), on a
corpus of two small releases made here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.logs.release import Frame, clues, server_arg_keys
from fleet.logs.releasefit import cached_versions, fits, fits_by_sites
from fleet.upstream.flags import FlagSpan, Table
from fleet.upstream.siteindex import IndexedSite, SiteIndex
from fleet.upstream.unionindex import PerRelease

SCHEDULER = "sglang/srt/managers/scheduler.py"


def test_stated_versions_in_the_shapes_logs_carry_them():
    text = ("sglang: 0.5.9\n"  # check_env
            "Successfully installed flashinfer-python==0.6.7.post3 sglang==0.5.10.post1\n"
            "/home/u/.cache/flashinfer/0.6.3/120a/cached_ops/fused_moe_120/fused_moe_120.so\n"
            "sglang 0.5.23 srt/mem_cache/allocation.py:344 (alloc_req_slots)\n")  # fleet's own words: no claim
    assert clues(text).stated == (("sglang", "0.5.9"), ("sglang", "0.5.10.post1"),
                                  ("flashinfer-python", "0.6.7.post3"), ("flashinfer-python", "0.6.3"))


def test_frames_inside_installed_packages_keep_their_source_line_across_worker_prefixes():
    # flashinfer#3675 as its reporter pasted it: a worker prefix on every line, blank lines between
    text = ('(StageEngineCoreProc pid=8146)   File "/root/omni/lib/python3.12/site-packages/flashinfer/jit/core.py", '
            'line 108, in check_cuda_arch\n(StageEngineCoreProc pid=8146)\n'
            '(StageEngineCoreProc pid=8146)     raise RuntimeError("FlashInfer requires GPUs with sm75 or higher")\n'
            '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 4001, in run\n')  # a checkout
    assert clues(text).frames == (Frame("flashinfer-python", "flashinfer/jit/core.py", 108, "check_cuda_arch",
                                        'raise RuntimeError("FlashInfer requires GPUs with sm75 or higher")'),)


@pytest.mark.parametrize(("echo", "keys"), [
    ("ServerArgs(model_path='/m', tokenizer_path='a, b=c', json_model_override_args='{\"x\": 1}', tp_size=8)",
     ("model_path", "tokenizer_path", "json_model_override_args", "tp_size")),
    ("{'model_path': '/m', 'lora_paths': {'a': 'b, c'}, 'tp_size': 8, 'dtype': 'auto'}",
     ("model_path", "lora_paths", "tp_size", "dtype")),
    ("ServerArgs(model_path='deepseek-ai/DeepSeek-V3', tokenizer_mode='auto', quantiza>",
     ("model_path", "tokenizer_mode")),
])
def test_server_argument_names_of_an_echo_in_either_form_even_cut_short(echo, keys):
    assert server_arg_keys(echo) == keys


def _release(cache: Path, version: str, files: dict[str, str]) -> None:
    folder = cache / "sglang" / version
    for module, text in files.items():
        (folder / module).parent.mkdir(parents=True, exist_ok=True)
        (folder / module).write_text(text)
    (folder / "release.json").write_text(json.dumps({
        "dist": "sglang", "version": version, "root": f"/elsewhere/sglang/{version}", "wheel": "w.whl",
        "sha256": "0", "wheel_bytes": 1, "files": len(files), "bytes": 1}))


@pytest.fixture
def cache(tmp_path):
    old = "def run_scheduler_process():\n    scheduler.event_loop()\n"
    new = "def run_scheduler_process():\n    setup()\n    scheduler.run_event_loop()\n"
    _release(tmp_path, "0.5.9", {SCHEDULER: old})
    _release(tmp_path, "0.5.23", {SCHEDULER: new})
    _release(tmp_path, "0.5.10.post1", {SCHEDULER: new})
    return tmp_path


def _traceback(line: int, code: str) -> str:
    return (f'  File "/usr/lib/python3.12/site-packages/{SCHEDULER}", line {line}, in run_scheduler_process\n'
            f"    {code}\n")


def test_cached_releases_come_oldest_first(cache):
    assert cached_versions("sglang", cache) == ["0.5.9", "0.5.10.post1", "0.5.23"]


def test_a_frame_fits_the_releases_that_print_that_source_line_there(cache):
    found = fits(clues(_traceback(3, "scheduler.run_event_loop()")), "sglang", cache)
    assert found is not None and found.versions == ("0.5.10.post1", "0.5.23") and found.pick == "0.5.23"
    assert found.reasons == ("1 of 1 traceback frame match",)
    assert fits(clues(_traceback(2, "scheduler.event_loop()")), "sglang", cache).versions == ("0.5.9",)


def test_a_frame_no_release_prints_gives_no_release_rather_than_the_newest(cache):
    found = fits(clues(_traceback(2, "something_else()")), "sglang", cache)
    assert found is not None and found.versions == () and found.pick is None


def test_a_stated_version_wins_and_one_the_corpus_lacks_is_no_guess(cache):
    text = "sglang==0.5.10.post1\n" + _traceback(3, "scheduler.run_event_loop()")
    assert fits(clues(text), "sglang", cache).versions == ("0.5.10.post1",)
    lacked = fits(clues("sglang: 0.2.10\n"), "sglang", cache)
    assert lacked.versions == () and "not in the upstream corpus" in lacked.reasons[0]


def test_echoed_server_arguments_narrow_to_the_releases_with_those_flags(cache):
    table = Table(versions=["0.5.9", "0.5.10.post1", "0.5.23"], flags={
        "model-path": FlagSpan(spans=[["0.5.9", "0.5.23"]], switch=False),
        "attn-cp-size": FlagSpan(spans=[["0.5.10.post1", "0.5.23"]], switch=False)})
    text = "server_args=ServerArgs(model_path='/m', attn_cp_size=1, not_a_flag=2)\n"
    assert fits(clues(text), "sglang", cache, table).versions == ("0.5.10.post1", "0.5.23")
    assert fits(clues("server_args=ServerArgs(model_path='/m')\n"), "sglang", cache, table) is None  # all take it


def test_a_log_that_says_nothing_of_a_package_gives_none(cache):
    assert fits(clues("flashinfer-python==0.6.3\n"), "sglang", cache) is None


def _index(version: str, *texts: str) -> SiteIndex:
    return SiteIndex(IndexedSite("sglang", version, "sglang/srt/x.py", i + 1, "f", "raise", "ValueError", t)
                     for i, t in enumerate(texts))


def test_bare_exception_lines_fit_the_releases_whose_sites_print_them_surest_first():
    indexes = PerRelease({"0.5.9": _index("0.5.9", "page size {} is not supported by the backend here"),
                          "0.5.23": _index("0.5.23", "page size {} is not supported by the {} backend"),
                          "0.5.22": _index("0.5.22", "something else entirely happened here")})
    found = fits_by_sites(["ValueError: page size 3 is not supported by the backend here"], "sglang", indexes)
    assert found is not None and found.versions == ("0.5.9",)
    assert fits_by_sites(["ValueError: nothing any release prints"], "sglang", indexes) is None


def test_a_frame_whose_source_line_the_log_lacks_has_none_and_repeats_count_once():
    text = ('  File "/x/site-packages/sglang/srt/managers/scheduler.py", line 10, in run\n'
            '  File "/x/site-packages/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl\n'
            '    return self._call_impl(*args, **kwargs)\n') * 8
    (frame,) = clues(text).frames
    assert frame.code is None and frame.line == 10
