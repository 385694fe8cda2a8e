"""Rendering the systemd unit and its environment file from templates/ (pure: data in, text out)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
API_KEY_VAR = "FLEET_SGLANG_API_KEY"
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


def env_file(unit: str) -> str:
    """Where fleet installs a unit's environment file (0600: it may hold the API key)."""
    return f"/etc/fleet/{unit}.env"


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


def exec_start(argv: list[str], secret_args: dict[int, str] | None = None) -> str:
    """argv quoted for ExecStart; secret_args maps positions to an env var systemd expands (${VAR})."""
    if not argv or not argv[0].startswith("/"):
        raise RenderError(f"ExecStart must start with an absolute path, got {argv[:1]}")
    words = []
    for i, arg in enumerate(argv):
        words.append("${" + secret_args[i] + "}" if secret_args and i in secret_args else systemd_quote(arg))
    return " ".join(words)


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
    secret_args: dict[int, str] = field(default_factory=dict)
    stop_timeout: int = 120


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["envfile_quote"] = envfile_quote
    return env


def render_unit(spec: UnitSpec) -> str:
    return _env().get_template("sglang.service.j2").render(
        playbook=spec.playbook, rung=spec.rung, release=spec.release, user=spec.user, workdir=spec.workdir,
        env_file=spec.env_file, exec_start=exec_start(spec.argv, spec.secret_args),
        stop_timeout=spec.stop_timeout, hardening=HARDENING,
    )


def render_env(spec: UnitSpec) -> str:
    return _env().get_template("sglang.env.j2").render(env=spec.env, release=spec.release)
