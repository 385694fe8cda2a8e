"""Rule files: the shipped ones are sound, broken ones fail on load with one line per problem."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from fleet.logs.normalise import normalise
from fleet.logs.rules import RULES_DIR, LogClass, RuleFileError, load_rules, triggers

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
SHIPPED = [(path.name, rule) for path in sorted(RULES_DIR.glob("*.yaml"))
           for rule in yaml.safe_load(path.read_text())["rules"]]


@pytest.fixture(scope="module")
def rules():
    return load_rules()


def test_shipped_rules_load_and_cover_every_class(rules):
    assert {r.log_class for r in rules.rules} == set(LogClass)


def test_every_failure_class_has_a_remedy_for_people_and_every_failing_rule_one_of_its_own(rules):
    failing = [r for r in rules.rules if r.severity != "info"]
    assert all(r.remedy for r in failing), [r.name for r in failing if not r.remedy]
    assert {r.log_class for r in failing if r.remedy} == set(LogClass) - {LogClass.READY}


@pytest.mark.parametrize(("file", "spec"), SHIPPED, ids=[f"{f}:{r['name']}" for f, r in SHIPPED])
def test_shipped_rule_has_examples_it_classifies_itself(rules, file, spec):
    assert spec.get("examples"), f"{file}: rule {spec['name']} has no examples"
    for example in spec["examples"]:
        best, wrapper = rules.best(normalise(example).text)
        # a wrapper's example may carry a cause, which then names the class
        assert spec["name"] in {best.name, wrapper and wrapper.name}, f"{example!r} went to {best.name}"


def _all_lines() -> list[str]:
    lines = [e for _, spec in SHIPPED for e in spec.get("examples", [])]
    for path in LOGS.iterdir():
        if path.suffix == ".log":
            lines += path.read_text().splitlines()
        elif path.suffix == ".jsonl":
            lines += [ln for row in path.read_text().splitlines() for ln in json.loads(row)["text"].splitlines()]
    return lines


def test_literal_prefilter_never_hides_a_match(rules):
    for line in _all_lines():
        text = normalise(line).text
        brute = next((r for r in rules.rules if r.matches(text)), None)
        found = rules.best(text)
        assert (found[0] if found else None) is brute, line


@pytest.mark.parametrize(("pattern", "text"), [
    (r"(?:Scheduler|TokenizerManager) hit an exception", "TokenizerManager hit an exception"),
    (r"\[Auto ?Tun+er\]: Skipping tactic", "[AutoTunnner]: Skipping tactic 3"),
    (r"x(?:abc)+y|^Exit code: -?[1-9]", "Exit code: 3"),
    (r"No compiled \w+ for CUDA", "NO COMPILED kernel FOR cuda"),
])
def test_triggers_are_found_in_every_match(pattern, text):
    compiled = re.compile(pattern, re.IGNORECASE)
    assert compiled.search(text)
    found = triggers([compiled])
    assert found is None or any(t in text.casefold() for t in found)


def test_a_pattern_without_literals_is_always_checked():
    assert triggers([re.compile(r"\d+\s+0x[0-9a-f]+")]) is None


GOOD = """\
name: {name}
class: CUDA_OOM
severity: fatal
priority: 75
regex: ['CUDA out of memory']
explanation: GPU memory ran out
remedy: lower --mem-fraction-static
sources: [{{project: torch, ref: "https://github.com/pytorch/pytorch/blob/v2.9.1/c10/cuda/CUDACachingAllocator.cpp"}}]
"""

BAD_FILES = [
    ("bad regex", GOOD.format(name="oom").replace("'CUDA out of memory'", "'CUDA (out of memory'"),
     "rule 'oom': regex: bad regex 'CUDA (out of memory': missing ), unterminated subpattern"),
    ("unknown class", GOOD.format(name="oom").replace("CUDA_OOM", "CUDA_OMM"),
     "rule 'oom': class: unknown class 'CUDA_OMM'"),
    ("unknown severity", GOOD.format(name="oom").replace("fatal", "fatel"),
     "rule 'oom': severity: unknown severity 'fatel'"),
    ("unknown key", GOOD.format(name="oom") + "remedys: [lower_mem_fraction]\n", "rule 'oom': unknown key 'remedys'"),
    ("unknown remedy", GOOD.format(name="oom") + "remedies: [lower_mem]\n",
     "rule 'oom': remedies: unknown remedy 'lower_mem'"),
    ("missing key", GOOD.format(name="oom").replace("priority: 75\n", ""), "rule 'oom': missing key 'priority'"),
    ("example that does not match", GOOD.format(name="oom") + "examples: ['out of mem']\n",
     "rule 'oom': example 'out of mem' matches none of the regexes"),
    ("unnamed rule", GOOD.format(name="oom").replace("name: oom\n", ""), "rule #1: missing key 'name'"),
    ("no source", GOOD.format(name="oom").split("sources:")[0], "rule 'oom': missing key 'sources'"),
    ("unknown project", GOOD.format(name="oom").replace("project: torch", "project: pytorch"),
     "rule 'oom': sources.project: unknown project 'pytorch'"),
    ("corpus source without a file", GOOD.format(name="oom").replace(
        "project: torch, ref: \"https://github.com/pytorch/pytorch/blob/v2.9.1/c10/cuda/CUDACachingAllocator.cpp\"",
        "package: sglang, versions: '>=0.5.9', literal: 'CUDA out of memory'"),
     "rule 'oom': missing key 'sources.file'"),
    ("literal in no example", GOOD.format(name="oom").replace("ref: ", "literal: 'Tried to allocate', ref: ")
     + "examples: ['CUDA out of memory']\n",
     "rule 'oom': source literal 'Tried to allocate' occurs in none of the examples"),
    ("bad version range", GOOD.format(name="oom").replace(
        "project: torch, ref: \"https://github.com/pytorch/pytorch/blob/v2.9.1/c10/cuda/CUDACachingAllocator.cpp\"",
        "package: sglang, versions: 'since 0.5', file: a.py, literal: 'CUDA out of memory'")
     + "examples: ['CUDA out of memory']\n", "bad version range clause 'since 0.5'"),
    ("fatal rule without a remedy", GOOD.format(name="oom").replace("remedy: lower --mem-fraction-static\n", ""),
     "rule 'oom': a fatal rule needs a remedy"),
]


def _write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("rules:\n" + textwrap.indent(body, "  ").replace("  name:", "- name:", 1)
                    if body.startswith("name:") else "rules:\n  - " + textwrap.indent(body, "    ").lstrip())
    return path


@pytest.mark.parametrize(("what", "body", "expected"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_rule_file_fails_with_one_line_naming_file_rule_and_problem(tmp_path, what, body, expected):
    path = _write(tmp_path, "bad.yaml", body)
    with pytest.raises(RuleFileError) as raised:
        load_rules(tmp_path)
    assert len(raised.value.problems) == 1 and "\n" not in raised.value.problems[0]
    assert raised.value.problems[0].startswith(f"{path}:")
    assert expected in raised.value.problems[0]


def test_every_problem_of_every_file_is_reported_at_once(tmp_path):
    _write(tmp_path, "a.yaml", GOOD.format(name="oom").replace("fatal", "deadly"))
    _write(tmp_path, "b.yaml", GOOD.format(name="oom2").replace("CUDA_OOM", "NOPE"))
    with pytest.raises(RuleFileError) as raised:
        load_rules(tmp_path)
    assert [p.split(": ", 1)[0].split("/")[-1] for p in raised.value.problems] == ["a.yaml:4", "b.yaml:3"]
    assert str(raised.value) == "\n".join(raised.value.problems)


def test_a_rule_name_used_twice_is_an_error(tmp_path):
    _write(tmp_path, "a.yaml", GOOD.format(name="oom"))
    second = _write(tmp_path, "b.yaml", GOOD.format(name="oom"))
    with pytest.raises(RuleFileError, match=f"^{second}: rule 'oom': name already used in .*a.yaml$"):
        load_rules(tmp_path)


@pytest.mark.parametrize(("content", "expected"), [
    ("rules: [\n", "invalid YAML"),
    ("- just a list\n", "expected a mapping with a 'rules:' list"),
    ("rules: []\nrulez: []\n", "unknown key 'rulez'"),
    ("description: x\n", "missing key 'rules'"),
    ("rules:\n  - 42\n", "rules.0: Input should be a valid dictionary"),
])
def test_a_malformed_file_is_one_line_naming_the_file(tmp_path, content, expected):
    path = tmp_path / "broken.yaml"
    path.write_text(content)
    with pytest.raises(RuleFileError) as raised:
        load_rules(tmp_path)
    assert len(raised.value.problems) == 1 and raised.value.problems[0].startswith(str(path))
    assert expected in raised.value.problems[0]


def test_a_folder_without_rule_files_is_an_error(tmp_path):
    with pytest.raises(RuleFileError, match="no rule files"):
        load_rules(tmp_path)


@pytest.mark.parametrize(("code", "verdict"), [(13, "ILLEGAL_ADDRESS"), (31, "ILLEGAL_ADDRESS"),
                                               (43, "ILLEGAL_ADDRESS"), (119, "GPU_FAULT"), (154, "GPU_FAULT"),
                                               (48, "GPU_FAULT"), (95, "GPU_FAULT"), (8, "GPU_FAULT"),
                                               (79, "GPU_FAULT"), (74, "GPU_FAULT"), (140, "GPU_FAULT")])
def test_xid_codes_of_the_application_keep_their_class_and_the_hardwares_are_gpu_fault(rules, code, verdict):
    line = f"kernel: NVRM: Xid (PCI:0000:3b:00): {code}, pid=3301, name=python3, something"
    best, _ = rules.best(normalise(line).text)
    assert best.log_class == verdict and (verdict != "GPU_FAULT" or not best.remedies)  # no flag fixes hardware
