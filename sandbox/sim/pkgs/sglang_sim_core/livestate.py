"""Live GPU state that the stand-in nvidia-smi reports, under ${FLEET_SIM_RUN:-/run/fleet-sim}.

  apps/<pid>   one file per simulated GPU process, one line: `<gpu_index> <used_mib> <process_name>`.
               The stand-in lists the entries whose /proc/<pid> exists (--query-compute-apps) and
               counts their memory in memory.used. A worker killed without cleanup (SIGKILL) leaves
               a file whose pid is gone: ignored by everyone.
  load         `pid <server_pid>` then `<gpu_index> <power_draw_w> <utilization_pct>` per GPU; used for
               power.draw / utilization.gpu while <server_pid> lives, else the profile's idle values.

Both are written atomically (temp file + rename).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sglang_sim_core import env


@dataclass(frozen=True)
class App:
    pid: int
    gpu_index: int
    used_mib: int
    name: str


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def apps_dir() -> Path:
    return env.run_dir() / "apps"


def load_path() -> Path:
    return env.run_dir() / "load"


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie has released its GPU memory)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def write_app(pid: int, gpu_index: int, used_mib: float, name: str) -> None:
    _atomic_write(apps_dir() / str(pid), f"{gpu_index} {int(used_mib)} {name}\n")


def remove_app(pid: int) -> None:
    try:
        (apps_dir() / str(pid)).unlink()
    except FileNotFoundError:
        pass


def live_apps() -> list[App]:
    """Entries whose process still exists (stale files of dead pids are removed on the way)."""
    apps: list[App] = []
    try:
        entries = list(apps_dir().iterdir())
    except FileNotFoundError:
        return apps
    for entry in entries:
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if not pid_alive(pid):
            try:
                entry.unlink()
            except OSError:
                pass
            continue
        try:
            gpu, used, name = entry.read_text().split(maxsplit=2)
            apps.append(App(pid, int(gpu), int(used), name.strip()))
        except (OSError, ValueError):
            continue
    return apps


def used_mib_on(gpu_index: int, exclude: set[int] | None = None) -> list[App]:
    exclude = exclude or set()
    return [a for a in live_apps() if a.gpu_index == gpu_index and a.pid not in exclude]


def write_load(server_pid: int, rows: list[tuple[int, float, float]]) -> None:
    lines = [f"pid {server_pid}"] + [f"{gpu} {power:.2f} {util:.0f}" for gpu, power, util in rows]
    _atomic_write(load_path(), "\n".join(lines) + "\n")


def clear_load(server_pid: int) -> None:
    """Remove the load file if it is ours (the stand-in falls back to the profile's idle values)."""
    path = load_path()
    try:
        first = path.read_text().split("\n", 1)[0].split()
    except OSError:
        return
    if first == ["pid", str(server_pid)]:
        try:
            path.unlink()
        except OSError:
            pass
