"""Playbooks: what to serve, how, and the ordered fallback ladder of rungs to try (playbooks/*.yaml).

    name: glm5-nvfp4
    model: {path: /models/GLM-5-NVFP4, architecture: Glm4MoeForCausalLM}
    serve: {unit: sglang, port: 30000, env: {NCCL_P2P_DISABLE: "1"}, api_key: {env: SGLANG_API_KEY}}
    flags: {tp-size: 8, quantization: modelopt_fp4}          # base sglang flags
    ladder:
      - name: fusion-sm120
        when: {sm: [120, 121]}                                # conditions on probe facts
        flags: {enable-flashinfer-allreduce-fusion: true}     # true: bare flag; null: drop a base flag
        patches: [sm120-allreduce-fusion]
      - name: lower-mem-fraction
        flags: {mem-fraction-static: 0.8}
        flags_by_sglang:                                      # merged too where the host's sglang is in range
          "<0.5.14": {cuda-graph-max-bs: 256}                 #   (checked against playbooks/upstream/sglang-flags.yaml)
          ">=0.5.14": {cuda-graph-max-bs-decode: 256}
      - {name: no-fusion, after: [ARCH_UNSUPPORTED, TMA_FAILURE]}  # worth trying after these failure classes
A rung's flags and env are merged onto the base; patch sets it does not list are reverted. No ladder: one, `base`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from fleet import errors, fields, policy, site, yamlfile
from fleet.errors import InputError
from fleet.host.facts import HostFacts
from fleet.outcomes import DEPLOY_OUTCOMES
from fleet.secretref import MASK, SecretRef, is_secret_name
from fleet.upstream.pins import DistName, Pin, pin_set
from fleet.upstream.versions import checked_range, in_range

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
FLAG_NAME = _FLAG = re.compile(r"[a-z0-9][a-z0-9-]{0,99}")  # fullmatch: a "$" would let a trailing newline through
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")

FlagValue = bool | int | float | str | None
EnvValue = str | SecretRef  # a literal, or a secret resolved where fleet runs and written only to the 0600 env file
ENV_SECRET = "env:"  # a resolved env secret's key among a run's secrets, before the variable's name

# Flags fleet writes from the playbook's own sections: one way to open the server, and that way needs a key.
SERVE_FLAGS = {"host": "serve.host", "port": "serve.port", "api-key": "serve.api_key", "model-path": "model.path",
               "model": "model.path"}
_SECRET_FLAG = re.compile(r"(?:^|-)(?:key|password|passwd|secret|credentials?)$")  # admin-api-key, ...


def _check_text(value: str, what: str) -> str:  # a newline could smuggle a directive into a unit or env file
    try:
        fields.text(value)
    except ValueError:
        raise ValueError(f"{what} must not contain newlines, NUL or other control characters") from None
    return value


def _check_flags(flags: dict[str, FlagValue], server: bool = True) -> dict[str, FlagValue]:
    def check(name: str, value: FlagValue) -> None:
        if not _FLAG.fullmatch(name):
            raise ValueError(f"flag {name!r}: write it without leading dashes, lower-case words joined by '-'")
        if server and name in SERVE_FLAGS:
            raise ValueError(f"--{name} is set by fleet from {SERVE_FLAGS[name]}: set it there"
                             + " (a host beyond loopback needs serve.api_key)" * (name in ("host", "api-key")))
        if _SECRET_FLAG.search(name) and value not in (None, False):  # the router's flags too
            raise ValueError(f"--{name} would put a secret in the unit file and every process's command line: "
                             "the server's key is serve.api_key ({env: NAME} or {file: PATH})")
        if isinstance(value, str):
            _check_text(value, f"flag {name}")
    fields.each(flags.items(), lambda item: check(*item))  # every bad flag said at once, not one per run
    return flags


E = TypeVar("E", bound=dict[str, EnvValue] | dict[str, str])


def _check_env(env: E, secret_names: Iterable[str] = (), literal_secrets: bool = False) -> E:
    fields.each(env.items(), lambda item: _check_variable(*item, secret_names, literal_secrets))  # all said at once
    return env


def _check_variable(name: str, value: EnvValue | str, secret_names: Iterable[str], literal_secrets: bool) -> None:
    if not _ENV.fullmatch(name):
        raise ValueError(f"environment variable name {name!r} is not valid")
    if isinstance(value, SecretRef):
        return
    if not literal_secrets and is_secret_name(name, secret_names) and value.strip():
        raise ValueError(f"{name}: a literal secret in a playbook; name it instead: "
                         f"{name}: {{env: {name}}} (fleet's environment) or {{file: PATH}}")
    _check_text(str(value), f"env {name}")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Model(Strict):
    path: fields.Text  # a folder on the host or a Hugging Face repo id
    architecture: fields.Text | None = None
    served_name: fields.Text | None = None


class Serve(Strict):
    unit: fields.UnitName | None = None  # default: the inventory's unit
    user: fields.UserName = "root"
    host: fields.HostAddr = "127.0.0.1"
    port: int = Field(default=30000, ge=1, le=65535)
    venv: fields.AbsPath | None = None  # default: the inventory's venv
    secret_env: list[str] = []  # more names whose values are secret (masked wherever fleet shows them)
    env: dict[str, EnvValue] = {}
    api_key: SecretRef | None = None
    warm_start: bool = False  # caches of hosts of the same key put in place before a start (issue 49)
    _env_numbers = field_validator("env", mode="before")(classmethod(lambda cls, v: fields.env_text(v)))
    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, EnvValue], info: ValidationInfo) -> dict[str, EnvValue]:
        return _check_env(v, info.data.get("secret_env") or ())  # secret_env is validated before env

    @model_validator(mode="after")
    def _exposure(self) -> Serve:
        if self.host not in LOOPBACK and self.api_key is None:
            raise ValueError(f"host {self.host} listens beyond loopback: give serve.api_key (a secret reference, "
                             "env: or file:) or keep host 127.0.0.1")
        return self


class Conditions(Strict):
    """All given must hold for a rung to be eligible on a host."""

    sm: list[int] | None = None
    arch_family: list[str] | None = None
    interconnect: list[str] | None = None
    p2p: list[str] | None = None  # e.g. ["ok"], or ["refused"] (matches "refused (CNS)")
    min_gpus: int | None = None
    sglang: str | None = None  # a version range of the host's sglang, e.g. ">=0.5.20"

    _sglang = field_validator("sglang")(classmethod(lambda cls, v: checked_range(v)))

    def failed(self, facts: HostFacts) -> str | None:
        """Why the facts rule this rung out, or None when they allow it."""
        sms = {g.sm for g in facts.gpus}
        if self.sm is not None and not (sms and sms <= set(self.sm)):
            return f"needs SM in {self.sm}, host has {sorted(s for s in sms if s) or 'unknown'}"
        if self.arch_family is not None and facts.arch_family not in self.arch_family:
            return f"needs arch family {self.arch_family}, host is {facts.arch_family}"
        if self.interconnect is not None and facts.interconnect not in self.interconnect:
            return f"needs interconnect {self.interconnect}, host has {facts.interconnect}"
        if self.p2p is not None and not any(facts.p2p.startswith(p) for p in self.p2p):
            return f"needs P2P {self.p2p}, host has {facts.p2p}"
        if self.min_gpus is not None and len(facts.gpus) < self.min_gpus:
            return f"needs at least {self.min_gpus} GPUs, host has {len(facts.gpus)}"
        if self.sglang is not None:
            have = sglang_version(facts)
            if have is None or not in_range(have, self.sglang):
                return f"needs sglang {self.sglang}, host has {have or 'none found'}"
        return None


def sglang_version(facts: HostFacts | None) -> str | None:
    pkg = facts.packages.get("sglang") if facts else None
    return pkg.version if pkg else None


class Rung(Strict):
    name: str
    description: fields.Text = ""
    when: Conditions = Conditions()
    after: list[str] | None = None  # None: worth trying after any failure
    flags: dict[str, FlagValue] = {}
    env: dict[str, EnvValue] = {}
    patches: list[str] = []
    flags_by_sglang: dict[str, dict[str, FlagValue]] = {}  # version range -> flags, merged after `flags`

    _flags = field_validator("flags")(classmethod(lambda cls, v: _check_flags(v)))
    _env_numbers = field_validator("env", mode="before")(classmethod(lambda cls, v: fields.env_text(v)))
    _env = field_validator("env")(classmethod(lambda cls, v: _check_env(v)))

    @field_validator("flags_by_sglang")
    @classmethod
    def _by_version(cls, v: dict[str, dict[str, FlagValue]]) -> dict[str, dict[str, FlagValue]]:
        fields.each(v.items(), lambda item: (checked_range(item[0]), _check_flags(item[1])))  # all said at once
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        try:
            return fields.name(v)
        except ValueError as exc:
            raise ValueError(f"rung name {exc}") from None

    def worth_trying_after(self, last_outcome: str | None) -> bool:
        """A rung with `after:` is tried only after one of those outcomes (the first rung always is)."""
        return last_outcome is None or self.after is None or last_outcome in self.after


class Health(Strict):
    prompt: str = "2+2="
    expect: str = "4"  # the answer, stripped, must start with it (stripped the same way here)
    max_tokens: int = Field(default=8, ge=1)

    @model_validator(mode="after")
    def _matchable(self) -> Health:
        self.expect = self.expect.strip()
        if not self.expect:
            raise ValueError("expect: blank, it would match any answer (the answer is compared stripped)")
        if len(self.expect.split()) > self.max_tokens:
            raise ValueError(f"expect: {len(self.expect.split())} words cannot come back in max_tokens "
                             f"{self.max_tokens}")
        return self


class Budgets(Strict):
    """Seconds without progress before an attempt is a HANG, per startup phase (stop: the unit's TimeoutStopSec)."""

    start: float = Field(default=120, gt=0, allow_inf_nan=False)
    weight_load: float = Field(default=1800, gt=0, allow_inf_nan=False)
    jit_compile: float = Field(default=1200, gt=0, allow_inf_nan=False)
    autotune: float = Field(default=1800, gt=0, allow_inf_nan=False)
    graph_capture: float = Field(default=900, gt=0, allow_inf_nan=False)
    ready: float = Field(default=300, gt=0, allow_inf_nan=False)
    stop: float = Field(default=120, gt=0, allow_inf_nan=False)


class Bench(Strict):
    """The short benchmark run after health (the performance gate) and by `inv bench` / `inv tune`.

    `python -m sglang.bench_serving` with an offline dataset and fixed lengths. A rung whose output
    throughput is below `fraction` of the host's last known-good result on the same settings (else below
    `floor` tok/s, else below `fraction` of the best rung in this run) is a PERF_REGRESSION."""

    gate: bool = True
    dataset: Literal["random-ids"] = "random-ids"  # needs no download (hosts are often offline)
    backend: str = "sglang"
    input_len: int = Field(default=128, ge=1)
    output_len: int = Field(default=64, ge=1)
    num_prompts: int = Field(default=128, ge=1)
    max_concurrency: int = Field(default=64, ge=1)
    fraction: float = Field(default=0.9, gt=0, le=1)
    floor: float | None = Field(default=None, ge=0)  # tok/s
    # inv tune: counted runs per serving rung after one warm-up (--runs), and the gain a later rung needs
    # beyond both rungs' spreads to win (fleet.deploy.noise)
    runs: int = Field(default=3, ge=1, le=20)
    min_gain: float = Field(default=0.02, ge=0, lt=1)
    timeout: float = Field(default=600, gt=0)  # seconds for one benchmark run
    underutilised_below: float = Field(default=0.5, gt=0, le=1)  # mean power / limit
    # a run is a measurement only when at least this share of its prompts succeeded; else BENCH_FAILED
    min_success: float = Field(default=0.99, gt=0, le=1)

    @field_validator("backend")
    @classmethod
    def _backend(cls, v: str) -> str:
        if not _FLAG.fullmatch(v):
            raise ValueError(f"not a bench_serving backend name: {v!r}")
        return v


class Router(Strict):
    """Data-parallel replicas behind sglang's router (`python -m sglang_router.launch_router`, its own unit on
    `host`): every host deployed is a replica; clients and the router use serve.api_key."""

    host: fields.Text  # an inventory host name; checked against the inventory at deploy time
    port: int = Field(default=30080, ge=1, le=65535)
    listen: fields.HostAddr = "0.0.0.0"
    policy: Literal["round_robin", "random", "cache_aware", "power_of_two"] = "round_robin"
    unit: fields.UnitName = "sglang-router"
    flags: dict[str, FlagValue] = {}  # more launch_router flags, e.g. health-check-interval-secs: 10
    venv: fields.AbsPath | None = None  # the venv with sglang-router; none: the replicas' (serve.venv, host's)

    @field_validator("flags")
    @classmethod
    def _flags(cls, v: dict[str, FlagValue]) -> dict[str, FlagValue]:
        def check(name: str) -> None:
            if name in ROUTER_FLAGS_SET_BY_FLEET:
                raise ValueError(f"--{name} is set by fleet from the router section and the replicas")
            _check_flags({name: v[name]}, server=False)
        fields.each(v, check)  # every bad flag said at once
        return v

    def problems(self, serve: Serve, known: Iterable[str] | None = None) -> list[tuple[yamlfile.Loc, str]]:
        """Where and why the router section cannot work with the serve section, each rule apart; `known`: the serve
        fields that held up (inv check of a refused section), the rules of the others not judged."""
        held = set(Serve.model_fields if known is None else known)
        rules = [("host", serve.host in LOOPBACK, ("serve", "host"), "replicas behind a router must listen beyond "
                  "loopback (the router calls them over the network): set serve.host, e.g. 0.0.0.0, and serve.api_key"),
                 ("port", self.port == serve.port, ("router", "port"),
                  f"{self.port} is serve.port too; the router's host may also be a replica"),
                 ("unit", self.unit == serve.unit, ("router", "unit"), f"{self.unit} is serve.unit too")]
        return [(loc, why) for key, wrong, loc, why in rules if key in held and wrong]


ROUTER_FLAGS_SET_BY_FLEET = {"worker-urls", "host", "port", "policy", "api-key"}


class Nodes(Strict):
    """One server spanning hosts (sglang --nnodes): deploy takes exactly `count` hosts, rank 0 first."""

    count: int = Field(ge=2, le=64)
    dist_port: int = Field(default=5757, ge=1, le=65535)  # rank 0's torch.distributed store (--dist-init-addr)


NODE_FLAGS = ("nnodes", "node-rank", "dist-init-addr", "nccl-init-addr")  # rendered per node from `nodes:`


class Playbook(Strict):
    name: fields.Name
    description: fields.Text = ""
    model: Model
    serve: Serve = Serve()
    flags: dict[str, FlagValue] = {}
    ladder: list[Rung] = Field(default_factory=lambda: [Rung(name="base")], min_length=1)  # none: the base flags
    health: Health = Health()
    budgets: Budgets = Budgets()
    bench: Bench | None = None
    keep_releases: int = Field(default=5, ge=1)
    nodes: Nodes | None = None
    router: Router | None = None
    canary: policy.Canary = policy.Canary()
    packages: dict[DistName, Pin] = {}  # none: the venv served as found, its versions recorded
    tune: dict[str, list[FlagValue]] = {}  # `inv tune --slo`'s space narrowed: flag -> values (deploy/searchspace)
    _flags = field_validator("flags", "tune")(classmethod(lambda cls, v: _check_flags(v)))
    _packages = field_validator("packages")(classmethod(lambda cls, v: pin_set(v)))

    @field_validator("ladder")
    @classmethod
    def unique_rungs(cls, ladder: list[Rung]) -> list[Rung]:
        seen: set[str] = set()
        for rung in ladder:
            if rung.name in seen:
                raise ValueError(f"rung {rung.name!r} appears twice in the ladder")
            seen.add(rung.name)
        return ladder

    def rung(self, name: str) -> Rung:
        for r in self.ladder:
            if r.name == name:
                return r
        raise InputError(f"playbook {self.name}: no rung named {name!r}")


# On unless a playbook or rung says `false`: `inv status` reads the server's /metrics.
DEFAULT_FLAGS: dict[str, FlagValue] = {"enable-metrics": True}


def merged_flags(base: dict[str, FlagValue], rung: Rung, sglang: str | None = None) -> dict[str, FlagValue]:
    """The base flags, then the rung's, then the rung's `flags_by_sglang` whose range holds the host's sglang
    version (none when it is unknown)."""
    flags = dict(base)
    for name, value in DEFAULT_FLAGS.items():
        flags.setdefault(name, value)  # appended, so a playbook that names it keeps its argv order
    layers = [rung.flags, *(f for spec, f in rung.flags_by_sglang.items() if sglang and in_range(sglang, spec))]
    for layer in layers:
        for name, value in layer.items():
            if value is None or value is False:
                flags.pop(name, None)
            else:
                flags[name] = value
    return {k: v for k, v in flags.items() if v is not None and v is not False}


def flag_args(flags: dict[str, FlagValue]) -> list[str]:
    """sglang argv for the flags: true is a bare switch, others are `--name value`."""
    args: list[str] = []
    for name, value in flags.items():
        args.append(f"--{name}")
        if value is not True:
            args.append(str(value))
    return args


def load(path: Path, known_classes: set[str] | None = None, known_patches: set[str] | None = None) -> Playbook:
    doc = yamlfile.load(path)
    if not isinstance(doc.data, dict):
        raise doc.error((), "a playbook must be a mapping")
    book = doc.parse(Playbook)
    if found := problems(doc, book, known_classes, known_patches):
        raise found[0]
    return book


def problems(doc: yamlfile.Document, book: Playbook, known_classes: set[str] | None = None,
             known_patches: set[str] | None = None) -> list[InputError]:
    """All the schema cannot see (`inv check` says every one; load refuses on the first): router and serve, the
    nodes, each rung's env by the playbook's secret list, failure classes and patch sets this site knows."""
    found = [doc.error(*problem) for problem in book.router.problems(book.serve)] if book.router else []
    if book.router is not None and book.nodes is not None:
        found.append(doc.error(("router",), "replicas behind a router are single-host servers; a playbook with "
                                            "nodes: cannot have router: too"))
    found += check_nodes(doc, book) if book.nodes else []
    for i, rung in enumerate(book.ladder):
        try:  # the rung checked its env by the names' words; here by the playbook's own list too
            _check_env(rung.env, book.serve.secret_env)
        except ValueError as exc:
            found.append(doc.error(("ladder", i, "env"), str(exc)))
        found += [doc.error(("ladder", i, "after"), f"unknown failure class {cls!r}") for cls in rung.after or []
                  if known_classes is not None and cls not in known_classes and cls not in DEPLOY_OUTCOMES]
        found += [doc.error(("ladder", i, "patches"), f"unknown patch set {p!r}")
                  for p in rung.patches if known_patches is not None and p not in known_patches]
    return found


def check_nodes(doc: yamlfile.Document, book: Playbook) -> list[InputError]:
    """A multi-node playbook: fleet owns the node flags, and every rung's TP x PP must split over the nodes; each
    problem (load raises the first)."""
    assert book.nodes is not None
    found = [doc.error(("nodes", "dist_port"), f"dist_port {book.nodes.dist_port} is serve.port too")
             ] if book.nodes.dist_port == book.serve.port is not None else []  # None: refused (inv check)
    for where, flags in [(("flags",), book.flags), *((("ladder", i, "flags"), r.flags) for i, r in
                                                     enumerate(book.ladder))]:
        found += [doc.error((*where, name), f"--{name} is set by fleet from nodes: (remove it here)")
                  for name in NODE_FLAGS if name in flags]
    for i, rung in enumerate(book.ladder):
        flags = merged_flags(book.flags, rung)
        tp, pp = (_as_int(flags.get(a, flags.get(b, 1))) for a, b in
                  (("tp-size", "tensor-parallel-size"), ("pp-size", "pipeline-parallel-size")))
        if tp is None or pp is None or (tp * pp) % book.nodes.count:
            found.append(doc.error(("ladder", i), f"rung {rung.name}: TP x PP = {flags.get('tp-size', 1)} x "
                                   f"{flags.get('pp-size', 1)} does not split over {book.nodes.count} nodes"))
    return found


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def resolve(name_or_path: str, directories: list[Path] | None = None) -> Path:
    """A path as given (relative to the working folder), else a name in the site's playbooks/ then the
    shipped ones (fleet.site), whatever the working folder."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    folders = site.find().playbooks if directories is None else directories
    if "/" not in name_or_path:
        for folder in folders:
            candidate = folder / f"{name_or_path}.yaml"
            if candidate.is_file():
                return candidate
    stems = sorted({p.stem for folder in folders for p in folder.glob("*.yaml")})
    known = ", ".join(stems)
    if "/" in name_or_path or path.suffix in (".yaml", ".yml"):  # a path: said as one, where it was looked for
        raise InputError(f"--playbook {path}: no such file ({path.absolute()}); a name without .yaml is looked up "
                         f"in playbooks/ (known: {known or 'none'})")
    raise InputError(f"{errors.as_typed('--playbook', name_or_path)}: no such playbook"
                     f"{errors.did_you_mean(name_or_path, stems)} (known: {known or 'none'})")


def env_secret_key(scope: str, name: str) -> str:
    """Where secrets_for keeps an env secret: by scope ("serve", or the rung's name) and variable."""
    return f"{ENV_SECRET}{scope}:{name}"


def plain_env(book: Playbook, rung: Rung, secrets: dict[str, str]) -> dict[str, str]:
    """serve.env merged with the rung's env, each secret reference replaced by its resolved value
    (fleet.deploy.inputs.secrets_for); a reference left unresolved is an error, never an empty value."""
    out: dict[str, str] = {}
    for scope, env in (("serve", book.serve.env), (rung.name, rung.env)):
        for name, value in env.items():
            if isinstance(value, SecretRef) and env_secret_key(scope, name) not in secrets:
                raise InputError(f"env {name}: its secret ({value.where(name)}) was not resolved")
            out[name] = secrets[env_secret_key(scope, name)] if isinstance(value, SecretRef) else value
    return out


def secret_names(book: Playbook) -> list[str]:
    """The variables whose values fleet masks beyond those named like secrets: serve.secret_env, and every one
    the playbook gives as a reference."""
    refs = {n for env in (book.serve.env, *(r.env for r in book.ladder)) for n, v in env.items()
            if isinstance(v, SecretRef)}
    return [*book.serve.secret_env, *sorted(refs)]


def shown_env(env: dict[str, str], secret_names: Iterable[str] = ()) -> dict[str, str]:
    """The env as fleet shows and records it: values of secret-named variables masked."""
    return {k: MASK if is_secret_name(k, secret_names) else v for k, v in env.items()}


def shipped(name: str, directories: list[Path] | None = None) -> Path:
    """The playbook a host names (in a release manifest): only `<folder>/<name>.yaml` of the site's playbook
    folders for a plain playbook name, and only a file that is inside its folder once symlinks are followed. A
    host never makes the controller read a path of its choosing."""
    try:
        fields.name(name)
    except ValueError as exc:
        raise InputError(f"playbook name {exc}") from None
    folders = site.find().playbooks if directories is None else directories
    for folder in folders:
        candidate = folder / f"{name}.yaml"
        if candidate.is_file() and candidate.resolve().parent == folder.resolve():
            return candidate.resolve()
    known = ", ".join(sorted({p.stem for folder in folders for p in folder.glob("*.yaml")}))
    raise InputError(f"no playbook {name} in {', '.join(f'{f}/' for f in folders)} (known: {known or 'none'})")


def host_env(host_vars: dict[str, object]) -> dict[str, str]:
    """Per-host environment from the inventory's vars.env, checked where it loads (fleet.inventory.HostVars)."""
    return {str(k): str(v) for k, v in env.items()} if isinstance(env := host_vars.get("env"), dict) else {}
