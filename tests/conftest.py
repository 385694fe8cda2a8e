"""Test-wide setup: the sandbox guard is on, real inventory addresses are blackholed, and sandbox tests share one
sandbox fleet per process that is always torn down.

The suite runs in parallel (pytest-xdist, `-n 3` in pyproject's addopts): each worker takes a free sandbox instance
of its own (lane0..lane3; FLEET_SANDBOX_LANES names others) and holds it for its life, so its own hosts, bridge,
addresses, inventory and known_hosts, and its own FLEET_STATE_DIR and FLEET_WHEELHOUSE. A test module runs whole
on one worker (its module fixtures are set up once); a module that sets SPREAD_OVER_WORKERS = True (the fault
matrix) has its tests spread over the workers. Run serially with `-n 0` (the 'test' instance), or with
FLEET_SANDBOX_INSTANCE set to one instance (e.g. `dev`, to go alongside another run): one instance is one fleet,
so that run is serial.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

os.environ["FLEET_SANDBOX_ONLY"] = "1"
# The instance the person running the suite named (before this file names one): one instance, one serial run.
_NAMED_INSTANCE = os.environ.get("FLEET_SANDBOX_INSTANCE") if not os.environ.get("PYTEST_XDIST_WORKER") else None
os.environ.setdefault("FLEET_SANDBOX_INSTANCE", "test")  # "dev" runs a second suite alongside
# fleet's local state (facts, known-good rungs) of the tests never mixes with the user's .fleet/, nor reads the
# user's wheelhouse (a test that installs packages builds its own: sandbox/sim/wheels.py). Made here once per run
# (a worker inherits its controller's and takes a folder in it by lane), removed when this process ends.
_MADE: list[Path] = []
for _var, _prefix in (("FLEET_STATE_DIR", "fleet-test-state-"), ("FLEET_WHEELHOUSE", "fleet-test-wheelhouse-")):
    if _var not in os.environ:
        _MADE.append(Path(tempfile.mkdtemp(prefix=_prefix)))
        os.environ[_var] = str(_MADE[-1])


def lanes() -> list[str]:
    """The sandbox instances a parallel run's workers take from: lane0..lane3, or those FLEET_SANDBOX_LANES names."""
    from sandbox.config import LANES

    named = os.environ.get("FLEET_SANDBOX_LANES", "")
    return [n.strip() for n in named.split(",") if n.strip()] or list(LANES[:4])


_HELD: dict[str, int] = {}  # instance -> the fd of its lock, held for this process's life (the kernel lets go)
# Where the locks live: root's under /run/lock (no clean-up of /tmp removes a lock a live run holds), others' in /tmp.
_LOCKS = (Path("/run/lock/fleet-sandbox") if os.geteuid() == 0 and Path("/run/lock").is_dir()
          else Path(tempfile.gettempdir()) / f"fleet-sandbox-locks-{os.getuid()}")


def hold(instance: str) -> bool:
    """Take this machine's lock on a sandbox instance for as long as this process lives; False when another
    live test run holds it. A run killed in the middle holds nothing: its next run takes the lock and downs
    what the dead one left."""
    if instance in _HELD:
        return True
    folder = _LOCKS
    folder.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(folder / f"{instance}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD[instance] = fd
    return True


def _free_lane(worker: str) -> str:
    """gwN takes the first lane free from the Nth on: two parallel runs on one machine never share a lane. With
    none free it names its own without holding it: its pure tests run, a sandbox test fails saying why."""
    pool = lanes()
    n = int(worker.removeprefix("gw"))
    for lane in pool[n:] + pool[:n]:
        if hold(lane):
            return lane
    return pool[n % len(pool)]


WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ...: this process is one of a parallel run's workers
# Once per worker: this file loaded again by path (a test reads lanes() from it), or by a process the worker started
# (it inherits PYTEST_XDIST_WORKER), takes no second lane.
if WORKER and "FLEET_TEST_LANE_OF" not in os.environ:
    os.environ["FLEET_TEST_LANE_OF"] = str(os.getpid())
    # Everything a sandbox test shares with the other workers is made per worker here, before any test (or fleet)
    # reads it: the fleet (instance: hosts, addresses, bridge, inventory, known_hosts) and the local state folders,
    # by lane (a lane is one run's at a time, even when two runs were given the same FLEET_STATE_DIR).
    os.environ["FLEET_SANDBOX_INSTANCE"] = _free_lane(WORKER)
    for _var in ("FLEET_STATE_DIR", "FLEET_WHEELHOUSE"):
        _mine = Path(os.environ[_var]) / os.environ["FLEET_SANDBOX_INSTANCE"]
        _mine.mkdir(parents=True, exist_ok=True)
        os.environ[_var] = str(_mine)

# A suite started as a background job of a non-interactive shell (`cmd &`, nohup) inherits SIGINT ignored, and so
# would every `inv` it starts: Python then installs no KeyboardInterrupt, and the Ctrl-C tests would wait forever.
# A handler here is reset to the default in each child, which Python then turns into KeyboardInterrupt again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parent.parent
PROFILES = ["rtx-pro-6000-x8-proxmox", "h100-sxm-x8", "rtx5090-x2-workstation", "b200-x8"]


@pytest.fixture(scope="module", autouse=True)
def _own_fleet_state(tmp_path_factory):
    """Each test module has fleet state of its own (facts, what the fleet learned): every deploy teaches the fleet
    (issue 39), so one module's deploys would reorder another's ladders (the known winner is tried first), and a
    module would pass alone and fail in the suite."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLEET_STATE_DIR", str(tmp_path_factory.mktemp("fleet-state")))
        yield


_INHERITED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@pytest.fixture(autouse=True)
def _signals_as_found():
    """A test leaves this worker's signals as it found them. An ignored or blocked signal is inherited by every
    process the worker starts after it: a test that ran `inv` in-process left SIGTERM ignored, and a later probe
    test's `kill` of a stuck job then did nothing (the job held the probe's pipe, 60 s, a flake by test order)."""
    handlers = {sig: signal.getsignal(sig) for sig in _INHERITED}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    changed = [sig.name for sig, h in handlers.items() if signal.getsignal(sig) is not h]
    held = signal.pthread_sigmask(signal.SIG_SETMASK, blocked) != blocked
    for sig, h in handlers.items():
        signal.signal(sig, h)
    assert not changed and not held, (f"the test left signal handlers changed ({', '.join(changed) or 'none'}) "
                                      f"or signals blocked ({held}): restore them")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Before pytest-xdist starts workers: a run on one named instance is serial (one instance is one fleet), and a
    parallel run has a lane for every worker."""
    from sandbox.config import _INSTANCES

    unknown = [name for name in lanes() if name not in _INSTANCES]
    if unknown:
        raise pytest.UsageError(f"FLEET_SANDBOX_LANES: no sandbox instance {', '.join(unknown)} (lanes are "
                                f"lane0..lane7; sandbox/config.py)")
    n = getattr(config.option, "numprocesses", None)
    if not n:
        return
    if _NAMED_INSTANCE and not os.environ.get("FLEET_SANDBOX_LANES"):
        config.option.numprocesses = 0  # FLEET_SANDBOX_INSTANCE=dev pytest: that instance alone, as before
        return
    if isinstance(n, int) and n > len(lanes()):
        raise pytest.UsageError(f"-n {n}: only {len(lanes())} sandbox lanes ({', '.join(lanes())}); "
                                f"name more in FLEET_SANDBOX_LANES")


def pytest_report_header(config):
    if getattr(config.option, "numprocesses", None):
        return f"sandbox lanes: each worker takes a free one of {', '.join(lanes())}"
    return f"sandbox instance: {os.environ['FLEET_SANDBOX_INSTANCE']}"


# A parallel run hands out work in this order (the sandbox's long waits first, the short CPU-bound tests last, to
# fill the gaps): a long module started last would make the others wait for it at the end.
ORDER = ["faults", "integration", "hostile", "sim", "upstream", "unit"]


def pytest_collection_modifyitems(config, items):
    """A parallel run hands out the sandbox's long waits first (ORDER), in the same order on every worker."""
    if WORKER:
        def rank(item):
            parts = Path(str(item.path)).relative_to(REPO / "tests").parts
            return (ORDER.index(parts[0]) if parts[0] in ORDER else len(ORDER), not _spread(item.nodeid))
        items.sort(key=rank)  # stable: the order within a module (and between modules of a folder) is kept
    _SANDBOX_MODULES.update(item.path for item in items if "_sandbox_session" in item.fixturenames)


@functools.cache
def _spread_module(path: str) -> bool:
    """The module says `SPREAD_OVER_WORKERS = True` (read as text: the controller of a parallel run collects
    nothing, it sees node ids only)."""
    try:
        text = (REPO / path).read_text()
    except OSError:
        return False
    return any(line.strip() == "SPREAD_OVER_WORKERS = True" for line in text.splitlines())


def _spread(nodeid: str) -> bool:
    return _spread_module(nodeid.split("::", 1)[0])


def pytest_xdist_make_scheduler(config, log):
    """A module's tests run on one worker, in order, its module fixtures set up once; a module that sets
    SPREAD_OVER_WORKERS = True (the fault matrix: every point of every kind) has its tests spread over them.
    Our own scope, not xdist_group marks: pytest 9.2 no longer reads the group xdist 3.8 writes into the node id,
    and every test went its own way (a module's tests on three workers, each finding the others' hosts)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if _spread(nodeid) else nodeid.split("::", 1)[0]

    return ModuleScheduling(config, log)


def pytest_sessionstart(session):
    if os.geteuid() == 0:
        from sandbox import blackhole

        blackhole.install()
        if WORKER and os.environ["FLEET_SANDBOX_INSTANCE"] in _HELD:
            _down_what_a_dead_run_left(os.environ["FLEET_SANDBOX_INSTANCE"])


def pytest_sessionfinish(session):
    """The controller of a parallel run, at its end: a lane nobody holds that still has hosts (a worker that
    crashed mid-run, its replacement on another lane) goes down, so the run leaves no fleet behind."""
    if WORKER or not getattr(session.config.option, "numprocesses", None) or os.geteuid() != 0:
        return
    for lane in lanes():
        if hold(lane):
            try:
                _down_what_a_dead_run_left(lane)
            finally:
                os.close(_HELD.pop(lane))


def pytest_unconfigure(config):
    for made in _MADE:
        shutil.rmtree(made, ignore_errors=True)


def _down_what_a_dead_run_left(instance: str) -> None:
    """A lane as a run killed in the middle left it (hosts still running, its namespaces and bridge) goes down:
    on a worker before anything else, even one that runs no sandbox test (the session fixture downs it too)."""
    from sandbox.config import config
    from sandbox.hosts import Sandbox

    sb = Sandbox(config(instance), log=lambda m: None)
    if sb.load_state() is not None:
        sb.down()


@pytest.fixture(scope="session")
def bare_profile(tmp_path_factory) -> Path:
    """A profile folder made here, not shipped: no systemd-detect-virt, no DMI (any folder must work), and
    P2P that nvidia-smi reports OK but that hangs, as VFIO clique grants do (nccl#2335)."""
    dest = tmp_path_factory.mktemp("profiles") / "bare-2gpu"
    shutil.copytree(REPO / "sandbox/profiles/rtx5090-x2-workstation", dest)
    (dest / "system/systemd-detect-virt.txt").unlink()
    shutil.rmtree(dest / "system/dmi")
    p2p = dest / "nvidia-smi/topo-p2p-r.txt"
    p2p.write_text(p2p.read_text().replace("GNS", "OK"))
    with open(dest / "profile.yaml", "a") as f:
        f.write("p2p_broken: true\n")
    return dest


@pytest.fixture(scope="session")
def _sandbox_session(bare_profile):
    from sandbox.config import config
    from sandbox.hosts import Sandbox

    if os.geteuid() != 0:
        pytest.fail("sandbox tests need root (CI runs as root); a sandbox that cannot start is a failure")
    instance = os.environ["FLEET_SANDBOX_INSTANCE"]
    if not hold(instance):
        pytest.fail(f"sandbox instance {instance} is in use by another test run on this machine (every lane of "
                    f"{', '.join(lanes())} when in parallel); wait for it, name free lanes in FLEET_SANDBOX_LANES, "
                    f"or run serially on another instance: FLEET_SANDBOX_INSTANCE=dev pytest -n 0")
    sb = Sandbox(config(), log=lambda m: None)
    profiles = [*PROFILES, str(bare_profile)]
    try:
        sb.down()  # fresh hosts every session, even after a run that died without tearing down
        sb.up(len(profiles), profiles)
        yield sb, profiles
    finally:
        sb.down()


_SANDBOX_MODULES: set[Path] = set()  # the test modules that use the sandbox (collected)
_SERVED: list[Path] = []  # the modules this process's fleet has served


@pytest.fixture(scope="module", autouse=True)
def _fresh_fleet(request):
    """Each test module that uses the sandbox starts on fresh hosts (about 2 s: down and up again). A module leaves
    what it did on its hosts (releases, venvs, patched files, a lock, a sim server holding GPU memory), and which
    module ran before it on a lane depends on how the parallel run handed them out: seven tests passed alone and
    in the serial order and failed after another module in a parallel run."""
    if request.node.path not in _SANDBOX_MODULES:
        yield
        return
    sb, profiles = request.getfixturevalue("_sandbox_session")
    if _SERVED:
        sb.down()
        sb.up(len(profiles), profiles)
    _SERVED.append(request.node.path)
    yield


@pytest.fixture
def sandbox(_sandbox_session):
    """The test fleet, brought back up if an earlier test took it down (a no-op when it runs)."""
    sb, profiles = _sandbox_session
    sb.up(len(profiles), profiles)
    return sb


@pytest.fixture
def sandbox_inventory(sandbox):
    from fleet import inventory

    return inventory.load(sandbox.cfg.inventory_path)
