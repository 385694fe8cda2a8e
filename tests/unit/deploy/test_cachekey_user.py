"""Found by review (h-adv15, stop 54) of the cache key's user (fleet.deploy.cachekey): a root server's key keeps its old
digest and JSON (no `user`), and from_json reads a key without `user` as root's. An entry stored before the key held
the user, by a non-root server (serve.user llm, its cache folders named as a root one's: serve.env HOME or every cache
variable set), has exactly that JSON and digest: after the upgrade it is placed for a root unit, and root loads what
llm's server compiled (h-adv14's finding, left standing for every entry the store already holds). Fails on dbbc9f2."""

from __future__ import annotations

import hashlib
import json

from fleet.deploy.cachekey import CacheKey
from fleet.deploy.cachestore import CacheStore, Entry


def test_an_entry_stored_before_the_key_held_the_user_is_never_placed_for_a_root_unit(tmp_path):
    fields = CacheKey.__dataclass_fields__
    values = {name: () for name in fields}
    values.update(venv="/opt/ml-env", folders=("/srv/sglang/.cache/flashinfer",), user="llm")
    llm = CacheKey(**values)  # type: ignore[arg-type]
    root = CacheKey(**{**values, "user": "root"})  # type: ignore[arg-type]
    store = CacheStore(tmp_path / "store")
    # what the store holds from before the upgrade: llm's server's caches under the key as it was then (no user)
    old = {k: v for k, v in llm.to_json().items() if k != "user"}
    legacy = store.root / root.digest  # the old digest of llm's key is root's digest now
    legacy.mkdir(parents=True)
    (legacy / "key.json").write_text(json.dumps(old, sort_keys=True))
    (legacy / "cache.tar").write_bytes(b"llm's compiled modules")
    (legacy / "meta.json").write_text(json.dumps({"sha256": hashlib.sha256(b"llm's compiled modules").hexdigest(),
                                                  "size": 22, "host": "h", "stored": 0, "phases": None}))
    got = store.get(root)
    assert not isinstance(got, Entry), got  # before: an Entry: placed for the root unit, loaded by root
