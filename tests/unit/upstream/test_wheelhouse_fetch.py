"""fleet.upstream.wheelhouse and resolver for the host it installs on: wheels chosen by the host's tags, missing ones
downloaded by pip for the host's Python and platform from a local file:// index (never the network), and one line
when they cannot be had."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from fleet.progress import Live
from fleet.upstream import resolver, wheelhouse
from fleet.upstream.wheelhouse import MissingWheel, Target

HOST = Target("3.11", "x86_64", "2.36")


def lines_of(said: list[str]):
    """A Progress keeping the lines said, not where a download stands now (a Live line each second it goes on)."""
    return lambda message: None if isinstance(message, Live) else said.append(message)


def wheel(folder: Path, name: str, version: str, *requires: str, tag: str = "py3-none-any") -> Path:
    """A wheel pip accepts (METADATA and WHEEL); a platform tag (cp311-cp311-manylinux_2_28_x86_64) gets a
    compiled-looking file of 200 kB."""
    stem = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{stem}-{tag}.whl"
    meta = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{stem}.dist-info/METADATA", "Metadata-Version: 2.1\n" + "\n".join(meta) + "\n\n")
        zf.writestr(f"{stem}.dist-info/WHEEL", f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: "
                                               f"{'true' if tag.startswith('py3') else 'false'}\nTag: {tag}\n\n")
        if not tag.startswith("py3"):
            zf.writestr(f"{name.replace('-', '_')}/_core.so", b"\0" * 200_000)
    return path


def index(remote: Path, root: Path) -> str:
    """A PEP 503 simple index of the wheels in `remote`, as files, and its file:// URL."""
    for w in remote.glob("*.whl"):
        project = root / w.name.split("-")[0].replace("_", "-").lower()
        project.mkdir(parents=True, exist_ok=True)
        shutil.copy(w, project / w.name)
    for project in root.iterdir():
        links = "".join(f'<a href="{w.name}">{w.name}</a>\n' for w in sorted(project.glob("*.whl")))
        (project / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    (root / "index.html").write_text("".join(f'<a href="{p.name}/">{p.name}</a>\n' for p in root.iterdir()))
    return root.as_uri()


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """What the index has: sglang (pure), its torch for cp311 and for cp312 on x86_64, and for aarch64."""
    src = tmp_path / "remote"
    src.mkdir()
    wheel(src, "sglang", "0.5.9", "torch==2.9.1")
    for tag in ("cp311-cp311-manylinux_2_28_x86_64", "cp312-cp312-manylinux_2_28_x86_64",
                "cp311-cp311-manylinux_2_28_aarch64"):
        wheel(src, "torch", "2.9.1", tag=tag)
    return src


def test_a_host_installs_only_wheels_of_its_python_and_platform():
    assert HOST.fits("torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert HOST.fits("sglang-0.5.9-py3-none-any.whl") and HOST.fits("x-1-cp39-abi3-manylinux2014_x86_64.whl")
    assert not HOST.fits("torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert not HOST.fits("torch-2.9.1-cp311-cp311-manylinux_2_28_aarch64.whl")
    assert not HOST.fits("torch-2.9.1-cp311-cp311-manylinux_2_38_x86_64.whl")  # newer glibc than the host's
    assert not HOST.fits("not a wheel name.whl")
    assert Target("3.11", "aarch64").platforms()[0] == "manylinux_2_17_aarch64"  # no glibc said: the oldest
    assert str(HOST) == "CPython 3.11 on x86_64 (glibc 2.36)"
    # a host's glibc is its word, up to 2.60: manylinux_2_60 .. _2_5, manylinux2014/2010/1 beside theirs, linux
    assert len(Target("3.11", "x86_64", "2.999").platforms()) == (60 - 5 + 1) + 3 + 1


def test_the_resolve_for_a_host_passes_over_wheels_it_cannot_install(remote, tmp_path):
    with pytest.raises(MissingWheel, match=r"sglang 0.5.9 requires torch==2.9.1; .* for CPython 3.11 on aarch64"):
        resolver.resolve({"sglang": "0.5.9"}, Target("3.11", "aarch64", "2.17"), remote)
    chosen = resolver.resolve({"sglang": "0.5.9"}, HOST, remote)
    assert [w.filename for w in chosen] == ["sglang-0.5.9-py3-none-any.whl",
                                            "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"]


def test_fill_downloads_what_the_host_needs_from_a_file_index_saying_each(remote, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", index(remote, tmp_path / "simple"))
    house = tmp_path / "house"
    said: list[str] = []
    got = resolver.fill({"sglang": "0.5.9"}, HOST, house, lines_of(said))
    assert got == ["sglang-0.5.9-py3-none-any.whl", "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert sorted(p.name for p in house.iterdir()) == got  # no other platform's torch, no temporary folder left
    assert said[0] == (f"downloading sglang==0.5.9 for CPython 3.11 on x86_64 (glibc 2.36) from "
                       f"{os.environ['PIP_INDEX_URL']} into {house}")
    assert said[1].startswith("downloading torch==2.9.1 for CPython 3.11")
    assert resolver.fill({"sglang": "0.5.9"}, HOST, house, lines_of(said)) == [] and len(said) == 2  # all there


def test_a_wheel_the_index_lacks_is_one_line_naming_it_the_host_and_how_to_provide_it(remote, tmp_path, monkeypatch):
    (remote / "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl").unlink()
    monkeypatch.setenv("PIP_INDEX_URL", index(remote, tmp_path / "simple"))
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(remote / "sglang-0.5.9-py3-none-any.whl", house)  # what it has stays; only torch is asked for
    with pytest.raises(MissingWheel) as caught:
        resolver.fill({"sglang": "0.5.9"}, HOST, house)
    text = str(caught.value)
    assert "\n" not in text and caught.value.requirement == "torch==2.9.1"
    assert text.startswith(f"sglang 0.5.9 requires torch==2.9.1; no wheel in the wheelhouse {house} has it for "
                           "CPython 3.11 on x86_64 (glibc 2.36); pip download torch==2.9.1 from file://")
    assert "--python-version 3.11 --implementation cp --abi cp311" in text and "FLEET_WHEELHOUSE" in text
    assert [p.name for p in house.iterdir()] == ["sglang-0.5.9-py3-none-any.whl"]  # what it got stays


def test_the_sandbox_guard_asks_no_index_but_a_local_one(remote, tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "1")
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.org/simple")
    assert "FLEET_SANDBOX_ONLY=1 allows no index but a file:// one" in (wheelhouse.fetch_refused() or "")
    said: list[str] = []
    with pytest.raises(MissingWheel, match="FLEET_SANDBOX_ONLY=1 allows no index"):
        resolver.fill({"sglang": "0.5.9"}, HOST, tmp_path / "house", lines_of(said))
    assert said == []  # nothing was asked of the network
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    assert wheelhouse.fetch_refused() is None


def test_the_unpacked_size_is_what_the_zip_directories_say(remote):
    wheels = wheelhouse.scan(remote)
    assert wheelhouse.unpacked_size(wheels) > 3 * 200_000
    (remote / "broken-1-py3-none-any.whl").write_bytes(b"not a zip")
    assert wheelhouse.unpacked_size(wheelhouse.scan(remote)) == wheelhouse.unpacked_size(wheels)


@pytest.mark.parametrize("name", ["foo-1.0-cp311-cp311-manylinux1_x86_64.whl",
                                  "foo-1.0-cp311-cp311-manylinux2010_x86_64.whl",
                                  "foo-1.0-cp311-cp311-manylinux_2_5_x86_64.manylinux1_x86_64.whl",
                                  "foo-1.0-cp311-cp311-manylinux_2_12_x86_64.manylinux2010_x86_64.whl",
                                  "foo-1.0-cp311-cp311-manylinux_2_16_x86_64.whl",
                                  "foo-1.0-cp39-abi3-manylinux1_x86_64.whl"])
def test_a_host_installs_manylinux_wheels_older_than_its_glibc_as_pep_600_says(name):
    assert HOST.fits(name) and HOST.why_not(name) is None
    assert not Target("3.11", "x86_64", "2.4").fits(name)  # older than any manylinux


def test_what_a_host_cannot_install_is_said_in_a_few_words():
    assert HOST.why_not("foo-1.0-cp311-cp311-musllinux_1_1_x86_64.whl") == ("musllinux_1_1_x86_64 is for musl hosts, "
                                                                           "not glibc ones")
    assert HOST.why_not("foo-1.0-cp311-cp311-manylinux_2_38_x86_64.whl") == "manylinux_2_38_x86_64 needs glibc 2.38"
    assert Target("3.11", "x86_64", "2.10").why_not("foo-1.0-cp311-cp311-manylinux2014_x86_64.whl") == (
        "manylinux2014_x86_64 needs glibc 2.17")
    assert HOST.why_not("foo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl") == "it is for cp312-cp312"
    assert HOST.why_not("foo-1.0-cp311-cp311-manylinux_2_28_aarch64.whl") == "it is for manylinux_2_28_aarch64"
    assert HOST.why_not("foo-1.0-cp311-cp311-win_amd64.whl") == "it is for win_amd64"
    assert HOST.why_not("not a wheel.whl") == "that is not a wheel's file name"
    assert HOST.host() == "a glibc 2.36 x86_64 host with CPython 3.11"


def test_fill_takes_a_manylinux1_wheel_pip_downloads_for_a_newer_glibc(tmp_path, monkeypatch):
    remote = tmp_path / "remote"
    remote.mkdir()
    wheel(remote, "foo", "1.0", tag="cp311-cp311-manylinux1_x86_64")
    monkeypatch.setenv("PIP_INDEX_URL", index(remote, tmp_path / "simple"))
    said: list[str] = []
    assert resolver.fill({"foo": "1.0"}, HOST, tmp_path / "house", lines_of(said)) == [
        "foo-1.0-cp311-cp311-manylinux1_x86_64.whl"]
    assert len(said) == 1  # one download; fleet took what pip took (it downloaded it up to 400 times, then refused)


class Pip:
    """subprocess.run for `pip download`: what it was asked (argv, env) and a wheel it 'downloads' into -d; any
    other command (the resolver's pip over the wheelhouse) runs as it is."""

    def __init__(self, wheel_name: str | None = None, fail: str = ""):
        self.wheel_name, self.fail = wheel_name, fail
        self.calls: list[tuple[list[str], dict[str, str]]] = []
        self.real = subprocess.run

    def __call__(self, cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        if "download" not in cmd:
            return self.real(cmd, **kw)
        env = kw["env"]
        assert isinstance(env, dict)
        self.calls.append((cmd, env))
        if self.wheel_name:
            wheel(Path(cmd[cmd.index("-d") + 1]), *self.wheel_name.split("-")[:2],
                  tag=self.wheel_name.removesuffix(".whl").split("-", 2)[2])
        return subprocess.CompletedProcess(cmd, 1 if self.fail else 0, "", self.fail)


@pytest.mark.parametrize(("got", "why"), [
    ("foo-1.0-cp311-cp311-musllinux_1_1_x86_64.whl", "pip downloaded foo-1.0-cp311-cp311-musllinux_1_1_x86_64.whl, "
     "which a glibc 2.36 x86_64 host with CPython 3.11 cannot install (musllinux_1_1_x86_64 is for musl hosts, not "
     "glibc ones)"),
    ("bar-2.0-py3-none-any.whl", "pip downloaded bar-2.0-py3-none-any.whl, which is not foo==1.0"),
    ("foo-1.1-py3-none-any.whl", "pip downloaded foo-1.1-py3-none-any.whl, which is not foo==1.0")])
def test_a_download_that_adds_nothing_the_host_installs_stops_fill_at_once_in_one_line(tmp_path, monkeypatch, got, why):
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    pip = Pip(got)
    house = tmp_path / "house"
    said: list[str] = []
    with pytest.raises(MissingWheel) as caught:
        resolver.fill({"foo": "1.0"}, HOST, house, lines_of(said), run=pip)
    text = str(caught.value)
    assert len(pip.calls) == 1 and len(said) == 1  # asked once, never again for the same wheel
    assert "\n" not in text and caught.value.requirement == "foo==1.0"
    assert text.startswith("the playbook requires foo==1.0; no wheel in the wheelhouse") and f"; {why}. " in text
    assert text.endswith(f"; {why}. Put a wheel of foo==1.0 that host installs in {house} (pip wheel foo==1.0 on one "
                         "like it), or pin a version the index has one of")
    assert list(house.iterdir()) == []  # what fleet refused is not left in the wheelhouse (nor the temporary folder)


def test_index_credentials_reach_pip_only_in_its_environment_and_are_masked_wherever_fleet_says_them(tmp_path,
                                                                                                  monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://ci:s3cr3t-token@pypi.internal.example/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://x2:extra-t0ken@mirror.example/simple https://tok3n@m2.example/s")
    monkeypatch.delenv("FLEET_SANDBOX_ONLY", raising=False)
    pip = Pip(fail="ERROR: Could not find https://ci:s3cr3t-token@pypi.internal.example/simple/torch/")
    said: list[str] = []
    with pytest.raises(MissingWheel) as caught:
        resolver.fill({"torch": "2.9.1"}, HOST, tmp_path, lines_of(said), run=pip)  # nothing reaches any index
    (cmd, env), = pip.calls
    assert not any("s3cr3t" in a or "t0ken" in a or "tok3n" in a for a in cmd)  # argv: read by ps
    assert "--index-url" not in cmd and "--extra-index-url" not in cmd
    assert env["PIP_INDEX_URL"] == "https://ci:s3cr3t-token@pypi.internal.example/simple"
    assert env["PIP_EXTRA_INDEX_URL"] == os.environ["PIP_EXTRA_INDEX_URL"]
    for text in (*said, str(caught.value)):
        assert "s3cr3t" not in text and "t0ken" not in text and "tok3n" not in text
    assert said == [f"downloading torch==2.9.1 for {HOST} from https://ci:***@pypi.internal.example/simple + "
                    f"https://x2:***@mirror.example/simple + https://***@m2.example/s into {tmp_path}"]
    assert "ERROR: Could not find https://ci:***@pypi.internal.example/simple/torch/" in str(caught.value)


def test_the_sandbox_guard_masks_the_index_it_refuses_and_refuses_an_extra_index_too(monkeypatch, tmp_path):
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "1")
    monkeypatch.setenv("PIP_INDEX_URL", "https://ci:s3cr3t-token@pypi.internal.example/simple")
    with pytest.raises(MissingWheel) as caught:
        resolver.fill({"torch": "2.9.1"}, HOST, tmp_path)
    assert "s3cr3t" not in str(caught.value) and "(PIP_INDEX_URL is https://ci:***@pypi.internal.example" in str(
        caught.value)
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://pypi.org/simple")  # pip would ask it: the network
    assert wheelhouse.fetch_refused() == (f"FLEET_SANDBOX_ONLY=1 allows no index but a file:// one (PIP_INDEX_URL is "
                                          f"{(tmp_path / 'simple').as_uri()}, PIP_EXTRA_INDEX_URL https://pypi.org/simple)")


def test_the_controllers_pip_settings_cannot_change_what_is_fetched_or_from_where(remote, tmp_path, monkeypatch):
    """PIP_NO_INDEX, PIP_FIND_LINKS (a folder with another torch), PIP_PLATFORM, PIP_ONLY_BINARY and a pip.conf
    naming another index: fleet's pip reads none of them; it asks PIP_INDEX_URL, for the host's platform."""
    monkeypatch.setenv("PIP_INDEX_URL", index(remote, tmp_path / "simple"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    wheel(elsewhere, "sglang", "0.5.9", "torch==2.9.1", "numpy")  # same name, other contents
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nno-index = true\nfind-links = {elsewhere}\n")
    for name, value in {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(elsewhere), "PIP_PLATFORM": "win_amd64",
                        "PIP_ONLY_BINARY": "none", "PIP_CONFIG_FILE": str(conf), "PIP_NO_DEPS": "0"}.items():
        monkeypatch.setenv(name, value)
    house = tmp_path / "house"
    assert resolver.fill({"sglang": "0.5.9"}, HOST, house) == ["sglang-0.5.9-py3-none-any.whl",
                                                                 "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"]
    name = "sglang-0.5.9-py3-none-any.whl"
    assert (house / name).read_bytes() == (remote / name).read_bytes()  # the index's, not the find-links one


def test_what_fleet_repeats_of_pip_is_masked_before_it_is_cut():
    line = "x" * 280 + " https://ci:s3cr3t-token-that-runs-past-the-cut@idx.example/simple\x1b[31m"
    assert "s3cr3t" not in wheelhouse.said(line) and wheelhouse.said(line).endswith(" https://ci:***@idx.")
    assert wheelhouse.said("a\x1b[0mb\n") == "a?[0mb?"
