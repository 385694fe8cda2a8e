"""The simulated sglang and flashinfer print only what the real releases they stand for print: every message
the simulator's `sglang` (0.5.9) and `flashinfer` (0.6.3) packages log, print or raise is matched against the
strings of the real release (placeholders on either side match anything)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from fleet.logs import rules as logrules
from fleet.upstream import corpus as upstream
from fleet.upstream import sourcetext

SIM = Path(__file__).resolve().parents[2] / "sandbox" / "sim" / "pkgs"
STANDS_FOR = {"sglang": ("sglang", "0.5.9"), "flashinfer": ("flashinfer-python", "0.6.3")}
_LOG = {"debug", "info", "warning", "error", "exception", "critical", "info_once", "warning_once"}

# Texts the simulated packages print that are not the package's own, each with where it really comes from.
NOT_THEIRS = {
    "bench_serving.py": {r"^\r\{\}%\|": "tqdm's progress bar (its default bar format)"},
    "http_server.py": {
        r"must be a (?:string|list of token ids)$": "the simulator's request validation: an HTTP 400 body, not a "
                                                    "log line (real sglang answers with pydantic's words)",
    },
    "server_args.py": {r"^No CUDA GPUs are available$": "torch (torch/cuda/__init__.py _lazy_init)"},
    "core.py": {r"^\[\{\}/\{\}\] c\+\+ -shared": "ninja -v echoing build.ninja's link rule (FLASHINFER_JIT_VERBOSE=1)",
                r"^\{\}: file too short$": "glibc's dlopen refusing a truncated shared object (tvm_ffi.load_module, "
                                            "flashinfer 0.6.3 jit/core.py l.305-306, passes it on; inferred)"},
}


def sim_messages(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        logged = isinstance(f, ast.Attribute) and name in _LOG
        raised = name == "print" or name == "Exception" or (name[:1].isupper() and name.endswith("Error"))
        if logged or raised:
            text = sourcetext.render(node.args[0])
            if text and len(text.replace(sourcetext.PLACEHOLDER, "").strip()) >= 12:
                out.append((node.lineno, text))
    return out


def _shape(template: str) -> re.Pattern[str] | None:
    """sourcetext.shape, for templates with a fixed piece long enough to tell one message from another."""
    pieces = [p.strip() for p in template.split(sourcetext.PLACEHOLDER) if p.strip()]
    return sourcetext.shape(template) if pieces and max(map(len, pieces)) >= 10 else None


@pytest.fixture(scope="module")
def real(matrix) -> dict[str, list[str]]:
    out = {}
    for top, (dist, version) in STANDS_FOR.items():
        pkg = upstream.require(dist, version).package(top)
        out[top] = list({t for p in pkg.rglob("*.py") for t in sourcetext.templates(p.read_text(errors="replace"))})
    return out


@pytest.mark.parametrize("top", sorted(STANDS_FOR))
def test_every_simulated_message_is_a_real_one(real, top):
    shapes = [(max((p.strip() for p in r.split(sourcetext.PLACEHOLDER)), key=len), s) for r in real[top]
              if (s := _shape(r)) is not None]
    unknown, checked = [], 0
    for path in sorted((SIM / top).rglob("*.py")):
        exempt = NOT_THEIRS.get(path.name, {})
        for line, text in sim_messages(path):
            if any(re.search(rx, text) for rx in exempt):
                continue
            checked += 1
            mine = _shape(text)
            theirs = (mine is not None and any(mine.search(r) for r in real[top])) or any(
                key in text and rx.search(text) for key, rx in shapes)
            if not theirs:
                unknown.append(f"{path.relative_to(SIM)}:{line}: {text[:120]!r}")
    assert checked >= 15  # the check ran over something (sglang: about 80, flashinfer: 18)
    assert unknown == [], f"lines no real {STANDS_FOR[top]} prints"


def test_the_exemptions_are_still_needed():
    """An exemption for a text the simulator no longer prints is dead: drop it."""
    for file, patterns in NOT_THEIRS.items():
        texts = [t for p in SIM.rglob(file) for _, t in sim_messages(p)]
        for rx in patterns:
            assert any(re.search(rx, t) for t in texts), f"{file}: nothing matches {rx!r}"


# the simulator's own failures (a broken sandbox), not lines a stand-in prints for the software it models
SIM_OWN = (r"^the table has a catch-all serve row$", r"^nvidia-smi \{\} failed", r"^simulated torch: ")


def test_the_simulated_torch_nccl_and_cuda_lines_are_recorded_real_ones():
    """What the stand-ins print for torch, NCCL and CUDA (not in the corpus) matches a line with a public
    source: a recorded failure (tests/fixtures/logs/real_failures.jsonl, each with its thread), a message real
    torch raised on a GPU (torch_messages.jsonl, by tests/tools/record_torch_messages.py) or the example of a log
    rule whose sources name that project."""
    logs = SIM.parents[2] / "tests" / "fixtures" / "logs"
    recorded = [json.loads(row)["text"] for name in ("real_failures.jsonl", "torch_messages.jsonl")
                for row in (logs / name).read_text().splitlines() if row.strip()]
    sourced = [ex for rule in logrules.default_rules().rules
               if any(isinstance(s, logrules.ProjectSource) and s.project in ("torch", "NCCL", "CUDA")
                      for s in rule.sources) for ex in rule.examples]
    unknown, checked = [], 0
    for top in ("sglang_sim_core", "torch"):
        for path in sorted((SIM / top).rglob("*.py")):
            for line, text in sim_messages(path):
                if any(re.search(rx, text) for rx in SIM_OWN):
                    continue
                checked += 1
                shape = _shape(text)
                if shape is None or not any(shape.search(r) for r in recorded + sourced):
                    unknown.append(f"{path.relative_to(SIM)}:{line}: {text[:120]!r}")
    assert checked >= 4 and unknown == []
