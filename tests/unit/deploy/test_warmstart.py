"""fleet.deploy.warmstart's pure parts: flashinfer's arch folder per release, and the cache folders a host's
release uses with the unit's environment."""

from __future__ import annotations

from fleet.deploy import warmstart
from fleet.host.facts import Gpu, HostFacts, Package


def _facts(sglang: str, flashinfer: str, sm: int = 120) -> HostFacts:
    return HostFacts(host="h", address="a", gpus=[Gpu(index=0, name="G", sm=sm)],
                     packages={"sglang": Package(version=sglang), "flashinfer-python": Package(version=flashinfer)})


def test_flashinfer_names_its_arch_folder_as_each_release_does() -> None:
    assert warmstart.archs(120, "0.6.3") == "120a"
    assert warmstart.archs(120, "0.7.2") == "120f"  # 0.6.7+: SM 12.0 is compute_120f
    assert warmstart.archs(121, "0.7.2") == "121a"
    assert warmstart.archs(90, "0.6.3") == "90a"
    assert warmstart.archs(80, "0.6.3") == "80"


def test_sglang_0_5_9_caches_sit_in_home_and_tmp() -> None:
    got = warmstart.folders(_facts("0.5.9", "0.6.3"), {}, "root")
    assert got == ["/root/.cache/deep_gemm", "/root/.cache/flashinfer/0.6.3/120a/cached_ops", "/root/.triton/cache",
                   "/tmp/torchinductor_root"]


def test_sglang_0_5_23_caches_follow_sglang_cache_dir() -> None:
    got = warmstart.folders(_facts("0.5.23", "0.7.2"), {"SGLANG_CACHE_DIR": "/srv/c"}, "llm")
    assert got == ["/srv/c/.cache/flashinfer/0.7.2/120f/cached_ops", "/srv/c/deep_gemm",
                   "/srv/c/flashinfer/autotune/0.7.2/sm120", "/srv/c/inductor", "/srv/c/triton"]


def test_a_host_whose_versions_are_unknown_has_no_folders() -> None:
    assert warmstart.folders(_facts("0.5.9", "0.6.3").model_copy(update={"packages": {}}), {}, "root") == []
