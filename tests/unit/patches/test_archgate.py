"""The arch-gate evaluator: C preprocessor conditions (checked against the real `cpp`) and Python gates."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from fleet.patches import audit as archgate

REPO = Path(__file__).resolve().parents[3]
SIM = REPO / "sandbox/sim/pkgs"
COMM = SIM / "flashinfer/data/include/flashinfer/comm"
ARCHS = [None, 700, 800, 890, 900, 1000, 1030, 1200, 1210]


@pytest.mark.parametrize("expr,arch,want", [
    ("(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))", 1200, False),
    ("(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))", 900, True),
    ("(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))", None, False),
    ("__CUDA_ARCH__ >= 800 || !defined(__CUDA_ARCH__)", None, True),
    ("__CUDA_ARCH__ >= 800 || !defined(__CUDA_ARCH__)", 700, False),
    ("defined __CUDA_ARCH__ && __CUDA_ARCH__ / 100 == 12", 1210, True),
    ("!(__CUDA_ARCH__ < 1000) && FOO", 1200, False),
    ("__CUDA_ARCH__ >= 900 ? 1 : 0", 1000, True),
    ("__CUDA_ARCH__ >= 700 /* volta */", 700, True),
    # C++ alternative tokens, true/false, hex, the arch-specific macros and cutlass's function-like ones
    ("(defined(__CUDA_ARCH__) and (__CUDA_ARCH__ == 900))", 900, True),
    ("(defined(__CUDA_ARCH__) and (__CUDA_ARCH__ >= 900)) or defined(__CLION_IDE__)", 1200, True),
    ("not defined(__CUDA_ARCH__)", None, True),
    ("__CUDA_ARCH__ >= 900 && true", 900, True),
    ("CUDA_ARCH_FAMILY(1200)", 1200, True),
    ("CUDA_ARCH_FAMILY(1000)", 1200, False),
    ("(__CUDA_ARCH__ == 1000 && CUDA_ARCH_CONDITIONAL_OR_FAMILY(1000))", 1000, True),
    ("defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1200)", 1200, True),
    ("(__CUDA_ARCH__ & 0xF) == 0", 1200, True),
])
def test_eval_cpp(expr, arch, want):
    assert archgate.eval_cpp(expr, arch) is want


def test_eval_cpp_rejects_garbage():
    with pytest.raises(archgate.ExprError):
        archgate.eval_cpp("__CUDA_ARCH__ >=", 900)


def _cpp_says(conds: list[str], arch: int | None) -> list[bool]:
    """What the real C preprocessor takes for each condition, in one cpp run."""
    src = "".join(f"#if {c}\nTAKEN_{i}\n#endif\n" for i, c in enumerate(conds))
    args = ["cpp", "-P", "-undef"] + ([f"-D__CUDA_ARCH__={arch}"] if arch is not None else [])
    out = set(subprocess.run(args, input=src, capture_output=True, text=True, check=True).stdout.split())
    return [f"TAKEN_{i}" in out for i in range(len(conds))]


def _agrees(conds: list[str]) -> None:
    conds = sorted(set(conds))
    for arch in ARCHS:
        ours, cpp = [archgate.eval_cpp(c, arch) for c in conds], _cpp_says(conds, arch)
        assert ours == cpp, [(c, arch) for c, a, b in zip(conds, ours, cpp, strict=True) if a != b]


def test_agrees_with_the_c_preprocessor_on_every_simulated_header():
    conds = [d.cond for path in sorted(COMM.glob("*.cuh"))
             for d in archgate.cpp_directives(path.read_text())
             if d.kind in ("if", "elif") and "__CUDA_ARCH__" in d.cond]
    assert len(conds) >= 40
    _agrees(conds + ["defined __CUDA_ARCH__ && __CUDA_ARCH__ / 100 == 12", "!(__CUDA_ARCH__ < 1000) && FOO",
                     "__CUDA_ARCH__ >= 900 ? 1 : 0", "(__CUDA_ARCH__ % 1000) >= 200 || -1 > 0"])


def _scan_of_sim() -> dict:
    files = {}
    for path in sorted(COMM.glob("*.cuh")):
        rel = "flashinfer/" + str(path.relative_to(SIM / "flashinfer"))
        files[rel] = {"kind": "c", "lines": [[i + 1, t] for i, t in enumerate(path.read_text().split("\n"))
                                             if t.lstrip().startswith("#")]}
    for rel in ("flashinfer/jit/comm.py", "sglang/srt/server_args.py", "sglang/srt/layers/communicator.py"):
        files[rel] = {"kind": "py", "lines": [[i + 1, t] for i, t in enumerate((SIM / rel).read_text().split("\n"))]}
    return files


def test_sm120_gates_in_the_simulated_packages_and_what_the_set_lifts():
    gates = archgate.evaluate(_scan_of_sim(), 120)
    bad = [g for g in gates if g.excludes]
    cuh = [g for g in bad if g.file.endswith("trtllm_allreduce.cuh")]
    assert [g.line for g in cuh] == [417, 455, 485, 533, 711, 895, 950, 991, 1053, 1207, 1265, 1335, 1444]
    py = {(g.file, g.line) for g in bad if g.kind != "cpp"}
    assert py == {("flashinfer/jit/comm.py", 61), ("sglang/srt/server_args.py", 344),
                  ("sglang/srt/layers/communicator.py", 95)}
    assert len(bad) == 16
    # the < 800 legacy branches and the >= 1000 FP4 helpers do not exclude SM120
    assert not any(g.excludes for g in gates if "fusion" in g.file and g.kind == "cpp")


def test_sm90_and_sm100_verdicts():
    # SM90's reference is SM90 itself: the >= 1000 (SM100-only) branches are not "excluding" it
    assert not [g for g in archgate.evaluate(_scan_of_sim(), 90) if g.excludes]
    assert not [g for g in archgate.evaluate(_scan_of_sim(), 100) if g.excludes]


def test_python_gates():
    g = archgate.py_gate("f", 1, "        supported_major_versions=[9, 10]", 120)
    assert g.kind == "py-majors" and g.excludes
    assert not archgate.py_gate("f", 1, "supported_major_versions=[9, 10, 12]", 120).excludes
    assert archgate.py_gate("f", 1, "if major in (9, 10):", 120).excludes
    # a negated list guards the refusal: SM12x outside (9, 10) takes it, SM100 does not
    assert archgate.py_gate("f", 1, "if major not in (9, 10):", 120).excludes
    assert not archgate.py_gate("f", 1, "elif major not in (8, 12):", 120).excludes
    g = archgate.py_gate("f", 1, "(_is_sm90_supported or _is_sm100_supported or (_is_cuda and is_sm120_supported()))",
                         120)
    assert g.kind == "py-sm-check" and not g.excludes
    assert not archgate.py_gate("f", 1, "and (is_sm90_supported() or is_blackwell_supported())", 120).excludes
    assert archgate.py_gate("f", 1, "x = is_sm100_supported()", 120) is None  # a single check is not a gate


def test_elif_chain_is_evaluated_with_earlier_branches_negated():
    text = "#if __CUDA_ARCH__ >= 1000\n#elif __CUDA_ARCH__ >= 900\n#endif\n"
    gates = archgate.cpp_gates("x.cuh", archgate.cpp_directives(text), 120)
    # SM120 takes the #if branch, as its reference SM100 does: the elif (SM90's) excludes nothing
    assert [g.excludes for g in gates] == [False, False]


CONDITIONS = REPO / "sandbox/sim/data/flashinfer_arch_conditions.txt"


def _releases() -> dict[str, dict]:
    """flashinfer_arch_conditions.txt as scans per release: {release: {file: {kind, lines}}}."""
    out: dict[str, dict] = {}
    release = file = None
    for line in CONDITIONS.read_text().split("\n"):
        if line.startswith("================ "):
            release, file = line.split()[1], None
            out[release] = {}
        elif line.startswith("--- ") and release:
            file = line.split()[1]
            kind = "py" if file.endswith(".py") else "c"
            out[release][file] = {"kind": kind, "lines": []}
        elif release and file and (m := re.match(r"^(\d+)[:-](.*)$", line)):
            out[release][file]["lines"].append([int(m.group(1)), m.group(2)])
        elif release and line.startswith("flashinfer/jit/") and ":" in line:
            path, n, text = line.split(":", 2)
            out[release].setdefault(path, {"kind": "py", "lines": []})["lines"].append([int(n), text])
    return out


def test_real_flashinfer_conditions_by_release():
    releases = _releases()
    for rel in ("v0.4.0", "v0.5.3", "v0.6.3", "v0.6.6", "v0.6.16"):
        bad = [g for g in archgate.evaluate(releases[rel], 120) if g.excludes]
        cuh = [g for g in bad if g.file.endswith("trtllm_allreduce.cuh")]
        assert len(cuh) == 13 and all("< 1200" in g.condition for g in cuh), rel
        assert {g.file for g in bad} == {"include/flashinfer/comm/trtllm_allreduce.cuh",
                                         "flashinfer/jit/comm.py"}, rel
        assert not [g for g in archgate.evaluate(releases[rel], 100) if g.excludes], rel
    assert [g for g in archgate.evaluate(releases["HEAD"], 120) if g.excludes] == []  # fixed upstream (0.6.17)
    # every supported_major_versions gate of flashinfer/jit at v0.6.3, for SM120
    bad = sorted((g.file, g.line) for g in archgate.evaluate(releases["all"], 120) if g.excludes)
    assert bad == [("flashinfer/jit/comm.py", 61), ("flashinfer/jit/fused_moe.py", 62),
                   ("flashinfer/jit/fused_moe.py", 79), ("flashinfer/jit/fused_moe.py", 238),
                   ("flashinfer/jit/mla.py", 23)]
    # selective_state_update's [9] is SM90-only: SM100, SM120's reference, lacks it too, so it excludes nothing


def test_real_conditions_agree_with_cpp():
    conds = []
    for scan in _releases().values():
        for item in scan.values():
            if item["kind"] == "c":
                for _, text in item["lines"]:
                    conds += [d.cond for d in archgate.cpp_directives(text)
                              if d.kind == "if" and "__CUDA_ARCH__" in d.cond]
    assert len(conds) > 200
    _agrees(conds)


def test_unknown_function_like_macros_are_reported_never_guessed():
    with pytest.raises(archgate.ExprError, match=r"unknown function-like macro _CCCL_CUDA_COMPILER\(\)"):
        archgate.eval_cpp("_CCCL_CUDA_COMPILER(NVCC, >=, 12, 8) && __CUDA_ARCH__ >= 900", 900)
    text = "#if _CCCL_CUDA_COMPILER(CLANG) && __CUDA_ARCH__ >= 1000\nx\n#endif\n"
    (g,) = archgate.cpp_gates("f.cuh", archgate.cpp_directives(text), 120)
    assert not g.excludes and g.error and "_CCCL_CUDA_COMPILER" in g.error


def _excludes(text: str, sm: int = 120) -> list[bool]:
    return [g.excludes for g in archgate.cpp_gates("f.cuh", archgate.cpp_directives(text), sm)]


def test_chains_judge_what_the_sm_takes_instead():
    # SM100 (SM120's reference) has a body, SM120 none: excluded
    assert _excludes("#if __CUDA_ARCH__ == 1000\ncode();\n#endif\n") == [True]
    # SM120 takes a fallback with code: not excluded
    assert _excludes("#if __CUDA_ARCH__ == 1000\nfast();\n#else\nslow();\n#endif\n") == [False]
    # ... but an empty or #error fallback is no body
    assert _excludes("#if __CUDA_ARCH__ == 1000\nfast();\n#else\n// nothing\n#endif\n") == [True]
    assert _excludes('#if __CUDA_ARCH__ == 1000\nfast();\n#else\n#error "sm100 only"\n#endif\n') == [True]
    # an #error branch is never itself excluding (not taking it is good)
    assert _excludes('#if __CUDA_ARCH__ < 1000\n#error "needs sm100"\n#endif\n') == [False]
    # SM90-only code: SM100 skips it too, so it is not SM120's to miss
    assert _excludes("#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000\nwgmma();\n#endif\n") == [False]
    # a nested block counts as the body of its branch
    assert _excludes("#if __CUDA_ARCH__ >= 900\n#ifdef X\ny();\n#endif\n#endif\n") == [False]


def test_reference_of_an_sm():
    assert archgate.reference_for(120) == 1000 and archgate.reference_for(100) == 1000
    assert archgate.reference_for(90) == 900 and archgate.reference_for(89) == 900


def test_python_gates_of_sglang_0_5_2x():
    g = archgate.py_gate("f", 1, "if not (get_platform().is_sm90 or get_platform().is_sm100):", 120)
    assert g.kind == "py-sm-check" and g.excludes
    assert not archgate.py_gate("f", 1, "(get_platform().is_sm90 or get_platform().is_sm100 or "
                                        "get_platform().is_sm120)", 120).excludes
    assert not archgate.py_gate("f", 1, "if get_platform().is_sm100 or get_platform().is_sm120:", 120).excludes


def test_inl_files_are_in_the_full_scope():
    assert "**/*.inl" in archgate.scope_for(["flashinfer"], full=True)["flashinfer"]


def test_real_0_7_4_conditions_agree_with_cpp():
    """Every __CUDA_ARCH__ condition of real flashinfer 0.7.4's comm headers, against the real cpp."""
    from fleet.upstream import corpus as upstream
    rel = upstream.cached("flashinfer-python", "0.7.4")
    assert rel is not None, "run `inv upstream` (bootstrap.sh does)"
    conds = []
    for path in sorted((rel.package() / "data/include/flashinfer/comm").glob("*.cuh")):
        conds += [d.cond for d in archgate.cpp_directives(path.read_text())
                  if d.kind in ("if", "elif") and "__CUDA_ARCH__" in d.cond]
    assert len(conds) > 30
    _agrees(conds)
