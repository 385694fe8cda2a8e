"""fleet.patches.kept: which excluding gate upstream keeps on purpose (matched by file, function, condition, release
and SM major, nothing looser), the data file's errors, and what the audit's verdict and exit code make of it."""

from __future__ import annotations

import pytest

from fleet.errors import InputError
from fleet.patches import audit as archgate
from fleet.patches import kept as keptgates

ENTRY = keptgates.KeptGate(
    name="mnnvl", file="flashinfer/jit/comm.py", where="gen_trtllm_mnnvl_comm_module",
    condition="supported_major_versions=[9, 10]", dist="flashinfer-python", releases=">=0.6.14,<=0.7.4",
    sm_majors=[11, 12], reason="datacenter\n  only",
    evidence=keptgates.Evidence(file="flashinfer/jit/comm.py", text="x"),
    sources=["https://github.com/flashinfer-ai/flashinfer/pull/3385"])
FI = {"flashinfer": {"dist": "flashinfer-python", "version": "0.7.4", "path": "/x"}}


def _find(**over: object) -> keptgates.Kept | None:
    args: dict[str, object] = {"file": ENTRY.file, "where": ENTRY.where, "condition": ENTRY.condition, "sm": 120,
                               "packages": FI, **over}
    return keptgates.find(entries=(ENTRY,), **args)  # type: ignore[arg-type]


def test_a_gate_named_by_file_function_condition_release_and_sm_is_kept_with_its_reason_and_source():
    kept = _find()
    assert kept == keptgates.Kept("mnnvl", "datacenter only", ("https://github.com/flashinfer-ai/flashinfer/pull/3385",))
    assert _find(condition="supported_major_versions=[9,  10]") == kept  # spacing as the source wraps it
    assert _find(sm=110) == kept and _find(sm=121) == kept
    assert _find(packages={"flashinfer": {"dist": "flashinfer_python", "version": "0.6.14"}}) == kept


@pytest.mark.parametrize("over", [
    {"where": "gen_trtllm_comm_module"},  # same file and condition, another function: the gate fleet patches
    {"file": "flashinfer/jit/other.py"},
    {"condition": "supported_major_versions=[9]"},
    {"sm": 100}, {"sm": 89},  # SMs the entry does not name
    {"packages": {"flashinfer": {"dist": "flashinfer-python", "version": "0.7.5"}}},  # a release nobody read yet
    {"packages": {"flashinfer": {"dist": "flashinfer-python", "version": "0.6.12"}}},
    {"packages": {"flashinfer": {"dist": "flashinfer-python", "version": "not-a-version"}}},  # a host's garbage
    {"packages": {"flashinfer": {"dist": "flashinfer-python", "version": None}}},  # the host could not tell
    {"packages": {"flashinfer": {"dist": "flashinfer", "version": "0.7.4"}}},  # another distribution
    {"packages": {"flashinfer": {"error": "not importable"}}}, {"packages": {}},
    {"packages": {"flashinfer": ["not", "a", "dict"]}}, {"packages": ["not", "a", "dict"]},
])
def test_anything_less_than_an_exact_match_is_audited_as_any_gate(over):
    assert _find(**over) is None


def _gate(where: str, excludes: bool = True) -> archgate.Gate:
    return archgate.Gate("flashinfer/jit/comm.py", 49, "py-majors", "supported_major_versions=[9, 10]", "t",
                         excludes=excludes, where=where)


def test_kept_gates_are_shown_but_never_remain_and_the_verdict_says_how_many():
    gates = [_gate("gen_trtllm_mnnvl_comm_module"), _gate("gen_trtllm_comm_module"),
             _gate("gen_trtllm_mnnvl_comm_module", excludes=False)]
    gates = archgate.mark_kept(gates, 120, FI, (ENTRY,))
    assert [g.kept is not None for g in gates] == [True, False, False]  # a gate that lets the SM through: unmarked
    res = archgate.AuditResult("h", 120, gates, FI)
    assert res.kept == [gates[0]] and res.remaining == [gates[1]]
    assert res.verdict() == "h: 2 of 3 gates exclude SM 120; upstream keeps 1 on purpose, 1 remain"
    gates[1].lifted_by = ["sm120-allreduce-fusion"]
    assert res.remaining == [] and res.verdict() == ("h: 2 of 3 gates exclude SM 120; upstream keeps 1 on purpose; "
                                                     "the sets lift 1, 0 remain")
    data = res.to_json()
    assert data["remaining"] == 0 and data["kept_by_upstream"] == 1
    assert data["excluding"][0]["kept"]["sources"] == ("https://github.com/flashinfer-ai/flashinfer/pull/3385",)


def test_the_shipped_file_loads_and_names_each_gate_once():
    entries = keptgates.load()
    assert len({e.name for e in entries}) == len(entries) >= 2
    assert len({(e.file, e.where, e.condition) for e in entries}) == len(entries)


@pytest.mark.parametrize(("text", "want"), [
    ("gates:\n  - name: a\n", ":2: gates.0.file: required key is missing"),
    ("gates:\n  - {name: a, file: f/x.py, where: w, condition: c, dist: d, releases: '>=0.1',\n"
     "     sm_majors: [12], reason: r, evidence: {file: f/x.py, text: t}, sources: ['http://x']}\n",
     ":3: gates.0.sources: Value error, one or more https:// addresses"),
    ("gates:\n  - {name: a, file: f/x.py, where: w, condition: c, dist: d, releases: '~0.1',\n"
     "     sm_majors: [12], reason: r, evidence: {file: f/x.py, text: t}, sources: ['https://x']}\n",
     ":2: gates.0.releases: Value error, bad version range clause '~0.1'"),
    ("gates:\n  - {name: a, file: ../x.py, where: w, condition: c, dist: d, releases: '>=0.1',\n"
     "     sm_majors: [12], reason: r, evidence: {file: f/x.py, text: t}, sources: ['https://x']}\n",
     ":2: gates.0.file: Value error, package/relative/path"),
    ("gates:\n  - {name: a, file: f/x.py, where: w, condition: c, dist: d, releases: '>=0.1',\n"
     "     sm_majors: [], reason: r, evidence: {file: f/x.py, text: t}, sources: ['https://x']}\n"
     "  - {name: a, file: f/x.py, where: w, condition: c, dist: d, releases: '>=0.1',\n"
     "     sm_majors: [12], reason: r, evidence: {file: f/x.py, text: t}, sources: ['https://x']}\n",
     ":3: gates.0.sm_majors: Value error, one or more SM majors"),
])
def test_a_bad_data_file_is_one_line_naming_file_line_and_key(tmp_path, text, want):
    path = tmp_path / "kept.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        keptgates.load(path)
    assert str(err.value).startswith(str(path)) and want.replace("Value error, ", "") in str(err.value)


def test_a_name_given_twice_is_refused_at_its_second_line(tmp_path):
    one = ("  - {name: a, file: f/x.py, where: w, condition: c, dist: d, releases: '>=0.1', sm_majors: [12],\n"
           "     reason: r, evidence: {file: f/x.py, text: t}, sources: ['https://x']}\n")
    path = tmp_path / "kept.yaml"
    path.write_text("gates:\n" + one + one)
    with pytest.raises(InputError, match=r"kept.yaml:4: gates.1.name: 'a' is named twice"):
        keptgates.load(path)


@pytest.mark.parametrize(("source", "line", "want"), [
    ("def gen():\n    x = f(\n        supported_major_versions=[9, 10])\n", 3, "gen"),
    ("def a():\n    def inner():\n        pass\n    nvcc = f(\n        supported_major_versions=[9, 10])\n", 5, "a"),
    ("class C:\n    def m(self):\n        return is_sm90_supported() or is_sm100_supported()\n", 3, "m"),
    ("def a():\n    pass\nX = is_sm90_supported() or is_sm100_supported()\n", 3, ""),
    ("async def a():\n    if major in (9, 10):\n        pass\n", 2, "a"),
])
def test_a_python_gate_knows_the_function_it_sits_in(source, line, want):
    assert archgate.enclosing_def(source.split("\n"), line - 1) == want
    assert [x[2] for x in archgate.gate_lines(source) if x[0] == line] == [want]
