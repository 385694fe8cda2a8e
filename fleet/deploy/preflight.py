"""Preflight: what fleet checks before it changes anything on a host, each check one command (pure where it
can be). A rung that fails a check is a PREFLIGHT attempt; the host is left as it was."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from fabric import Connection

from fleet.deploy.results import Attempt
from fleet.host.facts import HostFacts, known_bad
from fleet.host.render import env_file_values, unit_runs
from fleet.host.serverchecks import VenvRun, launch_help, model_check, port_users, venv_run
from fleet.host.service import GpuApp, can_import, foreign_holders, gpu_holders
from fleet.host.sysinfo import PACKAGE_DIRS
from fleet.inventory import Host
from fleet.logs import redact
from fleet.outcomes import Outcome
from fleet.patches import engine as patches
from fleet.patches import plan as patchplan
from fleet.patches import sets as patchsets
from fleet.playbook import FlagValue, Playbook, Rung, host_env, merged_flags, sglang_version
from fleet.progress import Progress
from fleet.upstream import flags as sglang_cli
from fleet.upstream import pins

MIN_FREE_KIB = 2 * 2**20  # logs, JIT builds and caches need room; a full disk fails a start halfway


def host_problems(facts: HostFacts) -> list[str]:
    """What makes any start fail on this host, from the probe alone: a torch without the GPUs' arch, or
    too little disk where the venv and the flashinfer cache live."""
    problems = [w for w in known_bad(facts) if w.startswith("torch was not built for SM")]
    for key in ("root", "venv", "flashinfer_cache"):
        disk = facts.disk.get(key)
        if disk and disk.avail_kib is not None and disk.avail_kib < MIN_FREE_KIB:
            problems.append(f"only {disk.avail_kib // 1024} MiB free on {disk.mount or disk.path} ({key}); "
                            f"need {MIN_FREE_KIB // 2**20} GiB")
    return problems


def known_flags(conn: Connection, host: Host, venv: str) -> set[str] | None:
    res = launch_help(conn, host, venv)
    flags = set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", res))
    return flags or None


# What a unit's environment has its python, the loader or the JIT compilers take code from, and how each splits
LOADS = {"PYTHONPATH": ":", "PYTHONHOME": ":", "PYTHONUSERBASE": "", "LD_PRELOAD": r"[:\s]+",
         "LD_LIBRARY_PATH": "[:;]", "LD_AUDIT": "[:;]", "PATH": ":", "CC": "", "CXX": "", "CUDA_HOME": "",
         "TRITON_CACHE_DIR": "", "TRITON_HOME": "", "TORCH_EXTENSIONS_DIR": "", "SGLANG_CACHE_DIR": "",
         "FLASHINFER_WORKSPACE_BASE": "", "XDG_CACHE_HOME": ""}  # the JIT caches: compiled modules it loads


def loaded(envs: Iterable[Mapping[str, object]]) -> tuple[str, ...]:
    """Every entry the unit's environment gives LOADS (pure), split as python, ld.so or the shell split them: an
    empty entry is "" (the working folder, to python and ld.so), a relative or `$ORIGIN`/`$LIB` one as written."""
    found: list[str] = []
    for env in envs:
        for name, split in LOADS.items():
            value = env.get(name)
            if isinstance(value, str):
                found += re.split(split, value) if split else [value]
    return tuple(dict.fromkeys(found))


def unclear(envs: Iterable[Mapping[str, object]]) -> str | None:
    """Why fleet cannot tell who may change what the unit loads (pure): an entry of LOADS that is not a plain
    absolute path (relative or empty: the working folder; a `$` token ld.so expands), None where each is one."""
    for env in envs:
        for name, split in LOADS.items():
            value = env.get(name)
            entries = (re.split(split, value) if split else [value]) if isinstance(value, str) else []
            odd = next((p for p in entries if not p.startswith("/") or "$" in p), None)
            if odd is not None:
                return (f"env {name} names {odd!r}: a relative, empty or $-token entry leads where fleet cannot "
                        "tell who may change what the unit loads from it; write plain absolute paths")
    return None


def venv_problem(conn: Connection, host: Host, book: Playbook, venv: str) -> str | None:
    """The venv the unit runs from must be there (a playbook that pins `packages:` has it built: fleet.host.venvs),
    and the unit's user must be one whose running it gives no one else a way in (venv_verdict), with what every
    rung's environment has it load (serve.env and the host's; a rung's own: rung_env_problem)."""
    envs: list[Mapping[str, object]] = [book.serve.env, host_env(host.vars)]
    if why := unclear(envs):
        return why
    return _judged(conn, host, book, venv, loaded(envs))


def _judged(conn: Connection, host: Host, book: Playbook, venv: str, also: tuple[str, ...]) -> str | None:
    """venv_verdict of the venv with `also`; a venv the deploy builds (`packages:`) is judged once built."""
    user = book.serve.user
    found = venv_run(conn, host, venv, user, also)
    if not found.exists and book.packages:
        return None if found.user_uid is not None else venv_verdict(found, venv, user, also)
    return venv_verdict(found, venv, user, also)


def rung_env_problem(conn: Connection, host: Host, book: Playbook, venv: str, rung: Rung) -> str | None:
    """venv_problem's rule for what the rung's own env adds to what the unit loads (None where it adds nothing):
    a rung whose env names a folder another user may change is refused, the other rungs go on."""
    base: list[Mapping[str, object]] = [book.serve.env, host_env(host.vars)]
    if why := unclear([rung.env]):
        return why
    also = loaded([*base, rung.env])
    if set(also) <= set(loaded(base)):
        return None
    return _judged(conn, host, book, venv, also)


def router_venv_problem(conn: Connection, host: Host, python: str, user: str) -> str | None:
    """The router's unit runs `python` as `user` (serve.user): venv_verdict's rule, then sglang_router must import
    (as the venv's owner)."""
    venv = python.rsplit("/bin/", 1)[0]
    found = venv_run(conn, host, venv, user)
    if found.exists and (problem := venv_verdict(found, venv, user)):
        return problem
    return None if can_import(conn, host, python, "sglang_router") else \
        f"sglang_router is not importable by {python} (pip install sglang-router)"


def unit_owner_problem(conn: Connection, host: Host, unit_text: str, env_text: str = "") -> str | None:
    """venv_verdict's refusal for a unit as written (a release's, put back by a rollback or a fall-back) with its
    env file, None where it may start: the owners may have changed since that release was made."""
    runs = unit_runs(unit_text)
    if runs is None:
        return None
    user, venv = runs
    envs = [env_file_values(env_text)]
    if why := unclear(envs):
        return why
    also = loaded(envs)
    return venv_verdict(venv_run(conn, host, venv, user, also), venv, user, also)


def venv_verdict(found: VenvRun, venv: str, user: str, also: tuple[str, ...] = ()) -> str | None:
    """Why the unit must not start from this venv as `user` (pure), None where it may: a venv's code runs as its
    single owner or as root's venv. Refused: no such user on the host (systemd would fail the start: status
    217/USER); no bin/python; a venv others may change too (owner.py's rule); a venv whose owner is another user
    than the unit's: a root unit (serve.user root, the default) would run that user's code as root at every
    start, another user's unit would run it as that user. `also`: what the unit's environment has it load, judged
    with the venv (LOADS)."""
    where = venv.rstrip("/") or "/"
    what = f"venv {where}" + (f" with {', '.join(also[:3])}{' ...' if len(also) > 3 else ''} (its env)" if also else "")
    if found.user_uid is None:
        return (f"serve.user {user!r} has no account on the host: the unit could not start (status 217/USER); "
                "create the user there, or set serve.user to one it has")
    if not found.exists:
        return (f"venv {where} does not exist on the host (no {where}/bin/python): the unit could not start; "
                "create it there, point serve.venv (or the inventory's venv) at one, or pin `packages:` in the "
                "playbook for the deploy to build it")
    if found.owner is None:
        return f"{what}: {found.said}"
    if not found.owner:
        return None
    uid = int(found.owner.split(":")[0])
    owner = f"{found.owner_name} (uid {uid})" if found.owner_name else f"uid {uid}"
    if found.user_uid == 0:
        return (f"{what} is {owner}'s, and the unit runs as root (serve.user: {user}): every start would run "
                f"that user's code as root; set serve.user to {found.owner_name or 'its owner'}, or use a venv "
                "root alone may change")
    if uid != found.user_uid:
        return (f"{what} is {owner}'s, and the unit runs as {user}: every start would run that user's code "
                f"as {user} (its API key, model and GPUs); set serve.user to {found.owner_name or 'its owner'}, or "
                f"use a venv root or {user} alone may change")
    return None


def model_problem(conn: Connection, host: Host, path: str) -> str | None:
    """The model folder must have config.json and every shard its index names."""
    out = model_check(conn, host, path)
    return f"model {out}" if out else None


def port_problem(conn: Connection, host: Host, port: int, unit: str) -> str | None:
    """The port must be free or held by our own unit's processes."""
    out = port_users(conn, host, port, unit)
    return f"port {port} is in use by another process: {out[:160]}" if out else None


def gpu_problem(conn: Connection, host: Host, unit: str, facts: HostFacts, env: dict[str, str]) -> str | None:
    """A process that is not the unit's holds a GPU the playbook would use: fleet stops only its own unit's
    processes, so it refuses to start next to (or on top of) another team's job. None when the GPUs are free."""
    return foreign_gpu_problem(gpu_holders(conn, host), unit, facts, env)


def foreign_gpu_problem(holders: list[GpuApp], unit: str, facts: HostFacts, env: dict[str, str]) -> str | None:
    """gpu_problem's judgement (pure): which GPUs the playbook uses (CUDA_VISIBLE_DEVICES by index, else all)
    and who else holds one of them."""
    visible = env.get("CUDA_VISIBLE_DEVICES", "").strip()
    wanted = None
    if visible and all(v.strip().isdigit() for v in visible.split(",")):
        indexes = {int(v) for v in visible.split(",")}
        wanted = {g.pci_bus_id for g in facts.gpus if g.index in indexes and g.pci_bus_id}
    index = {(g.pci_bus_id or "").lower().split(":", 1)[-1]: g.index for g in facts.gpus}
    others = foreign_holders(holders, unit, wanted)
    if not others:
        return None
    def gpu(a: GpuApp) -> str:
        found = index.get((a.bus_id or "").lower().split(":", 1)[-1]) if a.bus_id else None
        return f"GPU {found}" if found is not None else f"GPU {a.bus_id or '?'}"
    return ("a GPU this playbook uses is held by a process that is not the unit's: "
            + "; ".join(f"{gpu(a)}: {redact.line(a.describe())}" for a in others[:4])  # its command line may hold keys
            + (f" (and {len(others) - 4} more)" if len(others) > 4 else "")
            + f"; fleet stops only {unit}'s own processes: stop that one, or give the playbook other GPUs "
              "(serve.env CUDA_VISIBLE_DEVICES)")


def patch_problem(conn: Connection, host: Host, name: str) -> tuple[str | None, list[str]]:
    """Why a rung's patch set cannot apply (None: it can), and the parts of it this host does not need
    (upstream has the fix; the set is not meant for this host), each with its reason."""
    res = patches.check_host(conn, host, patchsets.load_sets([name]))
    return (None if res.ok else (res.error or f"patch set {name} cannot apply")), not_needed_notes(res.sets)


def not_needed_notes(sets: list[patchplan.SetPlan]) -> list[str]:
    """What a host does not need of its rung's sets, and why (pure): a whole set, or parts upstream fixed."""
    notes = []
    for sp in sets:
        if sp.state in (patchplan.NOT_NEEDED, patchplan.NOT_APPLICABLE):
            notes.append(f"patch set {sp.name}: {sp.state}: {sp.reason}")
        else:
            notes += [f"patch set {sp.name}: part not needed: {why}" for why in sp.not_needed]
    return notes


def flag_problems(flags: dict[str, FlagValue], version: str | None, known: set[str] | None,
                  table: sglang_cli.Table) -> tuple[list[str], list[str]]:
    """Why these flags cannot start this host's sglang, and what upstream deprecated among them (pure).
    `known`: the flags its `launch_server --help` lists (None: no answer, then the table judges alone); the
    table words why a flag is missing: removed in which release, and what upstream says to use instead."""
    blocking, deprecated = [], []
    for name in flags:
        missing = (known is not None and f"--{name}" not in known) or (
            known is None and version is not None and table.problem(name, version) is not None)
        if missing:
            why = table.problem(name, version) if version else None
            blocking.append(why or f"--{name} is not in the installed sglang {version or ''}".rstrip())
        elif version and (note := table.deprecated(name, version)):
            deprecated.append(note)
    return blocking, deprecated


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 1


def gpus_needed(flags: dict[str, FlagValue]) -> int:
    """TP x PP x DP, under either spelling of each flag (pure)."""
    return (_int(flags.get("tp-size", flags.get("tensor-parallel-size", 1)))
            * _int(flags.get("pp-size", flags.get("pipeline-parallel-size", 1)))
            * _int(flags.get("dp-size", flags.get("data-parallel-size", 1))))


def pin_drift(book: Playbook, facts: HostFacts, venv: str) -> list[str]:
    """The playbook's `packages:` pins the venv the probe read does not meet (pure)."""
    return pins.unmet(book.packages, {k: p.version for k, p in facts.packages.items()}, venv, set(PACKAGE_DIRS))


def check(conn: Connection, host: Host, book: Playbook, venv: str, unit: str, facts: HostFacts,
          rungs: list[Rung], say: Progress) -> tuple[list[Rung], list[Attempt]]:
    """The rungs that pass every check, and a PREFLIGHT attempt for each one (or the host) that does not."""
    if not facts.ok:
        return [], [Attempt("-", Outcome.PREFLIGHT, f"probe failed: {facts.error}", 0)]
    blocking = host_problems(facts) + pin_drift(book, facts, venv)
    if blocking:
        return [], [Attempt("-", Outcome.PREFLIGHT, "; ".join(blocking), 0)]
    for warning in known_bad(facts):
        say(f"warning: {warning}")
    known = known_flags(conn, host, venv)
    problem = (venv_problem(conn, host, book, venv) or model_problem(conn, host, book.model.path)
               or port_problem(conn, host, book.serve.port, unit)
               or gpu_problem(conn, host, unit, facts,
                           {**{k: v for k, v in book.serve.env.items() if isinstance(v, str)},
                            **host_env(host.vars)}))
    if problem:
        return [], [Attempt("-", Outcome.PREFLIGHT, problem, 0)]
    gpus = len(facts.gpus) * (book.nodes.count if book.nodes else 1)
    version, table = sglang_version(facts), sglang_cli.default_table()
    sets_cache: dict[str, str | None] = {}
    kept, skipped, told = [], [], set()
    for rung in rungs:
        flags = merged_flags(book.flags, rung, version)
        why = None
        unknown, deprecated = flag_problems(flags, version, known, table)
        for note in deprecated:
            if note not in told:
                told.add(note)
                say(f"warning: {note}")
        if unknown:
            why = "; ".join(unknown)
        elif (need := gpus_needed(flags)) > gpus:
            why = f"TP x PP x DP = {need} GPUs, host has {len(facts.gpus)}"
        elif env_why := rung_env_problem(conn, host, book, venv, rung):
            why = env_why
        else:
            for s in rung.patches:
                if s not in sets_cache:
                    sets_cache[s], notes = patch_problem(conn, host, s)
                    for note in notes:
                        say(note)
                if sets_cache[s]:
                    why = sets_cache[s]
                    break
        if why:
            say(f"rung {rung.name}: preflight: {why}")
            skipped.append(Attempt(rung.name, Outcome.PREFLIGHT, why, 0))
        else:
            kept.append(rung)
    return kept, skipped
