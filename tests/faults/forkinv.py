"""A fork server for `inv` (the fault-point harness runs hundreds of them): this process imports invoke, tasks.py
and every fleet module once; each run is a child forked from it, with its own pid (a `kill` fault SIGKILLs that
child alone, and its lock names that pid), running invoke's own program on the argv, environment and working
folder `.venv/bin/inv` would get, stdin closed, stdout and stderr to files. What it saves is the interpreter's
start-up and imports, about 1.5 s a run on a busy machine. Protocol: one JSON request a line on stdin
({"id", "argv", "env", "out", "err"}), one line back (`forkinv: {"id", "rc", "cpu"}`: the exit status, or -signal,
and the CPU seconds the run used, user and system, for the harness's figures)."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PREFIX = "forkinv: "  # its answers' lines (anything else a module printed is passed over)


def _preload() -> object:
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    from invoke.main import program

    import fleet

    importlib.import_module("tasks")
    for mod in pkgutil.walk_packages(fleet.__path__, "fleet."):
        if not mod.name.startswith("fleet.host.programs."):  # programs shipped to hosts, not modules
            importlib.import_module(mod.name)
    from fleet.host import programs

    for name in programs.SCRIPTS:  # read once, here, like the modules
        programs.text(name)
    from fleet.logs import datafiles

    datafiles.problems()  # the shipped log rules, site classes and phases, each loaded once a process (cached):
    return program  # every deploy checks them before a host is contacted (0.24 s a run), and its watcher reads them


def _child(program, req: dict) -> int:
    os.environ.clear()
    os.environ.update(req["env"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        os.dup2(os.open(path, flags, 0o600), fd)
    sys.argv = list(req["argv"])
    try:
        program.run(list(req["argv"]), exit=True)
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        return 1


def serve() -> None:
    program = _preload()
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(program, req)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status, usage = os.wait4(pid, 0)
        rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        cpu = round(usage.ru_utime + usage.ru_stime, 3)
        print(PREFIX + json.dumps({"id": req.get("id"), "rc": rc, "cpu": cpu}), flush=True)


if __name__ == "__main__":
    serve()
