"""Draw a fresh sample of startup sites of sglang releases to label by hand (issue 51: precision on a fresh sample).

The population of a release: every site (fleet.upstream.sourcetext.sites: raise / assert / logger.error) of its
startup modules (playbooks/upstream/startup-modules.yaml), in module then line order, as tests/upstream reads them.
A site whose message (its first 100 characters, in any module: a message moves between modules across releases) is
in any file of tests/fixtures/site_labels (any release) is left out, and so is one already drawn for an earlier
release of this draw: every message is labelled once. (Until h-class8 the key was (module, text): fresh6 drew 35 of
its 150 sites with a text labelled before in another module, all 32 flagged right; its novel sites alone measured
0.907, not the 0.930 of the whole.) One random.Random(seed) draws `--per-release` sites of each release in the
order given; each release's draw is sorted by module and line. It runs no classifier: the files it writes have
`label: "?"` to be filled in by reading the source, before bench/bench_site_precision.py is run on them.

usage: .venv/bin/python bench/draw_site_sample.py --seed 5205 --per-release 50 --name fresh \
           0.5.8.post1 0.5.15.post1 0.5.22
       (writes tests/fixtures/site_labels/sglang-<release>-<name>.yaml; --print: to stdout, with the source around)
Needs the upstream corpus (`inv upstream`); reads no network.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from fleet.logs import coverage as rulecoverage  # noqa: E402
from fleet.upstream import corpus  # noqa: E402
from fleet.upstream.sourcetext import Site, sites  # noqa: E402

LABELS = REPO / "tests" / "fixtures" / "site_labels"
TEXT = 100  # the fixtures keep a message's first 100 characters


def population(version: str) -> list[tuple[str, Site]]:
    """(module, site) of every startup site of the release, in module then line order."""
    modules = yaml.safe_load(rulecoverage.MODULES_FILE.read_text())[version]
    root = corpus.tree(corpus.require("sglang", version))
    return [(m, s) for m in modules for s in sites((root / m).read_text(encoding="utf-8", errors="replace"))]


def labelled(name: str) -> set[str]:
    """The message (first 100 characters) of every site some file of tests/fixtures/site_labels already holds, in
    whatever module, but this draw's own files (`--print` after the draw shows the same sites)."""
    out: set[str] = set()
    for path in sorted(p for p in LABELS.glob("*.yaml") if not p.name.endswith(f"-{name}.yaml")):
        out.update(e["text"] for e in yaml.safe_load(path.read_text())["sites"])
    return out


def draw(versions: list[str], seed: int, per_release: int, name: str) -> dict[str, list[tuple[str, Site]]]:
    rng = random.Random(seed)
    seen = labelled(name)
    out: dict[str, list[tuple[str, Site]]] = {}
    for version in versions:
        pool = [(m, s) for m, s in population(version) if s.text[:TEXT] not in seen]
        # a release with fewer sites left than asked gives what it has (the draw is never redone to make up for it)
        picked = sorted(rng.sample(pool, min(per_release, len(pool))), key=lambda ms: (ms[0], ms[1].line))
        seen.update(s.text[:TEXT] for _, s in picked)
        out[version] = picked
    return out


def _quoted(text: str) -> str:
    return yaml.safe_dump(text, default_style='"', width=10_000).strip()


def fixture(version: str, picked: list[tuple[str, Site]], seed: int, versions: list[str], name: str,
            per_release: int) -> str:
    short = f" (all it had left of {per_release} asked)" if len(picked) < per_release else ""
    head = (f"# {len(picked)} startup sites of sglang {version}{short}, held out: "
            f"bench/draw_site_sample.py --seed {seed} --per-release {per_release} --name {name} {' '.join(versions)}\n"
            "# (one random.Random(seed) over the releases in that order; sites already in a file of this folder or\n"
            "# drawn for an earlier release left out). Labelled by reading each site's source before any classifier\n"
            "# ran on it; see the labelling rule in the README of this folder.\n")
    rows = "".join(f"  - {{module: {_quoted(m)}, line: {s.line}, label: \"?\", text: {_quoted(s.text[:TEXT])}}}\n"
                   for m, s in picked)
    return (f"{head}seed: {seed}\nfloor: 0.0  # set to the precision measured once labelled (never tuned on)\n"
            f"release: \"{version}\"\nsites:\n{rows}")


def show(version: str, picked: list[tuple[str, Site]], around: int) -> None:
    root = corpus.tree(corpus.require("sglang", version))
    for m, s in picked:
        lines = (root / m).read_text(encoding="utf-8", errors="replace").splitlines()
        print(f"=== {version} {m}:{s.line} [{s.kind} {s.exception or ''} in {s.function}]")
        for n in range(max(1, s.line - around), min(len(lines), s.line + around) + 1):
            print(f"{n:5d}{'>' if n == s.line else ' '} {lines[n - 1][:150]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--per-release", type=int, default=50)
    ap.add_argument("--name", default="fresh")
    ap.add_argument("--print", action="store_true", help="print each site with the source around it, write nothing")
    ap.add_argument("--around", type=int, default=6)
    args = ap.parse_args()
    drawn = draw(args.versions, args.seed, args.per_release, args.name)
    for version, picked in drawn.items():
        if args.print:
            show(version, picked, args.around)
            continue
        path = LABELS / f"sglang-{version}-{args.name}.yaml"
        if path.exists():
            sys.exit(f"error: {path} exists: a drawn sample is never drawn again over its labels")
        path.write_text(fixture(version, picked, args.seed, args.versions, args.name, args.per_release))
        print(f"{path.relative_to(REPO)}: {len(picked)} sites")


if __name__ == "__main__":
    main()
