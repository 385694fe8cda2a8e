"""fleet.deploy.warmstart's pure parts: flashinfer's arch folder per release, and the cache folders a host's
release uses with the unit's environment."""

from __future__ import annotations

import hashlib
import io
import tarfile

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


def test_sglang_0_5_9_caches_sit_in_home_and_the_units_own_tmp_is_left_alone() -> None:
    """Inductor's default folder is in /tmp, which the unit has its own of (PrivateTmp=yes): not the host's."""
    got = warmstart.folders(_facts("0.5.9", "0.6.3"), {}, "root", "/root")
    assert got == ["/root/.cache/deep_gemm", "/root/.cache/flashinfer/0.6.3/120a/cached_ops", "/root/.triton/cache"]
    with_env = warmstart.folders(_facts("0.5.9", "0.6.3"), {"TORCHINDUCTOR_CACHE_DIR": "/srv/inductor"}, "root",
                                 "/root")
    assert "/srv/inductor" in with_env


def test_sglang_0_5_23_caches_follow_sglang_cache_dir() -> None:
    got = warmstart.folders(_facts("0.5.23", "0.7.2"), {"SGLANG_CACHE_DIR": "/srv/c"}, "llm", "/home/llm")
    assert got == ["/srv/c/.cache/flashinfer/0.7.2/120f/cached_ops", "/srv/c/deep_gemm",
                   "/srv/c/flashinfer/autotune/0.7.2/sm120", "/srv/c/inductor", "/srv/c/triton"]


def test_a_host_whose_versions_are_unknown_has_no_folders() -> None:
    assert warmstart.folders(_facts("0.5.9", "0.6.3").model_copy(update={"packages": {}}), {}, "root", "/root") == []


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def test_the_placed_modules_are_read_from_the_tar_by_path() -> None:
    got = warmstart.modules_in(_tar({"root/ops/a/a.so": b"A", "root/ops/a/.ninja_log": b"x"}))
    assert got == {"/root/ops/a/a.so": hashlib.sha256(b"A").hexdigest()}
    assert warmstart.modules_in(b"not a tar") == {}


def test_a_warm_start_says_whether_its_modules_were_used_or_rebuilt() -> None:
    placed = {"/o/a/a.so": "1" * 64, "/o/b/b.so": "2" * 64}
    assert "the 2 placed modules were used as placed" in warmstart.judge_modules(placed, dict(placed))
    said = warmstart.judge_modules(placed, {"/o/a/a.so": "1" * 64, "/o/b/b.so": "3" * 64})
    assert said.startswith("warm start: 1 of 2 placed modules were rebuilt by the release (b.so)")
