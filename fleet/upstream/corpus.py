"""The upstream corpus: real sglang and flashinfer-python wheels, fetched once with pip and kept unpacked.

The patch sets and the audit are checked against these files, never against the sandbox's look-alikes.
Each release lives in `<cache>/<dist>/<version>/` (default cache `~/.cache/fleet/upstream`, or
`$FLEET_UPSTREAM_CACHE`): only the text files the audit and the patch sets read (KEEP) and the wheel's
METADATA, plus `release.json` with the wheel's name, size and sha256. A wheel is accepted only when its
sha256 equals the one the registry's index (PEP 691 JSON) lists for that file name.

Which releases: playbooks/upstream/matrix.yaml (`Matrix`).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from fleet import yamlfile
from fleet.errors import FleetError, InputError
from fleet.progress import Progress, quiet, ticking
from fleet.secretref import without_userinfo
from fleet.site import SHIPPED
from fleet.upstream import pins as pinning

MATRIX = SHIPPED / "playbooks" / "upstream" / "matrix.yaml"  # shipped, whatever the working folder
KEEP = (".py", ".cu", ".cuh", ".h", ".hpp", ".inl", ".cc", ".cpp")
DEFAULT_INDEX = "https://pypi.org/simple"
IMPORT_NAME = {"sglang": "sglang", "flashinfer-python": "flashinfer"}
# The controller's PIP_* that fleet's pip download honours: which indexes, and how to reach them; no other
PIP_KEEP = frozenset({"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_CERT", "PIP_CLIENT_CERT",
                      "PIP_PROXY", "PIP_TIMEOUT", "PIP_RETRIES", "PIP_CACHE_DIR", "PIP_NO_CACHE_DIR",
                      "PIP_KEYRING_PROVIDER"})


def cache_dir() -> Path:
    return Path(os.environ.get("FLEET_UPSTREAM_CACHE") or "~/.cache/fleet/upstream").expanduser()


class Matrix(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    platform: str
    python: str
    sglang: dict[str, str]  # sglang version -> the flashinfer-python its wheel pins
    flashinfer_extra: list[str]

    def pairs(self) -> list[tuple[str, str]]:
        """(sglang, flashinfer-python) for each sglang release: its pin, then each extra flashinfer."""
        out: list[tuple[str, str]] = []
        for sg, pin in self.sglang.items():
            for fi in dict.fromkeys([pin, *self.flashinfer_extra]):
                out.append((sg, fi))
        return out

    def releases(self) -> list[tuple[str, str]]:
        fis = dict.fromkeys([*self.sglang.values(), *self.flashinfer_extra])
        return [("sglang", v) for v in self.sglang] + [("flashinfer-python", v) for v in fis]


def load_matrix(path: Path = MATRIX) -> Matrix:
    return yamlfile.load(path).parse(Matrix)


@dataclass(frozen=True)
class UpstreamRelease:
    """One released wheel of sglang or flashinfer-python in the local corpus (release.json), unpacked."""

    dist: str
    version: str
    root: str  # the unpacked tree (site-packages layout)
    wheel: str
    sha256: str
    wheel_bytes: int
    files: int
    bytes: int
    fetched_s: float = 0.0

    def package(self, import_name: str | None = None) -> Path:
        """The package folder, as it would sit in site-packages (e.g. <root>/flashinfer)."""
        return Path(self.root) / (import_name or IMPORT_NAME.get(self.dist, self.dist.replace("-", "_")))


def _folder(cache: Path, dist: str, version: str) -> Path:
    return cache / dist / version


def tree(release: UpstreamRelease, cache: Path | None = None) -> Path:
    """The release's unpacked tree where the cache is now: release.json's `root` names the machine's that
    fetched it (a copied or moved cache keeps the old path), so only its part under <dist>/<version> counts."""
    folder = _folder(cache or cache_dir(), release.dist, release.version)
    parts = Path(release.root).parts
    for i in range(len(parts) - 1, 0, -1):
        if parts[i - 1:i + 1] == (release.dist, release.version) and ".." not in parts[i + 1:]:
            return folder.joinpath(*parts[i + 1:])
    return folder


def cached(dist: str, version: str, cache: Path | None = None) -> UpstreamRelease | None:
    meta = _folder(cache or cache_dir(), dist, version) / "release.json"
    if not meta.is_file():
        return None
    return UpstreamRelease(**json.loads(meta.read_text()))


def require(dist: str, version: str, cache: Path | None = None) -> UpstreamRelease:
    """A release that must already be in the cache (tests and the offline audit read it)."""
    rel = cached(dist, version, cache)
    if rel is None:
        raise InputError(f"{dist} {version} is not in the upstream cache {cache or cache_dir()}: "
                         f"run `inv upstream` (or `inv upstream --sglang X --flashinfer Y`) first")
    return rel


def metadata(dist: str, version: str, cache: Path | None = None) -> str | None:
    """The wheel's METADATA as the cache keeps it, read where the cache is now (a cache copied from another
    machine keeps the other machine's `root` in release.json); None when it has none."""
    found = sorted(_folder(cache or cache_dir(), dist, version).glob("*.dist-info/METADATA"))
    return found[0].read_text(encoding="utf-8", errors="replace") if found else None


def check_pins(pins: dict[str, str], source: str = "the playbook", cache: Path | None = None,
               matrix: Matrix | None = None) -> list[tuple[str, str]]:
    """(distribution, one line) for each pin the others' Requires-Dist refuse, read offline from the corpus,
    and for each pinned release of the corpus's kind (sglang, flashinfer-python) it does not hold: a version
    that was never released is refused by `inv upstream` when it fetches it."""
    matrix = matrix or load_matrix()
    found: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for dist, version in sorted(pins.items()):
        if dist not in IMPORT_NAME:
            continue
        try:
            have = cached(dist, version, cache) is not None
            text = metadata(dist, version, cache) if have else None
        except (OSError, ValueError, TypeError):  # a torn release.json, an unreadable folder: as if it had none
            have, text = True, None
        if text is None:
            fetch = f"`inv upstream {'--sglang' if dist == 'sglang' else '--flashinfer'} {version}`"
            where = _folder(cache or cache_dir(), dist, version)
            problems.append((dist, f"{dist} {version} is not in the upstream cache {cache or cache_dir()}, so its "
                                   f"Requires-Dist cannot be checked: fetch it with {fetch}" if not have else
                                   f"{dist} {version}: {where} holds no METADATA, so its Requires-Dist cannot be "
                                   f"checked: remove that folder and fetch it again with {fetch}"))
            continue
        found[dist] = text
    conflicts = pinning.conflicts(pins, found, matrix.python, source=source)
    wrong = {dist for dist, _ in conflicts}  # a pin known to be wrong needs no fetch to say so
    return [p for p in problems if p[0] not in wrong] + conflicts


def index_url() -> str:
    return (os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX).rstrip("/")


def extra_index_urls() -> list[str]:
    """The controller's PIP_EXTRA_INDEX_URL: pip asks these too (space-separated, as pip reads it)."""
    return os.environ.get("PIP_EXTRA_INDEX_URL", "").split()


def shown_index() -> str:
    """The indexes pip is given, as fleet may say them: a URL's password never (user:***@)."""
    return without_userinfo(" ".join([index_url(), *(f"+ {u}" for u in extra_index_urls())]))


def pip_env() -> dict[str, str]:
    """The environment of fleet's `pip download`: the index (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL: never on pip's
    command line, which every user of the controller reads in ps) and how to reach it (PIP_KEEP); no pip config
    file and no other PIP_* of the controller (PIP_NO_INDEX, PIP_FIND_LINKS, PIP_PLATFORM, ... would change
    silently what is fetched, or from where, against what fleet says)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in PIP_KEEP}
    env.update(PIP_INDEX_URL=index_url(), PIP_CONFIG_FILE=os.devnull)
    return env


def registry_sha256(dist: str, filename: str, index: str | None = None) -> str:
    """The sha256 the registry's simple index (PEP 691 JSON) lists for one file of `dist`."""
    url = f"{index or index_url()}/{dist}/"
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            doc = json.load(resp)
    except (OSError, ValueError) as exc:
        raise FleetError(without_userinfo(f"cannot read the registry index {url}: {exc}")) from None
    for f in doc.get("files", []):
        if f.get("filename") == filename and f.get("hashes", {}).get("sha256"):
            return str(f["hashes"]["sha256"])
    raise FleetError(without_userinfo(f"the registry index {url} lists no sha256 for {filename}"))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


DOWNLOAD_S = 900  # pip's download of one release at most


def _pip_download(dist: str, version: str, dest: Path, python: str, platform: str) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
           python, "--platform", platform, "--disable-pip-version-check", "-q", "-d", str(dest), f"{dist}=={version}"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_S, env=pip_env(),
                         stdin=subprocess.DEVNULL)
    wheels = sorted(dest.glob("*.whl"))
    if res.returncode != 0 or len(wheels) != 1:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise FleetError(without_userinfo(f"pip download {dist}=={version} failed (exit {res.returncode}): {tail[0]}"))
    return wheels[0]


def _unpack(wheel: Path, into: Path) -> tuple[int, int]:
    files = size = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            keep = name.endswith(KEEP) or (name.endswith(".dist-info/METADATA") and name.count("/") == 1)
            if info.is_dir() or not keep or name.startswith("/") or ".." in name.split("/"):
                continue
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            files += 1
            size += info.file_size
    return files, size


def fetch(dist: str, version: str, matrix: Matrix, cache: Path | None = None, index: str | None = None,
          download: Callable[[str, str, Path, str, str], Path] = _pip_download, say: Progress = quiet
          ) -> UpstreamRelease:
    """The release from the cache, else downloaded (`download`: with pip, _pip_download; `say` hears where the
    download stands, against its DOWNLOAD_S), checked against the registry, unpacked."""
    cache = cache or cache_dir()
    have = cached(dist, version, cache)
    if have is not None:
        return have
    folder = _folder(cache, dist, version)
    folder.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{version}.") as tmp:
        with ticking(say, f"fetch {dist}=={version}", DOWNLOAD_S):
            wheel = download(dist, version, Path(tmp) / "wheel", matrix.python, matrix.platform)
        got, want = _sha256(wheel), registry_sha256(dist, wheel.name, index)
        if got != want:
            raise FleetError(f"{wheel.name}: sha256 {got} differs from the registry's {want}: refusing it")
        tree = Path(tmp) / "tree"
        files, size = _unpack(wheel, tree)
        rel = UpstreamRelease(dist, version, str(folder), wheel.name, got, wheel.stat().st_size, files, size,
                      round(time.monotonic() - start, 2))
        (tree / "release.json").write_text(json.dumps(asdict(rel), indent=1))
        if folder.exists():
            shutil.rmtree(folder)
        tree.rename(folder)
    return rel


def fetch_all(matrix: Matrix, wanted: list[tuple[str, str]] | None = None, cache: Path | None = None,
              workers: int = 4, say: Progress = quiet,
              download: Callable[[str, str, Path, str, str], Path] = _pip_download) -> list[UpstreamRelease]:
    """Every release of the matrix (or `wanted`), four downloads at a time; the first failure raises. Each one not
    in the cache is said as it starts and ends, and while any goes on, where the fetch stands (it was silent: a
    stalled index, or a 900 MB wheel, left `inv upstream` without a word for minutes)."""
    todo = wanted or matrix.releases()
    missing = [dv for dv in todo if cached(dv[0], dv[1], cache) is None]

    def one(dv: tuple[str, str]) -> UpstreamRelease:
        if dv not in missing:
            return fetch(dv[0], dv[1], matrix, cache, download=download)
        say(f"fetching {dv[0]}=={dv[1]} from {shown_index()} (not in the cache {cache or cache_dir()})")
        rel = fetch(dv[0], dv[1], matrix, cache, download=download)
        say(f"fetched {dv[0]}=={dv[1]}: {rel.files} files in {rel.fetched_s:.0f} s")
        return rel
    with ticking(say if missing else quiet, f"fetch of {len(missing)} release(s)", DOWNLOAD_S), \
            concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, todo))
