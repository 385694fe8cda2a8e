# fleet's probe: every fact of a GPU host in one round trip (fleet/probe.py parses what it prints).
# Shipped as text over one exec channel: sh -c "$(this file)" fleet-probe VENV UNIT QUERY_FIELDS
# Each section is framed by @@fleet:begin NAME@@ / @@fleet:end NAME rc=N@@; the last line is @@fleet:done@@.
# The nvidia-smi calls are independent, and each pays NVML's start-up (a second or more per call on an
# 8-GPU host without persistence mode): they run at once, each into a file of its own, and every section
# is printed whole, in the same order as when they run one after the other (the fallback: no temp dir).
venv=$1; unit=$2; f=$3
case $venv in "~") venv=$HOME;; "~/"*) venv=$HOME/${venv#"~/"};; esac
T=; command -v timeout >/dev/null 2>&1 && T='timeout 30'
b() { printf '@@fleet:begin %s@@\n' "$1"; }
e() { printf '\n@@fleet:end %s rc=%s@@\n' "$1" "$2"; }
run() { n=$1; shift; b "$n"; "$@" 2>&1; e "$n" $?; }
dump() {
  [ -r "$1" ] || { echo "cannot read $1"; return 1; }
  while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "$l"; done < "$1"
}
cache=${FLASHINFER_WORKSPACE_BASE:-$HOME}/.cache/flashinfer

gpu_query() {
  i=0
  while :; do
    b query-gpu; o=$($T nvidia-smi --query-gpu="$f" --format=csv,nounits 2>&1); rc=$?
    printf '%s' "$o"; e query-gpu $rc
    [ $rc -eq 2 ] && [ $i -lt 4 ] || break
    case $o in *'Field "'*'" is not a valid field to query.'*) ;; *) break;; esac
    x=${o#*Field \"}; x=${x%%\"*}
    case ,$f, in *,"$x",*) ;; *) break;; esac
    g=,$f,; g=${g%%,"$x",*},${g#*,"$x",}; g=${g#,}; f=${g%,}; i=$((i+1))
    [ -n "$f" ] || break
  done
}
smi_version() {
  b smi-version; $T nvidia-smi --version 2>&1; rc=$?; e smi-version $rc
  [ $rc -eq 0 ] || run smi-plain $T nvidia-smi
  run proc-driver dump /proc/driver/nvidia/version
}
host_facts() {
  run virt systemd-detect-virt
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
  $T systemctl show "$unit" --property=LoadState,ActiveState,SubState,UnitFileState,MainPID 2>&1; e unit $?
  b df; set --
  for kv in "root=/" "venv=$venv" "flashinfer_cache=$cache" "hf_cache=${HF_HOME:-$HOME/.cache/huggingface}"; do
    k=${kv%%=*}; p=${kv#*=}
    while [ -n "$p" ] && [ ! -e "$p" ]; do p=${p%/*}; done
    [ -n "$p" ] || p=/
    printf 'path %s %s\n' "$k" "$p"; set -- "$@" "$p"
  done
  $T df -Pk "$@" 2>&1; e df $?

  b packages; set --
  [ -d "$venv" ] || printf '@novenv %s\n' "$venv"
  for sp in "$venv"/lib/python3*/site-packages; do
    [ -d "$sp" ] || continue
    printf '@sp %s\n' "$sp"
    for t in flashinfer flashinfer_cubin flashinfer_jit_cache nvidia/nccl sgl_kernel sglang torch; do [ -d "$sp/$t" ] && printf '@dir %s\n' "$sp/$t"; done
    for n in sglang sgl_kernel flashinfer_python flashinfer flashinfer_jit_cache flashinfer_cubin torch nvidia_nccl_cu12 nvidia_nccl_cu13; do
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
# fleet_out: a name nothing above uses (host_facts sets w, d, p, ... as it goes).
if fleet_out=$(mktemp -d 2>/dev/null); then
  trap 'rm -rf "$fleet_out"' EXIT
  gpu_query > "$fleet_out/1" &
  run topo-m $T nvidia-smi topo -m > "$fleet_out/2" &
  run topo-p2p-r $T nvidia-smi topo -p2p r > "$fleet_out/3" &
  smi_version > "$fleet_out/4" &
  host_facts > "$fleet_out/5"
  wait
  cat "$fleet_out/1" "$fleet_out/2" "$fleet_out/3" "$fleet_out/4" "$fleet_out/5"
else
  gpu_query
  run topo-m $T nvidia-smi topo -m
  run topo-p2p-r $T nvidia-smi topo -p2p r
  smi_version
  host_facts
fi
printf '@@fleet:done@@\n'
