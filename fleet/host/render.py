"""Rendering the systemd unit and its environment file from templates/ (pure: data in, text out)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import jinja2

from fleet.host import programs as hostside

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
API_KEY = "api-key"  # the server's API key: fleet's name for the secret, and the systemd credential that holds it
LAUNCHER = "/var/lib/fleet/bin/fleet-launch"  # fleet/host/programs/launch.py on the host: hands the key over in-process
_PLAIN = re.compile(r"^[A-Za-z0-9_./:=,+@%$-]+$")  # tested after % and $ are doubled

# Emitted into every unit, and why. Never PrivateDevices / DevicePolicy=closed (GPU device nodes),
# MemoryDenyWriteExecute (JIT-compiled kernels) or ProtectHome (venvs and caches live under /root).
HARDENING = {
    "unit": [
        "StartLimitIntervalSec=600",  # a crash loop stops after StartLimitBurst restarts
        "StartLimitBurst=3",
    ],
    "service": [
        "Restart=on-failure",
        "RestartSec=30",  # long enough for fleet to stop a failed attempt before systemd retries it
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "LimitNOFILE=1048576",  # many requests, many sockets
        "LimitMEMLOCK=infinity",  # NCCL and CUDA IPC pin host memory
    ],
}
FORBIDDEN_HARDENING = ("PrivateDevices", "DevicePolicy=closed", "MemoryDenyWriteExecute", "ProtectHome")


def unit_file(unit: str) -> str:
    """Where fleet installs a unit's file."""
    return f"/etc/systemd/system/{unit}.service"


def unit_of_files(files: Iterable[str]) -> str | None:
    """The unit whose file a release's manifest lists (a `before:` copy aside): the one its deploy installed, a
    playbook's serve.unit where it won over the inventory's `unit`; None where it lists none."""
    found = (p[len("/etc/systemd/system/"):-len(".service")] for p in files
             if p.startswith("/etc/systemd/system/") and p.endswith(".service") and p.count("/") == 4)
    return next(found, None)


def env_file(unit: str) -> str:
    """Where fleet installs a unit's environment file (0600: it may hold the API key)."""
    return f"/etc/fleet/{unit}.env"


def key_file(unit: str) -> str:
    """Where fleet installs a unit's API key (0600, root's): `LoadCredential=` hands it to the server."""
    return f"/etc/fleet/{unit}.key"


def launcher_text() -> str:
    """The launcher fleet installs at LAUNCHER (fleet/host/programs/launch.py)."""
    return hostside.text("launch.py")


def server_argv(python: str, module: str, args: list[str], keyed: bool) -> list[str]:
    """How a unit starts a Python server module: `python -m MODULE ARGS`, or with `keyed` through fleet's
    launcher, which reads the unit's API key credential and adds `--api-key KEY` inside the process, so the
    key is in no command line, no environment and (masked) no journal line."""
    if keyed:
        return [python, LAUNCHER, API_KEY, "flag:api-key", module, *args]
    return [python, "-m", module, *args]


class RenderError(ValueError):
    pass


def systemd_quote(arg: str) -> str:
    """One ExecStart word, quoted by systemd's rules (not a shell's): %, $ escaped, quotes when needed."""
    if any(c in arg for c in "\n\r\0"):
        raise RenderError(f"argument {arg!r} contains a newline or NUL")
    text = arg.replace("%", "%%").replace("$", "$$")
    if _PLAIN.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def envfile_quote(value: str) -> str:
    if any(c in value for c in "\n\r\0"):
        raise RenderError("environment values must not contain newlines or NUL")
    return '"' + re.sub(r'([\\"$`])', r"\\\1", value) + '"'


def exec_start(argv: list[str]) -> str:
    """argv quoted for ExecStart, each word literal (no $VAR, no % specifier expands)."""
    if not argv or not argv[0].startswith("/"):
        raise RenderError(f"ExecStart must start with an absolute path, got {argv[:1]}")
    return " ".join(systemd_quote(arg) for arg in argv)


def load_credential(key_path: str | None) -> str | None:
    """The unit's `LoadCredential=` value for its API key file, or None without a key."""
    if key_path is None:
        return None
    if not key_path.startswith("/") or any(c.isspace() or c == ":" for c in key_path):
        raise RenderError(f"key file path {key_path!r} cannot be named in LoadCredential=")
    return f"{API_KEY}:{key_path.replace('%', '%%')}"  # specifiers expand there; backslashes are taken as they are


def workdir(user: str) -> str:
    """The unit's WorkingDirectory=: / for root, else the account's own home as the host has it (`~`, systemd's
    User= home; `-`: a service account without one starts in / rather than failing 200/CHDIR), never a guessed
    /home/NAME (useradd -r puts a service user's home elsewhere)."""
    return "/" if user == "root" else "-~"


@dataclass
class UnitSpec:
    playbook: str
    rung: str
    release: str
    user: str
    workdir: str
    env_file: str
    argv: list[str]
    env: dict[str, str]
    key_file: str | None = None  # the API key's file, handed over by LoadCredential= (argv runs the launcher)
    stop_timeout: int = 120


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["envfile_quote"] = envfile_quote
    return env


def render_unit(spec: UnitSpec) -> str:
    return _env().get_template("sglang.service.j2").render(
        playbook=spec.playbook, rung=spec.rung, release=spec.release, user=spec.user, workdir=spec.workdir,
        env_file=spec.env_file, exec_start=exec_start(spec.argv), credential=load_credential(spec.key_file),
        stop_timeout=spec.stop_timeout, hardening=HARDENING,
    )


def render_env(spec: UnitSpec) -> str:
    return _env().get_template("sglang.env.j2").render(env=spec.env, release=spec.release)


def unit_runs(text: str) -> tuple[str, str] | None:
    """(User=, the venv of ExecStart's program) of a unit's text (pure): root where no User= is set; None where
    ExecStart names no program in a venv's bin/."""
    user, program = "root", ""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "User":
            user = value.strip() or "root"
        elif key.strip() == "ExecStart":
            try:
                program = (shlex.split(value) or [""])[0].lstrip("@-:+!").replace("%%", "%")  # systemd_quote's
            except ValueError:
                program = ""
    venv = program.rsplit("/bin/", 1)[0] if program.startswith("/") and "/bin/" in program else ""
    return (user, venv) if venv else None


def env_file_values(text: str) -> dict[str, str]:
    """An env file as fleet renders it (KEY="value", `\\`, `"`, `$` and backquote escaped: render.envfile_quote),
    read back (pure)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            out[key.strip()] = value
    return out


def unit_environment(text: str) -> str:
    """The unit's Environment= assignments (systemd's quoting, read as shlex does), as env file lines (pure); an
    empty Environment= drops those before it, as systemd does."""
    lines: list[str] = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() != "Environment":
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            words = value.split()
        if not words:
            lines = []
        lines += [w for w in words if "=" in w]
    return "".join(line + "\n" for line in lines)


def environment_files(text: str) -> list[str]:
    """The files the unit's EnvironmentFile= lines name, in order (pure; `-`: optional); an empty one drops those
    before it."""
    found: list[str] = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "EnvironmentFile":
            path = value.strip().removeprefix("-")
            found = [*found, path] if path else []
    return found
