"""sglang's benchmark on a host in one round trip: a background loop samples `nvidia-smi --query-gpu=...` into a
temp folder while the benchmark runs in the foreground (under `timeout`), then both outputs come back between
markers (fleet.deploy.bench reads them)."""

from __future__ import annotations

import shlex

from fabric import Connection

from fleet.inventory import Host
from fleet.ssh.remote import CommandResult, run

SMI_QUERY = "index,power.draw,power.limit,utilization.gpu"
MARK = "@@FLEET-BENCH"
DETAILS = "details.jsonl"  # a relative --output-file lands in the script's temp folder; `details` prints it


def line(argv: list[str], env: dict[str, str] | None = None) -> str:
    """`argv` as one shell-quoted command line, under `env` (by `env NAME=VALUE ...`) when given."""
    if env:
        return shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *argv])
    return shlex.join(argv)


def script(bench_cmd: str, timeout_s: float, interval_s: float = 0.25, details: bool = False) -> str:
    """Sampler in the background, benchmark in the foreground (under `timeout`), then everything printed
    between markers (with `details`, bench_serving's output file DETAILS last)."""
    return (
        "d=$(mktemp -d /tmp/fleet-bench.XXXXXX) || exit 1; trap 'rm -rf \"$d\"' EXIT; "
        f"( while :; do echo \"@@ $(date +%s.%N)\"; nvidia-smi --query-gpu={SMI_QUERY} "
        f"--format=csv,noheader,nounits 2>&1; sleep {interval_s}; done ) > \"$d/smi\" 2>&1 & s=$!; "
        + f"cd \"$d\" && timeout {int(timeout_s)} {bench_cmd} > \"$d/out\" 2> \"$d/err\"; rc=$?; "
        "kill $s 2>/dev/null; wait $s 2>/dev/null; "
        f"echo '{MARK} rc='$rc; echo '{MARK} out'; cat \"$d/out\"; "
        f"echo '{MARK} err'; tail -c 4000 \"$d/err\"; echo '{MARK} smi'; cat \"$d/smi\""
        + (f"; echo '{MARK} details'; cat \"$d/{DETAILS}\" 2>/dev/null" if details else "")
    )


def run_bench(conn: Connection, host: Host, bench_cmd: str, timeout_s: float, details: bool = False) -> CommandResult:
    """`script` of `bench_cmd` on the host, given a minute past the benchmark's own timeout to answer."""
    return run(conn, host, script(bench_cmd, timeout_s, details=details), timeout=timeout_s + 60)
