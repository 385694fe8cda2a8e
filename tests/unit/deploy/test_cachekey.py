"""fleet.deploy.cachekey: the key under which hosts share compile and tune caches; any part that changes what a
kernel or tactic is changes the key."""

from __future__ import annotations

import pytest

from fleet.deploy import cachekey
from fleet.deploy.cachekey import CacheKey, NoKey
from fleet.host.facts import Gpu, HostFacts, Package
from fleet.patches.sets import DEFAULT_DIR, load_sets

PRO6000 = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
ARGV = ["-m", "sglang.launch_server", "--model-path", "/models/llama", "--tp-size", "2", "--port", "30000",
        "--attention-backend=flashinfer", "--enable-flashinfer-allreduce-fusion", "--log-level", "info"]
VENV = "/root/ml-env"


def _facts(sm: int = 120, name: str = PRO6000, flashinfer: str = "0.6.3", driver: str = "580.95.05") -> HostFacts:
    gpus = [Gpu(index=i, name=name, compute_cap=f"{sm // 10}.{sm % 10}", sm=sm) for i in range(2)]
    return HostFacts(host="h", address="10.0.0.1", gpus=gpus, driver_version=driver, torch_cuda="13.0",
                     packages={"sglang": Package(version="0.5.9"), "flashinfer": Package(version=flashinfer),
                               "torch": Package(version="2.9.1+cu130")})


def _key(facts: HostFacts | None = None, patches: cachekey.Pairs = (), argv: list[str] = ARGV,
         env: dict[str, str] | None = None) -> CacheKey:
    key = cachekey.key_for(facts or _facts(), patches, argv, env or {}, VENV)
    assert isinstance(key, CacheKey), key
    return key


def test_two_hosts_of_one_kind_get_one_key() -> None:
    a = _key(_facts())
    b = _key(_facts())
    assert a == b and a.digest == b.digest and len(a.digest) == 64


@pytest.mark.parametrize(("other", "part"), [
    (_facts(sm=100, name="NVIDIA B200"), "sm"),
    (_facts(name="NVIDIA GeForce RTX 5090"), "gpu"),
    (_facts(flashinfer="0.6.7.post3"), "packages"),
    (_facts(driver="590.10"), "driver"),
])
def test_another_gpu_driver_or_package_changes_the_key(other: HostFacts, part: str) -> None:
    mine, theirs = _key(), _key(other)
    assert mine.digest != theirs.digest
    assert part in mine.differences(theirs)


def test_kernel_flags_are_in_the_key_and_other_flags_are_not() -> None:
    key = _key()
    assert key.flags == (("--attention-backend", "flashinfer"), ("--enable-flashinfer-allreduce-fusion", ""),
                         ("--model-path", "/models/llama"), ("--tp-size", "2"))
    assert _key(argv=[*ARGV[:-1], "debug"]).digest == key.digest  # --log-level changes no kernel
    assert _key(argv=[a if a != "2" else "4" for a in ARGV]).digest != key.digest


def test_kernel_environment_is_in_the_key() -> None:
    assert _key(env={"FLASHINFER_CUDA_ARCH_LIST": "12.0f", "HOME": "/x"}).env == (
        ("FLASHINFER_CUDA_ARCH_LIST", "12.0f"),)


def test_a_patch_set_changes_the_key_and_so_does_its_variant() -> None:
    patch = load_sets(["sm120-allreduce-fusion"], DEFAULT_DIR)[0]
    old = cachekey.patch_digest(patch, {"sglang": "0.5.9", "flashinfer-python": "0.6.3"})
    new = cachekey.patch_digest(patch, {"sglang": "0.5.23", "flashinfer-python": "0.7.2"})
    assert old != new  # other edits for other releases
    plain, patched = _key(), _key(patches=((patch.name, old),))
    assert plain.digest != patched.digest and plain.differences(patched) == ("patches",)
    assert patched.digest != _key(patches=((patch.name, new),)).digest


def test_a_key_survives_its_json_and_refuses_anything_else() -> None:
    key = _key(patches=(("p", "0" * 64),))
    assert CacheKey.from_json(key.to_json()) == key
    broken = key.to_json() | {"packages": "sglang"}
    with pytest.raises(ValueError, match="packages"):
        CacheKey.from_json(broken)
    with pytest.raises(ValueError, match="not a cache key"):
        CacheKey.from_json({"sm": "120"})


@pytest.mark.parametrize(("facts", "why"), [
    (HostFacts(host="h", address="a"), "no GPU facts"),
    (_facts().model_copy(update={"gpus_agree": False}), "GPUs differ"),
    (_facts().model_copy(update={"torch_cuda": None}), "torch's CUDA"),
    (_facts().model_copy(update={"packages": {"sglang": Package(version=None)}}), "version is unknown"),
])
def test_a_host_whose_facts_are_incomplete_gets_no_key(facts: HostFacts, why: str) -> None:
    got = cachekey.key_for(facts, (), ARGV, {}, VENV)
    assert isinstance(got, NoKey) and why in got.reason
