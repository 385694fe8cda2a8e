"""Generate the simulated flashinfer comm headers (run by hand; the output is committed).

The SIMULATED headers carry flashinfer 0.6.3's architecture gates verbatim and on the same line
numbers as upstream (sandbox/sim/data/flashinfer_arch_conditions.txt), so that a grep, an audit or a
patch written against the real files behaves the same here. Everything else is the simulator's own
short stand-in code plus padding. Inside each gated body sits a marker,
``FLASHINFER_SIM_KERNEL(name, lo, hi)``: the code must be present when lo <= __CUDA_ARCH__ < hi for
the kernel to be correct. The simulator preprocesses the headers with the real ``cpp`` and checks
which markers survive (sglang_sim_core/kernels.py keeps the pristine list).

    python sandbox/sim/tools/gen_flashinfer_headers.py
"""

from __future__ import annotations

from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "pkgs/flashinfer/data/include/flashinfer/comm"

G1200 = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
G700 = "#if __CUDA_ARCH__ >= 700"
LT800 = "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800"
GE800_OR_HOST = "#if __CUDA_ARCH__ >= 800 || !defined(__CUDA_ARCH__)"
GE800 = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800))"
GE1000 = "#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000)"
GE900 = "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))"

ANY = 9999  # upper bound meaning "every later architecture"

PAD = "//"


def mark(name: str, lo: int, hi: int = ANY) -> str:
    return f"  FLASHINFER_SIM_KERNEL({name}, {lo}, {hi});"


class Writer:
    def __init__(self, header: list[str]) -> None:
        self.lines: list[str] = list(header)

    def at(self, line_no: int, block: list[str]) -> None:
        """Place block so that its first line lands on line_no (1-based)."""
        if len(self.lines) >= line_no:
            raise SystemExit(f"block for line {line_no} would start at {len(self.lines) + 1}")
        while len(self.lines) < line_no - 1:
            self.lines.append(PAD)
        self.lines.extend(block)

    def add(self, block: list[str]) -> None:
        self.lines.extend(block)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def banner(name: str, what: str) -> list[str]:
    return [
        "/*",
        f" * {name}: SIMULATED flashinfer 0.6.3 header (fleet sandbox simulator, not NVIDIA code).",
        f" * {what}",
        " *",
        " * The preprocessor gates below are flashinfer 0.6.3's, verbatim and on upstream's line numbers.",
        " * The code around them is a short stand-in; lines holding only // keep the numbering.",
        " * FLASHINFER_SIM_KERNEL(name, lo, hi) marks code that must be compiled in when",
        " * lo <= arch < hi for the kernel to work; the simulator runs cpp over this file to see",
        " * which markers survive. System includes are left out so that plain cpp can read it.",
        " */",
        "#pragma once",
        "",
        "namespace flashinfer {",
        "namespace trtllm_allreduce {",
        "",
    ]


def pdl(gate: str, kernel: str, what: str, name: str) -> list[str]:
    call = "cudaGridDependencySynchronize();" if what == "wait" else "cudaTriggerProgrammaticLaunchCompletion();"
    return [gate, f"  {call}", mark(name, 900), "#endif"]


def gen_allreduce() -> str:
    w = Writer(banner("trtllm_allreduce.cuh", "One-shot, two-shot and lamport all-reduce kernels."))
    w.add([
        "template <typename T>",
        "struct AllReduceParams {",
        "  int elts_total;",
        "  int rank;",
        "  int local_rank;",
        "  void* peer_comm_buffer_ptrs[16];",
        "  void* local_output_buffer_ptr;",
        "  uint32_t barrier_flag;",
        "};",
    ])
    w.at(251, [
        "// Flag stores and loads used by the barriers between ranks.",
        "static inline __device__ void st_flag_release(uint32_t const& flag, uint32_t* flag_addr) {",
        "  // release semantics need sm_70",
    ])
    w.add([G700, '  asm volatile("st.global.release.sys.b32 [%1], %0;" ::"r"(flag), "l"(flag_addr));',
           mark("ar_st_flag_release", 700), "#else",
           '  asm volatile("st.global.volatile.b32 [%1], %0;" ::"r"(flag), "l"(flag_addr));',
           mark("ar_st_flag_volatile", 0, 700), "#endif", "}"])
    w.at(263, ["static inline __device__ uint32_t ld_flag_acquire(uint32_t* flag_addr) {",
               "  uint32_t flag;", "  // acquire semantics need sm_70"])
    w.add([G700, '  asm volatile("ld.global.acquire.sys.b32 %0, [%1];" : "=r"(flag) : "l"(flag_addr));',
           mark("ar_ld_flag_acquire", 700), "#else",
           '  asm volatile("ld.global.volatile.b32 %0, [%1];" : "=r"(flag) : "l"(flag_addr));',
           mark("ar_ld_flag_volatile", 0, 700), "#endif", "  return flag;", "}"])
    kernels = [
        (410, 417, "oneshot_allreduce_kernel", "wait", "ar_oneshot_pdl_wait"),
        (450, 455, None, "trigger", "ar_oneshot_pdl_trigger"),
        (478, 485, "twoshot_allreduce_kernel", "wait", "ar_twoshot_pdl_wait"),
        (528, 533, None, "trigger", "ar_twoshot_pdl_trigger"),
    ]
    for start, gate_line, kernel, what, name in kernels:
        if kernel:
            w.at(start, ["template <typename T, int RANKS_PER_NODE>",
                         f"static __global__ void __launch_bounds__(512, 1) {kernel}(AllReduceParams<T> params) {{",
                         "  // wait for the producer kernel before touching its output (programmatic launch)"])
        else:
            w.at(start, ["  // ... reduction over the peer buffers ...", "  // let the next kernel start"])
        w.at(gate_line, pdl(G1200, kernel or "", what, name))
        if not kernel:
            w.add(["}"])
    w.at(705, ["template <typename T, int RANKS_PER_NODE, bool Bias = false, bool Affine = false>",
               "static __global__ void __launch_bounds__(1024, 1)",
               "    lamport_style_one_shot_all_reduce_norm_kernel(AllReduceParams<T> params) {",
               "  // Small-batch decode path: one-shot all-reduce fused with RMSNorm over lamport buffers.",
               "  // The whole body is gated: compiled for an excluded arch the kernel launches, does",
               "  // nothing and returns whatever the output buffer held (no error)."])
    w.at(711, [G1200, mark("ar_lamport_oneshot_norm_body", 900),
               "  cudaGridDependencySynchronize();",
               "  // ... push local shard to every peer's lamport buffer, poll until all arrived ...",
               "  // ... sum, add residual, RMSNorm, write output ...",
               "  cudaTriggerProgrammaticLaunchCompletion();",
               "#endif", "}"])
    rest = [
        (890, 895, "rms_norm_kernel", "wait", "ar_rms_norm_pdl_wait"),
        (945, 950, None, "trigger", "ar_rms_norm_pdl_trigger"),
        (985, 991, "rms_pre_post_norm_kernel", "wait", "ar_rms_pre_post_norm_pdl_wait"),
        (1048, 1053, None, "trigger", "ar_rms_pre_post_norm_pdl_trigger"),
        (1200, 1207, "lamport_initialize_kernel", "wait", "ar_lamport_init_pdl_wait"),
        (1260, 1265, None, "trigger", "ar_lamport_init_pdl_trigger"),
        (1328, 1335, "oneshot_prenorm_allreduce_kernel", "wait", "ar_oneshot_prenorm_pdl_wait"),
        (1439, 1444, None, "trigger", "ar_oneshot_prenorm_pdl_trigger"),
    ]
    for start, gate_line, kernel, what, name in rest:
        if kernel:
            w.at(start, ["template <typename T>",
                         f"static __global__ void {kernel}(AllReduceParams<T> params) {{",
                         "  // wait for the producer kernel before touching its output (programmatic launch)"])
        else:
            w.at(start, ["  // ... kernel work ...", "  // let the next kernel start"])
        w.at(gate_line, pdl(G1200, kernel or "", what, name))
        if not kernel:
            w.add(["}"])
    w.add(["", "}  // namespace trtllm_allreduce", "}  // namespace flashinfer"])
    return w.text()


def lt800_pair(gate_line: int, start: int, func: str, name: str) -> list[tuple[int, list[str]]]:
    return [
        (start, [f"inline __device__ float2 {func}(uint32_t packed) {{"]),
        (gate_line, [LT800, "  // pre-Ampere: convert through float", mark(f"{name}_fallback", 0, 800),
                     "#else", "  // native bf16x2 instructions", mark(f"{name}_native", 800), "#endif", "}"]),
    ]


def gen_fusion(moe: bool) -> str:
    if moe:
        name = "trtllm_moe_allreduce_fusion.cuh"
        what = "All-reduce fused with MoE finalize, residual add and RMSNorm (+ optional quant)."
        pre = "moe"
        lt = [(160, 166), (182, 187), (226, 231), (247, 252)]
        ge800_host, ge800 = (306, 310), (336, 340)
        fp4 = [(462, 469), (510, 516), (543, 548), (577, 582)]
        ge900 = [(930, 936), (940, 940), (1071, 1077), (1232, 1237)]
    else:
        name = "trtllm_allreduce_fusion.cuh"
        what = "All-reduce fused with residual add and RMSNorm (+ optional FP8/FP4 quant)."
        pre = "fus"
        lt = [(162, 168), (184, 189), (228, 233), (249, 254)]
        ge800_host, ge800 = (308, 312), (338, 342)
        fp4 = [(485, 491), (533, 538), (553, 558), (585, 590), (619, 624)]
        ge900 = [(1006, 1012), (1158, 1164), (1199, 1204), (1246, 1251), (1266, 1271), (1312, 1317)]
    blocks: list[tuple[int, list[str]]] = []
    for i, (start, gate) in enumerate(lt):
        blocks += lt800_pair(gate, start, f"bf16_helper_{i}", f"{pre}_bf16_helper_{i}")
    blocks.append((ge800_host[0], ["// packed vector arithmetic (host side compiles the generic version)"]))
    blocks.append((ge800_host[1], [GE800_OR_HOST, mark(f"{pre}_vec_ops", 800), "#endif"]))
    blocks.append((ge800[0], ["template <typename T>", "inline __device__ T add_bf16x2(T a, T b) {"]))
    blocks.append((ge800[1], [GE800, mark(f"{pre}_bf16x2_add", 800), "#endif", "  return a;", "}"]))
    for i, (start, gate) in enumerate(fp4):
        blocks.append((start, [f"// FP4 (e2m1) quantization helper {i}: scale-factor layout and packing"]))
        blocks.append((gate, [GE1000, mark(f"{pre}_fp4_quant_{i}", 1000), "#endif"]))
    for i, (start, gate) in enumerate(ge900):
        if start != gate:
            blocks.append((start, [f"// cluster / programmatic-launch section {i}"]))
        blocks.append((gate, [GE900, mark(f"{pre}_sm90_section_{i}", 900), "#endif"]))
    if moe:
        blocks.append((1110, ["inline void moe_allreduce_fusion_launch_config() {", "  // cluster launch"]))
        blocks.append((1113, ["  int cluster_size = 8;", "}"]))
        blocks.append((1407, ["inline void moe_finalize_allreduce_fusion_launch_config() {", "  // cluster launch"]))
        blocks.append((1410, ["  int cluster_size = 8;", "}"]))
    else:
        # the one-shot launcher's cluster size, on 0.6.3's lines 1375 and 1398-1403 (the set's clamp edit anchors here)
        blocks.append((1375, ["cudaError_t allreduce_fusion_kernel_launcher(int SM) {  // sim: 0.6.3's, cut short"]))
        blocks.append((1398, ["  int cluster_size;", "  if (SM >= 90) {", "    cluster_size = 8;", "  } else {",
                              "    cluster_size = 1;", "  }",
                              "  return cluster_size ? cudaSuccess : cudaErrorInvalidValue;", "}"]))
        blocks.append((1487, ["inline void fill_launch_attrs(int SM) {", "  struct { int numAttrs; } cfg;"]))
        blocks.append((1490, ["  cfg.numAttrs = SM >= 90 ? 2 : 0;", "}"]))
    w = Writer(banner(name, what))
    for line_no, block in sorted(blocks, key=lambda b: b[0]):
        w.at(line_no, block)
    w.add(["", "}  // namespace trtllm_allreduce", "}  // namespace flashinfer"])
    return w.text()


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "trtllm_allreduce.cuh").write_text(gen_allreduce())
    (OUT / "trtllm_allreduce_fusion.cuh").write_text(gen_fusion(moe=False))
    (OUT / "trtllm_moe_allreduce_fusion.cuh").write_text(gen_fusion(moe=True))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
