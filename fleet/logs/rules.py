"""Log rules as data: the schema of playbooks/rules/*.yaml, its validation, and the compiled rule set.

A rule file:

    rules:
      - name: cuda_oom                 # unique over all files
        class: CUDA_OOM                # one of LogClass
        severity: fatal                # fatal | warning | info
        priority: 75                   # specificity: when several rules match, the highest wins
        regex: ['CUDA out of memory']  # one or more; any may match; case-insensitive unless case_sensitive
        explanation: GPU memory ran out
        remedy: lower --mem-fraction-static  # what a person should try next, in one line (fatal and warning
                                       #   rules must have one: `inv logs` and deploy's summary show it)
        remedies: [lower_mem_fraction] # fallback steps deploy may try, in order
        consequence: false             # true: the line follows another failure (an NCCL abort after a watchdog
                                       #   timeout): an earlier specific fatal line decides the verdict
        wraps: false                   # true: the message reports an error it caught (a traceback, the
                                       #   autotuner): a more specific rule on the same line or on the lines
                                       #   that continue it names the class; this rule keeps the severity
        examples: ['...']              # lines one of the regexes must match (checked on load)
        sources:                       # where the text comes from; at least one (checked on load: each literal
                                       #   occurs in an example; tests/upstream checks corpus ones per release)
          - {package: sglang, versions: ">=0.5.10", file: sglang/srt/entrypoints/engine.py,
             literal: "scheduler died during initialization"}      # sglang / flashinfer-python: in the corpus
          - {project: torch, ref: "https://github.com/pytorch/pytorch/blob/v2.9.1/c10/cuda/CUDACachingAllocator.cpp",
             literal: "CUDA out of memory"}                        # others: the project and a public reference

`literal` is the text as the source writes it, `{}` where an f-string placeholder sits.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from re import _parser as sre_parse  # type: ignore[attr-defined]  # the stdlib's own regex parser: the one exact source of literals
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fleet import yamlfile
from fleet.errors import InputError
from fleet.upstream import sourcetext
from fleet.upstream.versions import parse_range

RULES_DIR = Path(__file__).resolve().parents[2] / "playbooks" / "rules"


def regexes(patterns: list[str]) -> list[str]:
    """The patterns, each checked to compile (a schema validator's ValueError names the bad one). A pattern Python's
    re reads otherwise than it looks (grep's `[[:digit:]]`, a set of `[`, `:`, `d` ...) is one too: re said so
    only as a FutureWarning, printed raw on the terminal naming fleet's source line, never the rule."""
    for pattern in patterns:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", FutureWarning)
                re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"bad regex {pattern!r}: {exc}") from None
        except FutureWarning as exc:
            posix = re.search(r"\[\[:[a-z]+:\]\]", pattern)
            raise ValueError(f"bad regex {pattern!r}: {exc}" + (
                f" ({posix.group()} is grep's class, which Python's re reads as a set of its letters: write \\d, \\s, "
                "\\w or a range such as [0-9])" if posix else " (Python's re would read it otherwise than it looks: "
                "escape the [ or the doubled sign)")) from None
    return patterns


class LogClass(StrEnum):
    READY = "READY"
    ARCH_UNSUPPORTED = "ARCH_UNSUPPORTED"
    TMA_FAILURE = "TMA_FAILURE"
    AUTOTUNE_FAILURE = "AUTOTUNE_FAILURE"
    CUDA_OOM = "CUDA_OOM"
    KV_CACHE_TOO_SMALL = "KV_CACHE_TOO_SMALL"
    COMM_FAILURE = "COMM_FAILURE"
    P2P_UNAVAILABLE = "P2P_UNAVAILABLE"
    ILLEGAL_ADDRESS = "ILLEGAL_ADDRESS"
    NO_KERNEL_IMAGE = "NO_KERNEL_IMAGE"
    CUDA_GRAPH_FAILURE = "CUDA_GRAPH_FAILURE"
    GPU_FAULT = "GPU_FAULT"  # the GPU or its link failed (playbooks/rules/gpu-hardware.yaml): no flag helps
    HOST_OOM = "HOST_OOM"  # the kernel's OOM killer: host RAM, not GPU memory
    COLLECTIVE_TIMEOUT = "COLLECTIVE_TIMEOUT"  # a collective outlived its timeout: a rank stalled or died first
    CONFIG_REFUSED = "CONFIG_REFUSED"  # sglang refused its arguments or a combination of them
    MODEL_LOAD_FAILURE = "MODEL_LOAD_FAILURE"  # the checkpoint, its config or its weights could not be loaded
    REQUEST_REFUSED = "REQUEST_REFUSED"  # a client's request was refused; the server goes on
    INTERNAL_ERROR = "INTERNAL_ERROR"  # an invariant of sglang's own code failed: its bug, or a path it does not handle
    MISSING_PACKAGE = "MISSING_PACKAGE"  # a package or tool what was asked needs is not installed
    FATAL = "FATAL"


class Severity(StrEnum):
    FATAL = "fatal"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.FATAL: 2, Severity.WARNING: 1, Severity.INFO: 0}

# The fallback steps deploy knows; a typo in a rule file must fail on load, not in the middle of a deploy.
REMEDY_STEPS = frozenset({
    "disable_allreduce_fusion",
    "moe_backend_triton",
    "attention_backend_triton",
    "disable_custom_all_reduce",
    "nccl_p2p_disable",
    "lower_mem_fraction",
    "raise_mem_fraction",
    "lower_cuda_graph_max_bs",
    "disable_cuda_graph",
})
_PATCH_REMEDY = re.compile(r"^apply_patch:[a-z0-9][a-z0-9_.-]*$")
_MIN_TRIGGER = 3  # shorter fragments occur in nearly every line and would filter nothing


class RuleFileError(InputError):
    """One or more rule files are invalid; each line of the message names file, rule and problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


CORPUS_PACKAGES = ("sglang", "flashinfer-python")  # what tests/upstream checks release by release
PROJECTS = frozenset({"torch", "CUDA", "NCCL", "Triton", "cutlass", "TensorRT-LLM", "vLLM", "nvidia-driver",
                      "systemd", "Linux", "CPython", "libstdc++", "uvicorn", "ninja", "sglang", "flashinfer",
                      "transformers", "safetensors", "DeepGEMM", "cuBLAS", "gloo", "tqdm"})


class CorpusSource(BaseModel):
    """A text of sglang or flashinfer-python: the releases that print it, the file, the literal."""

    model_config = ConfigDict(extra="forbid", strict=True)

    package: str = Field(pattern=r"^(sglang|flashinfer-python)$")
    versions: str
    file: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")
    literal: str = Field(min_length=8)

    @field_validator("versions")
    @classmethod
    def _range(cls, v: str) -> str:
        parse_range(v)
        return v


class ProjectSource(BaseModel):
    """A text of another project (CUDA, torch, NCCL, Triton, the kernel, systemd...): where it is written."""

    model_config = ConfigDict(extra="forbid", strict=True)

    project: str
    ref: str = Field(pattern=r"^https://\S+$")
    literal: str | None = Field(default=None, min_length=4)

    @field_validator("project")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in PROJECTS:
            raise ValueError(f"unknown project {v!r} (known: {', '.join(sorted(PROJECTS))}; sglang and "
                             "flashinfer-python texts name package, versions, file and literal instead)")
        return v


Source = CorpusSource | ProjectSource


def source_kinds(value: Any) -> Any:
    """A `sources:` list as models: one naming a package is a CorpusSource, one naming a project a ProjectSource."""
    if not isinstance(value, list):
        return value
    out: list[Source] = []
    for item in value:
        if isinstance(item, dict) and "package" in item:
            out.append(CorpusSource.model_validate(item))
        elif isinstance(item, dict) and "project" in item:
            out.append(ProjectSource.model_validate(item))
        else:
            raise ValueError("each source names a package (sglang, flashinfer-python) or a project")
    return out


def literals_in_examples(sources: Sequence[Source], examples: Sequence[str]) -> None:
    """ValueError unless each source's literal occurs in an example: its fixed pieces (around `{}`), in order."""
    for src in sources:
        if src.literal is None:
            continue
        if not any(sourcetext.shape(src.literal).search(ex) for ex in examples):
            raise ValueError(f"source literal {src.literal!r} occurs in none of the examples")


class RuleSpec(BaseModel):
    """One rule as written in a rule file."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    log_class: LogClass = Field(alias="class")
    severity: Severity
    priority: int = Field(ge=0, le=1000)
    regex: list[str] = Field(min_length=1)
    explanation: str = Field(min_length=1, max_length=200)
    remedy: str | None = Field(default=None, min_length=1, max_length=300)
    remedies: list[str] = Field(default_factory=list)
    wraps: bool = False
    consequence: bool = False
    case_sensitive: bool = False
    examples: list[str] = Field(default_factory=list)
    sources: list[CorpusSource | ProjectSource] = Field(min_length=1)

    _sources = field_validator("sources", mode="before")(classmethod(lambda cls, v: source_kinds(v)))

    @field_validator("log_class", mode="before")
    @classmethod
    def _known_class(cls, value: Any) -> Any:
        if value not in LogClass.__members__:
            raise ValueError(f"unknown class {value!r} (known: {', '.join(LogClass)})")
        return value

    @field_validator("severity", mode="before")
    @classmethod
    def _known_severity(cls, value: Any) -> Any:
        if value not in {s.value for s in Severity}:
            raise ValueError(f"unknown severity {value!r} (known: fatal, warning, info)")
        return value

    @field_validator("regex", "examples", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("regex")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        return regexes(patterns)

    @field_validator("remedies")
    @classmethod
    def _known_remedies(cls, remedies: list[str]) -> list[str]:
        for remedy in remedies:
            if remedy not in REMEDY_STEPS and not _PATCH_REMEDY.fullmatch(remedy):
                raise ValueError(f"unknown remedy {remedy!r} (known: {', '.join(sorted(REMEDY_STEPS))}, "
                                 "apply_patch:<set>)")
        return remedies

    @model_validator(mode="after")
    def _remedy_for_failures(self) -> RuleSpec:
        if self.remedy is None and self.severity is not Severity.INFO:
            raise ValueError(f"a {self.severity} rule needs a remedy: the next thing a person should try")
        return self

    @model_validator(mode="after")
    def _literals_in_examples(self) -> RuleSpec:
        literals_in_examples(self.sources, self.examples)
        return self

    @model_validator(mode="after")
    def _examples_match(self) -> RuleSpec:
        flags = 0 if self.case_sensitive else re.IGNORECASE
        for example in self.examples:
            if not any(re.search(p, example, flags) for p in self.regex):
                raise ValueError(f"example {example!r} matches none of the regexes")
        return self


class RuleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    rules: list[dict[str, Any]]  # validated one by one so that every error can name its rule


@dataclass(frozen=True, slots=True)
class Rule:
    """A validated, compiled rule."""

    name: str
    log_class: LogClass
    severity: Severity
    priority: int
    explanation: str
    remedies: tuple[str, ...]
    wraps: bool
    patterns: tuple[re.Pattern[str], ...]
    source: str
    triggers: tuple[str, ...] | None = None  # lowercase fragments, one of which any match contains
    remedy: str | None = None  # what a person should try next
    sources: tuple[CorpusSource | ProjectSource, ...] = ()
    examples: tuple[str, ...] = ()
    consequence: bool = False  # follows another failure: an earlier specific fatal line decides

    def matches(self, text: str) -> bool:
        return any(p.search(text) for p in self.patterns)


class RuleSet:
    """All rules, most specific first; answers which rule explains a line best."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        # sorted() is stable, so equal priorities keep file order
        self.rules: tuple[Rule, ...] = tuple(sorted(rules, key=lambda r: -r.priority))
        self._always = frozenset(i for i, r in enumerate(self.rules) if r.triggers is None)
        by_trigger: dict[str, set[int]] = {}
        for i, rule in enumerate(self.rules):
            for t in rule.triggers or ():
                by_trigger.setdefault(t, set()).add(i)
        self._triggers = tuple(by_trigger)
        self._by_trigger = by_trigger

    def __len__(self) -> int:
        return len(self.rules)

    def cause(self, text: str) -> Rule | None:
        """The most specific rule matching `text` that names a cause of its own (no consequence, no wrapper, no
        catch-all): a consequence's line may state its cause ("watchdog thread terminated with exception: [Rank 5]
        Watchdog caught collective operation timeout")."""
        folded = text.casefold()
        present = [t for t in self._triggers if t in folded]
        candidates = set(self._always).union(*(self._by_trigger[t] for t in present))
        return next((r for r in (self.rules[i] for i in sorted(candidates))
                     if not r.consequence and not r.wraps and r.log_class is not LogClass.FATAL and r.matches(text)),
                    None)

    def best(self, text: str) -> tuple[Rule, Rule | None] | None:
        """The most specific rule matching `text`, and the most specific wrapper around it (if any)."""
        # case-insensitive regexes get no literal fast path in `re`: plain substring tests (one flat
        # comprehension, the cheapest loop Python has) rule out most rules for most lines
        folded = text.casefold()
        present = [t for t in self._triggers if t in folded]
        if not present and not self._always:
            return None
        candidates = set(self._always).union(*(self._by_trigger[t] for t in present))
        ordered = [self.rules[i] for i in sorted(candidates)]
        best = next((r for r in ordered if r.matches(text)), None)
        if best is None:
            return None
        wrapper = best if best.wraps else next((w for w in ordered if w.wraps and w.matches(text)), None)
        return best, wrapper


def triggers(patterns: Sequence[re.Pattern[str]]) -> tuple[str, ...] | None:
    """Casefolded literal fragments such that every match of any pattern contains one; None if unknown."""
    found: list[str] = []
    for pattern in patterns:
        try:
            literals = _required(list(sre_parse.parse(pattern.pattern, pattern.flags)))
        except Exception:  # an internal parser we only use for speed: never let it break loading
            return None
        if literals is None:
            return None
        found.extend(literals)
    return tuple(dict.fromkeys(found))


def _required(seq: list[Any]) -> list[str] | None:
    """Fragments one of which every match of the parsed sequence `seq` contains (None: none known)."""
    candidates: list[list[str]] = []
    run = ""
    for op, av in [*seq, (None, None)]:
        if op is sre_parse.LITERAL and av < 128:
            run += chr(av).casefold()
            continue
        if len(run) >= _MIN_TRIGGER:
            candidates.append([run])
        run = ""
        if op is sre_parse.BRANCH:
            branches = [_required(list(alt)) for alt in av[1]]
            if all(b is not None for b in branches):
                candidates.append([lit for b in branches for lit in b])  # type: ignore[union-attr]
        elif op is sre_parse.SUBPATTERN:
            inner = _required(list(av[-1]))
            if inner is not None:
                candidates.append(inner)
        elif op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT) and av[0] >= 1:
            inner = _required(list(av[2]))
            if inner is not None:
                candidates.append(inner)
    if not candidates:
        return None
    return max(candidates, key=lambda lits: (min(map(len, lits)), -len(lits)))  # the most selective


@functools.cache
def default_rules() -> RuleSet:
    """The shipped rules, loaded once per process."""
    return load_rules(RULES_DIR)


def load_rules(rules_dir: Path = RULES_DIR) -> RuleSet:
    """Every playbooks/rules/*.yaml, validated; RuleFileError lists every problem, one line each."""
    files = sorted(rules_dir.glob("*.yaml")) if rules_dir.is_dir() else []
    if not files:
        raise RuleFileError([f"{rules_dir}: no rule files (*.yaml)"])
    problems: list[str] = []
    rules: list[Rule] = []
    for path in files:
        try:
            rules.extend(_load_file(path, problems))
        except InputError as exc:  # unreadable or not YAML: one line naming file and line already
            problems.append(str(exc))
    seen: dict[str, str] = {}
    for rule in rules:
        if rule.name in seen:
            problems.append(f"{rule.source}: rule '{rule.name}': name already used in {seen[rule.name]}")
        seen.setdefault(rule.name, rule.source)
    if problems:
        raise RuleFileError(problems)
    return RuleSet(rules)


def _load_file(path: Path, problems: list[str]) -> list[Rule]:
    doc = yamlfile.load(path)
    if not isinstance(doc.data, dict):
        problems.append(f"{path}: expected a mapping with a 'rules:' list")
        return []
    try:
        spec = RuleFile.model_validate(doc.data)
    except ValidationError as exc:
        problems.extend(f"{_where(doc, _key(err, 2))}: {_problem(err)}" for err in exc.errors())
        return []
    rules = []
    for i, raw in enumerate(spec.rules):
        name = raw.get("name")
        label = f"rule '{name}'" if isinstance(name, str) else f"rule #{i + 1}"
        try:
            rule = RuleSpec.model_validate(raw)
        except ValidationError as exc:
            problems.extend(f"{_where(doc, ('rules', i, *_key(err, 1)))}: {label}: {_problem(err)}"
                            for err in exc.errors())
            continue
        flags = 0 if rule.case_sensitive else re.IGNORECASE
        patterns = tuple(re.compile(p, flags) for p in rule.regex)
        rules.append(Rule(
            name=rule.name, log_class=rule.log_class, severity=rule.severity, priority=rule.priority,
            explanation=rule.explanation, remedies=tuple(rule.remedies), wraps=rule.wraps,
            patterns=patterns, source=str(path), triggers=triggers(patterns), remedy=rule.remedy,
            sources=tuple(rule.sources), examples=tuple(rule.examples), consequence=rule.consequence,
        ))
    return rules


def _key(err: Any, depth: int) -> yamlfile.Loc:
    """The first `depth` parts of a pydantic error location: enough to find the line in the file."""
    return tuple(p for p in err["loc"] if isinstance(p, str | int))[:depth]


def _where(doc: yamlfile.Document, loc: yamlfile.Loc) -> str:
    line = doc.line_of(loc)
    return f"{doc.path}:{line}" if line else str(doc.path)


def _problem(err: Any) -> str:
    key = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"unknown key '{key}'"
    if err["type"] == "missing":
        return f"missing key '{key}'"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{key}: {msg}" if key else msg
