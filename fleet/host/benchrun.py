"""sglang's benchmark on a host in one round trip: a background loop samples `nvidia-smi --query-gpu=...` into a
temp folder while the benchmark runs in the foreground (under `timeout`), then both outputs come back between
markers (fleet.deploy.bench reads them)."""

from __future__ import annotations

import shlex

from fabric import Connection

from fleet.host import programs as hostside
from fleet.inventory import Host
from fleet.ssh.remote import CommandResult, run

SMI_QUERY = "index,power.draw,power.limit,utilization.gpu"
MARK = "@@FLEET-BENCH"
DETAILS = "details.jsonl"  # a relative --output-file lands in the owner's folder $d/w; `details` prints it
DETAILS_READ_S = 60  # the owner's details file read within this (a fifo in its place blocks the reader)


def _for_owner(venv: str, key_path: str | None) -> str:
    """Shell: the temp folder $d stays root's (0711: nothing can be made in it but by root), the benchmark's working
    folder $d/w the venv's owner's (bench_serving runs as that user where it is not root: as_owner.py, the same
    rule asked once more), and $CREDENTIALS_DIRECTORY the key's folder, or for such an owner $d/c, root's, with a
    copy of the key made by root there and then handed over (`chown -h`: the key is root's, 0600; that owner's code
    serves with it already). A venv the rule refuses gets no copy: its benchmark is refused in its own line. Root
    opens nothing by name in the owner's folder (`details` reads it as the owner)."""
    key = shlex.quote(key_path or "")
    return ("chmod 711 \"$d\" && mkdir -m 700 \"$d/w\" || exit 1; "
            f"o=$({hostside.owner_of_venv(venv)} 2>/dev/null) || o=; k={key}; "
            "[ -z \"$k\" ] || export CREDENTIALS_DIRECTORY=\"${k%/*}\"; "
            "[ -z \"$o\" ] || o=\"+${o%:*}:+${o#*:}\"; "  # +: the ids as numbers (chown takes a numeric name first)
            "if [ -n \"$o\" ]; then chown -h -- \"$o\" \"$d/w\" && if [ -n \"$k\" ]; then mkdir -m 711 \"$d/c\" && "
            "(umask 077 && cp -- \"$k\" \"$d/c/${k##*/}\") && chown -h -- \"$o\" \"$d/c/${k##*/}\" && "
            "CREDENTIALS_DIRECTORY=$d/c; fi; fi; ")


def script(bench_cmd: str, timeout_s: float, *, venv: str, interval_s: float = 0.25, details: bool = False,
           key_path: str | None = None) -> str:
    """Sampler in the background, benchmark in the foreground (under `timeout`, in $d/w), then everything printed
    between markers (with `details`, bench_serving's output file DETAILS last, read as the venv's owner)."""
    read_details = f"timeout {DETAILS_READ_S} " + hostside.as_owner(venv, "cat", "--", DETAILS)
    return (
        "d=$(mktemp -d /tmp/fleet-bench.XXXXXX) || exit 1; trap 'rm -rf \"$d\"' EXIT; " + _for_owner(venv, key_path) +
        f"( while :; do echo \"@@ $(date +%s.%N)\"; nvidia-smi --query-gpu={SMI_QUERY} "
        f"--format=csv,noheader,nounits 2>&1; sleep {interval_s}; done ) > \"$d/smi\" 2>&1 & s=$!; "
        + f"cd \"$d/w\" && timeout {int(timeout_s)} {bench_cmd} > \"$d/out\" 2> \"$d/err\"; rc=$?; "
        "kill $s 2>/dev/null; wait $s 2>/dev/null; "
        f"echo '{MARK} rc='$rc; echo '{MARK} out'; cat \"$d/out\"; "
        f"echo '{MARK} err'; tail -c 4000 \"$d/err\"; echo '{MARK} smi'; cat \"$d/smi\""
        + (f"; echo '{MARK} details'; cd \"$d/w\" && {read_details} 2>/dev/null" if details else "")
    )


def run_bench(conn: Connection, host: Host, bench_cmd: str, timeout_s: float, *, venv: str, details: bool = False,
              key_path: str | None = None) -> CommandResult:
    """`script` of `bench_cmd` (of `venv`, with the server's key at `key_path`) on the host, given a minute past the
    benchmark's own timeout to answer."""
    return run(conn, host, script(bench_cmd, timeout_s, details=details, venv=venv, key_path=key_path),
               timeout=timeout_s + 60)
