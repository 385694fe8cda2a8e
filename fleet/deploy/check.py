"""Everything fleet can know about a playbook without a host (`inv check`, and `inv deploy` before contact).

In one pass, one problem per line naming file:line:
- the schema (every problem pydantic finds), then the rules `playbook.load` keeps (router, nodes, classes named
  by `after:`, patch sets, the exposure rule and literal secrets);
- every flag of `flags`, each rung and `flags_by_sglang`, merged as a deploy would merge them, against the flag
  table (playbooks/upstream/sglang-flags.yaml) for each sglang release the rung can meet: the releases fleet
  knows, those this site's hosts reported (fleet.deploy.fingerprint), narrowed by the rung's `when: sglang`.
  Unknown flags (with the nearest known one), flags a release lacks or removed, switches given values and
  valued flags given `true`, values argparse refuses and values out of the range sglang documents or enforces
  (playbooks/upstream/sglang-ranges.yaml: mem-fraction-static above 1, a negative base-gpu-id, a port past
  65535) are errors; flags upstream deprecated are warnings;
- `when:` values against the facts vocabulary (fleet.host.facts), and rungs that can never run;
- `packages:` pins against each other: each pinned wheel's Requires-Dist (the corpus's real METADATA) against
  the other pins; a pinned sglang is the one release the flags are checked against; a pin with no wheel in
  the controller's wheelhouse (fleet.upstream.wheelhouse) is a warning here and refuses a deploy; a lock beside
  the playbook that locks other pins than these (fleet.upstream.lockfile) is a warning.

What it cannot know without a host: the host's sglang (a release not in the table is judged as the newest
release before it), its GPUs, the model on disk, the port, patch sets' anchors in its files (preflight does).
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from fleet import yamlfile
from fleet.deploy import filekind, prune
from fleet.errors import InputError, did_you_mean
from fleet.host import facts as vocab
from fleet.host.sysinfo import PACKAGE_DIRS
from fleet.outcomes import DEPLOY_OUTCOMES
from fleet.playbook import FLAG_NAME, Conditions, FlagValue, Nodes, Playbook, Router, Rung, Serve
from fleet.playbook import check_nodes as node_problems
from fleet.playbook import problems as playbook_problems
from fleet.upstream import corpus, lockfile, pins, wheelhouse
from fleet.upstream import flags as sglang_cli
from fleet.upstream import ranges as sglang_ranges
from fleet.upstream.versions import in_range, version_key

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Problem:
    text: str  # "FILE:LINE: KEY: what is wrong"
    warning: bool = False
    line: int = 0  # for the order of the report

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Checked:
    path: Path
    book: Playbook | None
    releases: list[str] = field(default_factory=list)  # the sglang releases the flags were checked against
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if not p.warning]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.warning]


def check(path: Path, known_classes: set[str] | None = None, known_patches: set[str] | None = None,
          site_versions: Iterable[str] = (), hosts: set[str] | None = None,
          table: sglang_cli.Table | None = None, hosts_unread: str | None = None) -> Checked:
    """The playbook at `path`, checked; `hosts`: the inventory's host names (router.host must be one);
    `hosts_unread`: why an inventory named has none to check against (router.host is said not checked)."""
    table = table or sglang_cli.default_table()
    releases = sorted({*table.versions, *site_versions}, key=version_key)
    try:
        doc = yamlfile.load(path, collect=True)  # a key written twice is one problem among the rest
    except InputError as exc:
        return Checked(path, None, releases, [Problem(str(exc))])
    if other := filekind.other_kind(doc.data):  # one line, not the schema's every key of another kind of file
        return Checked(path, None, releases, [Problem(f"{path}: not a playbook: {other}")])
    twice = [Problem(str(e), line=_line(str(e))) for e in doc.duplicates or []]
    try:
        book = Playbook.model_validate(doc.data)
    except ValidationError as err:
        problems = [*twice, *(Problem(str(e), line=_line(str(e))) for e in doc.validation_errors(err, Playbook))]
        c = _Checker(doc, table, releases, problems)
        _check_raw(c, doc.data, known_classes, known_patches)
        _check_raw_pins(c, doc.data)
        _check_raw_sections(c, doc.data, err, hosts, hosts_unread)
        _check_raw_names(c, doc.data, err)
        _check_raw_rules(c, doc.data, err)
        _check_raw_nodes(c, doc.data, err)
        return Checked(path, None, releases, sorted(problems, key=lambda p: p.line))
    found = playbook_problems(doc, book, known_classes, known_patches)
    if pinned := book.packages.get("sglang"):  # the flags need to hold on that release alone
        releases = [pinned]
    problems = [*twice, *(Problem(str(e), line=_line(str(e))) for e in found)]
    c = _Checker(doc, table, releases, problems)
    written = {pins.canonical(k): k for k in doc.data.get("packages", {})}
    for dist, problem in pin_problems(book.packages):
        c.error(("packages", written.get(dist, dist)), problem, kind=problem)
    for dist, problem in wheelhouse.missing(book.packages):  # deploy refuses these (fleet.deploy.inputs)
        c.error(("packages", written.get(dist, dist)), problem, warning=True, kind="wheelhouse")
    if book.packages and (why := stale_lock(path, book.packages)):
        c.error(("packages",), why, warning=True, kind="lock")
    for dist in sorted(set(book.packages) - set(PACKAGE_DIRS)):
        c.error(("packages", written.get(dist, dist)), f"the probe does not read {dist} in a venv (only "
                f"{', '.join(sorted(PACKAGE_DIRS))}): preflight cannot tell whether the host has this pin",
                warning=True)
    for i, rung in enumerate(book.ladder):
        c.rung(book.flags, i, rung)
    if book.router is not None:
        _router_host(c, book.router.host, hosts, hosts_unread)
    return Checked(path, None if found or twice else book, releases, sorted(problems, key=lambda p: p.line))


def stale_lock(path: Path, packages: dict[str, str]) -> str | None:
    """The playbook's lock (fleet.upstream.lockfile) when it no longer matches its pins, or cannot be read."""
    try:
        return lockfile.stale(lockfile.path_for(path), packages)
    except InputError as exc:
        return str(exc)


def _check_raw_names(c: _Checker, data: Any, err: ValidationError) -> None:
    """A ladder the schema refused for one of its rungs: its rule of one name per rung, which runs only once every
    rung holds up, applied to the names as written."""
    ladder = data.get("ladder") if isinstance(data, dict) else None
    if not isinstance(ladder, list) or any(tuple(e["loc"]) == ("ladder",) for e in err.errors()):
        return  # not a list, or the schema said it already
    names = [item["name"] for item in ladder if isinstance(item, dict) and isinstance(item.get("name"), str)]
    try:  # the schema's own rule, on rungs that are only their names
        Playbook.unique_rungs([Rung.model_construct(name=name) for name in names])
    except ValueError as exc:
        c.error(("ladder",), str(exc))


# The keys each whole-section rule reads (Serve._exposure, Health._matchable): such a rule is not judged where one
# of them was refused (its problem is said; the rule cannot know the value meant).
_RULE_READS = {"serve": {"host", "api_key"}, "health": {"expect", "max_tokens"}}
_RULE_NAMES = {"serve": "the exposure rule (serve.host beyond loopback needs serve.api_key)",
               "health": "health.expect against max_tokens"}


def _check_raw_rules(c: _Checker, data: Any, err: ValidationError) -> None:
    """A playbook the schema refused: the rules that a refused key kept from running (a mapping's check of its
    items, a section's rule of the whole), judged on the rest: each refused value left out, the schema asked
    again, and what it says now that it did not say before is said (the ladder aside: _check_raw checks its
    rungs, and not where a rule reads a refused key)."""
    if not isinstance(data, dict):
        return
    said = {_loc(e["loc"]) for e in err.errors()}
    for section, reads in _RULE_READS.items():
        if refused := sorted(reads & {str(loc[1]) for loc in said if len(loc) > 1 and loc[0] == section}):
            c.error((section,), f"{_RULE_NAMES[section]} not checked: {', '.join(f'{section}.{k}' for k in refused)} "
                    f"{'is' if len(refused) == 1 else 'are'} refused", warning=True, kind="unchecked")
    pruned = copy.deepcopy(data)
    dropped: set[yamlfile.Loc] = set()
    news = said
    for _ in range(8):  # until the schema says nothing new: a rule may wait on one that waited on the schema
        for loc in sorted(news, key=len, reverse=True):  # deepest first; a value left out once
            if loc and loc[0] != "ladder" and not any(loc[:n] in dropped for n in range(len(loc) + 1)):
                if where := prune.drop(pruned, loc):
                    dropped.add(where)
        try:
            Playbook.model_validate(pruned)
            return
        except ValidationError as again:
            found = [(_loc(e["loc"]), e) for e in again.errors()]
        news = {loc for loc, e in found if loc and loc[0] != "ladder" and e["type"] != "missing"} - said
        if not news:
            return
        for loc, e in found:
            if loc not in news:
                continue
            keys = {str(r[1]) for r in said if len(r) > 1 and r[0] == loc[0]}
            if not (len(loc) == 1 and keys & _RULE_READS.get(str(loc[0]), set())):  # said not checked above
                c.error(loc, e["msg"].removeprefix("Value error, "))
        said |= news


def _loc(loc: tuple[Any, ...]) -> yamlfile.Loc:
    return tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))


def _check_raw_nodes(c: _Checker, data: Any, err: ValidationError) -> None:
    """A multi-node playbook the schema refused: the nodes rules (fleet.playbook.node_problems) run on what holds
    up: the base flags and each rung's that are flags at all; dist_port against serve.port where both held up."""
    raw = data.get("nodes") if isinstance(data, dict) else None
    if raw is not None and not isinstance(raw, dict):  # `nodes: 3`: no count to split the rungs over
        c.error(("ladder",), "each rung's TP x PP not checked against nodes.count, which is refused", warning=True,
                kind="unchecked")
    if not isinstance(raw, dict):
        return
    refused = {_loc(e["loc"])[:2] for e in err.errors()}
    nodes = _held(Nodes, raw, {str(loc[1]) for loc in refused if len(loc) == 2 and loc[0] == "nodes"})
    if nodes is None:  # every TP x PP splits over one node: the rule that reads the count is said not checked
        c.error(("ladder",), "each rung's TP x PP not checked against nodes.count, which is refused", warning=True,
                kind="unchecked")
        port_held = _held(Nodes, {**raw, "count": 2}, set())  # its dist_port alone
        nodes = Nodes.model_construct(count=1, dist_port=port_held.dist_port if port_held else None)
    serve = data.get("serve") if isinstance(data.get("serve"), dict) else {}
    port = serve.get("port", Serve.model_fields["port"].default)
    if ("serve", "port") in refused or ("nodes", "dist_port") in refused:
        c.error(("nodes", "dist_port"), "not checked against serve.port: one of them is refused", warning=True,
                kind="unchecked")
        port = None
    ladder = data.get("ladder") if isinstance(data.get("ladder"), list) else []
    if "flags" in data and not isinstance(data["flags"], dict):  # every rung's TP x PP starts from the base flags
        c.error(("ladder",), "each rung's TP x PP not checked against nodes.count: the base flags are refused",
                warning=True, kind="unchecked")
        ladder = []
    rungs = [Rung.model_construct(name=str(r.get("name", i)) if isinstance(r, dict) else str(i),
                                  flags=_flags_of(r.get("flags") if isinstance(r, dict) else None), flags_by_sglang={})
             for i, r in enumerate(ladder)]
    book = Playbook.model_construct(nodes=nodes, serve=Serve.model_construct(port=port),
                                    flags=_flags_of(data.get("flags")), ladder=rungs)
    for problem in node_problems(c.doc, book):
        if str(problem) not in {str(p) for p in c.problems}:
            c.problems.append(Problem(str(problem), line=_line(str(problem))))


def _flags_of(raw: Any) -> dict[str, FlagValue]:
    """Of a mapping of flags the schema may refuse, those that are flags at all (a name, a plain value)."""
    return {k: v for k, v in raw.items() if isinstance(k, str) and FLAG_NAME.fullmatch(k)
            and isinstance(v, FlagValue)} if isinstance(raw, dict) else {}


def _check_raw_pins(c: _Checker, data: Any) -> None:
    """A playbook the schema refused: its pins checked all the same when `packages:` holds up on its own."""
    raw = data.get("packages") if isinstance(data, dict) else None
    if not isinstance(raw, dict) or not raw:
        return
    def held(pins: dict[Any, Any]) -> dict[str, str] | None:
        try:
            return Playbook.model_validate({"name": "x", "model": {"path": "/x"}, "ladder": [{"name": "x"}],
                                            "packages": pins}).packages
        except ValidationError:
            return None  # its problems are among the schema's
    packages = held(raw)
    if packages is None:  # the pins that hold up alone, checked against each other all the same
        packages = {k: v for one in (held({k: v}) for k, v in raw.items()) if one for k, v in one.items()}
    written = {pins.canonical(k): k for k in raw}
    for dist, problem in pin_problems(packages):
        c.error(("packages", written.get(dist, dist)), problem, kind=problem)
    for dist, problem in wheelhouse.missing(packages):  # as for a playbook the schema takes
        c.error(("packages", written.get(dist, dist)), problem, warning=True, kind="wheelhouse")


def _router_host(c: _Checker, host: str, hosts: set[str] | None, unread: str | None) -> None:
    if hosts is not None and host not in hosts:
        c.error(("router", "host"), f"{host} is no host of the inventory{did_you_mean(host, hosts)}")
    elif hosts is None and unread:
        c.error(("router", "host"), f"not checked against the inventory: {unread}", warning=True, kind="unchecked")


def _check_raw_sections(c: _Checker, data: Any, err: ValidationError, hosts: set[str] | None,
                        hosts_unread: str | None = None) -> None:
    """A playbook the schema refused: the rules of the router (against serve and the inventory) run all the same on
    the keys of both sections that hold up; a rule that reads a refused key is said not checked."""
    if not isinstance(data, dict):
        return
    refused = {tuple(e["loc"][:2]) for e in err.errors()}
    serve: Serve | None = None
    raw = data.get("serve", {})
    known: set[str] = set()
    if isinstance(raw, dict):
        fields = {k: v for k, v in raw.items() if k not in ("env", "secret_env") and ("serve", k) not in refused}
        known = set(Serve.model_fields) - {str(loc[1]) for loc in refused if len(loc) == 2 and loc[0] == "serve"}
        # each field held up (the exposure rule is _check_raw_rules'): the router is judged against them
        serve = Serve.model_construct(**fields)
    raw = data.get("router")
    if isinstance(raw, dict):
        router = _held(Router, raw, {str(loc[1]) for loc in refused if len(loc) == 2 and loc[0] == "router"})
        if router is None:
            return
        if ("router", "host") not in refused:
            _router_host(c, router.host, hosts, hosts_unread)
        for problem in router.problems(serve, known) if serve is not None else []:
            c.error(*problem)
        for key in sorted({"port", "unit", "host"} - known):  # a rule that reads a refused serve key: said so
            c.error(("router",) if key == "host" else ("router", key), f"not checked against serve.{key}, which is "
                    "refused", warning=True, kind="unchecked")


def _held(model: type[M], raw: dict[str, Any], refused: set[str]) -> M | None:
    """The section less its refused keys, each rule judged on what holds up; None when that does not hold up
    either (a required key refused: the rules that read it are not judged)."""
    kept = {k: v for k, v in raw.items() if k not in refused}
    try:
        return model.model_validate(kept)
    except ValidationError:
        return None


def pin_problems(packages: dict[str, str]) -> list[tuple[str, str]]:
    """The playbook's pins against each other, read offline from the corpus (fleet.upstream.corpus.check_pins)."""
    return corpus.check_pins(packages) if packages else []


def _line(text: str) -> int:
    m = re.match(r"[^:]*:(\d+): ", text)
    return int(m.group(1)) if m else 0


def _check_raw(c: _Checker, data: Any, known_classes: set[str] | None = None,
               known_patches: set[str] | None = None) -> None:
    """A playbook the schema refused: its rungs that hold up on their own, checked all the same (with the base
    flags that are flags at all; their failure classes and patch sets), so that one pass says every problem."""
    if not isinstance(data, dict):
        return
    raw = data.get("flags")
    base = {k: v for k, v in raw.items() if isinstance(k, str) and FLAG_NAME.fullmatch(k)  # printed: never raw
            and isinstance(v, FlagValue)} if isinstance(raw, dict) else {}
    ladder = data.get("ladder")  # one rung written without its dash (a mapping) is checked as the rung it is
    for i, item in enumerate(ladder if isinstance(ladder, list) else [ladder] if isinstance(ladder, dict) else []):
        try:
            rung = Rung.model_validate(item)
        except ValidationError as err:  # its problems are among the schema's; what holds up is checked all the same
            if (held := _holding_up(item, err, i)) is None:
                continue
            rung = held
        c.rung(base, i, rung)
        by_sglang = item.get("flags_by_sglang") if isinstance(item, dict) else None
        for spec, flags in by_sglang.items() if isinstance(by_sglang, dict) else []:
            if spec not in rung.flags_by_sglang and isinstance(flags, dict):  # range refused: names checked
                c.names((("ladder", i, "flags_by_sglang", spec), _flags_of(flags)))
        for cls in rung.after or []:
            if known_classes is not None and cls not in known_classes and cls not in DEPLOY_OUTCOMES:
                c.error(("ladder", i, "after"), f"unknown failure class {cls!r}", kind=cls)
        for name in rung.patches:
            if known_patches is not None and name not in known_patches:
                c.error(("ladder", i, "patches"), f"unknown patch set {name!r}", kind=name)


def _holding_up(item: Any, err: ValidationError, index: int) -> Rung | None:
    """A rung the schema refused, less what it refused: its other fields, and of its flags each one that holds up
    alone (a secret flag or one fleet sets refused, its typos are still found); a name missing or refused stands
    as `ladder-I` (its flags, classes and patch sets were otherwise found only once it had a good one); None when
    nothing is left to check (the rung is not a mapping)."""
    if not isinstance(item, dict):
        return None
    refused = {e["loc"][0] for e in err.errors() if e["loc"]}
    kept = {k: v for k, v in item.items() if k not in refused}
    if "name" in refused:
        kept["name"] = f"ladder-{index}"
    if "flags" in refused and isinstance(item.get("flags"), dict):
        kept["flags"] = {k: v for k, v in item["flags"].items() if _holds({"name": "x", "flags": {k: v}})}
    if "when" in refused and isinstance(item.get("when"), dict):  # its other conditions checked all the same
        wrong = {e["loc"][1] for e in err.errors() if len(e["loc"]) > 1 and e["loc"][0] == "when"}
        kept["when"] = {k: v for k, v in item["when"].items() if k not in wrong}
        kept["when"] |= {k: held for k in wrong if (held := _items(Conditions, {}, str(k), item["when"].get(k)))}
    kept |= {k: v for k in ("patches", "after") if k in refused and (v := _items(Rung, {"name": "x"}, k, item[k]))}
    if "flags_by_sglang" in refused and isinstance(item.get("flags_by_sglang"), dict):
        kept["flags_by_sglang"] = {spec: flags for spec, flags in item["flags_by_sglang"].items()
                                   if _holds({"name": "x", "flags_by_sglang": {spec: flags}})}
    try:
        return Rung.model_validate(kept)
    except ValidationError:
        return None


def _items(model: type[BaseModel], base: dict[str, Any], key: str, value: Any) -> list[Any]:
    """Of a list field the schema refused (`sm: 999`, a list with a wrong item), the items that hold up alone: their
    own checks run in the same pass (an unknown SM, patch set or class); [] for a field that is no list."""
    listed = "list" in str(getattr(model.model_fields.get(key), "annotation", ""))
    ones = [{**base, key: [one]} for one in (value if isinstance(value, list) else [value])]
    return [getattr(model.model_validate(one), key)[0] for one in ones if listed and _holds(one, model)]


def _holds(data: dict[str, Any], model: type[BaseModel] = Rung) -> bool:
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True


_GPU_COUNTS = ("tp-size", "tensor-parallel-size")  # sglang's type=int in every release (srt/server_args.py)


@dataclass
class _Checker:
    doc: yamlfile.Document
    table: sglang_cli.Table
    releases: list[str]
    problems: list[Problem]
    seen: set[tuple[yamlfile.Loc, str]] = field(default_factory=set)
    ranges: sglang_ranges.Ranges = field(default_factory=sglang_ranges.default_ranges)

    def error(self, loc: yamlfile.Loc, message: str, warning: bool = False, kind: str = "") -> None:
        if (loc, kind or str(warning)) not in self.seen:  # a flag wrong for ten releases is one problem, said once
            self.seen.add((loc, kind or str(warning)))
            self.problems.append(Problem(str(self.doc.error(loc, message)), warning, self.doc.line_of(loc) or 0))

    def rung(self, base: dict[str, FlagValue], i: int, rung: Rung) -> None:
        where = ("ladder", i)
        self.when(where, rung.when)
        if rung.after == [] and i > 0:
            self.error((*where, "after"), f"rung {rung.name} never runs: after: [] names no failure class")
        layers: list[tuple[yamlfile.Loc, dict[str, FlagValue]]] = [(("flags",), base),
                                                                   ((*where, "flags"), rung.flags)]
        layers += [((*where, "flags_by_sglang", spec), f) for spec, f in rung.flags_by_sglang.items()]
        self.names(*layers)
        meets = [v for v in self.releases if rung.when.sglang is None or in_range(v, rung.when.sglang)]
        if not meets:
            self.error((*where, "when", "sglang"), f"no sglang release fleet knows is in {rung.when.sglang!r} "
                                                   "(its flags are checked against none)", warning=True)
        for spec in rung.flags_by_sglang:
            if not any(in_range(v, spec) for v in meets):
                self.error((*where, "flags_by_sglang", spec), f"no sglang release this rung can meet is in "
                                                              f"{spec!r}", warning=True)
        for version in meets:
            for name, (value, loc) in _merged(layers[:2] + [(loc, f) for loc, f in layers[2:]
                                                            if in_range(version, str(loc[-1]))]).items():
                self.flag(name, value, loc, version, rung.name)

    def names(self, *layers: tuple[yamlfile.Loc, dict[str, FlagValue]]) -> None:
        """Each flag's name against every release (a name no release has is wrong whatever the range)."""
        for loc, layer in layers:
            for name in layer:
                if name not in self.table.flags:
                    near = difflib.get_close_matches(name, self.table.flags, n=1, cutoff=0.75)
                    self.error((*loc, name), f"--{name} is in no sglang release from {self.table.versions[0]} to "
                                             f"{self.table.versions[-1]}" + (f"; did you mean --{near[0]}?" if near
                                                                             else ""))

    def flag(self, name: str, value: FlagValue, loc: yamlfile.Loc, version: str, rung: str) -> None:
        span = self.table.flags.get(name)
        if span is None:
            return  # said above
        on = f"sglang {version}" + (f", rung {rung}" if loc[0] == "flags" else "")
        if problem := self.table.problem(name, version):
            self.error(loc, f"{problem.replace(f' (host has {version})', '')} ({on})")
        elif deprecated := self.table.deprecated(name, version):
            self.error(loc, f"{deprecated} ({on})", warning=True)
        if span.switch and value is not True:
            self.error(loc, kind="value",
                       message=f"--{name} is a switch: give true (or false/null to leave it out), not {value!r}")
        elif not span.switch and value is True:
            self.error(loc, kind="value", message=f"--{name} takes a value: true would pass it bare and sglang "
                                                  "would stop (expected one argument)")
        elif name in _GPU_COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            self.error(loc, kind="value", message=f"--{name} takes a whole number of GPUs, 1 or more, not {value!r} "
                                                  "(sglang stops on it at start; preflight would count it as 1)")
        elif not span.switch and (wrong := self.table.value_problem(name, value, version)):
            self.error(loc, kind="choice", message=f"{wrong} ({on})")
        elif not span.switch and (release := self.table.release_for(version)) and \
                (out := self.ranges.problem(name, value, release, span.type)):
            self.error(loc, out, kind="range")  # wrong for every rung and release it holds on: said once

    def when(self, where: yamlfile.Loc, when: Conditions) -> None:
        loc = (*where, "when")
        for key, known in (("arch_family", vocab.ARCH_FAMILIES), ("interconnect", vocab.INTERCONNECTS)):
            for value in getattr(when, key) or []:
                if value not in known:
                    low = value.lower()  # NVLink -> nvlink, hopper-datacenter -> hopper
                    near = [k for k in known if k == low or k in low.split("-")] or difflib.get_close_matches(
                        low, known, n=1, cutoff=0.6)
                    self.error((*loc, key), f"{value!r} is no {key.replace('_', ' ')} a host reports (one of "
                                            f"{', '.join(known)})" + (f"; did you mean {near[0]}?" if near else ""))
        for value in when.p2p or []:
            if not any(value == s or value.startswith(f"{s} (") for s in vocab.P2P_STATES):
                self.error((*loc, "p2p"), f"{value!r} is no P2P state a host reports (one of "
                                          f"{', '.join(vocab.P2P_STATES)}, or e.g. 'refused (CNS)')")
        for sm in when.sm or []:
            if problem := vocab.unknown_sm(sm):
                self.error((*loc, "sm"), problem)
        if when.sm and when.arch_family:
            families = {vocab.arch_family(f"{sm // 10}.{sm % 10}") for sm in when.sm}
            if not families & set(when.arch_family):
                self.error(loc, f"never runs: SM {when.sm} is {sorted(families)}, not {when.arch_family}")
        many = (when.min_gpus or 0) >= 2
        if many and when.interconnect is not None and set(when.interconnect) <= {"none"}:
            self.error(loc, f"never runs: interconnect none is a one-GPU host, min_gpus is {when.min_gpus}")
        if many and when.p2p is not None and set(when.p2p) <= {"n/a"}:
            self.error(loc, f"never runs: P2P n/a is a one-GPU host, min_gpus is {when.min_gpus}")


def _merged(layers: list[tuple[yamlfile.Loc, dict[str, FlagValue]]]) -> dict[str, tuple[FlagValue, yamlfile.Loc]]:
    """The flags a deploy would pass (fleet.playbook.merged_flags), each with where it was last set."""
    out: dict[str, tuple[FlagValue, yamlfile.Loc]] = {}
    for loc, layer in layers:
        for name, value in layer.items():
            if value is None or value is False:
                out.pop(name, None)
            else:
                out[name] = (value, (*loc, name))
    return out
