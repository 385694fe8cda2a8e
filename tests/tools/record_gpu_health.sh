#!/bin/sh
# Records what fleet's health facts are parsed from, on a real GPU host (run by hand or through the lent
# device): nvidia-smi -q, the health fields of --query-gpu, the kernel log as the login reads it, and whether
# the venv's torch sees GPUs for the P2P check. Usage: sh tests/tools/record_gpu_health.sh OUTDIR
out=${1:?usage: record_gpu_health.sh OUTDIR}; mkdir -p "$out"
nvidia-smi -q > "$out/nvidia_smi_q.txt" 2>&1
nvidia-smi --help-query-gpu > "$out/help_query_gpu.txt" 2>&1
F=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,retired_pages.pending,retired_pages.double_bit.count,remapped_rows.pending,remapped_rows.failure,clocks_event_reasons.active,temperature.gpu,persistence_mode
nvidia-smi --query-gpu=$F --format=csv,nounits > "$out/query_health.csv" 2>&1
{
  echo "== nvidia-smi --version"; nvidia-smi --version; echo "rc=$?"
  for f in clocks_throttle_reasons.active gpu_recovery_action ecc.mode.current retired_pages.single_bit_ecc.count remapped_rows.correctable remapped_rows.uncorrectable; do
    echo "== query $f"; nvidia-smi --query-gpu=$f --format=csv,nounits 2>&1; echo "rc=$?"
  done
  echo "== nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER,TEMPERATURE,PERFORMANCE"
  nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER,TEMPERATURE,PERFORMANCE 2>&1; echo "rc=$?"
  echo "== time (ms): nvidia-smi -q, --query-gpu health"
  for c in "nvidia-smi -q" "nvidia-smi --query-gpu=$F --format=csv,nounits"; do
    s=$(date +%s%N); $c >/dev/null 2>&1; echo "$c: $(( ($(date +%s%N) - s) / 1000000 ))"
  done
  echo "== python3 torch"; python3 -c 'import torch; print(torch.__version__, torch.cuda.device_count())' 2>&1
  echo "== nvidia-smi topo -p2p r"; nvidia-smi topo -p2p r 2>&1; echo "rc=$?"
} > "$out/misc.txt" 2>&1
{
  echo "== id"; id
  echo "== journalctl -k -b"; journalctl -k -b -o short-monotonic --no-pager 2>&1 | tail -40; echo "rc=$?"
  echo "== dmesg"; dmesg 2>&1 | tail -40; echo "rc=$?"
  echo "== dmesg NVRM"; dmesg 2>&1 | grep -E 'NVRM|nvidia' | tail -40
  echo "== /proc/driver/nvidia/version"; cat /proc/driver/nvidia/version 2>&1
} > "$out/kernel_log.txt" 2>&1
