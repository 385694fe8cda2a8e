"""A warm start's cache transfers say where they stand (issue 46, finding 5; the eighteenth newcomer's hour): an
entry of up to 2 GiB (the store's bound) went to the host, or came back, through the link (a bastion's too) without a
line, up to kcache's 300 s, before `warm start: caches ... placed` or `caches collected`."""

from __future__ import annotations

from pathlib import Path

from ticking import Said

from fleet.deploy import warmstart
from fleet.deploy.cachekey import CacheKey
from fleet.deploy.cachestore import CacheStore
from fleet.deploy.warmstart import WarmStart
from fleet.host import kcache
from fleet.inventory import Host

HOST = Host(name="h1", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(), source=Path("hosts.yaml"))
KEY = CacheKey(sm="120", gpu="G", driver="580", cuda="13.0", packages=(("sglang", "0.5.9"),), patches=(),
               flags=(), env=(), venv="/root/ml-env")


def test_placing_and_collecting_say_where_they_stand_while_they_run(tmp_path, monkeypatch):
    store = CacheStore(tmp_path / "store")
    store.put(KEY, b"\0" * 10240, "h0")
    said = Said()

    def slow(*args, **kwargs):
        assert said.ticked.wait(10), said  # where the transfer stands was said while it ran
        said.ticked.clear()
        return kcache.HostRefused("not this time")

    monkeypatch.setattr(warmstart.kcache, "place", slow)
    monkeypatch.setattr(warmstart.kcache, "collect", slow)
    monkeypatch.setattr(warmstart.kcache, "unproven", lambda *args: [])
    warm = WarmStart(store, KEY, ["/c"], "/v")
    warm.before_start(None, HOST, said)  # type: ignore[arg-type]
    assert said[0] == "warm start: placing the caches of h0 (0.0 MiB; budget 300s)", said
    assert str(said[1]).startswith("phase cache place: "), said
    said.clear()
    store.drop(KEY, "for the test")
    warm.after_serving(None, HOST, said)  # type: ignore[arg-type]
    assert said[0] == f"collecting this host's caches for key {KEY.digest[:12]} (budget 300s)", said
    assert str(said[1]).startswith("phase cache collect: "), said
