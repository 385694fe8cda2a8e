"""The simulated wheels of BOTH releases against the real wheels they stand for (sglang 0.5.9 + flashinfer-python
0.6.3, sglang 0.5.23 + flashinfer-python 0.7.2): the flags each parser takes, the startup lines each prints, where
each keeps the fusion gates and what they say, flashinfer's JIT and kernel gates. Read from the built wheels and
compared with the corpus, independently of the generator (sandbox/sim/releases.py)."""

from __future__ import annotations

import ast
import json
import re
import zipfile
from pathlib import Path

import pytest
import yaml

from fleet.upstream import corpus as upstream
from fleet.upstream import flags as upstream_flags
from fleet.upstream import sourcetext
from sandbox.sim import wheels

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "sandbox/sim/pkgs"
GATE = re.compile(r"^#\s*(?:if|elif)\b.*__CUDA_ARCH__")


@pytest.fixture(scope="module")
def built(matrix, tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """wheel stem ('sglang-0.5.23') -> its files."""
    out = {}
    for path in wheels.build(tmp_path_factory.mktemp("house")):
        with zipfile.ZipFile(path) as zf:
            out["-".join(path.name.split("-")[:2])] = {n: zf.read(n) for n in zf.namelist()}
    return out


def _root(dist: str, version: str) -> Path:
    return upstream.tree(upstream.require(dist, version))


def _templates(root: Path) -> set[str]:
    """Every message of the modules where sglang's startup phases log (model_executor, distributed)."""
    return {t for sub in ("model_executor", "distributed") for p in (root / "sglang/srt" / sub).rglob("*.py")
            for t in sourcetext.templates(p.read_text(errors="replace"))}


def _release(built, version: str) -> dict:
    return json.loads(built[f"sglang-{version}"]["sglang/srt/sim_release.json"])


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_each_simulated_parser_takes_exactly_the_real_releases_flags(built, version):
    real = set(upstream_flags.flags_of(_root("sglang", version)))
    spec = _release(built, version)["flags"]
    if spec is None:  # 0.5.9: the committed add_argument table
        spec = [{"flags": e["flags"], "negatable": False}
                for e in json.loads(built["sglang-0.5.9"]["sglang/srt/server_args_v0_5_9.json"])]
    ours = {n[2:] for e in spec for n in e["flags"] if n.startswith("--")}
    ours |= {"no-" + n[2:] for e in spec if e["negatable"] for n in e["flags"] if n.startswith("--")}
    assert ours == real, (sorted(ours - real)[:10], sorted(real - ours)[:10])
    if version == "0.5.23":
        assert "cuda-graph-max-bs" not in ours and "cuda-graph-max-bs-decode" in ours  # removed in 0.5.20
        assert _release(built, version)["prog"] == "sglang serve"


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_each_simulated_startup_line_is_the_real_releases_and_marks_its_phase(built, version):
    lines = _release(built, version)["lines"]
    real = _templates(_root("sglang", version))
    assert set(lines.values()) <= real, set(lines.values()) - real
    phases = {p["name"]: re.compile(p["regex"]) for p in
              yaml.safe_load((REPO / "playbooks/phases/startup.yaml").read_text())["phases"]}
    filled = {k: v.replace("{}", "1") for k, v in lines.items()}
    assert phases["start"].search(filled["dist_begin"]) and phases["graph_capture"].search(filled["graph_begin"])
    assert filled["dist_begin"] == ("Init torch distributed begin." if version == "0.5.9" else "Init parallel begin.")


def test_the_simulators_own_defaults_are_0_5_9s_lines(built):
    """Without sim_release.json (sandbox/sim/install.py) the code prints its defaults: they are 0.5.9's."""
    lines = _release(built, "0.5.9")["lines"]
    defaults = {}
    for path in SIM.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "line" and len(node.args) >= 2:
                key, default = node.args[0], node.args[1]
                if isinstance(key, ast.Constant):
                    defaults[key.value] = ast.literal_eval(default) if isinstance(default, ast.Constant) else None
    assert defaults and set(defaults) == set(lines) and all(defaults[k] in (lines[k], None) for k in defaults)


def test_0_5_23s_fusion_gates_are_its_real_statements_at_its_real_paths(built):
    files = built["sglang-0.5.23"]
    root = _root("sglang", "0.5.23")
    for rel in ("sglang/srt/arg_groups/overrides.py", "sglang/srt/layers/flashinfer_comm_fusion.py",
                "sglang/srt/layers/layer_boundary/residual/add_norm.py"):
        ours = files[rel].decode()
        real = [ln.strip() for ln in (root / rel).read_text().split("\n")]
        copied = ours.split("from sglang.srt.sim_gates import *  # noqa: F403\n", 1)[1]
        for block in copied.split("\n\n\n"):
            lines = block.strip("\n").split("\n")
            if lines[0].startswith("def sim_block("):  # a statement of a function, called as one
                lines = lines[2:-1]
            mine = [ln.strip() for ln in lines]
            assert mine[0] and any(real[i:i + len(mine)] == mine for i in range(len(real))), (rel, mine[:3])
    assert "(get_platform().is_sm90 or get_platform().is_sm100)" in files["sglang/srt/arg_groups/overrides.py"].decode()
    assert "sglang/srt/layers/communicator.py" in files  # 0.5.9's file stays (the simulator's), unused by 0.5.23


@pytest.mark.parametrize("version", ["0.6.3", "0.7.2"])
def test_flashinfers_jit_and_kernel_gates_are_the_real_releases(built, version):
    files = built[f"flashinfer_python-{version}"]
    root = _root("flashinfer-python", version)

    def majors(source: str) -> str:
        fn = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)
                  and n.name == "gen_trtllm_comm_module")
        return next(ast.unparse(k.value) for c in ast.walk(fn) if isinstance(c, ast.Call) for k in c.keywords
                    if k.arg == "supported_major_versions")

    assert majors(files["flashinfer/jit/comm.py"].decode()) == majors((root / "flashinfer/jit/comm.py").read_text())
    headers = [n for n in files if n.startswith("flashinfer/data/include/flashinfer/comm/") and n.endswith(".cuh")]
    assert len(headers) == 3
    for name in headers:
        ours = [ln for ln in files[name].decode().split("\n") if GATE.match(ln)]
        real = [ln for ln in (root / name).read_text().split("\n") if GATE.match(ln)]
        assert ours and ours == real[:len(ours)], name
