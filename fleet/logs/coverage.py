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
from fleet.logs.classify import classify_line
from fleet.logs.rules import RuleSet
from fleet.upstream.siteindex import SiteIndex, build
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


def site_classifier(root: Path, modules: list[str], classes: SiteClasses | None = None,
                    version: str = "?") -> SiteClassifier:
    """The site classifier over these modules of the sglang release at `root`."""
    return SiteClassifier(SiteIndex(build("sglang", version, root, modules)), classes)


def measure(root: Path, modules: list[str], rules: RuleSet, by_site: SiteClassifier | None = None) -> Coverage:
    """Classify every site of these modules of the release at `root` (by the rules alone, or with `by_site`)."""
    cov = Coverage()
    for module in modules:
        for site in sites((root / module).read_text(encoding="utf-8", errors="replace")):
            cov.sites += 1
            match = classify_line(site.as_line(), rules, by_site)
            if match is not None and match.rule.name not in GENERIC:
                cov.specific += 1
                cov.by_rule[match.rule.name] += 1
            else:
                cov.uncovered.append((module, site))
    return cov
