"""The simulated flashinfer's attention modules and their JIT cache (issue 49): built (taking the profile's
modelled `jit_attention_seconds`) when cold, loaded without a build when the cache has them for this arch and
these sources, rebuilt when the sources or flags differ, and a truncated module kills the start as dlopen would."""

from __future__ import annotations

import shutil
import time

from sim_helpers import DENSE_MODEL
from simhost import SimHost

BUILT = "c++ -shared -o batch_"  # ninja -v's link line of an attention module (FLASHINFER_JIT_VERBOSE=1)
SCALE = {"SGLANG_SIM_TIME_SCALE": "0.01"}  # the 240 s build: 2.4 s of wall time


def _ops(host: SimHost, archs: str = "120a"):
    return host.home / ".cache" / "flashinfer" / "0.6.3" / archs / "cached_ops"


def _serve(host: SimHost) -> tuple[str, float]:
    start = time.monotonic()
    server = host.start("--model-path", DENSE_MODEL, "--tp-size", "2", env=SCALE)
    server.wait_ready(timeout=60)
    took = time.monotonic() - start
    server.stop()
    return server.log(), took


def test_a_cold_start_builds_the_attention_modules_and_a_warm_one_does_not(make_host) -> None:
    host = make_host()
    cold_log, cold = _serve(host)
    assert cold_log.count(BUILT) == 2  # prefill and decode
    mods = sorted(p.name for p in _ops(host).iterdir() if p.is_dir())
    assert [m.split("_with")[0] for m in mods] == ["batch_decode", "batch_prefill"]
    warm_log, warm = _serve(host)
    assert BUILT not in warm_log
    assert warm < cold - 1.5, (warm, cold)  # the 2.4 s of build not taken again


def test_a_profile_without_the_switch_models_no_build_time(make_host) -> None:
    host = make_host("rtx5090-x2-workstation")
    log, took = _serve(host)
    assert log.count(BUILT) == 2 and took < 10


def test_another_archs_cache_is_not_looked_at(make_host) -> None:
    donor, host = make_host(), make_host()
    _serve(donor)
    (host.home / ".cache" / "flashinfer" / "0.6.3").mkdir(parents=True)
    shutil.copytree(_ops(donor), _ops(host, "100a"))  # as if built on a B200
    log, _ = _serve(host)
    assert log.count(BUILT) == 2


def test_a_cache_built_from_other_flags_is_rebuilt(make_host) -> None:
    donor, host = make_host(), make_host()
    _serve(donor)
    _ops(host).parent.mkdir(parents=True)
    shutil.copytree(_ops(donor), _ops(host))
    for log in _ops(host).glob("batch_*/.ninja_log"):
        log.write_text("0" * 64 + "\n")  # built from other inputs
    log, _ = _serve(host)
    assert log.count(BUILT) == 2


def test_a_truncated_module_kills_the_start_and_a_cleared_cache_starts_cold(make_host) -> None:
    host = make_host()
    _serve(host)
    so = next(_ops(host).glob("batch_prefill*/*.so"))
    so.write_bytes(so.read_bytes()[:20])
    server = host.start("--model-path", DENSE_MODEL, "--tp-size", "2", env=SCALE)
    assert server.wait_exit(timeout=60) != 0
    assert f"OSError: {so}: file too short" in server.log()
    shutil.rmtree(_ops(host))
    log, _ = _serve(host)
    assert log.count(BUILT) == 2
