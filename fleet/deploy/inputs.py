"""A command's inputs, checked before any host is contacted: the playbook (with the rule classes and patch
sets it may name) and its secrets, resolved locally; values never reach the output (the hosts' sudo passwords:
fleet.ssh.become_password)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleet import playbook, secretref, yamlfile
from fleet.deploy import check, fingerprint
from fleet.errors import InputError
from fleet.host.render import API_KEY, RenderError, key_file, load_credential
from fleet.inventory import Host
from fleet.logs import rules as logrules
from fleet.patches import sets as patchsets
from fleet.upstream import wheelhouse


def load_playbook(name: str, checked: bool = True) -> tuple[playbook.Playbook, Path]:
    """The playbook, with everything `inv check` finds (fleet.deploy.check): an error refuses it in one line
    (the first, and how many more). `checked=False`: the schema only (a rollback to what was deployed)."""
    path = playbook.resolve(name)
    if not checked:
        return playbook.load(path, known_classes=known_classes(), known_patches=set(patchsets.available())), path
    result = check_playbook(path)
    unfilled = [p for p in result.warnings if wheelhouse.NO_WHEEL in p.text]  # a deploy cannot build that venv
    refused = wheelhouse.fetch_refused()  # else the wheels are downloaded for the hosts (fleet.multihost.wheels)
    if unfilled and not result.errors and refused:
        more = len(unfilled) - 1
        raise InputError(f"{unfilled[0]}; not downloaded: {refused}"
                         + (f" (and {more} more: inv check --playbook {name})" if more else ""))
    if result.errors or result.book is None:
        more = len(result.errors) - 1
        raise InputError(f"{result.errors[0]}" + (f" (and {more} more: inv check --playbook {name})" if more else ""))
    return result.book, path


def known_classes() -> set[str]:
    return {c.value for c in logrules.LogClass}


def check_playbook(path: Path, hosts: set[str] | None = None, hosts_unread: str | None = None) -> check.Checked:
    """`inv check` of one playbook: the failure classes, patch sets and sglang releases this site knows; each secret
    reference this machine cannot resolve is a warning (a deploy from here refuses it; CI may have none set)."""
    found = check.check(path, known_classes(), set(patchsets.available()), fingerprint.sglang_versions(), hosts,
                        hosts_unread=hosts_unread)
    # a playbook with errors is not loaded: its references read as written, so they come in this round too (they
    # were said only once every error was fixed, and the deploy refused them)
    refs = _refs(found.book) if found.book is not None else _written_refs(path)
    unresolved = [check.Problem(f"{path}: {p} (on this machine: a deploy from here refuses it)", warning=True)
                  for p in (_resolved(*refs)[1] if refs else [])]
    return replace(found, problems=[*found.problems, *unresolved])


def secrets_for(book: playbook.Playbook) -> dict[str, str]:
    """Resolve the playbook's secret references locally (the API key, and env values given as {env: ...} or
    {file: ...}, under playbook.env_secret_key); values never reach the output. Every one that cannot be resolved
    is said at once (the first, and the others after it): a deploy refused them one per run."""
    found, problems = resolved_secrets(book)
    if problems:
        raise InputError(problems[0] + "".join(f"; and {p}" for p in problems[1:]))
    return found


Envs = list[tuple[str, str, dict[str, Any]]]  # (scope, where, env): serve's and each rung's


def resolved_secrets(book: playbook.Playbook) -> tuple[dict[str, str], list[str]]:
    """Each secret reference resolved here, and why each one that cannot be is not (all of them)."""
    return _resolved(*_refs(book))


def _refs(book: playbook.Playbook) -> tuple[str, secretref.SecretRef | None, Envs]:
    rungs = [(r.name, f"ladder.{i}.env", r.env) for i, r in enumerate(book.ladder)]
    return f"playbook {book.name}", book.serve.api_key, [("serve", "serve.env", book.serve.env), *rungs]


def _written_refs(path: Path) -> tuple[str, secretref.SecretRef | None, Envs] | None:
    """The references of a playbook that does not load, as its file writes them (one written wrong left out)."""
    try:
        data = yamlfile.load(path).data
    except InputError:
        return None
    if not isinstance(data, dict):
        return None

    def ref(value: Any) -> secretref.SecretRef | None:
        with suppress(ValidationError):
            return secretref.SecretRef.model_validate(value) if isinstance(value, dict) else None
        return None

    def env(raw: Any) -> dict[str, Any]:
        return {str(k): r for k, v in raw.items() if (r := ref(v))} if isinstance(raw, dict) else {}
    serve: dict[str, Any] = data["serve"] if isinstance(data.get("serve"), dict) else {}
    rungs: list[Any] = data["ladder"] if isinstance(data.get("ladder"), list) else []
    name = data.get("name") if isinstance(data.get("name"), str) else path.stem
    return f"playbook {name}", ref(serve.get("api_key")), [("serve", "serve.env", env(serve.get("env"))), *(
        (str(r.get("name")), f"ladder.{i}.env", env(r.get("env"))) for i, r in enumerate(rungs) if isinstance(r, dict))]


def _resolved(owner: str, ref: secretref.SecretRef | None, envs: Envs) -> tuple[dict[str, str], list[str]]:
    found: dict[str, str] = {}
    problems: list[str] = []

    def take(key: str, resolve: Callable[[], str]) -> None:
        try:
            found[key] = resolve()
        except InputError as exc:
            problems.append(str(exc))

    if ref is not None:
        def api_key(ref: secretref.SecretRef = ref) -> str:
            value = secretref.resolve(ref, owner, "serve.api_key", "key", " (an empty key turns auth off)")
            if any(c.isspace() for c in value):
                raise InputError(f"{owner}: {ref.where('serve.api_key')}: the key has spaces or control characters")
            return value
        take(API_KEY, api_key)
    for scope, where, env in envs:
        for name, val in env.items():
            if isinstance(val, secretref.SecretRef):
                take(playbook.env_secret_key(scope, name), partial(secretref.resolve, val, owner, f"{where}.{name}"))
    return found, problems


def check_units(book: playbook.Playbook, hosts: Sequence[Host]) -> None:
    """What the unit file will need of each host's unit name, checked before any host is contacted (a unit
    like `a:b` cannot name its API key file in LoadCredential=, which render would refuse mid-deploy)."""
    if book.serve.api_key is None:
        return
    for host in hosts:
        unit = book.serve.unit or host.unit
        try:
            load_credential(key_file(unit))
        except RenderError:
            where = f"playbook {book.name}: serve.unit" if book.serve.unit else f"{host.source}: hosts.{host.name}.unit"
            raise InputError(f"{where}: {unit!r} with serve.api_key: the key file {key_file(unit)} cannot be "
                             "named in LoadCredential= (':' or a space); rename the unit") from None
