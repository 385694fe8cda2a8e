"""Every log rule's sglang / flashinfer-python source against the real releases: the file holds the literal in
each release of its range, and the real line, as that release prints it, gets the rule's class."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from fleet.logs import phases
from fleet.logs import rules as logrules
from fleet.logs.classify import classify_line
from fleet.upstream import corpus as upstream
from fleet.upstream import sourcetext
from fleet.upstream.versions import in_range

RULES = logrules.default_rules()
CORPUS = [(rule, src) for rule in RULES.rules for src in rule.sources if isinstance(src, logrules.CorpusSource)]


def releases(matrix: upstream.Matrix, dist: str) -> list[str]:
    return list(dict.fromkeys(v for d, v in matrix.releases() if d == dist))


def real_line(text: str, literal: str, examples: Sequence[str]) -> str | None:
    """The whole message around `literal` as the file writes it: the example that is an instance of it (the
    placeholders filled in), else the message with each placeholder given "1"."""
    for template in sourcetext.templates(text):
        if literal not in template:
            continue
        instance = next((ex for ex in examples if sourcetext.shape(template).search(ex)), None)
        return instance or template.replace(sourcetext.PLACEHOLDER, "1").strip()
    return None


def problems_of(matrix, src: logrules.CorpusSource, examples: Sequence[str], judge) -> list[str]:
    """For every release of the source's range: the file holds the literal, and `judge(real line)` (None when
    it is right, else what is wrong) accepts the real whole message."""
    wanted = [v for v in releases(matrix, src.package) if in_range(v, src.versions)]
    if not wanted:
        return [f"no release of the matrix in {src.versions}"]
    problems = []
    for version in wanted:
        path = Path(upstream.require(src.package, version).root) / src.file
        if not path.is_file():
            problems.append(f"{version}: no {src.file}")
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if not sourcetext.contains(text, src.literal, path.suffix == ".py"):
            problems.append(f"{version}: {src.file} no longer says {src.literal!r}")
            continue
        line = real_line(text, src.literal, examples) if path.suffix == ".py" else None
        if line is not None and (wrong := judge(line)):
            problems.append(f"{version}: the real line {line[:120]!r} {wrong}")
    return problems


MARKERS = [(m, src) for m in phases.load() for src in m.sources if isinstance(src, logrules.CorpusSource)]


@pytest.mark.parametrize("marker,src", MARKERS, ids=[f"{m.name}:{s.literal[:40]}" for m, s in MARKERS])
def test_each_phase_marker_is_printed_by_every_release_of_its_range(matrix, marker, src):
    def judge(line: str) -> str | None:
        got = phases.phase_of(line)
        return None if got == marker.name else f"is phase {got}"

    assert problems_of(matrix, src, marker.examples, judge) == []


def test_every_sglang_release_marks_weight_load_and_graph_capture(matrix):
    """Each phase with a budget that every start goes through has a marker in every release."""
    for name in ("start", "weight_load", "graph_capture", "ready"):
        covered = {v for m, s in MARKERS if m.name == name and s.package == "sglang"
                   for v in matrix.sglang if in_range(v, s.versions)}
        assert covered == set(matrix.sglang), f"{name}: no marker for {sorted(set(matrix.sglang) - covered)}"


def test_every_rule_names_a_source():
    assert all(rule.sources for rule in RULES.rules)
    assert len(CORPUS) >= 25


@pytest.mark.parametrize("rule,src", CORPUS, ids=[f"{r.name}:{s.literal[:40]}" for r, s in CORPUS])
def test_the_literal_is_in_the_file_of_every_release_of_its_range(matrix, rule, src):
    def judge(line: str) -> str | None:
        got = classify_line(line, RULES)
        ok = got is not None and got.rule.log_class == rule.log_class
        return None if ok else f"gets {got.rule.name if got else 'no rule'}, not {rule.log_class}"

    assert problems_of(matrix, src, rule.examples, judge) == []


COUNTS = [(c, src) for c in phases.load_counts() for src in c.sources if isinstance(src, logrules.CorpusSource)]


@pytest.mark.parametrize("counter,src", COUNTS, ids=[f"{c.name}:{s.literal[:40]}" for c, s in COUNTS])
def test_each_count_the_watch_reads_is_printed_by_every_release_of_its_range(matrix, counter, src):
    """The line a count is read from is the release's (its count is tqdm's or ninja's rendering of it)."""
    assert problems_of(matrix, src, counter.examples, lambda line: None) == []
