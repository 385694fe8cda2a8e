"""The upstream corpus: the matrix as data, and a wheel accepted only with the registry's sha256.

The registry is a local PEP 691 index served on loopback; pip's download is replaced by copying a wheel made
here (pip itself is exercised by bootstrap.sh, which fetches the real corpus)."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import threading
import zipfile
from pathlib import Path

import pytest

from fleet.errors import FleetError, InputError
from fleet.upstream import corpus as upstream


def test_matrix_pairs_and_releases():
    m = upstream.load_matrix()
    assert list(m.sglang)[0] == "0.5.8.post1" and m.sglang["0.5.9"] == "0.6.3"
    pairs = m.pairs()
    assert ("0.5.9", "0.6.3") in pairs and ("0.5.23", "0.7.4") in pairs and ("0.5.9", "0.6.16") in pairs
    assert len(pairs) == len(set(pairs))  # a pin equal to an extra is listed once
    assert ("flashinfer-python", "0.6.17") in m.releases() and ("sglang", "0.5.23") in m.releases()


def _wheel(tmp: Path) -> Path:
    w = tmp / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr("demo/__init__.py", "X = 1\n")
        z.writestr("demo/k.cuh", "#if __CUDA_ARCH__ >= 900\n#endif\n")
        z.writestr("demo/lib.so", b"\x7fELF")  # not a text file the audit reads: left out
        z.writestr("demo-1.0.dist-info/METADATA", "Name: demo\nVersion: 1.0\n")
    return w


@pytest.fixture
def registry(tmp_path):
    """A PEP 691 index on loopback; `sha` is what it lists for the wheel."""
    state = {"sha": ""}

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = json.dumps({"files": [{"filename": "demo-1.0-py3-none-any.whl",
                                          "hashes": {"sha256": state["sha"]}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", state
    srv.shutdown()
    srv.server_close()


def test_fetch_checks_the_registry_hash_keeps_text_and_caches(tmp_path, registry, monkeypatch):
    url, state = registry
    wheel = _wheel(tmp_path)
    calls = []

    def download(dist, version, dest, python, platform):
        calls.append((dist, version, python, platform))
        dest.mkdir(parents=True)
        target = dest / wheel.name
        target.write_bytes(wheel.read_bytes())
        return target

    monkeypatch.setattr(upstream, "_pip_download", download)
    m = upstream.load_matrix()
    cache = tmp_path / "cache"
    state["sha"] = "0" * 64
    with pytest.raises(FleetError, match="differs from the registry's"):
        upstream.fetch("demo", "1.0", m, cache, index=url)
    assert upstream.cached("demo", "1.0", cache) is None and not (cache / "demo/1.0").exists()
    state["sha"] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    rel = upstream.fetch("demo", "1.0", m, cache, index=url)
    assert rel.sha256 == state["sha"] and rel.files == 3  # __init__.py, k.cuh, METADATA; not lib.so
    assert (Path(rel.root) / "demo/k.cuh").is_file() and not (Path(rel.root) / "demo/lib.so").exists()
    assert calls == [("demo", "1.0", "3.11", "manylinux_2_34_x86_64")] * 2
    again = upstream.fetch("demo", "1.0", m, cache, index=url)  # unpacked once
    assert again == rel and len(calls) == 2


def test_a_registry_that_cannot_be_reached_fails_loudly(tmp_path):
    with pytest.raises(FleetError, match="cannot read the registry index"):
        upstream.registry_sha256("demo", "demo-1.0-py3-none-any.whl", index="http://127.0.0.1:9")


def test_require_names_the_missing_release(tmp_path):
    with pytest.raises(InputError, match=r"sglang 9\.9\.9 is not in the upstream cache .*inv upstream"):
        upstream.require("sglang", "9.9.9", tmp_path)


@pytest.mark.parametrize(("root", "where"), [
    ("/home/ana/.cache/fleet/upstream/sglang/0.5.23", ""),  # as `inv upstream` records it, on another machine
    ("/old/cache/sglang/0.5.23/tree", "tree"),
    ("/somewhere/else/entirely", ""),
    ("/c/sglang/0.5.23/../../../../etc", ""),  # never out of the cache
])
def test_a_release_s_tree_is_read_where_the_cache_is_now(tmp_path, root, where):
    rel = upstream.UpstreamRelease("sglang", "0.5.23", root, "w.whl", "0" * 64, 1, 1, 1)
    assert upstream.tree(rel, tmp_path) == tmp_path / "sglang" / "0.5.23" / where


def test_pip_gets_the_index_and_how_to_reach_it_and_no_other_pip_setting_of_the_controller(monkeypatch):
    for name, value in {"PIP_INDEX_URL": "https://ci:t0k@idx.example/simple/", "PIP_EXTRA_INDEX_URL": "file:///x",
                        "PIP_CERT": "/etc/ca.pem", "PIP_TIMEOUT": "5", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/w",
                        "PIP_PLATFORM": "win_amd64", "PIP_CONFIG_FILE": "/etc/pip.conf", "HTTPS_PROXY": "http://p:3128"
                        }.items():
        monkeypatch.setenv(name, value)
    env = upstream.pip_env()
    assert {k: v for k, v in env.items() if k.startswith("PIP_")} == {
        "PIP_INDEX_URL": "https://ci:t0k@idx.example/simple", "PIP_EXTRA_INDEX_URL": "file:///x",
        "PIP_CERT": "/etc/ca.pem", "PIP_TIMEOUT": "5", "PIP_CONFIG_FILE": os.devnull}
    assert env["HTTPS_PROXY"] == "http://p:3128"  # how the controller reaches the network is its own
    assert upstream.shown_index() == "https://ci:***@idx.example/simple + file:///x"
