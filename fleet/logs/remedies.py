"""The next thing a person should try after a failure: from the log rule that named the class, or for
deploy's own outcomes (HANG, WRONG_ANSWER, ...) from playbooks/outcomes/deploy.yaml."""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from fleet import yamlfile
from fleet.errors import InputError
from fleet.logs.classify import classify_line
from fleet.logs.rules import LogClass, RuleSet, default_rules
from fleet.outcomes import DEPLOY_OUTCOMES
from fleet.upstream.flags import default_table
from fleet.upstream.versions import is_version

OUTCOMES_FILE = Path(__file__).resolve().parents[2] / "playbooks" / "outcomes" / "deploy.yaml"


class OutcomeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    meaning: str = Field(min_length=1, max_length=200)
    remedy: str = Field(min_length=1, max_length=400)


class OutcomesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    outcomes: dict[str, OutcomeSpec]


def load_outcomes(path: Path = OUTCOMES_FILE) -> dict[str, OutcomeSpec]:
    """Every deploy outcome with its meaning and remedy; one missing or unknown is an error naming the file."""
    spec = yamlfile.load(path).parse(OutcomesFile)
    unknown, missing = set(spec.outcomes) - DEPLOY_OUTCOMES, DEPLOY_OUTCOMES - set(spec.outcomes)
    if unknown or missing:
        raise InputError(f"{path}: outcomes must be exactly deploy's: unknown {sorted(unknown)}, "
                         f"missing {sorted(missing)}")
    return spec.outcomes


@functools.cache
def _outcomes() -> dict[str, OutcomeSpec]:
    return load_outcomes()


def remedy_for(outcome: str, evidence: str = "", rules: RuleSet | None = None,
               sglang: str | None = None) -> str | None:
    """The remedy for an attempt's outcome; the rule its evidence line matches wins over the class's first.
    With the host's `sglang` version, flags it renamed are written as it spells them."""
    remedy = _remedy(outcome, evidence, rules)
    return spell(remedy, sglang) if remedy is not None and sglang else remedy


def spell(remedy: str, sglang: str) -> str:
    """`remedy` with each flag the host's `sglang` renamed written as it spells it (upstream's flag table); as
    written when `sglang` (what a host's probe or manifest said) is no version."""
    return default_table().spell(remedy, sglang) if is_version(sglang) else remedy


def _remedy(outcome: str, evidence: str, rules: RuleSet | None) -> str | None:
    if outcome in DEPLOY_OUTCOMES:
        return _outcomes()[outcome].remedy
    if outcome not in LogClass.__members__ or outcome == LogClass.READY:
        return None
    rules = rules if rules is not None else default_rules()
    match = classify_line(evidence, rules) if evidence else None
    if match is not None and match.rule.log_class == outcome and match.rule.remedy:
        return match.rule.remedy
    return next((r.remedy for r in rules.rules if r.log_class == outcome and r.remedy), None)
