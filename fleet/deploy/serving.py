"""What a playbook and a host give a deploy: the unit and its files, the venv the server runs from, the key, the
flags each rung renders to. A value, made once per run: the pins' venv is another Serving (`in_venv`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from fabric import Connection

from fleet.deploy.health import health_check
from fleet.deploy.perfgate import PerfGate
from fleet.deploy.results import Planned
from fleet.errors import FleetError
from fleet.host import venvs
from fleet.host.facts import HostFacts
from fleet.host.render import (
    API_KEY,
    UnitSpec,
    env_file,
    key_file,
    render_env,
    render_unit,
    server_argv,
    unit_file,
    workdir,
)
from fleet.host.service import read_file, sha256, unit_state
from fleet.inventory import Host
from fleet.outcomes import Outcome
from fleet.playbook import (
    Playbook,
    Rung,
    flag_args,
    host_env,
    merged_flags,
    plain_env,
    secret_names,
    shown_env,
)
from fleet.progress import Progress
from fleet.secretref import is_secret_name
from fleet.upstream import lockfile
from fleet.yamlfile import JsonObject


@dataclass(frozen=True)
class Serving:
    """How `book` serves on `host`. `origin`: the host as the inventory gives it (a release without pins is put
    back in its venv); `host`: as this run serves it (the pins' venv where the playbook has packages)."""

    origin: Host
    host: Host
    book: Playbook
    book_sha: str
    unit: str
    venv: str
    secrets: Mapping[str, str] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()  # per-node sglang flags of a multi-node deployment (fleet.multihost.multinode)
    lock: Path | None = None  # the lock of the playbook's packages: (fleet.upstream.lockfile)

    @classmethod
    def of(cls, host: Host, book: Playbook, book_path: Path, secrets: Mapping[str, str] | None = None,
           extra_args: tuple[str, ...] = ()) -> Serving:
        venv = book.serve.venv or host.venv  # probed, patched and recorded where the unit runs (as in_venv)
        return cls(origin=host, host=replace(host, venv=venv), book=book, book_sha=sha256(book_path.read_bytes()),
                   unit=book.serve.unit or host.unit, venv=venv, secrets=dict(secrets or {}),
                   extra_args=extra_args, lock=lockfile.path_for(book_path))

    @property
    def unit_path(self) -> str:
        return unit_file(self.unit)

    @property
    def env_path(self) -> str:
        return env_file(self.unit)

    @property
    def key_path(self) -> str:
        return key_file(self.unit)

    @property
    def bench_key(self) -> str | None:
        """The benchmark's key, read on the host (None: the server takes none)."""
        return self.key_path if self.book.serve.api_key else None

    def in_venv(self, venv: str) -> Serving:
        """The same, served from `venv` (a pin set's): probed, patched and benchmarked there."""
        return replace(self, venv=venv, host=replace(self.origin, venv=venv))

    def gate(self, compare_history: bool = True) -> PerfGate:
        """The bench gate of this venv: against the host's history (deploy), or only within the run (tune)."""
        return PerfGate(self.host, self.book, self.venv, self.bench_key, compare_history=compare_history)

    # ------------------------------------------------------------------ planning (pure)
    def plan(self, rung: Rung, release_id: str, sglang: str | None) -> Planned:
        """The unit, env and key file `rung` renders to on this host, for the sglang version found there."""
        book = self.book
        flags = merged_flags(book.flags, rung, sglang)
        key = self.secrets.get(API_KEY)
        argv = server_argv(f"{self.venv}/bin/python", "sglang.launch_server",
                           ["--model-path", book.model.path, "--host", book.serve.host,
                            "--port", str(book.serve.port), *flag_args(flags), *self.extra_args],
                           keyed=key is not None)
        env = {**plain_env(book, rung, dict(self.secrets)), **host_env(self.host.vars)}
        spec = UnitSpec(playbook=book.name, rung=rung.name, release=release_id, user=book.serve.user,
                        workdir=workdir(book.serve.user),
                        env_file=self.env_path, argv=argv, env=env, key_file=self.key_path if key else None,
                        stop_timeout=int(book.budgets.stop))
        config: JsonObject = {"playbook": book.name, "rung": rung.name, "flags": flags, "patches": rung.patches,
                              "env": shown_env(env, secret_names(book))}
        return Planned(rung, argv, env, config, render_unit(spec), render_env(spec), key, spec.key_file)

    def env_overrides(self, rungs: list[Rung]) -> list[str]:
        """A line for each variable of the host's vars.env that replaces another value the playbook's serve.env
        or a rung's env sets (docs/playbooks.md#environment-who-wins): said, where it was only a diff line; and
        each variable of the defaults' or a group's vars.env that a later level's replaced whole (dropped unsaid)."""
        mine, book = host_env(self.host.vars), self.book
        secret = secret_names(book)
        lines = []
        for name, value in mine.items():
            theirs = [(scope, env[name]) for scope, env in (("serve.env", book.serve.env),
                      *((f"rung {r.name}'s env", r.env) for r in rungs)) if name in env and env[name] != value]
            if theirs:
                shown = shown_env({name: value}, secret)[name]
                over = ", ".join(scope if is_secret_name(name, secret) or not isinstance(was, str) else
                                 f"{scope} {was!r}" for scope, was in theirs)
                lines.append(f"env {name}={shown!r} from the inventory's vars.env of {self.host.name}, over {over}")
        lines += [f"env {dropped} of the inventory's vars.env is not set on {self.host.name}: a later level's vars.env "
                  "(its group's, its own) replaces it whole (docs/playbooks.md#environment-who-wins)"
                  for dropped in self.host.env_replaced]
        origin = self.origin
        for key, given, wins in (("unit", origin.unit, book.serve.unit), ("venv", origin.venv, book.serve.venv)):
            if wins is not None and wins != given and key in origin.written:  # the playbook's serve: wins
                lines.append(f"{key} {wins} from the playbook's serve.{key}, over the inventory's {key} {given} of "
                             f"{origin.name} (docs/playbooks.md#serve)")
        return lines

    def eligible(self, facts: HostFacts, say: Progress) -> list[Rung]:
        """The ladder's rungs whose `when:` this host meets, in order."""
        rungs = []
        for rung in self.book.ladder:
            why = rung.when.failed(facts)
            if why:
                say(f"rung {rung.name}: not for this host ({why})")
            else:
                rungs.append(rung)
        return rungs

    # ------------------------------------------------------------------ what the host has now
    def key_unchanged(self, conn: Connection) -> bool:
        """The host's key file holds the key this run was given (a new key is a new release)."""
        key = self.secrets.get(API_KEY)
        return key is None or read_file(conn, self.host, self.key_path) == key.encode()

    def healthy(self, conn: Connection) -> bool:
        state = unit_state(conn, self.host, self.unit)
        return (state.get("ActiveState") == "active"
                and health_check(conn, self.host, self.book)[0] == Outcome.READY)


def with_pins(conn: Connection, serve: Serving, say: Progress) -> tuple[Serving, venvs.Venv]:
    """The venv of the playbook's pins, built when the host has none (nothing stopped; VenvError with one line
    otherwise), and the Serving that serves, probes, patches and benchmarks in it."""
    venv = venvs.ensure(conn, serve.origin, serve.book.packages, say, serve.lock)
    return serve.in_venv(venv.path), venv


def prune_venvs(conn: Connection, host: Host, say: Progress) -> None:
    """Venvs no kept release names are dropped; the release stands whatever happens here."""
    try:
        if dropped := venvs.prune(conn, host):
            say(f"pruned venvs no release refers to: {', '.join(dropped)}")
    except FleetError as exc:
        say(f"pruning venvs failed (the release stands): {exc}")
