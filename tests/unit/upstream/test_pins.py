"""Pins checked against each other from the real wheels' Requires-Dist (fleet.upstream.pins, pure), and the
playbook's `packages:` as `inv check` reads it (fleet.deploy.check, the corpus's METADATA)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.upstream import corpus, pins

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "upstream"
READ = {"sglang", "flashinfer-python", "sgl-kernel", "torch"}  # what the probe reads (fleet.host.sysinfo)


def meta(name: str) -> str:
    return (FIXTURES / f"{name}.METADATA").read_text()


def test_the_issue_s_pin_set_is_refused_in_one_line_naming_what_is_required():
    got = pins.conflicts({"sglang": "0.5.23", "flashinfer-python": "0.7.4"}, {"sglang": meta("sglang-0.5.23")},
                         "3.11")
    assert got == [("flashinfer-python", "sglang 0.5.23 requires flashinfer-python==0.7.2; the playbook pins 0.7.4")]
    assert pins.conflicts({"sglang": "0.5.23", "flashinfer-python": "0.7.1"}, {"sglang": meta("sglang-0.5.23")},
                          "3.11", source="--against")[0][1].endswith("; --against pins 0.7.1")


def test_the_pins_a_release_ships_with_agree():
    sg59 = {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "sgl-kernel": "0.3.21", "torch": "2.9.1"}
    assert pins.conflicts(sg59, {"sglang": meta("sglang-0.5.9")}, "3.11") == []
    sg523 = {"sglang": "0.5.23", "flashinfer-python": "0.7.2", "sglang-kernel": "0.4.10", "torch": "2.14.1"}
    assert pins.conflicts(sg523, {"sglang": meta("sglang-0.5.23"),
                                  "flashinfer-python": meta("flashinfer-python-0.7.2")}, "3.11") == []


def test_every_pin_a_wheel_refuses_is_said_and_a_local_label_matches_its_release():
    bad = {"sglang": "0.5.9", "flashinfer-python": "0.6.3.post1", "sgl-kernel": "0.3.20", "torch": "2.9.1+cu128"}
    got = dict(pins.conflicts(bad, {"sglang": meta("sglang-0.5.9")}, "3.11"))
    assert got == {"flashinfer-python": "sglang 0.5.9 requires flashinfer-python==0.6.3; the playbook pins 0.6.3.post1",
                   "sgl-kernel": "sglang 0.5.9 requires sgl-kernel==0.3.21; the playbook pins 0.3.20"}


def test_markers_are_read_for_the_host_s_platform_and_extras_not_asked_for_are_left_out():
    # flashinfer 0.7.2: torch (any), torch>=2.12.0 only for its b12x extra
    assert pins.conflicts({"flashinfer-python": "0.7.2", "torch": "2.9.1"},
                          {"flashinfer-python": meta("flashinfer-python-0.7.2")}, "3.11") == []
    # sglang 0.5.23: av==16.1.0 only on ARM Linux
    assert pins.conflicts({"sglang": "0.5.23", "flashinfer-python": "0.7.2", "av": "15.0.0"},
                          {"sglang": meta("sglang-0.5.23")}, "3.11") == []
    assert pins.conflicts({"sglang": "0.5.23", "flashinfer-python": "0.7.2", "av": "15.0.0"},
                          {"sglang": meta("sglang-0.5.23")}, "3.11", machine="aarch64")[0][1] == (
        "sglang 0.5.23 requires av==16.1.0; the playbook pins 15.0.0")


def test_a_requires_dist_that_is_not_pep_508_is_passed_over():
    text = "Metadata-Version: 2.1\nName: x\nVersion: 1\nRequires-Dist: torch ==== 2\nRequires-Dist: torch==2.9.1\n"
    assert [str(r) for r in pins.requirements(text)] == ["torch==2.9.1"]
    assert pins.conflicts({"x": "1", "torch": "2.8.0"}, {"x": text}, "3.11") == [
        ("torch", "x 1 requires torch==2.9.1; the playbook pins 2.8.0")]


def test_a_pin_set_is_normalised_and_each_pin_is_one_exact_version():
    assert pins.pin_set({"flashinfer_python": "0.6.16.post4", "SGLang": "0.5.23"}) == {
        "flashinfer-python": "0.6.16.post4", "sglang": "0.5.23"}
    for bad, says in ((">=0.5.9", "not one exact version"), ("==0.5.9", "not one exact version"),
                      ("0.5.*", "not one exact version"), ("latest", "not one exact version")):
        with pytest.raises(ValueError, match=says):
            pins.pin_set({"sglang": bad})
    with pytest.raises(ValueError, match="pins flashinfer-python a second time"):
        pins.pin_set({"flashinfer-python": "0.6.3", "flashinfer_python": "0.6.3"})
    with pytest.raises(ValueError, match="not a distribution name"):
        pins.pin_set({"sglang; rm -rf /": "0.5.9"})


def _release(cache: Path, dist: str, version: str, metadata: str) -> None:
    root = cache / dist / version
    (root / f"{dist.replace('-', '_')}-{version}.dist-info").mkdir(parents=True)
    (root / f"{dist.replace('-', '_')}-{version}.dist-info/METADATA").write_text(metadata)
    (root / "release.json").write_text(json.dumps({"dist": dist, "version": version, "root": str(root),
                                                   "wheel": "w.whl", "sha256": "0", "wheel_bytes": 0, "files": 1,
                                                   "bytes": 0}))


def test_the_corpus_checks_a_pin_set_and_names_a_release_it_does_not_hold(tmp_path):
    _release(tmp_path, "sglang", "0.5.23", meta("sglang-0.5.23"))
    got = corpus.check_pins({"sglang": "0.5.23", "flashinfer-python": "0.7.4"}, cache=tmp_path)
    assert got == [("flashinfer-python", "sglang 0.5.23 requires flashinfer-python==0.7.2; the playbook pins 0.7.4")]
    assert corpus.check_pins({"sglang": "0.5.23", "flashinfer-python": "0.7.2"}, cache=tmp_path) == [
        ("flashinfer-python", f"flashinfer-python 0.7.2 is not in the upstream cache {tmp_path}, so its "
                              "Requires-Dist cannot be checked: fetch it with `inv upstream --flashinfer 0.7.2`")]
    assert corpus.check_pins({"torch": "2.9.1"}, cache=tmp_path) == []  # nothing of the corpus's kind: no opinion


def test_a_cache_copied_from_another_machine_is_read_where_it_is_now(tmp_path):
    _release(tmp_path / "elsewhere", "sglang", "0.5.23", meta("sglang-0.5.23"))
    (tmp_path / "elsewhere").rename(tmp_path / "here")  # release.json still names the old root
    got = corpus.check_pins({"sglang": "0.5.23", "flashinfer-python": "0.7.4"}, cache=tmp_path / "here")
    assert got == [("flashinfer-python", "sglang 0.5.23 requires flashinfer-python==0.7.2; the playbook pins 0.7.4")]


def test_a_cached_release_without_its_metadata_cannot_vouch_for_the_pins(tmp_path):
    _release(tmp_path, "sglang", "0.5.23", meta("sglang-0.5.23"))
    next(tmp_path.glob("sglang/0.5.23/*.dist-info/METADATA")).unlink()
    assert corpus.check_pins({"sglang": "0.5.23"}, cache=tmp_path) == [
        ("sglang", f"sglang 0.5.23: {tmp_path}/sglang/0.5.23 holds no METADATA, so its Requires-Dist cannot be "
                   "checked: remove that folder and fetch it again with `inv upstream --sglang 0.5.23`")]


def test_a_venv_meets_its_pins_as_pip_s_double_equals_reads_them():
    pinned = {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1"}
    venv = {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1+cu130"}
    assert pins.unmet(pinned, venv, "/root/ml-env", READ) == []
    assert pins.unmet({}, {}, "/v", READ) == []
    assert pins.unmet({"triton": "3.5.0"}, {}, "/v", READ) == []  # the probe cannot read it: inv check warns


def test_each_pin_the_venv_does_not_meet_is_one_line_and_hostile_versions_are_not_printed():
    got = pins.unmet({"sglang": "0.5.23", "flashinfer_python": "0.7.2", "torch": "2.14.1", "sgl-kernel": "0.3.21"},
                     {"sglang": "0.5.9", "flashinfer-python": "0.6.3.post1", "torch": "\x1b[2J2.14.1"}, "/root/ml-env",
                     READ)
    tail = (" (only a one-host or rolling inv deploy builds a venv of the pins: install them there, or change "
            "packages:)")
    assert got == ["packages: the playbook pins sglang 0.5.23; the venv /root/ml-env has 0.5.9" + tail,
                   "packages: the playbook pins flashinfer_python 0.7.2; the venv /root/ml-env has 0.6.3.post1" + tail,
                   "packages: the playbook pins torch 2.14.1; the venv /root/ml-env has a version that is not PEP 440"
                   + tail,
                   "packages: the playbook pins sgl-kernel 0.3.21; the venv /root/ml-env has none" + tail]


def test_a_pin_typed_in_a_hurry_is_normalised_or_refused_with_what_to_write():
    assert pins.exact_version("v0.5.23") == "0.5.23" and pins.exact_version("0.6.16-post4") == "0.6.16.post4"
    assert pins.exact_version(" 0.5.23 ") == "0.5.23"
    with pytest.raises(ValueError, match=r"0.6 is a number in YAML: quote the version \('0.6'\)"):
        pins.exact_version(0.6)
    for bad in (True, None, [1]):
        with pytest.raises(ValueError, match="is not a version"):
            pins.exact_version(bad)


def test_a_torn_release_record_in_the_cache_is_one_line_not_a_traceback(tmp_path):
    _release(tmp_path, "sglang", "0.5.23", meta("sglang-0.5.23"))
    (tmp_path / "sglang/0.5.23/release.json").write_text('{"dist": "sgl')
    ((dist, line),) = corpus.check_pins({"sglang": "0.5.23"}, cache=tmp_path)
    assert dist == "sglang" and "holds no METADATA" in line and "fetch it again" in line
