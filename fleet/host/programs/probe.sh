# fleet's probe: every fact of a GPU host in one round trip (fleet/host/probe.py parses what it prints).
# Shipped as text over one exec channel: sh -c "$(this file)" fleet-probe VENV UNIT QUERY_FIELDS [LIMIT]
# Each section is framed by @@fleet:begin NAME@@ / @@fleet:end NAME rc=N@@; the last line is @@fleet:done@@.
# Every command that may wait on something (NVML's start-up, a second or more per nvidia-smi call on an
# 8-GPU host without persistence mode; systemd; a hung mount under df) is independent of the others: they
# all start at once, each as a job of its own writing straight into a file (no wrapper process), while the
# shell reads what needs no command. One deadline of LIMIT seconds (default 30) bounds them all: a job still
# running then is killed and its section ends rc=124, the others print whole. Sections print in the same
# order and bytes as when everything runs one after the other, each under `timeout` (the fallback: no
# temp dir).
venv=$1; unit=$2; f=$3; limit=${4:-30}
case $venv in "~") venv=$HOME;; "~/"*) venv=$HOME/${venv#"~/"};; esac
T=; command -v timeout >/dev/null 2>&1 && T="timeout $limit"
b() { printf '@@fleet:begin %s@@\n' "$1"; }
e() { printf '\n@@fleet:end %s rc=%s@@\n' "$1" "$2"; }
run() { n=$1; shift; b "$n"; "$@" 2>&1; e "$n" $?; }
dump() {
  [ -r "$1" ] || { echo "cannot read $1"; return 1; }
  while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "$l"; done < "$1"
}
cache=${FLASHINFER_WORKSPACE_BASE:-$HOME}/.cache/flashinfer

gpu_query() {  # $1 section, $2 fields: asked again without a field an old driver does not know, up to 4 times
  s=$1; f=$2; i=0
  while :; do
    b "$s"; o=$($T nvidia-smi --query-gpu="$f" --format=csv,nounits 2>&1); rc=$?
    printf '%s' "$o"; e "$s" $rc
    [ $rc -eq 2 ] && [ $i -lt 4 ] || break
    case $o in *'Field "'*'" is not a valid field to query.'*) ;; *) break;; esac
    x=${o#*Field \"}; x=${x%%\"*}
    case ,$f, in *,"$x",*) ;; *) break;; esac
    g=,$f,; g=${g%%,"$x",*},${g#*,"$x",}; g=${g#,}; f=${g%,}; i=$((i+1))
    [ -n "$f" ] || break
  done
}
# The health fields (fleet/host/gpuhealth.py HEALTH_FIELDS), a query of their own so that an old driver that
# rejects several of them never costs the main query its GPUs.
hf=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,retired_pages.pending,retired_pages.double_bit.count,remapped_rows.pending,remapped_rows.failure,clocks_throttle_reasons.active,temperature.gpu,persistence_mode,gpu_recovery_action
#@include xid.sh
smi_fallback() {  # $1: the status of nvidia-smi --version (a driver too old for it prints its banner)
  [ "$1" -eq 0 ] || run smi-plain $T nvidia-smi
  run proc-driver dump /proc/driver/nvidia/version
}
# step NAME CMD...: the output and end of section NAME (its begin line printed already), whose command may
# wait. One after the other: run now, under `timeout`. Concurrent: see below.
step() { n=$1; shift; $T "$@" 2>&1; rc=$?; e "$n" $rc; }
fstep() { n=$1; shift; "$@" 2>&1; e "$n" $?; }  # a function: it bounds its own commands
host_facts() {
  b xid; fstep xid kernel_log
  b virt; step virt systemd-detect-virt
  b dmi; d=/sys/class/dmi/id; v=; p=
  [ -r $d/sys_vendor ] && read -r v < $d/sys_vendor
  [ -r $d/product_name ] && read -r p < $d/product_name
  if [ -n "$v$p" ]; then printf 'source=sysfs\nvendor=%s\nproduct=%s\n' "$v" "$p"
  elif command -v dmidecode >/dev/null 2>&1; then
    printf 'source=dmidecode\nvendor=%s\n' "$(dmidecode -s system-manufacturer 2>&1)"
    printf 'product=%s\n' "$(dmidecode -s system-product-name 2>&1)"
  elif command -v hostnamectl >/dev/null 2>&1; then echo source=hostnamectl; $T hostnamectl status 2>&1
  fi; e dmi 0
  o=/etc/os-release; [ -r $o ] || o=/usr/lib/os-release; run os-release dump $o
  run kernel uname -srm
  b unit; printf 'Unit=%s\n' "$unit"
  step unit systemctl show "$unit" --property=LoadState,ActiveState,SubState,UnitFileState,MainPID
  b df; set --
  for kv in "root=/" "venv=$venv" "flashinfer_cache=$cache" "hf_cache=${HF_HOME:-$HOME/.cache/huggingface}"; do
    k=${kv%%=*}; p=${kv#*=}
    while [ -n "$p" ] && [ ! -e "$p" ]; do p=${p%/*}; done
    [ -n "$p" ] || p=/
    printf 'path %s %s\n' "$k" "$p"; set -- "$@" "$p"
  done
  step df df -Pk "$@"

  b packages; set --
  [ -d "$venv" ] || printf '@novenv %s\n' "$venv"
  for sp in "$venv"/lib/python3*/site-packages; do
    [ -d "$sp" ] || continue
    printf '@sp %s\n' "$sp"
    for t in flashinfer flashinfer_cubin flashinfer_jit_cache nvidia/nccl sgl_kernel sglang torch; do [ -d "$sp/$t" ] && printf '@dir %s\n' "$sp/$t"; done
    for n in sglang sgl_kernel sglang_kernel flashinfer_python flashinfer flashinfer_jit_cache flashinfer_cubin torch nvidia_nccl_cu12 nvidia_nccl_cu13; do
      for d in "$sp"/$n-*.dist-info; do
      for x in METADATA direct_url.json; do [ -f "$d/$x" ] && set -- "$@" "$d/$x"; done
    done; done
  done
  if [ $# -gt 0 ]; then
    awk 'FNR==1 { h=1; print "@file " FILENAME }
         FILENAME ~ /\/METADATA$/ { if (h && $0 == "") h=0; if (h && $0 ~ /^(Name|Version):/) print; next }
         { print }' "$@" 2>&1
  fi; e packages $?
  b torch-version
  for sp in "$venv"/lib/python3*/site-packages; do
    [ -r "$sp/torch/version.py" ] && dump "$sp/torch/version.py"
  done
  e torch-version 0
  b torch-archs
  for sp in "$venv"/lib/python3*/site-packages; do
    l=$sp/torch/lib/libtorch_python.so
    [ -r "$l" ] && grep -a -o -m1 -E '(sm|compute)_[0-9]+[a-z]?( (sm|compute)_[0-9]+[a-z]?)+' "$l"
  done; e torch-archs 0
  b flashinfer-cache; printf 'path %s\n' "$cache"
  if [ -d "$cache" ]; then echo exists
    for w in "$cache"/*/*/; do
      [ -d "$w" ] || continue; w=${w%/}; printf 'ws %s\n' "${w#"$cache"/}"
      for m in "$w"/cached_ops/*/; do [ -d "$m" ] && { m=${m%/}; printf 'op %s\n' "${m#"$cache"/}"; }; done
    done
  fi; e flashinfer-cache 0
}
# alive PID: the job has not ended (a zombie has); where /proc cannot tell, it may still run.
alive() {
  { read -r Fst < "/proc/$1/stat"; } 2>/dev/null || { [ -r /proc/self/stat ] && return 1; return 0; }
  Fst=${Fst##*) }; [ "${Fst%% *}" != Z ]
}
# settle: every job waited for, its end line written and its status in Frc<job> (job 0, query-gpu, ends its
# own sections, unless it is killed). If one still runs once
# the shell is done, a watchdog wakes the shell at the deadline (and each second after, so a wait cannot
# miss it); jobs still running then are killed, never waited for (one stuck in the kernel would not die),
# and end rc=124. Only jobs not yet waited for are signalled: their PIDs cannot have been reused. A host
# without sleep(1) gets no deadline, as one without timeout(1) gets none one after the other.
settle() {
  Fwd= Flate=
  for Fj in $Fjobs; do
    eval "Fp=\$Fpid$Fj"
    alive "$Fp" && command -v sleep >/dev/null 2>&1 || continue
    { read -r Ft _ < /proc/uptime; } 2>/dev/null; Ft=${Ft%%.*}
    Fleft=$((limit - ${Ft:-0} + ${Ft0:-0})); [ "$Fleft" -gt 0 ] || Fleft=1
    trap 'Flate=1' USR1
    ( trap 'kill $Fs 2>/dev/null; exit 0' TERM
      sleep "$Fleft" & Fs=$!; wait "$Fs"
      while kill -USR1 $$; do sleep 1 & Fs=$!; wait "$Fs"; done ) >/dev/null 2>&1 &
    Fwd=$!
    break
  done
  for Fj in $Fjobs; do
    eval "Fp=\$Fpid$Fj Fn=\$Fname$Fj"
    while :; do
      if [ -n "$Flate" ] && alive "$Fp"; then kill "$Fp" 2>/dev/null; Fr=124; break; fi
      wait "$Fp"; Fr=$?
      [ -n "$Flate" ] && [ "$Fr" -gt 128 ] && { alive "$Fp" && continue; Fr=124; }
      break
    done
    if [ "$Fj" = 0 ]; then [ "$Fr" != 124 ] || e "$Fn" 124 >> "$D/q"  # the queries end their own sections
    elif [ "$Fj" = h ]; then [ "$Fr" != 124 ] || e "$Fn" 124 >> "$D/h"
    else eval "Frc$Fj=\$Fr"; e "$Fn" "$Fr" > "$D/t$Fj"; fi
  done
  [ -z "$Fwd" ] || { kill "$Fwd"; trap - USR1; }
}
if D=$(mktemp -d 2>/dev/null); then
  trap 'rm -rf "$D"' EXIT
  # What the shell prints goes to numbered part files in $D; each step adds its job's output file and the
  # file its end line goes to once the job is waited for; one cat prints every part in order at the end.
  # Jobs never hold the channel (fd 3): one stuck past the deadline cannot keep the answer from ending.
  exec 3>&1; Fk=0 Fnj=0
  part() { Fk=$((Fk+1)); Fparts="$Fparts m$Fk"; exec > "$D/m$Fk"; }
  step() {
    Fn=$1; shift; Fnj=$((Fnj+1)); Fjobs="$Fjobs $Fnj"
    "$@" > "$D/j$Fnj" 2>&1 3>&- &
    eval "Fpid$Fnj=\$! Fname$Fnj=\$Fn"; Fparts="$Fparts j$Fnj t$Fnj"; part
  }
  { read -r Ft0 _ < /proc/uptime; } 2>/dev/null; Ft0=${Ft0%%.*}
  fstep() { step "$@"; }
  gpu_query query-gpu "$f" > "$D/q" 3>&- &  # job 0: it may ask again on an old driver, a shell of its own
  Fpid0=$! Fname0=query-gpu
  gpu_query health-gpu "$hf" > "$D/h" 3>&- &  # job h: the same, for the health fields
  Fpidh=$! Fnameh=health-gpu Fjobs="0 h" Fparts="q h"; part
  b topo-m; step topo-m nvidia-smi topo -m
  b topo-p2p-r; step topo-p2p-r nvidia-smi topo -p2p r
  b smi-version; step smi-version nvidia-smi --version
  Fv=$Fnj Fpost=$Fk; part
  host_facts
  exec >&3 3>&-
  settle
  eval "smi_fallback \$Frc$Fv" > "$D/m$Fpost"
  cd "$D" && cat $Fparts
else
  gpu_query query-gpu "$f"
  gpu_query health-gpu "$hf"
  b topo-m; step topo-m nvidia-smi topo -m
  b topo-p2p-r; step topo-p2p-r nvidia-smi topo -p2p r
  b smi-version; step smi-version nvidia-smi --version
  smi_fallback $rc
  host_facts
fi
printf '@@fleet:done@@\n'
