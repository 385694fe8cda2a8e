"""playbooks/upstream/caches.yaml as typed values: which caches a release keeps and where they are on a host."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from fleet.errors import InputError
from fleet.upstream import caches

PLACES = caches.HostPlaces(home="/root", tmp="/tmp", user="root", flashinfer="0.6.3", archs="120a", sm="120")


def _by_name(release: str) -> dict[str, caches.CacheSpec]:
    found = caches.for_release(release)
    names = [s.name for s in found]
    assert len(names) == len(set(names)), names  # one entry of each name per release
    return {s.name: s for s in found}


def test_sglang_0_5_9_keeps_the_flashinfer_jit_cache_in_home_and_tunes_in_memory() -> None:
    specs = _by_name("0.5.9")
    assert "flashinfer-autotune" not in specs  # 0.5.9 model_runner: `with autotune()`, no file
    assert specs["flashinfer-jit"].folder({}, PLACES) == PurePosixPath(
        "/root/.cache/flashinfer/0.6.3/120a/cached_ops")
    assert specs["triton"].folder({}, PLACES) == PurePosixPath("/root/.triton/cache")
    assert specs["inductor"].folder({}, PLACES) == PurePosixPath("/tmp/torchinductor_root")
    assert specs["deepgemm-jit"].folder({}, PLACES) == PurePosixPath("/root/.cache/deep_gemm")


def test_the_workspace_base_variable_moves_the_flashinfer_jit_cache() -> None:
    spec = _by_name("0.5.9")["flashinfer-jit"]
    got = spec.folder({"FLASHINFER_WORKSPACE_BASE": "/srv/ws"}, PLACES)
    assert got == PurePosixPath("/srv/ws/.cache/flashinfer/0.6.3/120a/cached_ops")


def test_from_0_5_18_every_cache_follows_sglang_cache_dir_unless_its_own_variable_is_set() -> None:
    specs = _by_name("0.5.23")
    env = {"SGLANG_CACHE_DIR": "/var/cache/sg"}
    places = caches.HostPlaces("/root", "/tmp", "root", "0.7.2", "120f", "120")
    assert specs["triton"].folder(env, places) == PurePosixPath("/var/cache/sg/triton")
    assert specs["inductor"].folder(env, places) == PurePosixPath("/var/cache/sg/inductor")
    assert specs["flashinfer-autotune"].folder(env, places) == PurePosixPath(
        "/var/cache/sg/flashinfer/autotune/0.7.2/sm120")
    assert specs["flashinfer-jit"].folder(env, places) == PurePosixPath(
        "/var/cache/sg/.cache/flashinfer/0.7.2/120f/cached_ops")
    own = {**env, "TRITON_CACHE_DIR": "/t"}
    assert specs["triton"].folder(own, places) == PurePosixPath("/t")
    assert specs["triton"].folder({}, places) == PurePosixPath("/root/.cache/sglang/triton")


def test_the_autotune_cache_appears_with_0_5_14() -> None:
    assert "flashinfer-autotune" not in _by_name("0.5.13.post1")
    assert "flashinfer-autotune" in _by_name("0.5.14")


def test_every_entry_cites_its_source() -> None:
    for spec in caches.load():
        assert " l." in spec.source, spec.name


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "caches.yaml"
    path.write_text(text)
    return path


HEAD = "kernel_flags: [--tp-size]\nkernel_env: [FLASHINFER_CUDA_ARCH_LIST]\n"
ENTRY = """  - name: triton
    releases: "{r}"
    where:
      - {{env: TRITON_CACHE_DIR}}
      - {{base: "{{home}}", path: .triton/cache}}
    keyed_by: [x]
    invalid: y
    source: "z l.1"
"""


def test_two_entries_of_one_name_over_one_release_are_refused_naming_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + "caches:\n" + ENTRY.format(r="<0.5.18") + ENTRY.format(r=">=0.5.14"))
    with pytest.raises(InputError, match=r"caches.yaml:13: caches.1.releases: 'triton' already covers"):
        caches.load(path)


def test_adjacent_ranges_of_one_name_are_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + "caches:\n" + ENTRY.format(r="<0.5.18") + ENTRY.format(r=">=0.5.18"))
    assert len(caches.load(path)) == 2


@pytest.mark.parametrize(("bad", "says"), [
    ('{base: "{home}", path: "../x"}', "no '..'"),
    ('{base: "{home}/{nope}"}', "unknown field 'nope'"),
    ('{base: "relative"}', "base: starts at"),
    ('{env: lower}', "no environment variable name"),
])
def test_a_bad_folder_is_refused_in_one_line(tmp_path: Path, bad: str, says: str) -> None:
    text = HEAD + "caches:\n" + ENTRY.format(r="<1").replace('{base: "{home}", path: .triton/cache}', bad)
    with pytest.raises(InputError, match=says):
        caches.load(_write(tmp_path, text))


def test_the_kernel_inputs_name_the_flags_that_change_kernels() -> None:
    inputs = caches.kernel_inputs()
    assert {"--attention-backend", "--moe-runner-backend", "--tp-size"} <= inputs.flags
    assert "FLASHINFER_CUDA_ARCH_LIST" in inputs.env


def test_a_kernel_flag_that_is_no_flag_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "kernel_flags: [tp-size]\nkernel_env: []\ncaches:\n" + ENTRY.format(r="<1"))
    with pytest.raises(InputError, match=r"caches.yaml:1: kernel_flags: 'tp-size' is no long flag"):
        caches.load(path)
