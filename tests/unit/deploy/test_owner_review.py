"""Found by review (h-adv14, stop 54) of the owner rule at preflight (fleet.deploy.preflight.venv_verdict,
fleet.host.serverchecks.VenvRun): each test states what should hold; those that fail show a finding."""

from __future__ import annotations

from fleet.deploy.preflight import venv_verdict
from fleet.host.serverchecks import MARK, VenvRun


def test_a_uid_line_of_non_ascii_digits_is_no_account_and_never_a_crash():
    # str.isdigit() takes '²' (and '٠', an Arabic-Indic zero) for digits; int('²') raises ValueError: the
    # preflight crashed with a traceback instead of refusing; int('٠') is 0: a hostile line read as root's uid
    for text in ("yes\n\u00b2\n0\n\n\n", "yes\n0\n0\nops\n\u00b2:1\n"):
        found = VenvRun.parse(f"{MARK}\n{text}")  # before: ValueError for the first
        problem = venv_verdict(found, "/opt/venv", "root")  # before: ValueError for the second
        assert problem, (text, found)
    assert VenvRun.parse(f"{MARK}\nyes\n\u0660\n0\n\n\n").user_uid is None  # before: 0


def test_a_venv_of_one_user_run_as_another_is_refused_not_said():
    # the invariant: a venv's code runs as its single owner or not at all. serve.user llm with ops's venv only
    # warned: ops changes the venv, and llm's server (its API key credential, its model, its GPUs) runs ops's code
    problem = venv_verdict(VenvRun.parse(f"{MARK}\nyes\n1001\n0\nops\n1000:1000\n"), "/home/ops/venv", "llm")
    assert problem is not None


def test_a_root_units_warm_start_never_gets_caches_a_users_server_made(tmp_path):
    # the cache key holds the folders, not the server's user: two playbooks alike but for serve.user (or one whose
    # serve.user changed), their cache folders named alike (serve.env HOME, or every cache variable set), share one
    # key. What the `llm` user's server compiled (its .so modules, in folders that user may change at will before
    # the collect) is stored, then placed for a root unit (kcache.py as root) and loaded by root at its start.
    from fleet.deploy.cachestore import CacheStore
    from fleet.deploy.warmstart import WarmStart
    from fleet.host.facts import Gpu, HostFacts, Package

    facts = HostFacts(host="h", address="a", gpus=[Gpu(index=0, name="NVIDIA RTX PRO 6000", sm=120)],
                      driver_version="580.95.05", torch_cuda="13.0",
                      packages={"sglang": Package(version="0.5.9"), "flashinfer-python": Package(version="0.6.3")})
    store, env = CacheStore(tmp_path / "store"), {"HOME": "/srv/sglang"}
    as_llm = WarmStart.of(store, facts, [], ["--tp-size", "2"], env, "/opt/ml-env", "llm", "/home/llm")
    as_root = WarmStart.of(store, facts, [], ["--tp-size", "2"], env, "/opt/ml-env", "root", "/root")
    assert isinstance(as_llm, WarmStart) and isinstance(as_root, WarmStart)
    assert as_llm.key.digest != as_root.key.digest  # before: equal: root places and runs llm's compiled modules
