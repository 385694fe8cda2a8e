"""`inv recover --host H`: what the GPUs' state calls for, then SSH back and a new probe.

- a GPU reset (`nvidia-smi -r -i N`) where the driver asks for one (recovery action reset, memory repair
  pending) and allows it: the unit stopped, no process left on the GPU, persistence off
  for the reset (put back after);
- else a reboot of the host (`systemctl reboot`), or, for a Proxmox guest described in the inventory, a VM
  reset (or stop then start with power_cycle) through the Proxmox API: a GPU off the bus, a driver that asks
  for a reboot, a reset the driver refused;
then it waits for SSH and probes again: the result says what was done and what the GPUs say now. A Proxmox
guest that SSH cannot reach (no answer, no banner, a refused or dropped connection) is reset through the API
without a probe first only when the operator says so (`--unreachable`); a host that answers and refuses us
(key, login) is never reset for it. A link lost under `nvidia-smi -r` is a reset that did not finish: the
machine is rebooted (or the VM reset), since the unit was stopped for it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from paramiko import SSHException

from fleet.deploy import hardware, restore
from fleet.deploy.boot import STARTS_AT_BOOT
from fleet.deploy.hostrun import NOT_STARTED, RAN, HostRun, host_run, lock_only, release_after_reboot
from fleet.errors import ConnectError, FleetError
from fleet.host.facts import HostFacts
from fleet.host.lock import LOCK_DIR, HostLockError, Lock
from fleet.host.releases import STOPPED_MARK, ReleaseStore
from fleet.host.render import unit_of_files
from fleet.host.session import ChannelFailed, CommandTimedOut, HostSession, OutputTooLarge, one_line
from fleet.inventory import Host
from fleet.multihost.proxmox import Proxmox, ProxmoxError, ProxmoxGuest
from fleet.progress import Progress, quiet, standing
from fleet.ssh.connect import ConnectOptions
from fleet.yamlfile import JsonObject

GPU_RESET = "gpu-reset"
REBOOT = "reboot"
VM_RESET = "vm-reset"
VM_POWER_CYCLE = "vm-power-cycle"
NOTHING = "none"
RESET_ACTIONS = frozenset({"reset", "drain_and_reset"})


@dataclass(frozen=True)
class RecoverResult:
    """One host's `inv recover` as `--json` prints it: the action taken (or NOTHING) and why, each step, the GPU
    faults before and after, and whether the host can serve again."""

    host: str
    action: str = NOTHING
    why: str = ""
    steps: list[str] = field(default_factory=list)
    faults_before: list[str] = field(default_factory=list)
    faults_after: list[str] = field(default_factory=list)
    ok: bool = False
    error: str | None = None  # why nothing could be done (the host not reached)

    def to_json(self) -> JsonObject:
        return self.__dict__.copy()


def plan(facts: HostFacts, guest: ProxmoxGuest | None, power_cycle: bool = False) -> tuple[str, list[int], str]:
    """(action, GPU indices to reset, why), pure. A reset needs every faulty GPU still listed; anything else
    (a GPU lost, a reboot asked for) takes the whole machine."""
    faults = hardware.assess(facts).fault
    if not faults:
        return NOTHING, [], "no GPU fault"
    whole = VM_POWER_CYCLE if guest and power_cycle else VM_RESET if guest else REBOOT
    if facts.lost_gpus or any(g.health and g.health.recovery_action not in (None, "none", *RESET_ACTIONS)
                              for g in facts.gpus):
        return whole, [], faults[0]
    reset = [g.index for g in facts.gpus if g.index is not None and g.health and (
        g.health.recovery_action in RESET_ACTIONS or g.health.remapped_rows_pending
        or g.health.retired_pages_pending or g.health.ecc_uncorrected_volatile)]
    if reset and not power_cycle:
        return GPU_RESET, reset, faults[0]
    return whole, [], faults[0]


def refusal(said: str) -> str:
    """The driver's reason in what a refused `nvidia-smi -r` printed: the line naming the GPU (`  GPU <bus>: In use
    by another client`, `Unable to ... for GPU <bus>: Insufficient Permissions`), else its last line."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    named = [line for line in lines if re.match(r"(GPU [0-9A-Fa-f:.]+: |Unable to )", line)]
    return ((named or lines)[0 if named else -1] if lines else "no output")[:160]


def served(host: Host, s: HostSession) -> tuple[Host, HostSession]:
    """The host as its current release serves it: a playbook's serve.unit wins over the inventory's `unit` (recover
    stopped, named and started the inventory's, a unit fleet never wrote there); as it is where none is current."""
    try:
        current = ReleaseStore.on(s).current()
    except FleetError:
        return host, s
    unit = unit_of_files(current.files) if current is not None else None
    if unit is None or unit == host.unit:
        return host, s
    host = replace(host, unit=unit)
    return host, s.as_host(host)


def start_problems(s: HostSession, facts: HostFacts, action: str, router: str | None) -> list[tuple[str, str]]:
    """(unit, why) for each unit this recover would have started again that the owner rule refuses as installed
    (restore.installed_problem), asked before anything stops: the host's unit where it runs (recover starts it after
    the reset or the boot), and for a reboot or a VM reset also where it is enabled (the boot starts it: a unit that
    died with the GPU fault, or one stopped as a GPU reset's refusal advises), and the router's unit there."""
    whole = action != GPU_RESET
    state = facts.unit
    ran = state is not None and state.active_state in RAN
    boots = whole and state is not None and (state.unit_file_state or "") in STARTS_AT_BOOT
    found = []
    if (ran or boots) and (why := restore.installed_problem(s, s.host.unit)):
        found.append((s.host.unit, f"{s.host.unit} " + ("runs and would be started again after" if ran else
                                                          "is enabled and would be started by the boot after")
                      + f" the {action}, which the owner rule refuses: {why}"))
    if whole and router is not None and (s.is_active(router) in RAN or s.unit_file_states([router]).get(router, "")
                                         in STARTS_AT_BOOT) and (why := restore.installed_problem(s, router)):
        found.append((router, f"the router's {router} would be started again after the {action}, which the owner "
                              f"rule refuses: {why}"))
    return found


def refuse_starts(s: HostSession, facts: HostFacts, action: str, router: str | None,
                  done: str = "nothing was changed") -> None:
    """FleetError, before the action, where start_problems finds a unit it would start that the rule refuses."""
    for unit, problem in start_problems(s, facts, action, router):
        raise FleetError(f"{s.host.name}: {problem}; {done} (" + (
            f"stop {unit} first to recover the GPUs with it stopped" if action == GPU_RESET else
            f"`systemctl disable --now {unit}` first: a boot starts an enabled unit") + ")")


def gpu_reset(run: HostRun, gpus: list[int], facts: HostFacts, say: Progress) -> str | None:
    """Reset each GPU; None when done, else why the driver would not (the caller reboots instead). The unit is
    stopped through the run, so a failure from here on starts it again (fleet.deploy.hostrun)."""
    s, unit = run.session, run.host.unit
    state = run.stop_unit(unit)
    say(f"stopped {unit} (it was {state})")
    persistent = {g.index for g in facts.gpus if g.health and g.health.persistence}
    for i in gpus:
        rc, apps = s.gpu_processes(i)
        if rc == 0 and apps.strip():
            return f"GPU {i} still has processes ({apps.splitlines()[0][:60]})"
        s.gpu_persistence(i, on=False)
        rc, said = s.gpu_reset(i)
        if i in persistent:
            s.gpu_persistence(i, on=True)
        if rc != 0:
            return f"nvidia-smi -r -i {i} refused (rc={rc}): {refusal(said)}"
        say(f"GPU {i} reset")
    if state in RAN:
        s.start(unit)  # a start that fails raises: the run skeleton tries once more and says what became of it
        say(f"started {unit} again")
    return None


def reboot(s: HostSession) -> None:
    """`systemctl reboot`: the connection may drop before an answer comes, which is the point; an answer that
    refuses (an inhibitor, access denied) raises: nothing was rebooted."""
    try:
        rc, said = s.reboot()
    except (FleetError, EOFError, OSError, SSHException):
        return
    if rc != 0:
        raise FleetError(f"{s.name}: `systemctl reboot` refused (exit {rc}): {refusal(said)}; nothing was rebooted")


def vm(proxmox: Proxmox, action: str, wait_s: float, say: Progress, sleep: Sleep = time.sleep) -> None:
    """A reset, or a stop then a start. Once a stop was sent, the start is always sent, whatever ends the wait
    for the stop (its deadline, an API error, Ctrl-C); a start that fails says plainly the VM may be stopped
    and how to start it."""
    before = proxmox.status()
    say(f"Proxmox VM {proxmox.guest.vmid} on {proxmox.guest.node}: {before}")
    if action == VM_RESET and before == "running":
        say(f"reset: {proxmox.reset()}")
        return
    if before != "running":
        say(f"start: {proxmox.start()}")
        return
    say(f"stop: {proxmox.stop()}")
    late: str | None = None
    try:
        deadline = time.monotonic() + wait_s
        while (state := proxmox.status()) != "stopped":
            if time.monotonic() > deadline:
                late = f"Proxmox VM {proxmox.guest.vmid} still running {wait_s:g}s after stop"
                break
            say(standing("VM stop", wait_s - (deadline - time.monotonic()), wait_s, f"status {state}"))
            sleep(1)
    finally:  # an error or Ctrl-C in the wait goes on after the start
        try:
            say(f"start: {proxmox.start()}")
        except ProxmoxError as exc:
            raise FleetError(f"{exc}; the VM may be left stopped: start it with `qm start {proxmox.guest.vmid}` on "
                             f"{proxmox.guest.node} (or Start in the Proxmox web UI)") from None
    if late:
        raise FleetError(f"{late}; a start was sent after it (check the VM runs: `qm status "
                         f"{proxmox.guest.vmid}` on {proxmox.guest.node})")


Sessions = Callable[[Host, ConnectOptions], HostSession]  # how a session to a host is opened (tests: a fake)
Sleep = Callable[[float], None]  # how the waits for a VM and for SSH pause between looks (tests: no pause)


def wait_for_ssh(host: Host, opts: ConnectOptions, wait_s: float, old_boot: str, sessions: Sessions = HostSession.open,
                 sleep: Sleep = time.sleep, say: Progress = quiet,
                 interrupted: Callable[[], None] | None = None) -> HostSession:
    """A session on the host's next boot: one whose boot id differs from `old_boot` (an sshd still up in the old
    boot, before the reboot takes it down, is not the recovered host). Each look that finds none says where the
    wait stands, with what the look was told. A first Ctrl-C is `interrupted()` and the wait goes on; a second
    (or one without `interrupted`) ends it (KeyboardInterrupt)."""
    start, asked = time.monotonic(), False
    while True:
        try:
            try:
                s = sessions(host, opts)
                try:
                    if s.boot_id() != old_boot:
                        return s
                    last = "sshd still in the boot before"
                except (FleetError, EOFError, OSError, SSHException) as exc:
                    last = str(exc) or type(exc).__name__
                s.close()
            except (FleetError, EOFError, OSError, SSHException) as exc:
                last = str(exc) or type(exc).__name__
            if time.monotonic() - start > wait_s:
                raise FleetError(f"{host.name}: not back in a new boot {wait_s:g}s after the recovery")
            say(standing("next boot", time.monotonic() - start, wait_s, last))
            sleep(1)
        except KeyboardInterrupt:
            if asked or interrupted is None:
                raise
            asked = True
            interrupted()


def interrupted_wait(host: Host, lock: Lock | None, stopped: list[str],
                     say: Progress) -> tuple[Callable[[], None], str]:
    """What a Ctrl-C in the wait for the next boot says at once, and what a second one says it left (issue 46,
    finding 4: a bare `interrupted`, the host's lock left held through the reboot, nothing said of it)."""
    units = ", ".join(stopped)
    todo = "probe it" if lock is None else f"release its lock{f' and start {units} again' if units else ''}"
    left = (f"`inv probe --host {host.name}` once it is back" if lock is None else
            f"its lock stays until the next deploy, rollback or `inv recover --host {host.name}` there takes it "
            f"over{f' (and starts {units} again)' if units else ''}")
    return (lambda: say(f"Ctrl-C: waiting for {host.name}'s next boot to {todo}; Ctrl-C again to stop waiting (the "
                        "reboot goes on there)"),
            f"Ctrl-C again: stopped waiting for {host.name}'s next boot; the reboot goes on there; {left}")


def vm_steps(proxmox: Proxmox, action: str, wait_s: float, say: Progress, sleep: Sleep = time.sleep) -> list[str]:
    """The VM reset or stop/start, and what the node's NVIDIA functions share a reset with (a note: a token
    without Sys.Audit on the node still resets its VM)."""
    groups: dict[int, list[str]] = {}
    try:
        for d in proxmox.nvidia_devices():  # a VFIO reset takes the whole IOMMU group with it
            groups.setdefault(d.iommu_group, []).append(d.id)
        steps = ["NVIDIA functions on the node by IOMMU group: " + "; ".join(
            f"{g}: {', '.join(ids)}" for g, ids in sorted(groups.items())) if groups else "no NVIDIA function listed"]
    except ProxmoxError as exc:
        steps = [f"NVIDIA functions on the node not listed ({exc})"]
    vm(proxmox, action, wait_s, say, sleep)
    return [*steps, f"Proxmox {action} of VM {proxmox.guest.vmid} on {proxmox.guest.node}"]


def unit_left_stopped(steps: list[str]) -> bool:
    """A unit that ran and could not be started again: recover did not end well, whatever the GPUs say."""
    return any(NOT_STARTED in step for step in steps)


def probed_again(s: HostSession, result: RecoverResult) -> RecoverResult:
    """The result, ended by a probe of the host after the recovery: its faults, and whether it can serve."""
    try:
        after = s.probe()
    finally:
        s.close()
    faults = hardware.assess(after).fault
    ok = not faults and not unit_left_stopped(result.steps)
    return replace(result, faults_after=faults, ok=ok,
                   steps=[*result.steps, "probed again: " + ("no GPU fault" if ok else "; ".join(faults))])


def unreachable_guest(host: Host, opts: ConnectOptions, proxmox: Proxmox, silent: ConnectError, power_cycle: bool,
                      dry_run: bool, wait_s: float, say: Progress, sessions: Sessions,
                      sleep: Sleep = time.sleep) -> RecoverResult:
    """SSH cannot reach a Proxmox guest and the operator said --unreachable: the VM reset (or stop/start)
    without a probe, then its next boot."""
    why = f"SSH cannot reach it: {silent}"
    action = VM_POWER_CYCLE if power_cycle else VM_RESET
    if dry_run:
        return RecoverResult(host.name, action, why, faults_before=[why], ok=True)
    say(f"{why}; the VM goes through the Proxmox API")
    steps = vm_steps(proxmox, action, wait_s, say, sleep)
    say(f"waiting for SSH in the next boot (budget {wait_s:g}s)")
    first, again = interrupted_wait(host, None, [], say)
    try:
        s = wait_for_ssh(host, opts, wait_s, "", sessions, sleep, say, first)
    except KeyboardInterrupt:
        say(again)
        raise
    return probed_again(s, RecoverResult(host.name, action, why, steps, faults_before=[why]))


def recover(host: Host, opts: ConnectOptions, proxmox: Proxmox | None = None, power_cycle: bool = False,
            dry_run: bool = False, wait_s: float = 600.0, say: Progress = quiet,
            unreachable: bool = False, sessions: Sessions = HostSession.open,
            sleep: Sleep = time.sleep, before_stop: Callable[[HostSession], None] | None = None,
            router: str | None = None) -> RecoverResult:
    """`unreachable`: the operator's word that a Proxmox guest SSH cannot reach may be reset through the API.
    Without it a guest that does not answer, refuses or drops the connection is an error, never a reset: a
    refused or reset connection is as often sshd stopped, a wrong port, hosts.deny or MaxStartups on a healthy
    guest that serves. `before_stop`: called under the lock before the reset, reboot or VM reset stops the
    server (a replica taken out of its router: fleet.multihost.router). `router`: the playbook router's unit when
    this host is its router's host: one that ran is started again on the new boot, as the host's unit is where
    the boot did not start it (fleet does not enable the router's unit; a host an older fleet deployed has its
    own unit disabled)."""
    try:
        s = sessions(host, opts)
    except ConnectError as exc:
        if proxmox is None or not exc.unreachable:
            raise
        if not unreachable:
            raise ConnectError(f"{exc}; {host.name} is a Proxmox guest: `inv recover --host {host.name} "
                               "--unreachable` resets it through the API (only if it is hung: a reset stops "
                               "what it serves)", unreachable=True, cause=exc.cause) from None
        return unreachable_guest(host, opts, proxmox, exc, power_cycle, dry_run, wait_s, say, sessions, sleep)
    host, s = served(host, s)
    lost, lock, stopped = False, None, []
    steps: list[str] = []  # each step as it is done (what an error says was sent reads them)
    try:
        facts = s.probe()
        boot = s.boot_id()
        faults = hardware.assess(facts).fault
        action, gpus, why = plan(facts, proxmox.guest if proxmox else None, power_cycle)
        if action == NOTHING and not dry_run:
            steps += after_dead_run(s, say, router)
        if action == NOTHING or dry_run:
            return RecoverResult(host.name, action, why, steps, faults, ok=not unit_left_stopped(steps))
        # not under another's deploy or tune; a failure before the machine goes down starts the unit again
        with host_run(host, opts, f"recover ({action})", unit=None, recover=lock_only(say), progress=say,
                      session=s, router=router) as run:
            refuse_starts(s, facts, action, router)
            if before_stop is not None:
                before_stop(s)
            if action == GPU_RESET:
                try:
                    refused = gpu_reset(run, gpus, facts, say)
                except (CommandTimedOut, ChannelFailed, OutputTooLarge) as exc:  # a reset that hangs: the machine
                    refused = str(exc)
                except ConnectError as exc:  # the link (or sudo) lost under the reset: its outcome is unknown
                    refused, lost = f"the connection was lost: {exc}", True
                steps.append(f"GPU reset of {', '.join(map(str, gpus))}" + (f": {refused}" if refused else ""))
                if refused:
                    action = VM_RESET if proxmox else REBOOT
                    if not lost:  # the boot starts what is enabled: asked again before the reboot
                        refuse_starts(s, facts, action, router, f"the GPU reset was refused ({refused}); no "
                                      f"{action} was sent")
            if action != GPU_RESET:  # kept through the reboot (/var/lib): released on the next boot
                ran = [host.unit] if facts.unit and facts.unit.active_state in RAN else []
                if ran and not lost:  # named on the host before the machine goes down: a recover cut after
                    run.name_for_restart(host.unit)  # it leaves the unit to the next run
                if router is not None and not lost and s.is_active(router) in RAN:  # the router's host: its
                    run.name_router_for_restart(router)  # unit goes down with the machine too
                lock = run.keep_lock_through_reboot()  # what ran is started on the new boot where the boot
                stopped = list(dict.fromkeys([*run.stopped, *ran, *run.router]))  # did not (the router's unit
                # is not enabled, nor a unit an older fleet deployed)
            if not lost:  # a reboot or reset refused here: the skeleton starts the unit and releases the lock
                steps += reboot_or_reset(s, proxmox, action, wait_s, say, sleep)
    finally:
        s.close()
    if lost and action != GPU_RESET:  # over a new connection (or the API); refused: put back over one too
        try:
            steps += _after_lost_link(host, opts, proxmox, action, wait_s, say, sessions, sleep)
        except FleetError as exc:
            raise FleetError(f"{exc}; {_still_in(host, opts, boot, lock, stopped, sessions, sent(steps))}") from None
    if action == GPU_RESET:
        return probed_again(sessions(host, opts), RecoverResult(host.name, action, why, steps, faults))
    say(f"waiting for SSH in the next boot (budget {wait_s:g}s)")
    first, again = interrupted_wait(host, lock, stopped, say)
    try:
        s = wait_for_ssh(host, opts, wait_s, boot, sessions, sleep, say, first)
    except FleetError as exc:
        raise FleetError(f"{exc}; {_still_in(host, opts, boot, lock, stopped, sessions, sent(steps))}") from None
    except KeyboardInterrupt:
        say(again)
        raise
    if lock is not None:
        steps += release_after_reboot(s, lock, stopped, router=router)
    return probed_again(s, RecoverResult(host.name, action, why, steps, faults))


def after_dead_run(s: HostSession, say: Progress, router: str | None = None) -> list[str]:
    """No GPU fault: still, what a recover (or another run) that died here left is closed, as any run's start
    does (its lock taken over, a unit it stopped started again). Nothing when nothing is left, or when a live
    run holds the lock (said)."""
    if not s.any_exists(LOCK_DIR, STOPPED_MARK):
        return []
    try:
        with host_run(s.host, None, "recover (after a dead run)", unit=None, recover=lock_only(say),
                      progress=say, session=s, router=router) as run:
            return run.recovered
    except HostLockError as exc:
        return [f"left alone: {exc}"]


def reboot_or_reset(s: HostSession, proxmox: Proxmox | None, action: str, wait_s: float,
                    say: Progress, sleep: Sleep = time.sleep) -> list[str]:
    """The whole machine, as the plan says: `systemctl reboot` on `s`, or the VM's reset through the API; the
    steps done."""
    if action == REBOOT:
        say("rebooting")
        reboot(s)
        return ["systemctl reboot"]
    if action in (VM_RESET, VM_POWER_CYCLE):
        assert proxmox is not None
        return vm_steps(proxmox, action, wait_s, say, sleep)
    return []


def _after_lost_link(host: Host, opts: ConnectOptions, proxmox: Proxmox | None, action: str,
                     wait_s: float, say: Progress, sessions: Sessions, sleep: Sleep = time.sleep) -> list[str]:
    """The link was lost under `nvidia-smi -r`: the reset's outcome is unknown, so the machine goes through a
    reboot (on a new connection) or the VM's reset; the steps done."""
    if action != REBOOT:  # the API needs no connection to the host
        assert proxmox is not None
        return vm_steps(proxmox, action, wait_s, say, sleep)
    say(f"the connection was lost under the GPU reset: waiting for SSH to reboot (budget {wait_s:g}s)")
    try:
        again = wait_for_ssh(host, opts, wait_s, "", sessions, sleep, say)
    except FleetError:
        raise FleetError(f"{host.name}: the connection was lost under `nvidia-smi -r` and did not come back in "
                         f"{wait_s:g}s; {host.unit} was stopped for the reset: reboot the host (or start "
                         f"{host.unit}) from its console") from None
    try:
        reboot(again)
    finally:
        again.close()
    return ["systemctl reboot (on a new connection)"]


def sent(steps: list[str]) -> bool:
    """A reboot or a VM reset was sent and accepted: the machine may still go down after the wait."""
    return any(step.startswith(("systemctl reboot", "Proxmox")) for step in steps)


def _still_in(host: Host, opts: ConnectOptions, boot: str, lock: Lock | None, stopped: list[str],
              sessions: Sessions, accepted: bool = False) -> str:
    """No new boot came: when the host still answers in its old boot, what recover stopped runs again and its
    lock goes; where the reboot was `accepted` (it may land later, slowly) the stop mark stays, so the run after
    it starts the unit again. What became of the host, in words."""
    try:
        s = sessions(host, opts)
    except FleetError:
        return f"{host.name} does not answer: check it from its console (or the Proxmox web UI)"
    try:
        if s.boot_id() != boot:
            return f"{host.name} answers in a new boot now"
        done = ([_start(s, unit) for unit in stopped] if lock is None
                else release_after_reboot(s, lock, stopped, keep_mark=accepted))
        if lock is not None and not any(note.startswith("the host lock") for note in done):
            done.append("the host lock was released")
        where = (f"{host.name} is still in the boot it had: the reboot was accepted but had not happened when the "
                 "wait ended (the stop mark stays: the next fleet run after it starts the unit)" if accepted
                 else f"{host.name} is still in the boot it had (not rebooted, not reset)")
        return "; ".join([where, *done])
    except (FleetError, EOFError, OSError, SSHException) as exc:
        return f"{host.name} could not be put back ({one_line(str(exc))}): check it from its console"
    finally:
        s.close()


def _start(s: HostSession, unit: str) -> str:
    try:
        if problem := restore.installed_problem(s, unit):
            return f"{unit} was stopped and {NOT_STARTED}: the owner rule refuses it ({problem})"
        s.start(unit)
    except FleetError as exc:
        return f"starting {unit} again failed ({one_line(str(exc))})"
    return f"{unit} was started again ({s.is_active(unit)})"
