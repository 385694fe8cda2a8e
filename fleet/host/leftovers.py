"""What a dead run may have left on a host, found and removed in one round trip each: manifests in a state, a
rollback's mark, the temp files of writes and links that never finished. The meaning of each is the caller's
(fleet.deploy.recovery, fleet.patches.engine)."""

from __future__ import annotations

import shlex

from fabric import Connection

from fleet.host.service import Shell, sh
from fleet.inventory import Host
from fleet.ssh.remote import run


def _grep(root: str, what: str) -> str:
    return f"grep -l {shlex.quote(what)} {shlex.quote(root)}/releases/*/manifest.json 2>/dev/null || true"


def manifests_with(s: Shell, root: str, what: str) -> list[str]:
    """The release manifests under `root` whose text has `what`: only lines of the form grep names them in (a host
    that answers anything else has named none)."""
    folder = f"{root}/releases/"
    return [path for path in s.sh(_grep(root, what)).split()
            if path.startswith(folder) and path.endswith("/manifest.json")
            and path[len(folder):].count("/") == 1 and len(path) > len(folder) + len("/manifest.json")]


def patch_runs_open(conn: Connection, host: Host, backup_root: str) -> bool:
    """Whether a patch run under `backup_root` is still applying or reverting."""
    return bool(run(conn, host, f"grep -lsE '\"status\": \"(applying|reverting)\"' "
                                f"{backup_root}/runs/*/manifest.json").stdout.strip())


def dead_run_marks(conn: Connection, host: Host, root: str, backup_root: str, mark: str) -> list[str]:
    """In one round trip: releases in progress under `root`, patch runs half done under `backup_root`, and `mark`
    when it exists (paths; [] on a clean host)."""
    runs, releases = f"{shlex.quote(backup_root)}/runs/*/manifest.json", _grep(root, '"status": "in-progress"')
    return sh(conn, host, f"{releases}; "
                          f"grep -lsE '\"status\": \"(applying|reverting)\"' {runs}; "
                          f"[ -e {shlex.quote(mark)} ] && echo {shlex.quote(mark)}; true").split()


def drop_temp_command(pairs: list[tuple[str, str]]) -> str:
    """The shell that removes FOLDER/PREFIX* for each pair, files and links (dangling ones too), and prints what it
    removed. Pure."""
    return ("for f in " + " ".join(f"{shlex.quote(d)}/{shlex.quote(p)}*" for d, p in pairs) +
            "; do { [ -e \"$f\" ] || [ -L \"$f\" ]; } && rm -f -- \"$f\" && echo \"$f\"; done; true")


def drop_temps(s: Shell, pairs: list[tuple[str, str]]) -> list[str]:
    """FOLDER/PREFIX* removed for each pair: the paths removed."""
    return s.sh(drop_temp_command(pairs)).split()
