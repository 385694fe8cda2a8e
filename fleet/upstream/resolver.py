"""Which wheels a venv of a pin set needs, as pip answers it: pip's own resolver (resolvelib, with backtracking)
over the wheelhouse alone, for one host's Python and platform.

    resolve({"sglang": "0.5.9", "flashinfer-python": "0.6.3"}, Target("3.11"), folder) -> [Wheel, ...]

It runs `pip install --dry-run --report` with `--no-index --find-links <wheelhouse> --only-binary=:all:` and the
host's tags (`--python-version --implementation --abi --platform`, as wheelhouse.download_command); nothing is
installed (`--target` is a folder pip never writes in a dry run; the report goes to a private folder). pip
evaluates markers, and a wheel's own Requires-Python, for the interpreter it runs in, not for `--python-version`:
the changes to pip are those two, made the host's (pins.environment: its full version where it said it) before
pip's own main runs. pip's settings of this
machine (PIP_*, pip.conf) never steer it.

A requirement no wheel there meets: MissingWheel naming it (`fill` downloads it); pins that cannot go
together: WheelhouseError with pip's own lines of why, joined in one. `fill(pins, target)` downloads into the
wheelhouse, one requirement at a time, what the resolve lacks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name
from packaging.version import Version

from fleet.progress import Progress, quiet, ticking
from fleet.upstream import corpus, wheelhouse
from fleet.upstream.pins import canonical, environment
from fleet.upstream.wheelhouse import MissingWheel, Target, Wheel, WheelhouseError

RESOLVE_TIMEOUT_S = 300  # pip over a local folder: seconds, even for torch's closure
# pip's main, run with the host's marker environment (argv[1], JSON) instead of this interpreter's, and the host's
# Python as what a wheel's Requires-Python is held to: `pip install` gives --python-version to its finder (tags, an
# index's data-requires-python) but lets its resolver check each wheel's own Requires-Python against the running
# interpreter (pip 23's RequiresPythonCandidate, given no version by the install command)
_SHIM = ("import json, sys\n"
         "from pip._vendor.packaging import markers\n"
         "from pip._internal.resolution.resolvelib import candidates\n"
         "env = json.loads(sys.argv.pop(1))\n"
         "markers.default_environment = lambda: dict(env)\n"
         "host = tuple(int(p) for p in env['python_full_version'].split('.'))\n"
         "init = candidates.RequiresPythonCandidate.__init__\n"
         "candidates.RequiresPythonCandidate.__init__ = lambda self, version: init(self, host)\n"
         "from pip._internal.cli.main import main\n"
         "sys.exit(main())\n")
_NOT_FOUND = re.compile(r"No matching distribution found for ([^;\s]+)")
_FROM = re.compile(r"satisfies the requirement .*? \(from (?!versions:)([A-Za-z0-9._-]+)")
_DEPENDS = re.compile(r"\s*(\S+) (\S+) depends on (.+)")


def command(pins: dict[str, str], target: Target, folder: Path, dest: str) -> list[str]:
    """pip's arguments (after `pip`): a dry-run install of the pins from the folder alone, for the target."""
    abi = "cp" + target.python.replace(".", "")
    return ["install", "--isolated", "--dry-run", "--ignore-installed", "--report", f"{dest}/report.json",
            "--target", f"{dest}/target",
            "--no-index", "--find-links", str(folder), "--only-binary=:all:", "--disable-pip-version-check",
            "--no-input", "--python-version", target.full or target.python, "--implementation", "cp",
            "--abi", abi, "--abi", "abi3", "--abi", "none", *(a for p in target.platforms() for a in ("--platform", p)),
            *(f"{canonical(d)}=={v}" for d, v in sorted(pins.items()))]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k not in {"PYTHONPATH", "PYTHONHOME"}}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1"}


def why(output: str) -> str:
    """pip's reason in one line: 'sglang 0.5.9 requires torch==2.9.1; ...' from its conflict lines (on its
    output), else its last ERROR line."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    causes = [f"{m[1]} {m[2]} requires {m[3].strip()}" for line in lines if (m := _DEPENDS.fullmatch(line))]
    if causes:
        return "pip finds no set of them that goes together: " + "; ".join(causes)
    errors = [line for line in lines if line.startswith("ERROR:")]
    return wheelhouse.said((errors or lines or ["pip said nothing"])[-1].removeprefix("ERROR: "))


def who(stderr: str, pins: dict[str, str]) -> str:
    """Which distribution required what pip found no wheel of, as pip says it ('sglang 0.5.9' where pinned)."""
    if not (m := _FROM.search(stderr)):
        return "the playbook"
    name = canonical(m[1])
    pinned = {canonical(d): v for d, v in pins.items()}
    return f"{name} {pinned[name]}" if name in pinned else name


def resolve(pins: dict[str, str], target: Target, folder: Path | None = None) -> list[Wheel]:
    """Every wheel a venv of these pins needs on the target's hosts, from the wheelhouse alone, sorted by name."""
    where = folder or wheelhouse.wheelhouse_dir()
    host_env = json.dumps(environment(target.full_version, target.machine))
    with tempfile.TemporaryDirectory(prefix="fleet-resolve-") as dest:
        cmd = [sys.executable, "-c", _SHIM, host_env, *command(pins, target, where, dest)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S,
                                 stdin=subprocess.DEVNULL, env=_env(), cwd=dest)
        except subprocess.TimeoutExpired:
            raise WheelhouseError(f"pip took more than {RESOLVE_TIMEOUT_S}s to resolve {', '.join(pins)}") from None
        if res.returncode != 0:
            if m := _NOT_FOUND.search(res.stderr):
                raise MissingWheel(f"{who(res.stderr, pins)} requires {m[1]}; no wheel in the wheelhouse {where} "
                                   f"has it for {target}", m[1])
            raise WheelhouseError(why(res.stdout + res.stderr))
        try:
            report = (Path(dest) / "report.json").read_text()
        except OSError:
            raise WheelhouseError("pip wrote no report of its resolve") from None
    return parse_report(report, where)


def parse_report(text: str, folder: Path) -> list[Wheel]:
    """The wheels of pip's installation report (JSON), each a file of `folder` (anything else is refused)."""
    try:
        items = json.loads(text)["install"]
    except (ValueError, KeyError, TypeError):
        raise WheelhouseError("pip's report of the resolve is not JSON fleet reads") from None
    out = []
    for item in items:
        url = urlparse(item["download_info"]["url"])
        path = Path(unquote(url.path))
        if url.scheme != "file" or path.parent.resolve() != folder.resolve():
            raise WheelhouseError(f"pip chose {wheelhouse.said(url.geturl())}, which is not in the wheelhouse {folder}")
        meta = item["metadata"]
        out.append(Wheel(folder / path.name, str(canonicalize_name(meta["name"])), Version(meta["version"])))
    return sorted(out, key=lambda w: w.name)


def fill(pins: dict[str, str], target: Target, folder: Path | None = None, say: Progress = quiet,
         run: wheelhouse.Runner = subprocess.run) -> list[str]:
    """Download into the wheelhouse every wheel a venv of these pins lacks for `target`'s host, one requirement at
    a time, saying each on `say`; the file names fetched. MissingWheel (one line: which wheel, for what host, how
    to provide it) when the index cannot be asked, has none, or has none that host installs; a download that
    adds nothing the host installs stops it (never asked again). `run`: how pip downloads (tests: a fake pip)."""
    where = folder or wheelhouse.wheelhouse_dir()
    fetched: list[str] = []
    for _ in range(wheelhouse.MAX_FETCHES):
        try:
            resolve(pins, target, where)
            return fetched
        except MissingWheel as exc:
            why = wheelhouse.fetch_refused()
            if why is None:
                say(f"downloading {exc.requirement} for {target} from {corpus.shown_index()} into {where}")
                try:  # where the download stands is said while it goes on (torch's wheel: minutes)
                    with ticking(say, f"download {exc.requirement}", wheelhouse.FETCH_TIMEOUT_S):
                        fetched += wheelhouse.download(exc.requirement, target, where, run)
                    continue
                except wheelhouse.UnfitWheel as unfit:
                    raise MissingWheel(f"{exc}; {unfit}. Put a wheel of {exc.requirement} that host installs in "
                                       f"{where} (pip wheel {exc.requirement} on one like it), or pin a version the "
                                       "index has one of", exc.requirement) from None
                except (WheelhouseError, OSError) as failed:
                    why = wheelhouse.said(str(failed))
            hint = " ".join(wheelhouse.download_command(exc.requirement, target, "DIR"))
            raise MissingWheel(f"{exc}; {why}. Where there is an index: `{hint}`, then copy DIR's wheels into "
                               f"{where} (or point FLEET_WHEELHOUSE at DIR)", exc.requirement) from None
    raise WheelhouseError(f"more than {wheelhouse.MAX_FETCHES} wheels to download for {', '.join(pins)}: refused")
