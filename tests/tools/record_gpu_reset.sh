#!/bin/sh
# Records how a real nvidia-smi refuses `-r`/`--gpu-reset` (tests/fixtures/gpu-health/gpu_reset_refused_*.txt):
# without root, and as root while a CUDA context holds the GPU (persistence left as the machine has it). It never
# asks for a reset that could go through: every root call below runs while the holder's context is alive.
# Usage on a GPU machine: sh tests/tools/record_gpu_reset.sh OUTDIR
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
say() { printf '== %s\n' "$*"; "$@" 2>&1; printf 'rc=%s\n' "$?"; }
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
{
    say nvidia-smi --version
    say nvidia-smi --query-gpu=index,pci.bus_id,persistence_mode,gpu_recovery_action --format=csv
    say nobody nvidia-smi -r -i 0
    say nobody nvidia-smi --gpu-reset -i 0
    say nobody nvidia-smi -pm 0 -i 0
    say nvidia-smi -r -i 9
} > "$out/gpu_reset_refused_not_root.txt"
# A CUDA context on GPU 0 through the driver API alone (no torch): what a serving process looks like to the reset.
python3 - "$out/holder.ready" <<'PY' &
import ctypes, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
ctx = ctypes.c_void_p()
assert cuda.cuInit(0) == 0 and cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0) == 0
open(sys.argv[1], "w").close()
time.sleep(60)
PY
holder=$!
i=0
while [ ! -e "$out/holder.ready" ] && [ $i -lt 100 ]; do sleep 0.2; i=$((i + 1)); done
{
    say nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory --format=csv
    if [ -e "$out/holder.ready" ] && kill -0 $holder; then
        say nvidia-smi -r -i 0
        say nvidia-smi --gpu-reset -i 0
    else
        echo "no CUDA context could be made: no root reset asked"
    fi
} > "$out/gpu_reset_refused_in_use.txt"
kill $holder
wait $holder 2>/dev/null
rm -f "$out/holder.ready"
