"""How much of what a real sglang release can fail with at startup the log rules classify specifically.

The population: every raise / assert / logger.error site (fleet.upstream.sourcetext.sites) in the startup-path modules
of a release (playbooks/upstream/startup-modules.yaml lists them per release, from the globs below). Each
site is turned into the line a log would show (`RuntimeError: ...`, placeholders given a sample) and
classified, with the release's own sites behind the rules (fleet/logs/bysite.py) unless told otherwise; "specific"
means a rule other than the catch-alls that only say "an exception happened" (a site class counts: it names one).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fleet.logs.bysite import SiteClasses, SiteClassifier
from fleet.logs.classify import LineMatch, classify_line
from fleet.logs.rules import RuleSet
from fleet.upstream.siteindex import IndexedSite, SiteIndex
from fleet.upstream.sourcetext import Site, sites

MODULES_FILE = Path(__file__).resolve().parents[2] / "playbooks" / "upstream" / "startup-modules.yaml"

# What `python -m sglang.launch_server` runs through before "fired up": launch, arguments, schedulers, model
# runner and graph capture, distributed init and all-reduce, memory pools, weight loading, the fused
# all-reduce and the quantisation / attention / MoE backends the shipped playbooks pick.
STARTUP_GLOBS = (
    "sglang/launch_server.py",
    "sglang/srt/entrypoints/engine.py",
    "sglang/srt/entrypoints/http_server.py",
    "sglang/srt/server_args.py",
    "sglang/srt/arg_groups/*.py",
    "sglang/srt/arg_groups/fields/*.py",
    "sglang/srt/managers/scheduler.py",
    "sglang/srt/managers/tp_worker.py",
    "sglang/srt/managers/data_parallel_controller.py",
    "sglang/srt/managers/tokenizer_manager.py",
    "sglang/srt/model_executor/model_runner.py",
    "sglang/srt/model_executor/model_runner_*.py",
    "sglang/srt/model_executor/model_runner_components/*.py",
    "sglang/srt/model_executor/cuda_graph_runner.py",
    "sglang/srt/model_executor/pool_configurator.py",
    "sglang/srt/model_executor/runner/*.py",
    "sglang/srt/distributed/parallel_state.py",
    "sglang/srt/distributed/bootstrap.py",
    "sglang/srt/distributed/device_communicators/custom_all_reduce*.py",
    "sglang/srt/distributed/device_communicators/pynccl*.py",
    "sglang/srt/layers/communicator.py",
    "sglang/srt/layers/flashinfer_comm_fusion.py",
    "sglang/srt/layers/layer_boundary/**/*.py",
    "sglang/srt/mem_cache/memory_pool.py",
    "sglang/srt/mem_cache/kv_cache_configurator.py",
    "sglang/srt/model_loader/loader.py",
    "sglang/srt/model_loader/weight_utils.py",
    "sglang/srt/utils/common.py",
    "sglang/srt/layers/attention/attention_registry.py",
    "sglang/srt/layers/quantization/modelopt_quant.py",
    "sglang/srt/layers/moe/fused_moe_triton/layer.py",
)

# The catch-alls: they say that something failed, not what. A site they alone classify is not covered.
GENERIC = frozenset({"python_exception_line", "python_traceback", "scheduler_exception", "cuda_error",
                     "sglang_process_died", "native_crash", "unit_exited"})


def startup_modules(root: Path) -> list[str]:
    """The startup-path modules of the release unpacked at `root`, relative to it, sorted."""
    found = {p.relative_to(root).as_posix() for g in STARTUP_GLOBS for p in root.glob(g) if p.is_file()}
    return sorted(found)


@dataclass
class Coverage:
    sites: int = 0
    specific: int = 0
    by_rule: Counter[str] = field(default_factory=Counter)
    uncovered: list[tuple[str, Site]] = field(default_factory=list)  # (module, site)

    @property
    def share(self) -> float:
        return self.specific / self.sites if self.sites else 0.0


def classify_sites(root: Path, modules: list[str], rules: RuleSet, classes: SiteClasses | None = None,
                   by_site: bool = True, version: str = "?") -> list[tuple[str, Site, LineMatch | None]]:
    """(module, site, what its line classifies as) for every site of these modules of the release at `root`: by
    the rules alone, or (by_site) with the sites of these modules behind them; each module is parsed once."""
    found = [(m, s) for m in modules for s in sites((root / m).read_text(encoding="utf-8", errors="replace"))]
    classifier = None
    if by_site:
        index = SiteIndex(IndexedSite("sglang", version, m, s.line, s.function, s.kind, s.exception, s.text)
                          for m, s in found)
        classifier = SiteClassifier(index, classes)
    return [(m, s, classify_line(s.as_line(), rules, classifier)) for m, s in found]


def specific(match: LineMatch | None) -> bool:
    """Whether a classification names a cause (not a catch-all that only says something failed)."""
    return match is not None and match.rule.name not in GENERIC


def measure(root: Path, modules: list[str], rules: RuleSet, classes: SiteClasses | None = None,
            by_site: bool = True) -> Coverage:
    """Classify every site of these modules of the release at `root` (see classify_sites)."""
    return tally(classify_sites(root, modules, rules, classes, by_site))


def tally(classified: list[tuple[str, Site, LineMatch | None]]) -> Coverage:
    """The coverage of sites classify_sites classified."""
    by_rule: Counter[str] = Counter()
    uncovered: list[tuple[str, Site]] = []
    for module, site, match in classified:
        if specific(match):
            assert match is not None
            by_rule[match.rule.name] += 1
        else:
            uncovered.append((module, site))
    return Coverage(len(classified), sum(by_rule.values()), by_rule, uncovered)
