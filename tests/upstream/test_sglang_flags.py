"""The committed flag table against the real sglang wheels, and the shipped playbooks against the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet import playbook
from fleet.upstream import corpus as upstream
from fleet.upstream import flags as sglang_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def real(matrix) -> dict[str, dict[str, sglang_cli.Flag]]:
    return {v: sglang_cli.flags_of(Path(upstream.require("sglang", v).root)) for v in matrix.sglang}


def test_the_committed_table_is_what_the_corpus_says(real):
    built = sglang_cli.build(real.items())
    assert sglang_cli.dump(built) == sglang_cli.TABLE.read_text(), \
        "playbooks/upstream/sglang-flags.yaml is stale: run `inv upstream --write-flags`"


def test_0_5_23_has_the_split_cuda_graph_flags_and_not_the_old_one(real):
    assert "cuda-graph-max-bs-decode" in real["0.5.23"] and "cuda-graph-max-bs-prefill" in real["0.5.23"]
    assert "cuda-graph-max-bs" not in real["0.5.23"]
    assert "cuda-graph-max-bs" in real["0.5.9"]
    # server_args.py of 0.5.23 declares only a handful; the fields of srt/arg_groups/fields/*.py hold the rest
    own = sglang_cli.parse((Path(upstream.require("sglang", "0.5.23").root) / "sglang/srt/server_args.py")
                           .read_text())
    assert len(own) < 20 < 500 < len(real["0.5.23"])
    fusion = real["0.5.23"]["enable-flashinfer-allreduce-fusion"]
    assert fusion.deprecated == "--flashinfer-allreduce-fusion-backend=auto"


def test_the_simulators_frozen_0_5_9_arguments_are_the_real_ones(real):
    sim = json.loads((ROOT / "sandbox/sim/data/sglang-v0.5.9-server-args.json").read_text())
    names = {f[2:] for entry in sim for f in entry["flags"] if f.startswith("--")}
    assert names == set(real["0.5.9"])


@pytest.mark.parametrize("path", sorted((ROOT / "playbooks").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_rung_starts_on_every_known_sglang(path, matrix):
    """No rung is lost silently: each rung's flags, as merged for a release, exist in that release."""
    book = playbook.load(path)
    table = sglang_cli.default_table()
    problems = []
    for version in matrix.sglang:
        for rung in book.ladder:
            for name in playbook.merged_flags(book.flags, rung, version):
                if (why := table.problem(name, version)) is not None:
                    problems.append(f"{book.name}/{rung.name} on {version}: {why}")
    assert problems == []
