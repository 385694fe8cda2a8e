"""The share of each real sglang release's startup failure sites that a specific log rule classifies may not
drop (the committed figure, tests/upstream/truth/rule_coverage.yaml), and the failures an operator of PCIe
Blackwell and Hopper fleets meets get their specific rule, read from the real release's own site."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fleet.logs import coverage as rulecoverage
from fleet.logs import rules as logrules
from fleet.logs.classify import classify_line
from fleet.upstream import corpus as upstream
from fleet.upstream import sourcetext

FIGURE = Path(__file__).resolve().parent / "truth" / "rule_coverage.yaml"
RULES = logrules.default_rules()


def test_the_committed_startup_modules_are_the_releases_own(matrix):
    committed = yaml.safe_load(rulecoverage.MODULES_FILE.read_text())
    assert list(committed) == list(matrix.sglang), "run bench/bench_rule_coverage.py --write"
    for version, modules in committed.items():
        assert modules == rulecoverage.startup_modules(Path(upstream.require("sglang", version).root)), version


def test_the_share_a_specific_rule_classifies_does_not_drop(matrix, startup_classified):
    committed = yaml.safe_load(FIGURE.read_text())
    dropped, report = [], []
    for version in matrix.sglang:
        cov = rulecoverage.tally(startup_classified(version))  # the rules with the release's sites behind them
        report.append(f"{version}: {cov.specific}/{cov.sites} = {cov.share:.3f}")
        if cov.share < committed[version]["share"] - 1e-4:
            dropped.append(f"{version}: {cov.share:.4f} < {committed[version]['share']}")
    print("\n".join(report))
    assert dropped == [], "a change made the rules classify fewer real startup failures"


# (release, module, a fragment of the site's message, the sample for its placeholders, the rule it must get)
OPERATOR = [
    ("0.5.23", "sglang/srt/layers/flashinfer_comm_fusion.py", "requires SM90 or SM10X", "1", "fusion_arch_gate"),
    ("0.5.23", "sglang/srt/entrypoints/engine.py", "died during initialization", "-9", "host_oom_killer"),
    ("0.5.23", "sglang/srt/entrypoints/engine.py", "died during initialization", "1", "sglang_process_died"),
    ("0.5.23", "sglang/srt/model_executor/model_runner_components/load_model_utils.py",
     "didn't finish loading", "1", "tp_ranks_load_mismatch"),
    ("0.5.9", "sglang/srt/model_executor/model_runner.py", "didn't finish loading", "1", "tp_ranks_load_mismatch"),
    ("0.5.23", "sglang/srt/model_executor/model_runner_components/moe_ep_setup.py",
     "must be divisible by moe_tp_size", "8", "moe_tp_split"),
    ("0.5.9", "sglang/srt/model_executor/model_runner.py", "must be divisible by moe_tp_size", "8", "moe_tp_split"),
    ("0.5.23", "sglang/srt/arg_groups/attention_hook.py", "TRTLLM MHA backend for prefill requires", "1",
     "arch_requirement"),
    ("0.5.23", "sglang/srt/arg_groups/attention_hook.py", "FMHAv2 prefill on SM120", "1", "arch_requirement"),
    ("0.5.23", "sglang/srt/arg_groups/kv_cache_hook.py", "requires Blackwell SM100 or SM120", "1", "arch_requirement"),
    ("0.5.23", "sglang/srt/arg_groups/kv_cache_hook.py", "--swa-full-tokens-ratio should be", "1",
     "server_args_refused"),
    ("0.5.9", "sglang/srt/server_args.py", "TRTLLM MLA backend is only supported", "1", "arch_unsupported"),
    ("0.5.23", "sglang/srt/model_executor/pool_configurator.py", "Not enough memory", "0.8",
     "kv_pool_not_enough_memory"),
]


@pytest.mark.parametrize("version,module,fragment,sample,rule", OPERATOR,
                         ids=[f"{v}:{f[:30]}:{r}" for v, _, f, _, r in OPERATOR])
def test_the_failures_operators_meet_get_their_rule(matrix, version, module, fragment, sample, rule):
    text = (Path(upstream.require("sglang", version).root) / module).read_text()
    found = [s for s in sourcetext.sites(text) if fragment in s.text]
    assert found, f"{version} {module} has no site saying {fragment!r}"
    for site in found:
        got = classify_line(site.as_line(sample), RULES)
        assert got is not None and got.rule.name == rule, f"{site.as_line(sample)!r} -> {got and got.rule.name}"
        assert got.rule.remedy
