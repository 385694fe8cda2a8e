"""fleet's command line: thin Invoke tasks. Logic lives in fleet/ (and sandbox/ for the sandbox fleet).

Options, targets and exit codes are the same in every task: fleet/cli/tasking.py and docs/cli.md.
"""

import functools
import os

from invoke import Collection, Exit

from fleet import cli
from fleet.cli import CHANGE_HELP, HOST_HELP, WIDE_HELP, reports_errors
from fleet.cli.tasking import EXIT_CODES_HELP, task

# Only the CLI layer (fleet.cli) is imported here; each task imports its own command module when it runs,
# so `inv --list` loads none of them.
_opts = cli.options


@task(name="exec", iterable=["host", "group"],
      help={"cmd": "shell command to run on every selected host", **CHANGE_HELP,
            "timeout": "seconds each host's command may take, output and exit status included, before the host "
                       "counts as failed (default 120)", "wide": WIDE_HELP})
@reports_errors
def exec_(c, cmd, inventory=None, host=None, group=None, all_=False, yes=False, json=False,
          accept_new_host_keys=False, ask_become_pass=False, timeout=None, wide=False):
    """Run one shell command on the selected hosts in parallel over SSH."""
    from fleet.cli import execute

    seconds = execute.parse_timeout(timeout)
    hosts = cli.changing_hosts("exec", inventory, host, group, all_)
    cli.targets.confirm("exec", hosts, yes, [f"command: {cmd}"])
    opts = _opts(hosts, accept_new_host_keys, ask_become_pass)
    raise Exit(code=execute.command(hosts, cmd, opts, json, seconds, wide))


@task(iterable=["host", "group"], help={**HOST_HELP, "verbose": "also say how each host was reached, like ssh -v: "
                                                             "every hop and its address, the known_hosts line "
                                                             "that vouched for each host key, each key offered",
                                          "p2p_check": "also copy a buffer between each pair of GPUs with the "
                                                       "venv's torch and compare it (a second round trip)",
                                          "wide": WIDE_HELP})
@reports_errors
def probe(c, inventory=None, host=None, group=None, json=False, accept_new_host_keys=False, ask_become_pass=False,
          verbose=False, p2p_check=False, wide=False):
    """Probe hosts in parallel (one SSH round trip each): GPUs, SM, topology, P2P, VM, driver, venv."""
    from fleet.cli import probe as probing

    hosts = cli.select_hosts(inventory, host, group)
    opts = _opts(hosts, accept_new_host_keys, ask_become_pass)
    raise Exit(code=probing.command(hosts, opts, json, verbose, p2p_check, wide))


DEPLOY_HELP = {**CHANGE_HELP, "playbook": "playbook name in playbooks/ or a path (default: the one the inventory "
                                          "binds to the hosts' group; no playbook is ever assumed)",
               "dry_run": "the deploy's own plan, touching nothing: the rung it tries first with the unit, env "
                          "and patch diffs against what is installed, or 'nothing to do' exactly when it would",
               "force": "deploy even when the host already serves, healthy, what this deploy would install (unit, "
                        "env file with the inventory's vars.env, patch sets, venv, key, rung): where it would say "
                        "unchanged",
               "serial": "rolling deploy: batch sizes in order, the last repeating, e.g. 1,2,25% (percent of the "
                         "hosts, rounded down, at least 1); default: every host in one batch",
               "max_fail": "stop the rollout once more than N hosts (or P% of all) failed, e.g. 1 or 10%; later "
                           "batches are left untouched (skipped); default 0",
               "host_timeout": "seconds a host's deploy may take before it counts as failed (its deploy goes on "
                               "in the background to its own end); default none",
               "canary": "judge the canary batch (--serial 1,25%) against hosts still on the old release under "
                         "the same load (the playbook's canary: section); one it does not pass is put back and "
                         "the rollout stops",
               "wide": WIDE_HELP}


@task(iterable=["host", "group"], help=DEPLOY_HELP)
@reports_errors
def deploy(c, playbook=None, inventory=None, host=None, group=None, all_=False, yes=False, json=False,
           dry_run=False, force=False, serial=None, max_fail=None, host_timeout=None, accept_new_host_keys=False,
           ask_become_pass=False, wide=False, canary=False):
    """Deploy a playbook: patch, render the unit, restart, watch the log, fall back, verify, release."""
    from fleet.cli import deploy as deploy_cmd

    hosts = cli.changing_hosts("deploy", inventory, host, group, all_)
    book = cli.targets.playbook_for(hosts, playbook)
    opts = functools.partial(_opts, hosts, accept_new_host_keys, ask_become_pass)  # made after the plan's yes
    raise Exit(code=deploy_cmd.deploy(hosts, book, opts, json, dry_run, force, serial, max_fail, host_timeout,
                                      yes=yes, wide=wide, canary=canary))


@task(iterable=["host", "group"], help={**CHANGE_HELP,
                                        "playbook": "the playbook the release was deployed with (default: the one "
                                                    "the release records; needed for --router and multi-node)",
                                        "to": "release to restore (default: the newest known-good before the "
                                              "current); before-fleet: the unit and env file as fleet found "
                                              "them, every patch set reverted",
                                        "router": "roll back the playbook's router unit on its router.host instead",
                                        "serial": "batch sizes as deploy's --serial (replicas behind a router: "
                                                  "1 by default, each out of the router and drained first)",
                                        "max_fail": "as deploy's --max-fail",
                                        "dry_run": "the rollback's own choice, touching nothing: the release it "
                                                   "goes to, the diff of the unit and env file, its patch sets, "
                                                   "the router's leave and rejoin, what would be enabled",
                                        "wide": WIDE_HELP})
@reports_errors
def rollback(c, playbook=None, to=None, inventory=None, host=None, group=None, all_=False, yes=False, json=False,
             accept_new_host_keys=False, ask_become_pass=False, router=False, wide=False, serial=None,
             max_fail=None, dry_run=False):
    """Go back to an earlier known-good release: unit, env and patched files byte for byte, then verify."""
    from fleet.cli import deploy as deploy_cmd

    cli.targets.check_to(to)  # before the inventory is read or the plan shown
    deploy_cmd.rollout.parse_serial(serial)
    deploy_cmd.rollout.parse_max_fail(max_fail)
    if router:  # the router unit on the playbook's router.host; the replicas are read, not changed
        hosts = cli.select_hosts(inventory, host, group)
    else:
        hosts = cli.changing_hosts("rollback", inventory, host, group, all_)
        if not dry_run:  # a dry run changes nothing and never asks (docs/cli.md)
            cli.targets.confirm("rollback", hosts, yes, [f"to: {to or 'the newest known-good before the current'}"])
    opts = _opts(hosts, accept_new_host_keys, ask_become_pass)
    raise Exit(code=deploy_cmd.rollback(hosts, playbook, to, opts, json, router, wide, serial, max_fail,
                                        dry_run=dry_run))


@task(iterable=["host", "group"], help={**HOST_HELP, "bench": "also each release's benchmark (tok/s, its spread "
                                                                 "where tuned) as a bar: a regression shows at a "
                                                                 "glance", "wide": WIDE_HELP})
@reports_errors
def history(c, inventory=None, host=None, group=None, json=False, accept_new_host_keys=False, ask_become_pass=False,
            bench=False, wide=False):
    """List a host's releases with their outcome (the current one marked); ids in full, for --to."""
    from fleet.cli import history as history_cmd

    hosts = cli.select_hosts(inventory, host, group)
    opts = _opts(hosts, accept_new_host_keys, ask_become_pass)
    raise Exit(code=history_cmd.history(hosts, opts, json, bench, wide))


@task(iterable=["host", "group"], help={**HOST_HELP, "port": "the sglang port health and /metrics are read on "
                                                "(default: the one the host's current release serves on, its "
                                                "playbook's serve.port; else 30000)",
                                        "watch": "refresh in place until Ctrl-C (with --json: one JSON row per "
                                                 "host and refresh)",
                                        "interval": "seconds between refreshes of --watch (default 5)",
                                        "wide": WIDE_HELP,
                                        "detail": "one host in full: every fact, each drifted file and why, the "
                                                  "last failure's evidence and what to try next"})
@reports_errors
def status(c, inventory=None, host=None, group=None, json=False, port=None, watch=False, interval=None,
           accept_new_host_keys=False, ask_become_pass=False, wide=False, detail=None):
    """The fleet board: one line per host, with the columns that fit the terminal.

    Unit state, health, release and rung, drift, playbook, gen tok/s (/metrics), GPU health, last failure, then
    requests, bench tok/s, power, GPUs and the sglang router."""
    from fleet.cli import status as board

    if interval is not None and not watch:  # it would be taken and do nothing
        raise cli.bad_input("--interval is the seconds between --watch's refreshes; add --watch")
    if detail and (host or group):  # one of them would be left unread, silently
        raise cli.bad_input(f"{cli.targets.typed_host(detail, '--detail')} names its one host: leave out --host and "
                            "--group")
    hosts = cli.select_hosts(inventory, [detail], [], "--detail") if detail else cli.select_hosts(inventory, host,
                                                                                                   group)
    if detail and len(hosts) != 1:  # a glob may name several: --detail shows one host in full
        raise cli.bad_input(f"{cli.targets.typed_host(detail, '--detail')}: one host in full ({len(hosts)} matched); "
                            "name one")
    opts = _opts(hosts, accept_new_host_keys, ask_become_pass)
    raise Exit(code=board.command(hosts, opts, port, json, watch, interval,
                                  cli.console, wide=wide, detail=bool(detail)))


@task(iterable=["host", "group"], help={**HOST_HELP, "follow": "keep following new lines (Ctrl-C ends it)",
                                        "since": "where to start, as journalctl takes it, on the host's clock: a "
                                                 "span (10m, 2h), a time (20:00), a date or both ('2026-12-05 "
                                                 "20:00'), a line's time as shown ('12-06 20:00:15'), today, "
                                                 "yesterday (default: the whole journal)",
                                        "lines": "only the last N lines, as tail -n and journalctl -n (with --since: "
                                                 "of that span; with --only: the last N it shows)",
                                        "only": "only classified lines this bad or worse: fatal or warning",
                                        "json": "one JSON object per line: host, time, class, severity, text"})
@reports_errors
def logs(c, inventory=None, host=None, group=None, follow=False, since=None, lines=None, only=None, json=False,
         accept_new_host_keys=False, ask_become_pass=False):
    """The sglang unit's journal from one or many hosts, each line classified live (fatal/warning/ready)."""
    from fleet.cli import logs as logs_

    hosts = cli.select_hosts(inventory, host, group)
    opts = _opts(hosts, accept_new_host_keys, ask_become_pass)
    raise Exit(code=logs_.run(hosts, opts, follow, since, only, json, cli.console, lines))


@task(iterable=["host", "group"], help={**CHANGE_HELP, "playbook": "playbook whose bench settings, port and "
                                                                  "venv are used (default: the one the inventory "
                                                                  "binds to the hosts' group)",
                                        "wide": WIDE_HELP})
@reports_errors
def bench(c, playbook=None, inventory=None, host=None, group=None, all_=False, yes=False, json=False,
          accept_new_host_keys=False, ask_become_pass=False, wide=False):
    """Benchmark the running server (bench_serving, offline), sample GPU power; store it in the current release."""
    from fleet.cli import tune as tuning

    hosts = cli.changing_hosts("bench", inventory, host, group, all_)
    playbook = cli.targets.playbook_for(hosts, playbook)
    cli.targets.confirm("bench", hosts, yes, [f"playbook: {playbook}", "load: the playbook's benchmark on each"])
    opts = _opts(hosts, accept_new_host_keys, ask_become_pass)
    raise Exit(code=tuning.bench_command(hosts, playbook, opts, json, wide))


@task(iterable=["host", "group"], help={**CHANGE_HELP, "playbook": DEPLOY_HELP["playbook"],
                                        "yes": "do not ask: not before several hosts, nor before restarting a "
                                               "host that is serving",
                                        "runs": "benchmark runs counted per serving rung, after one warm-up "
                                                "(default: the playbook's bench.runs, 3); a later rung wins only "
                                                "beyond both rungs' spreads and bench.min_gain",
                                        "slo": "search the playbook's space (tune:) for the most requests per "
                                               "second within this latency promise, e.g. ttft_p99=2s,tpot_p99=60ms",
                                        "budget": "with --slo: server starts at most (default 6)",
                                        "requests": "with --slo: requests per load point (default 1000)",
                                        "pairs": "with --slo: interleaved pairs of starts that tell two "
                                                 "finalists within 5% apart (default 3; 0: none)",
                                        "wide": WIDE_HELP})
@reports_errors
def tune(c, playbook=None, inventory=None, host=None, group=None, all_=False, json=False, yes=False,
         accept_new_host_keys=False, ask_become_pass=False, runs=None, wide=False, slo=None, budget=None,
         requests=None, pairs=None):
    """Try every eligible rung, benchmark each that serves, deploy the fastest and remember it for the hardware."""
    from fleet.cli import tune as tuning

    settings = tuning.slo_settings(slo, budget, requests, pairs)  # bad input: one line, exit 2, before any host
    hosts = cli.changing_hosts("tune", inventory, host, group, all_)
    playbook = cli.targets.playbook_for(hosts, playbook)
    cli.targets.confirm("tune", hosts, yes, [f"playbook: {playbook}", "every eligible rung restarts each host"])
    opts = _opts(hosts, accept_new_host_keys, ask_become_pass)
    if settings is not None:
        raise Exit(code=tuning.slo_tune_command(hosts, playbook, opts, json, yes, settings, wide))
    raise Exit(code=tuning.tune_command(hosts, playbook, opts, json, yes, runs, wide))


@task(iterable=["host", "group", "package", "set"],
      help={**HOST_HELP, "package": "python package to scan (repeatable; default flashinfer and sglang's gates)",
            "sm": "judge the gates for this SM (e.g. 120) instead of the host's GPUs",
            "set": "patch set(s) whose edits would lift gates (shown per gate)",
            "full": "scan every .cuh/.cu/.h/.inl/.py file of the packages, not only the fusion path's files",
            "sglang": "audit this sglang release's real files instead of hosts (no host contacted; needs --sm)",
            "flashinfer": "audit this flashinfer-python release's real files instead of hosts (needs --sm)",
            "offline": "with --sglang/--flashinfer: refuse a release not in the cache instead of fetching it",
            "wide": WIDE_HELP})
@reports_errors
def audit(c, inventory=None, host=None, group=None, package=None, sm=None, set=None, full=False, json=False,
          accept_new_host_keys=False, ask_become_pass=False, sglang=None, flashinfer=None, offline=False, wide=False):
    """Which architecture gates (__CUDA_ARCH__, SM checks) in the installed packages still exclude the SM.

    With --sglang / --flashinfer (and --sm) no host is contacted: the real released files of those versions
    are audited (fetched once into ~/.cache/fleet/upstream), e.g. before an upgrade.

    Exit 1 here: gates still exclude the SM after the --set sets' edits (or a host failed); all clear is one
    sentence. Gates upstream keeps off the SM on purpose (playbooks/upstream/kept-gates.yaml) are shown with
    their reason and source and do not count.
    """
    from fleet.cli import audit as audit_cmd

    if sglang or flashinfer:
        if host or group:
            raise Exit("--sglang/--flashinfer audit releases, not hosts: drop --host/--group", code=2)
        raise Exit(code=audit_cmd.upgrade(sglang, flashinfer, sm, package or [], set or [],
                                          full, json, cli.console, offline, wide))
    hosts = cli.select_hosts(inventory, host, group)
    opts = _opts(hosts, accept_new_host_keys, ask_become_pass)
    raise Exit(code=audit_cmd.run(hosts, opts, package or [], sm,
                                  set or [], full, json, cli.console, wide))


@task(help={"host": "the one host to recover (name or address)",
            "inventory": "inventory file (default: the site's inventory/hosts.yaml, see fleet-site.yaml)",
            "power_cycle": "a Proxmox guest: stop then start the VM instead of a reset; any host: no GPU reset",
            "unreachable": "a Proxmox guest SSH cannot reach (timed out, refused, dropped): reset it through the API",
            "dry_run": "probe and say what would be done; change nothing", "wait": "seconds to wait for SSH after",
            "json": "print the result as JSON", "accept_new_host_keys": HOST_HELP["accept_new_host_keys"],
            "ask_become_pass": HOST_HELP["ask_become_pass"],
            "playbook": "the host's playbook (default: the one its group binds): a replica behind its router: is "
                        "taken out of the router before the reset or reboot, and put back once it serves"})
@reports_errors
def recover(c, host, inventory=None, power_cycle=False, unreachable=False, dry_run=False, wait=600, json=False,
            accept_new_host_keys=False, ask_become_pass=False, playbook=None):
    """Recover a host's GPUs as their state asks: GPU reset, else reboot or Proxmox VM reset; then probe again."""
    from fleet.cli import recover as recovering

    chosen = cli.select_hosts(inventory, [host], [])
    if len(chosen) != 1:  # a glob or a comma may name several: recover acts on one host at a time
        raise cli.bad_input(f"{cli.targets.typed_host(host)}: inv recover takes one host ({len(chosen)} matched)")
    (target,) = chosen
    opts = _opts([target], accept_new_host_keys, ask_become_pass)
    raise Exit(code=recovering.command(target, opts, json, power_cycle, dry_run, float(wait), unreachable, playbook))


@task(help={"host": "host name or address", "token": "the lock's token, as the lock error printed it",
            "inventory": HOST_HELP["inventory"], "json": HOST_HELP["json"]})
@reports_errors
def unlock(c, host, token, inventory=None, json=False):
    """Remove a stale host lock left by a crashed run (only the lock carrying this token).

    A host with no lock is nothing to do (exit 0, said); a lock with another token is kept (exit 1)."""
    from fleet.cli import probe as probing

    chosen = cli.select_hosts(inventory, [host], [])
    if len(chosen) != 1:
        raise cli.bad_input(f"{cli.targets.typed_host(host)}: inv unlock takes one host ({len(chosen)} matched)")
    (target,) = chosen
    raise Exit(code=probing.unlock(target, token, _opts([target]), json))


@task(name="sandbox.up", help={"hosts": "number of hosts (named sbx0, sbx1, ...)",
            "profile": "hardware profile name or folder, repeatable; host i gets the i-th (cycling)"},
      iterable=["profile"])
@reports_errors
def sandbox_up(c, hosts=4, profile=None):
    """Bring up the sandbox fleet (same arguments again: no-op; others: replace it)."""
    from sandbox import cli as sbx

    _sandbox(lambda: sbx.up(int(hosts), profile or []))


@task(name="sandbox.down")
@reports_errors
def sandbox_down(c):
    """Stop the sandbox fleet and remove everything it made (mounts, namespaces, bridge, cgroups)."""
    from sandbox import cli as sbx

    _sandbox(sbx.down)


@task(name="sandbox.status")
@reports_errors
def sandbox_status(c):
    """Show the sandbox hosts: state, link, ssh readiness."""
    from sandbox import cli as sbx

    _sandbox(sbx.status)


def _fault(action, doc):
    @task(name=f"sandbox.{action}", help={"name": "sandbox host, e.g. sbx0"})
    @reports_errors
    def fault(c, name):
        from sandbox import cli as sbx

        _sandbox(lambda: sbx.fault(action, name))

    fault.__doc__ = doc + "\n\n" + EXIT_CODES_HELP
    fault.body.__doc__ = doc
    return fault


def _sandbox(fn):
    from sandbox.hosts import SandboxError, SandboxInputError

    os.environ["FLEET_SANDBOX_ONLY"] = "1"
    try:
        fn()
    except (SandboxError, ValueError) as exc:
        cli.say_error(str(exc))
        raise Exit(code=2 if isinstance(exc, (ValueError, SandboxInputError)) else 1) from None


@task(help={"hosts": "number of sandbox hosts", "profile": "profile(s) to use (default: all four shipped)"},
      iterable=["profile"])
@reports_errors
def demo(c, hosts=4, profile=None):
    """The sandbox demo: bring up simulated GPU hosts and run fleet against them over real SSH."""
    from sandbox import cli as sbx
    from sandbox.config import config

    profiles = profile or ["rtx-pro-6000-x8-proxmox", "h100-sxm-x8", "rtx5090-x2-workstation", "b200-x8"]
    _sandbox(lambda: sbx.up(int(hosts), profiles))
    inventory = str(config().inventory_path)
    cli.console.rule("1. probe: what every host has")
    try:
        probe(c, inventory=inventory)
    except Exit as done:
        if done.code:
            raise
    cli.console.rule("2. deploy the seed's playbook on sbx0 (8x RTX PRO 6000, SM 12.0, Proxmox VM)")
    try:
        deploy(c, playbook="glm5-nvfp4", inventory=inventory, host=["sbx0"])
    except Exit as done:
        if done.code:
            raise
    cli.console.rule("3. status")
    status(c, inventory=inventory)


@task(help={"file": "log file to classify, or - to read stdin",
            "json": "print pure JSON on stdout: {verdict, fatal, decided_by, events: [{line, class, severity, text, "
                    "explanation, remedy, source, ...}]}",
            "rules": "folder of rule files (default playbooks/rules)",
            "sglang": "the host's sglang release (from inv probe): lines resolve to its sites, remedies use its flags; "
                      "without it, the release the log's own clues fit (named in the output)",
            "flashinfer": "the host's flashinfer-python release: its sites too", "wide": WIDE_HELP})
@reports_errors
def classify(c, file, json=False, rules=None, sglang=None, flashinfer=None, wide=False):
    """Classify an sglang log: events and verdict; exit 0 ready/none, 1 fatal verdict, 2 bad input."""
    from fleet.cli import classify as classify_cmd

    raise Exit(code=classify_cmd.run(file, as_json=json, rules_dir=rules, sglang=sglang, flashinfer=flashinfer,
                                     wide=wide))


@task(iterable=["host", "group", "set"],
      help={**CHANGE_HELP, "set": "patch set name from playbooks/patches (repeatable; applied in order)",
            "check": "change nothing; exit 0 if the sets apply cleanly or are already applied, 1 if a file's text "
                     "drifted from what a set expects (named) or a host failed",
            "revert": "restore the originals of the sets' latest patch run (refused if a file changed since)",
            "allow_prebuilt_jit": "patch even though prebuilt flashinfer JIT modules will ignore the sources",
            "audit": "also list the arch gates (flashinfer comm headers, sglang gates) that still exclude the SM",
            "against": "with --check and no host: the sets on these releases, e.g. "
                       "sglang==0.5.23,flashinfer-python==0.7.2 (before an upgrade); refused (exit 2) where a "
                       "wheel's Requires-Dist refuses the other release",
            "sm": "with --against: the SM to plan for (default 120)",
            "offline": "with --against: refuse a release not in the cache instead of fetching it",
            "no_deps": "with --against: releases installed beside each other with pip --no-deps (their "
                       "Requires-Dist not checked)",
            "playbook": "the hosts' playbook: a dead run's put-back uses it and, with a router:, takes each replica "
                        "out of the router while it restarts the server",
            "wide": WIDE_HELP})
@reports_errors
def patch(c, set=None, check=False, revert=False, inventory=None, host=None, group=None, all_=False, yes=False,
          json=False, accept_new_host_keys=False, ask_become_pass=False, allow_prebuilt_jit=False, audit=False,
          against=None, sm="120", offline=False, no_deps=False, wide=False, playbook=None):
    """Apply, check or revert patch sets on hosts: all or nothing, idempotent, backed up, under the host lock."""
    from fleet.cli import patch as patching

    if no_deps and not against:
        raise Exit("--no-deps: it says how the releases of --against were installed; give --against too", code=2)
    if against:
        if not check or revert or host or group:
            raise Exit("--against plans on releases, not hosts: use it with --check and no --host/--group", code=2)
        raise Exit(code=patching.against_command(set or [], against, sm, json, offline, no_deps, wide))
    if check:
        hosts = cli.select_hosts(inventory, host, group)
    else:
        hosts = cli.changing_hosts("patch", inventory, host, group, all_)
        cli.targets.confirm("patch", hosts, yes, [f"{'revert' if revert else 'apply'}: {', '.join(set or [])}"])
    opts = _opts(hosts, accept_new_host_keys, ask_become_pass)
    raise Exit(code=patching.patch_command(hosts, set or [], check, revert, json, opts,
                                          allow_prebuilt_jit, audit=audit, wide=wide, playbook=playbook))


@task(help={"sglang": "only this sglang release (with --flashinfer: only that pair)",
            "flashinfer": "only this flashinfer-python release", "json": "print what is cached as JSON",
            "write_flags": "after fetching, rewrite playbooks/upstream/sglang-flags.yaml from every sglang of the "
                           "matrix (their launch_server flags, read with ast)", "wide": WIDE_HELP})
@reports_errors
def upstream(c, sglang=None, flashinfer=None, json=False, write_flags=False, wide=False):
    """Fetch the real sglang / flashinfer-python wheels fleet's checks are read from (~/.cache/fleet/upstream).

    Those of playbooks/upstream/matrix.yaml, or the ones named: pip download --no-deps, sha256 checked against
    the registry, text files kept.

    Exit codes: 0 all cached, 1 a fetch failed (the registry unreachable, a hash mismatch), 2 bad input.
    """
    from fleet.cli import upstream as upstream_cmd

    raise Exit(code=upstream_cmd.command(sglang, flashinfer, json, write_flags, wide))


@task(iterable=["playbook"],
      help={"playbook": "playbook name in playbooks/ or a path (repeatable; default: every playbook in playbooks/)",
            "inventory": "also check this inventory, and that a playbook's router.host is one of its hosts",
            "json": "print pure JSON on stdout: each playbook's errors and warnings",
            "lock": "resolve each playbook's packages: again and rewrite its lock (playbooks/NAME.lock)"})
@reports_errors
def check(c, playbook=None, inventory=None, json=False, lock=False):
    """Check playbooks without touching any host, every problem in one pass.

    Schema, every flag against the sglang releases they can meet, when: values, rungs that never run, the
    exposure rule, literal secrets, health.expect, and that the lock beside each (playbooks/NAME.lock) still
    locks its packages: pins. --lock resolves the pins again from
    the wheelhouse and rewrites the lock (for the kinds of host it knows): review the diff and commit it.

    Exit codes: 0 no error (warnings allowed), 2 an error (one line each, naming file:line).
    """
    from fleet.cli import check as check_cmd

    raise Exit(code=check_cmd.command(playbook or [], inventory, json, lock))


LEARNED_HELP = {"inventory": "inventory file for --group (default: the site's)",
                "host": "results this host reported: a name, a glob, !name, &name over the learned hosts "
                        "(repeatable; a host no longer in the inventory too)",
                "group": "results the hosts of this inventory group reported (repeatable)",
                "playbook": "only this playbook's (its name, as `inv learned` shows it)",
                "rung": "only this rung's results (repeatable)",
                "fingerprint": "only this fingerprint's (the 16 hex digits `inv learned` shows)",
                "json": HOST_HELP["json"]}


@task(iterable=["host", "group", "rung"], help=LEARNED_HELP)
@reports_errors
def learned(c, inventory=None, host=None, group=None, playbook=None, rung=None, fingerprint=None, json=False):
    """What the fleet learned per hardware fingerprint, playbook, rung and host.

    From known-good.json in the state folder (.fleet/, or FLEET_STATE_DIR): serves, tuned tok/s and spread,
    failures by class, the winner and the rungs skipped. Reads nothing else.

    Exit codes: 0 shown, 1 what was learned not readable, 2 bad input.
    """
    from fleet.cli import learned as learning

    pick = learning.selection(inventory, host or [], group or [], playbook, rung or [], fingerprint)
    raise Exit(code=learning.show(pick, json))


@task(iterable=["host", "group", "rung"],
      help={**LEARNED_HELP, "all": "everything learned (in place of the options that select)",
            "dry_run": "show what would be forgotten; change nothing"})
@reports_errors
def forget(c, inventory=None, host=None, group=None, playbook=None, rung=None, fingerprint=None, all_=False,
           dry_run=False, json=False):
    """Clear what the fleet learned (what `inv learned` shows), under the lock deploys and tunes take.

    For the hosts, playbook, rungs or fingerprint given; the file before is kept as known-good.json.bak. No host is
    contacted.

    Exit codes: 0 done (or nothing matched), 1 what was learned not readable, 2 bad input (nothing changed).
    """
    from fleet.cli import learned as learning

    pick = learning.selection(inventory, host or [], group or [], playbook, rung or [], fingerprint)
    raise Exit(code=learning.forget(pick, all_, dry_run, json, learning.only_narrowing(host or [], group or [])))


@task(help={"prune": "drop the entries no release kept on any host needs, then the least recently used beyond the "
                     "store's bound (what a deploy's prune does)",
            "dry_run": "with --prune: say what would be dropped; change nothing",
            "json": HOST_HELP["json"], "wide": WIDE_HELP})
@reports_errors
def cache(c, prune=False, dry_run=False, json=False, wide=False):
    """The controller's store of compile and tune caches (serve.warm_start), or pruned on purpose.

    From kcache/ in the state folder (.fleet/, or FLEET_STATE_DIR): each entry's key (GPU, sglang and
    flashinfer, patch sets), size, when it was last used, the host that gave it and the kept releases that need
    it. No host is contacted.

    Exit codes: 0 shown (or pruned), 2 bad input (nothing changed).
    """
    from fleet.cli import cache as caching

    raise Exit(code=caching.command(prune, dry_run, json, wide))


sandbox_ns = Collection("sandbox")
sandbox_ns.add_task(sandbox_up, "up")
sandbox_ns.add_task(sandbox_down, "down")
sandbox_ns.add_task(sandbox_status, "status")
sandbox_ns.add_task(_fault("cut", "Take a sandbox host's link down (network cut)."), "cut")
sandbox_ns.add_task(_fault("heal", "Bring a cut sandbox host's link back up."), "heal")
sandbox_ns.add_task(_fault("kill", "Hard-stop a sandbox host (SIGKILL, like a power cut)."), "kill")
sandbox_ns.add_task(_fault("start", "Boot a stopped or killed sandbox host again."), "start")

ns = Collection()
ns.add_task(exec_, "exec")
ns.add_task(demo)
ns.add_task(probe)
ns.add_task(deploy)
ns.add_task(rollback)
ns.add_task(history)
ns.add_task(unlock)
ns.add_task(recover)
ns.add_task(bench)
ns.add_task(tune)
ns.add_task(learned)
ns.add_task(forget)
ns.add_task(cache)
ns.add_task(status)
ns.add_task(logs)
ns.add_task(audit)
ns.add_collection(sandbox_ns)
ns.add_task(classify)
ns.add_task(patch)
ns.add_task(upstream)
ns.add_task(check)
