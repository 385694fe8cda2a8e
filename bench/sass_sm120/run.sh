#!/bin/bash
# On the lent GPU machine (bench/sass_sm120/prepare.py fills .device/ first): compile flashinfer 0.6.16's trtllm_comm headers (pristine, patched by fleet's sets)
# and 0.6.17's for sm_120a and sm_100a with the real nvcc, and count each kernel's SASS instructions.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
if [ -z "$NVCC" ]; then
  python3 - <<'PY'
import importlib.util, glob, os
for m in ("nvidia.cuda_nvcc", "nvidia"):
    s = importlib.util.find_spec(m)
    if s and s.submodule_search_locations:
        for p in s.submodule_search_locations:
            print("found", glob.glob(os.path.join(p, "**/nvcc"), recursive=True)[:3])
PY
  echo "no nvcc"; exit 3
fi
$NVCC --version | tail -2
one() {  # tree arch
  local tree=$1 arch=$2 start=$(date +%s)
  if $NVCC -std=c++17 -gencode arch=compute_${arch},code=sm_${arch} --expt-relaxed-constexpr -w -c tu.cu \
      -o $OUT/$tree-$arch.o -I $tree/include -I spdlog/include > $OUT/$tree-$arch.log 2>&1; then
    cuobjdump -sass $OUT/$tree-$arch.o 2>/dev/null | awk '/Function :/{f=$3} /^ +\/\*[0-9a-f]+\*\//{n[f]++} END{for(k in n) print n[k], k}' \
      | sort -k2 > $OUT/$tree-$arch.sass.txt
    echo "$tree $arch: compiled in $(( $(date +%s) - start )) s, $(wc -l < $OUT/$tree-$arch.sass.txt) kernels"
  else
    echo "$tree $arch: FAILED"; grep -m3 -i error $OUT/$tree-$arch.log
  fi
  rm -f $OUT/$tree-$arch.o
}
one fi0616 120a & one fi0616p 120a & one fi0617 120a & one fi0616p 100a & wait
