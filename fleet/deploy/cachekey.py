"""The key under which a host's compile and tune caches may be shared (issue 49): everything that makes a
compiled kernel or a tuned tactic valid on another host. Pure.

Two hosts share caches only when every part agrees: the GPU (SM and name: flashinfer's autotuner checks the
device name), the driver, torch's CUDA, every installed package's version, each applied patch set's digest (the
edits it made: a patch set that changes kernels changes the key, so no kernel compiled from other sources is
ever placed), the launch flags and environment that change kernels (playbooks/upstream/caches.yaml), and the
venv's folder (flashinfer's build.ninja names it), and the cache folders (a stored tar names them: a host whose
folders differ, another home or cache variable, refuses it whole). docs/FACTS.md section 8 says why each is there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from fleet.host.facts import HostFacts
from fleet.patches.sets import PatchSet
from fleet.upstream.caches import KernelInputs, kernel_inputs

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class CacheKey:
    sm: str
    gpu: str
    driver: str
    cuda: str
    packages: Pairs  # (name, version), sorted
    patches: Pairs  # (patch set, digest of its applied edits), sorted
    flags: Pairs  # (flag, value) of the kernel flags given, sorted; "" for a switch
    env: Pairs  # (variable, value) of the kernel variables set, sorted
    venv: str
    folders: tuple[str, ...] = ()  # the cache folders, sorted: a stored tar names them (another home is another key)
    user: str = "root"  # the server's (serve.user): what one user's server compiled never starts another's

    @property
    def digest(self) -> str:
        """sha256 of the key's canonical JSON: the store's folder name."""
        text = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def differences(self, other: CacheKey) -> tuple[str, ...]:
        """The parts in which two keys differ, by name (sm, gpu, packages, patches, ...)."""
        mine, theirs = asdict(self), asdict(other)
        return tuple(k for k in mine if mine[k] != theirs[k])

    def to_json(self) -> dict[str, object]:
        return {k: v if not isinstance(v, tuple) else list(v) if k == "folders" else [list(p) for p in v]
                for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: object) -> CacheKey:
        """A key read back from a store's manifest; ValueError for anything else."""
        if not isinstance(data, dict) or set(data) != set(cls.__dataclass_fields__):  # one without `user`: none
            raise ValueError("not a cache key")
        out: dict[str, object] = {}
        for name, value in data.items():
            if isinstance(value, str):
                out[name] = value
            elif name == "folders" and isinstance(value, list) and all(isinstance(x, str) for x in value):
                out[name] = tuple(value)
            elif isinstance(value, list) and all(
                    isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value):
                out[name] = tuple((p[0], p[1]) for p in value)
            else:
                raise ValueError(f"cache key field {name!r}: {value!r}")
        key = cls(**out)  # type: ignore[arg-type]
        if any(not isinstance(getattr(key, f), tuple) for f in ("packages", "patches", "flags", "env", "folders")):
            raise ValueError("cache key: packages, patches, flags and env are lists of pairs, folders a list")
        return key


@dataclass(frozen=True)
class NoKey:
    """Why a host gets no key (its caches are neither shared nor given others')."""

    reason: str


def patch_digest(patch: PatchSet, versions: Mapping[str, str | None]) -> str:
    """sha256 of the edits a patch set makes for these installed versions (distribution -> version)."""
    edits = [e.model_dump(mode="json") for e in patch.select(dict(versions)).edits]
    text = json.dumps({"name": patch.name, "edits": edits}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def kernel_flags(argv: Sequence[str], names: frozenset[str]) -> Pairs:
    """The kernel flags of a launch command line and their values ("" for a switch); `--flag=value` too."""
    out: dict[str, str] = {}
    args = list(argv)
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name not in names:
            continue
        if eq:
            out[name] = value
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[name] = args[i + 1]
        else:
            out[name] = ""
    return tuple(sorted(out.items()))


def key_for(facts: HostFacts, patches: Pairs, argv: Sequence[str], env: Mapping[str, str], venv: str,
            inputs: KernelInputs | None = None, folders: Sequence[str] = (), user: str = "root") -> CacheKey | NoKey:
    """The key of a host about to serve `argv` with `env` from `venv` as `user`, its patch sets applied (name,
    digest), its caches in `folders`."""
    inputs = kernel_inputs() if inputs is None else inputs
    if not facts.ok or not facts.gpus:
        return NoKey("no GPU facts")
    if not facts.gpus_agree:
        return NoKey("its GPUs differ")
    gpu = facts.gpus[0]
    if gpu.sm is None or not gpu.name:
        return NoKey("the GPU's SM or name is unknown")
    if not facts.driver_version or not facts.torch_cuda:
        return NoKey("the driver's version or torch's CUDA is unknown")
    packages = {n: p.version for n, p in facts.packages.items()}
    if "sglang" not in packages or any(v is None for v in packages.values()):
        return NoKey("a package's version is unknown")
    return CacheKey(
        sm=str(gpu.sm), gpu=gpu.name, driver=facts.driver_version, cuda=facts.torch_cuda,
        packages=tuple(sorted((n, str(v)) for n, v in packages.items())),
        patches=tuple(sorted(patches)),
        flags=kernel_flags(argv, inputs.flags),
        env=tuple(sorted((k, v) for k, v in env.items() if k in inputs.env)),
        venv=venv, folders=tuple(sorted(folders)), user=user or "root")
