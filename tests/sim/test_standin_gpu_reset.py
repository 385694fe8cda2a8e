"""The stand-in nvidia-smi's `-r`/`--gpu-reset` and `-pm` against what driver 580 printed on the lent H200
(tests/fixtures/gpu-health/gpu_reset_refused_*.txt): refused while a process holds the GPU or persistence is on,
refused without root, done otherwise, and the reset clears what the GPU's health fields said was wrong."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMI = REPO / "sandbox" / "standins" / "nvidia-smi"
PROFILE = REPO / "sandbox" / "profiles" / "rtx-pro-6000-x8-proxmox"
FIXTURES = REPO / "tests" / "fixtures" / "gpu-health"
H200_BUS, GPU0 = "00000000:00:06.0", "00000000:01:00.0"  # the recorded H200's bus id; GPU 0 of the profile
HEALTH = "index,persistence_mode,gpu_recovery_action,remapped_rows.pending,ecc.errors.uncorrected.volatile.total"


def recorded(name: str) -> dict[str, tuple[str, int]]:
    """Each `== command` section of a recording: (its output, its exit status)."""
    out = {}
    for block in re.split(r"^== ", (FIXTURES / name).read_text(), flags=re.M)[1:]:
        command, _, rest = block.partition("\n")
        text, _, rc = rest.rpartition("rc=")
        out[command] = (text, int(rc))
    return out


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return tmp_path / "run"


def smi(run_dir: Path, *args: str, user: bool = False) -> tuple[str, int]:
    env = {"PATH": os.environ["PATH"], "FLEET_SANDBOX_PROFILE": str(PROFILE), "FLEET_SIM_RUN": str(run_dir)}
    command = ["sh", str(SMI), *args]
    if user:  # as nobody, what a login without root gets
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert proc.stderr == ""  # the real tool prints its refusals on stdout
    return proc.stdout, proc.returncode


def health(run_dir: Path, gpu: int = 0) -> list[str]:
    out, rc = smi(run_dir, f"--query-gpu={HEALTH}", "--format=csv,noheader", "-i", str(gpu))
    assert rc == 0, out
    return out.strip().split(", ")


def hold(run_dir: Path, gpu: int) -> subprocess.Popen:
    """A live process on the GPU, as the simulated server registers its workers."""
    proc = subprocess.Popen(["sleep", "60"])
    (run_dir / "apps").mkdir(parents=True, exist_ok=True)
    (run_dir / "apps" / str(proc.pid)).write_text(f"{gpu} 518 python3\n")
    return proc


def test_a_process_on_the_gpu_is_refused_in_the_words_and_status_driver_580_used(run_dir):
    want, rc = recorded("gpu_reset_refused_in_use.txt")["nvidia-smi -r -i 0"]
    smi(run_dir, "-pm", "0", "-i", "0")
    holder = hold(run_dir, 0)
    try:
        for flag in ("-r", "--gpu-reset"):
            assert smi(run_dir, flag, "-i", "0") == (want.replace(H200_BUS, GPU0), rc) == (want.replace(
                H200_BUS, GPU0), 255)
    finally:
        holder.kill()
        holder.wait()
    assert smi(run_dir, "-r", "-i", "0") == (f"GPU {GPU0} was successfully reset.\n", 0)  # its holder gone


def test_persistence_on_is_refused_as_in_use_until_it_is_turned_off(run_dir):
    assert health(run_dir)[1] == "Enabled"  # as the profile says
    out, rc = smi(run_dir, "-r", "-i", "0")
    assert rc == 255 and f"  GPU {GPU0}: In use by another client\n" in out
    assert smi(run_dir, "-pm", "0", "-i", "0") == (f"Disabled persistence mode for GPU {GPU0}.\nAll done.\n", 0)
    assert health(run_dir)[1] == "Disabled" and health(run_dir, 1)[1] == "Enabled"  # only the GPU named
    assert smi(run_dir, "--gpu-reset", "-i", "0") == (f"GPU {GPU0} was successfully reset.\n", 0)
    assert smi(run_dir, "-pm", "1", "-i", "0")[1] == 0 and health(run_dir)[1] == "Enabled"


def test_several_gpus_held_are_counted_in_the_plural_and_none_is_reset(run_dir):
    smi(run_dir, "-pm", "0", "-i", "0,1")
    with (run_dir / "gpustate").open("a") as state:
        state.write(f"{GPU0} gpu_recovery_action=GPU Reset\n")
    out, rc = smi(run_dir, "-r", "-i", "0,1,2")  # 2 still persistent
    assert rc == 255 and out.startswith("The following GPUs could not be reset:\n  GPU 00000000:03:00.0: In use")
    out, rc = smi(run_dir, "-r")  # every GPU: 2 to 7 persistent
    assert rc == 255 and "\n6 devices are currently being used " in out and "using these devices" in out
    assert health(run_dir)[2] == "GPU Reset"  # all or nothing: GPU 0 was not reset


def test_without_root_the_reset_is_refused_as_recorded(run_dir):
    run_dir.mkdir(mode=0o755)
    rec = recorded("gpu_reset_refused_not_root.txt")
    want, rc = rec["nobody nvidia-smi -r -i 0"]
    assert smi(run_dir, "-r", "-i", "0", user=True) == (want.replace(H200_BUS, GPU0), rc) == (want.replace(
        H200_BUS, GPU0), 4)
    want, rc = rec["nobody nvidia-smi -pm 0 -i 0"]  # refused, yet it says it did and exits 0: driver 580's words
    assert smi(run_dir, "-pm", "0", "-i", "0", user=True) == (want.replace(H200_BUS, GPU0), rc)
    assert health(run_dir)[1] == "Enabled"  # nothing changed
    assert not (run_dir / "gpustate").exists()


def test_an_index_that_names_no_gpu_is_not_found(run_dir):
    assert smi(run_dir, "-r", "-i", "9") == recorded("gpu_reset_refused_not_root.txt")["nvidia-smi -r -i 9"]
    assert smi(run_dir, "-pm", "0", "-i", "0,9")[1] == 6 and not (run_dir / "gpustate").exists()


def test_a_reset_clears_the_recovery_action_pending_repairs_and_volatile_ecc(run_dir):
    run_dir.mkdir()
    (run_dir / "gpustate").write_text(f"{GPU0} gpu_recovery_action=GPU Reset\n{GPU0} remapped_rows.pending=Yes\n"
                                      f"{GPU0} ecc.errors.uncorrected.volatile.total=2\n")
    assert health(run_dir) == ["0", "Enabled", "GPU Reset", "Yes", "2"]
    assert health(run_dir, 1) == ["1", "Enabled", "None", "No", "0"]
    smi(run_dir, "-pm", "0", "-i", "0")
    assert smi(run_dir, "-r", "-i", "0")[1] == 0
    assert health(run_dir) == ["0", "Disabled", "None", "No", "0"]


def test_a_gpu_off_the_bus_cannot_be_reset(run_dir):
    run_dir.mkdir()
    (run_dir / "lost").write_text(f"{GPU0}\n")
    smi(run_dir, "-pm", "0", "-i", "0")
    assert smi(run_dir, "-r", "-i", "0") == (f"Unable to determine the device handle for GPU{GPU0}: Unknown Error\n",
                                             15)
