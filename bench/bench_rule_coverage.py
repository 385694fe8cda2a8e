"""How much of what each real sglang release can fail with at startup the log rules, with the release's own sites
behind them (fleet/logs/bysite.py), classify specifically (fleet/logs/coverage.py): sites, specifically classified,
share, the rules and site classes that do it, per release; against the
committed figure tests/upstream/truth/rule_coverage.yaml. With --old-rules REV, the same with the rule files
of that git revision and no sites behind them, as it measured (sources are added as placeholders when they have none).

usage: .venv/bin/python bench/bench_rule_coverage.py [--old-rules REV] [--write]
  --write  rewrite playbooks/upstream/startup-modules.yaml and the committed figure from this run
Needs the upstream corpus (`inv upstream`); reads no network.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet.logs import coverage as rulecoverage  # noqa: E402
from fleet.logs import rules as logrules  # noqa: E402
from fleet.upstream import corpus as upstream  # noqa: E402

FIGURE = REPO / "tests" / "upstream" / "truth" / "rule_coverage.yaml"


def old_rules(rev: str) -> logrules.RuleSet:
    with tempfile.TemporaryDirectory() as tmp:
        names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", rev, "playbooks/rules/"],
                               capture_output=True, text=True, check=True).stdout.split()
        for name in names:
            text = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{name}"], capture_output=True,
                                  text=True, check=True).stdout
            doc = yaml.safe_load(text)
            for rule in doc["rules"]:
                rule.setdefault("sources", [{"project": "sglang", "ref": "https://github.com/sgl-project/sglang"}])
            (Path(tmp) / Path(name).name).write_text(yaml.safe_dump(doc))
        return logrules.load_rules(Path(tmp))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-rules")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    rules = logrules.default_rules()
    before = old_rules(args.old_rules) if args.old_rules else None
    committed = yaml.safe_load(FIGURE.read_text()) if FIGURE.is_file() else {}
    modules_of, figure, rows = {}, {}, []
    print(f"{'sglang':<14}{'modules':>8}{'sites':>7}{'specific':>10}{'share':>8}{'committed':>11}"
          + (f"{'before':>8}" if before else "") + "  top rules")
    for version in upstream.load_matrix().sglang:
        root = Path(upstream.require("sglang", version).root)
        mods = rulecoverage.startup_modules(root)
        cov = rulecoverage.measure(root, mods, rules)
        modules_of[version] = mods
        figure[version] = {"sites": cov.sites, "specific": cov.specific, "share": round(cov.share, 4)}
        old = rulecoverage.measure(root, mods, before, by_site=False) if before else None  # as that revision did
        top = ", ".join(f"{n} {k}" for n, k in cov.by_rule.most_common(4))
        was = committed.get(version, {}).get("share")
        print(f"{version:<14}{len(mods):>8}{cov.sites:>7}{cov.specific:>10}{cov.share:>8.3f}"
              f"{(f'{was:.3f}' if was is not None else '-'):>11}" + (f"{old.share:>8.3f}" if old else "")
              + f"  {top}")
        rows.append({"sglang": version, **figure[version], "before": round(old.share, 4) if old else None})
    if args.write:
        lines = ["# The startup-path modules of each sglang release (fleet/logs/coverage.py STARTUP_GLOBS over the",
                 "# real wheel). Generated: bench/bench_rule_coverage.py --write; tests/upstream checks it."]
        lines += [f"{json.dumps(v)}: {json.dumps(m)}" for v, m in modules_of.items()]
        rulecoverage.MODULES_FILE.write_text("\n".join(lines) + "\n")
        FIGURE.write_text("# share of startup sites a specific rule classifies, per sglang release: it may not drop\n"
                          "# (tests/upstream/test_rule_coverage.py). Generated: bench/bench_rule_coverage.py --write\n"
                          + "".join(f"{json.dumps(v)}: {json.dumps(f)}\n" for v, f in figure.items()))
    print(json.dumps({"rule_coverage": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
