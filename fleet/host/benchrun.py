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
    """Shell: the owner rule asked once (as_owner.py --who: $o the owner's `uid:gid`, empty for root; $r its exit, 77
    and one line in $d/err where it refuses: nothing of the venv runs then). The temp folder $d stays root's (0711:
    nothing can be made in it but by root), the benchmark's working folder $d/w the owner's, and
    $CREDENTIALS_DIRECTORY the key's folder, or for such an owner $d/c, root's, with a copy of the key made by root
    there and then handed over (`chown -h`: the key is root's, 0600; that owner's code serves with it already). A
    venv the rule refuses gets no copy. Root opens nothing by name in the owner's folder (`details` reads it as the
    owner)."""
    key = shlex.quote(key_path or "")
    return ("chmod 711 \"$d\" && mkdir -m 700 \"$d/w\" || exit 1; "
            f"o=$({hostside.owner_of_venv(venv)} 2> \"$d/err\"); r=$?; k={key}; "
            "[ -z \"$k\" ] || export CREDENTIALS_DIRECTORY=\"${k%/*}\"; "
            "[ \"$r\" != 0 ] || [ -z \"$o\" ] || { c=\"+${o%:*}:+${o#*:}\"; "  # +: ids as numbers, not names
            "chown -h -- \"$c\" \"$d/w\" && if [ -n \"$k\" ]; then mkdir -m 711 \"$d/c\" && "
            "(umask 077 && cp -- \"$k\" \"$d/c/${k##*/}\") && chown -h -- \"$c\" \"$d/c/${k##*/}\" && "
            "CREDENTIALS_DIRECTORY=$d/c; fi; }; ")


def script(bench_cmd: str, timeout_s: float, *, venv: str, interval_s: float = 0.25, details: bool = False,
           key_path: str | None = None) -> str:
    """Sampler in the background, `bench_cmd` (shell words that run the venv's code) in the foreground as the venv's
    owner (under `timeout`, in $d/w), then everything printed between markers (with `details`, bench_serving's
    output file DETAILS last, read as that owner). Where the rule refuses the venv: exit 77 and its line, as
    as_owner.py says it."""
    as_owner = hostside.as_decided("\"$o\"", bench_cmd)
    read_details = f"timeout {DETAILS_READ_S} " + hostside.as_decided("\"$o\"", f"cat -- {DETAILS}")
    return (
        "d=$(mktemp -d /tmp/fleet-bench.XXXXXX) || exit 1; trap 'rm -rf \"$d\"' EXIT; " + _for_owner(venv, key_path) +
        f"( while :; do echo \"@@ $(date +%s.%N)\"; nvidia-smi --query-gpu={SMI_QUERY} "
        f"--format=csv,noheader,nounits 2>&1; sleep {interval_s}; done ) > \"$d/smi\" 2>&1 & s=$!; "
        f"rc=$r; [ \"$r\" != 0 ] || {{ cd \"$d/w\" && timeout {int(timeout_s)} {as_owner} > \"$d/out\" 2> \"$d/err\"; "
        "rc=$?; }; kill $s 2>/dev/null; wait $s 2>/dev/null; "
        f"echo '{MARK} rc='$rc; echo '{MARK} out'; cat \"$d/out\" 2>/dev/null; "
        f"echo '{MARK} err'; tail -c 4000 \"$d/err\"; echo '{MARK} smi'; cat \"$d/smi\""
        + (f"; echo '{MARK} details'; [ \"$r\" != 0 ] || {{ cd \"$d/w\" && {read_details} 2>/dev/null; }}"
           if details else "")
    )


def run_bench(conn: Connection, host: Host, bench_cmd: str, timeout_s: float, *, venv: str, details: bool = False,
              key_path: str | None = None) -> CommandResult:
    """`script` of `bench_cmd` (of `venv`, with the server's key at `key_path`) on the host, given a minute past the
    benchmark's own timeout to answer."""
    return run(conn, host, script(bench_cmd, timeout_s, details=details, venv=venv, key_path=key_path),
               timeout=timeout_s + 60)
