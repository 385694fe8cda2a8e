"""THE behaviour table of the simulated sglang 0.5.9 / flashinfer 0.6.3 stack (one table, data).

Each row: `id`, the startup `phase` it belongs to, `when` (conditions on the facts below), `then`
(what happens) and `source`. `mechanism` says who decides:
  "code"  the row happens because the simulated package code runs (the gate functions in
          sglang/srt/server_args.py, sglang/srt/layers/communicator.py, flashinfer/jit/comm.py, the
          cpp pass over the .cuh files, sglang's own checks). The row documents it; a patch that
          changes the code changes the outcome.
  "table" the row is applied by the simulator when its conditions hold (hardware effects no code
          can compute: hangs, OOMs, crashes inside CUDA, measured speed and power).

Facts (computed at start-up by sglang/srt/model_executor/model_runner.py, mostly by running code):
  sm, sm_major            device compute capability as nvidia-smi reports it (120, 12)
  tp, world               --tp-size, tp*pp
  nnodes                  --nnodes (multi-node rows only document what the rendezvous code does)
  gpus_short              tp*pp*dp > GPUs visible to CUDA
  memory_balanced         free memory of the rank's GPU >= 0.9 x the others' (sglang's check)
  p2p                     "ok" | "refused" (nvidia-smi topo -p2p r: CNS, GNS, TNS, NS, ... = refused)
  p2p_broken              profile.yaml switch: P2P reported OK but hangs (VFIO clique, nccl#2335)
  nccl_p2p                NCCL will use P2P: p2p ok and NCCL_P2P_DISABLE is not 1
  custom_ar               sglang's custom all-reduce stayed on after its own checks
  weights_fit             weights of this rank fit in free GPU memory
  kv_tokens               KV-pool size sglang computes from --mem-fraction-static
  reserve_fits            memory left outside the static pool covers CUDA graphs + activations
  fusion_requested        enable_flashinfer_allreduce_fusion after ServerArgs (flag or auto-enable)
  fusion_applied          communicator.apply_flashinfer_allreduce_fusion(bs) is true (tp > 1)
  jit_gate                "raises" | "passes" (flashinfer/jit/comm.py gen_trtllm_comm_module)
  kernel_build            "ok" | "failed" (cpp over the trtllm comm sources)
  kernels_complete        every kernel body the arch needs survived the preprocessor
  is_moe, moe_backend, autotune (flashinfer_cutlass MoE autotune on)
  moe_tuned               dense model, or MoE on flashinfer_cutlass with autotune
  batch_limit             --max-running-requests if given, else the default CUDA-graph batch size
                          (cuda_graph_max_bs: 512 on 96 GB GPUs at TP >= 4): the seed had to raise it
  uses_p2p_kernels        custom all-reduce stayed on, or fusion is applied (both use CUDA IPC/P2P)
  cuda_graph              CUDA graphs captured (not --disable-cuda-graph)

Serving rows give the modelled ceiling `rate` (output tok/s of the whole server at saturation,
times the model's speed factor), `saturation` (concurrent requests needed to reach it; fewer get
rate/saturation each), per-GPU `power_w` (or `power_frac` of power.limit) and `util_pct` at
full load, and the `output` quality. Rates are paced per token, so bench_serving MEASURES them.
"""

from __future__ import annotations

from typing import Any

SEED = "SEED.txt (8x RTX PRO 6000, SM 12.0, GLM-5-NVFP4, TP8, Proxmox VM)"

ROWS: list[dict[str, Any]] = [
    # ---------------------------------------------------------------- init (torch distributed)
    {
        "id": "tp-pp-exceed-gpus",
        "phase": "init",
        "mechanism": "code",
        "when": {"gpus_short": True},
        "then": {"fail": "RuntimeError: CUDA error: invalid device ordinal (torch.cuda.set_device in the "
                         "ranks that have no GPU), scheduler dead, exit 1"},
        "source": "issue 4 ('TP x PP not matching the GPUs: sglang's error'); the wording is CUDA's, "
                  "raised by torch.cuda.set_device(gpu_id) in ModelRunner.init_torch_distributed "
                  "(inferred). Fewer ranks than GPUs is allowed, as in sglang.",
    },
    {
        "id": "memory-unbalanced",
        "phase": "init",
        "mechanism": "code",
        "when": {"memory_balanced": False, "tp": (">", 1)},
        "then": {"fail": "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by "
                         "other processes."},
        "source": "sglang v0.5.9 srt/model_executor/model_runner.py 839-847 (init_torch_distributed; "
                  "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0 makes it a warning)",
    },
    {
        "id": "p2p-refused-custom-allreduce-off",
        "phase": "init",
        "mechanism": "code",
        "when": {"p2p": "refused", "tp": (">", 1)},
        "then": {"warn": "Custom allreduce is disabled because ... (PCIe-only world > 2, or no P2P); "
                         "runs on NCCL"},
        "source": "FACTS.md §2 custom_all_reduce.py lines 109/147/158; issue 4",
    },
    {
        "id": "p2p-broken-hang-nccl",
        "phase": "init",
        "mechanism": "table",
        "when": {"p2p_broken": True, "nccl_p2p": True, "tp": (">", 1)},
        "then": {"hang": "first NCCL all-reduce (warm-up at the end of init_distributed_environment): "
                         "no further output, never ready"},
        "source": "issue 4; FACTS.md §6 (NVIDIA/nccl#2335: clique grant -> all NCCL P2P protocols hang)",
    },
    {
        "id": "multinode-rendezvous",
        "phase": "init",
        "mechanism": "code",
        "when": {"nnodes": (">", 1)},
        "then": {"note": "each node starts its share of the tp*pp ranks (v0.5.9's split); global rank 0 hosts "
                         "the TCPStore on --dist-init-addr's port (real TCP) and waits for every other rank, "
                         "which connect and retry until the timeout; a TP group across nodes logs `Custom "
                         "allreduce is disabled because this process group spans across nodes.`; only node 0 "
                         "serves the API and says `The server is fired up`; a node of rank >= 1 logs `Dummy "
                         "health check server started in background thread at H:P` and answers only /health "
                         "and /health_generate"},
        "source": "sglang engine.py _launch_scheduler_processes / _launch_subprocesses (node_rank >= 1 path, "
                  "launch_dummy_health_check_server in sglang/srt/utils); model_runner.init_torch_distributed "
                  "uses tcp://dist_init_addr; custom allreduce line as logged in sglang#4978",
    },
    {
        "id": "multinode-rank-missing",
        "phase": "init",
        "mechanism": "code",
        "when": {"nnodes": (">", 1), "peer_joined": False},
        "then": {"fail": "rank 0: `torch.distributed.DistStoreError: Timed out after <T+1> seconds waiting for "
                         "clients. <n>/<world> clients joined.`; a rank that cannot reach rank 0: `[c10d] The "
                         "client socket has timed out after <T*1000>ms while trying to connect to (host, port).` "
                         "and `torch.distributed.DistNetworkError: <same>`; T = --dist-timeout, else torch's "
                         "1800 s (scaled by SGLANG_SIM_TIME_SCALE); scheduler dead, exit 1"},
        "source": "torch TCPStore.cpp waitForWorkers and socket.cpp (messages); sglang#2561 (the client side in "
                  "an sglang multi-node start); default timeout torch default_pg_timeout",
    },
    {
        "id": "multinode-peer-lost",
        "phase": "init",
        "mechanism": "code",
        "when": {"nnodes": (">", 1), "peer_alive": False},
        "then": {"fail": "a rank that had joined exits (any node): the others log `Scheduler hit an exception: "
                         "torch.distributed.DistBackendError: NCCL error in: ...ProcessGroupNCCL.cpp:..., remote "
                         "process exited or there was a network error` + `ncclRemoteError: ...`; node 0 exits 1 "
                         "(`Rank N scheduler is dead`), a node >= 1 logs `Scheduler or DataParallelController "
                         "<pid> terminated with 1` and exits 1"},
        "source": "NCCL ncclGetErrorString(ncclRemoteError); sglang engine.py (node_rank >= 1 joins its "
                  "schedulers and logs each that ends); as NCCL reports a remote rank exiting (modelled: the "
                  "store connection closing stands for the NCCL socket)",
    },
    # ---------------------------------------------------------------- load (weights)
    {
        "id": "gpu-memory-taken-oom",
        "phase": "load",
        "mechanism": "table",
        "when": {"weights_fit": False},
        "then": {"fail": "oom_weights"},
        "source": "issue 4 (a worker left behind holds its memory; next start OOMs); torch's CUDA OOM "
                  "text as in real_failures.jsonl log042",
    },
    # ---------------------------------------------------------------- kv (memory pool)
    {
        "id": "mem-fraction-too-low",
        "phase": "kv",
        "mechanism": "table",
        "when": {"kv_tokens": ("<=", 0)},
        "then": {"fail": "kv_not_enough"},
        "source": "FACTS.md §1 'Two opposite OOM fixes'; kv_cache_mixin 417; sglang#4330",
    },
    # ---------------------------------------------------------------- autotune
    {
        "id": "sm12x-tma-tactics-skipped",
        "phase": "autotune",
        "mechanism": "table",
        "when": {"autotune": True, "is_moe": True, "sm_major": 12},
        "then": {"warn": "tma_skip"},
        "source": "issue 4 / seed msg 796; flashinfer#2077 (SM120 autotune skips TMA WS grouped gemm "
                  "tactics); flashinfer PR #2786 (K=128 tiles overflow 99 KB SMEM). Printed with and "
                  "without fusion: the MoE GEMM tactics fail on SM12x either way (inferred).",
    },
    # ---------------------------------------------------------------- capture (CUDA graphs / first forward)
    {
        "id": "fusion-asked-sglang-gates-unpatched",
        "phase": "capture",
        "mechanism": "code",
        "when": {"fusion_requested": True, "fusion_applied": False},
        "then": {"note": "fusion stays off with no log line; serves as without fusion"},
        "source": "issue 4; FACTS.md §1 (v0.5.9 communicator.py gate (_is_sm90_supported or "
                  "_is_sm100_supported); server_args auto-enable only SM90/SM100)",
    },
    {
        "id": "jit-gate-unpatched",
        "phase": "capture",
        "mechanism": "code",
        "when": {"fusion_applied": True, "jit_gate": "raises"},
        "then": {"fail": "RuntimeError: No supported CUDA architectures found for major versions [9, 10]. "
                         "-> Exception: Capture cuda graph failed: ..., exit 1"},
        "source": "issue 4; seed msg 754; FACTS.md §3; real_failures.jsonl log001 (sglang#15650)",
    },
    {
        "id": "kernel-build-broken",
        "phase": "capture",
        "mechanism": "code",
        "when": {"fusion_applied": True, "kernel_build": "failed"},
        "then": {"fail": "preprocessor errors, RuntimeError: Ninja build failed., exit 1"},
        "source": "FACTS.md §3 (cpp_ext.py 'Ninja build failed.'); a patch that breaks an #if",
    },
    {
        "id": "mem-fraction-too-high",
        "phase": "capture",
        "mechanism": "table",
        "when": {"reserve_fits": False},
        "then": {"fail": "oom_capture"},
        "source": "FACTS.md §1 'Two opposite OOM fixes' (runtime / cuda-graph OOM: lower the value); "
                  "sglang#4330",
    },
    {
        "id": "fusion-sm12x-batch-over-512",
        "phase": "capture",
        "mechanism": "table",
        "when": {"fusion_applied": True, "sm_major": 12, "batch_limit": (">", 512), "cuda_graph": True},
        "then": {"fail": "tma_capture"},
        "source": "issue 4 / seed ('above 512 it crashes in CUDA graph capture'); the inner error "
                  "wording is the TMA WS grouped gemm failure of flashinfer#2077 (inferred)",
    },
    {
        "id": "p2p-broken-hang-custom-allreduce",
        "phase": "capture",
        "mechanism": "table",
        "when": {"p2p_broken": True, "uses_p2p_kernels": True},
        "then": {"hang": "first custom / fused all-reduce during capture: no further output"},
        "source": "issue 4; FACTS.md §6 (nccl#2335; club-3090 saw a real workload hang under a clique)",
    },
    # ---------------------------------------------------------------- serve
    {
        "id": "fusion-kernels-compiled-out",
        "phase": "serve",
        "mechanism": "code",
        "when": {"fusion_applied": True, "kernels_complete": False},
        "then": {"output": "garbage", "continue": True},
        "source": "issue 4; FACTS.md §3 commit 2deed6c15: 'Widening the JIT gate alone would build the "
                  "lamport kernel ... with an empty body: ... return garbage with no error'",
    },
    {
        "id": "fusion-sm12x-slow",
        "phase": "serve",
        "mechanism": "table",
        "when": {"fusion_applied": True, "sm_major": 12},
        "then": {"rate": 78.6, "saturation": 8, "power_w": 125.0, "util_pct": 100},
        "source": f"issue 4; {SEED}: 78.6 tok/s, ~125 W per GPU with fusion patched in",
    },
    {
        "id": "fusion-sm90-native",
        "phase": "serve",
        "mechanism": "table",
        "when": {"fusion_applied": True, "sm_major": 9},
        "then": {"relative_to_no_fusion": 1.15, "power_factor": 1.05},
        "source": "issue 4 ('SM 9.0/10.0: fusion works natively and is faster'); factor modelled",
    },
    {
        "id": "fusion-sm100-native",
        "phase": "serve",
        "mechanism": "table",
        "when": {"fusion_applied": True, "sm_major": 10},
        "then": {"relative_to_no_fusion": 1.15, "power_factor": 1.05},
        "source": "issue 4 ('SM 9.0/10.0: fusion works natively and is faster'); factor modelled",
    },
    {
        "id": "sm12x-autotuned-1024",
        "phase": "serve",
        "mechanism": "table",
        "when": {"sm_major": 12, "moe_tuned": True, "batch_limit": (">=", 1024)},
        "then": {"rate": 3740.0, "saturation": 64, "power_w": 250.0, "util_pct": 97},
        "source": f"issue 4; {SEED}: ~3,740 tok/s with CUTLASS MoE autotune and "
                  "--max-running-requests 1024, ~250 W of 600",
    },
    {
        "id": "sm12x-untuned",
        "phase": "serve",
        "mechanism": "table",
        "when": {"sm_major": 12},
        "then": {"rate": 880.0, "saturation": 24, "power_w": 175.0, "util_pct": 60},
        "source": f"issue 4; {SEED}: ~880 tok/s before autotune and the larger batch limit (power "
                  "modelled)",
    },
    {
        "id": "sm90-tuned",
        "phase": "serve",
        "mechanism": "table",
        "when": {"sm_major": 9, "moe_tuned": True, "batch_limit": (">=", 1024)},
        "then": {"rate": 4400.0, "saturation": 64, "power_frac": 0.74, "util_pct": 95},
        "source": "analogue of the seed rows on 8x H100 SXM (NVLink), modelled",
    },
    {
        "id": "sm90-untuned",
        "phase": "serve",
        "mechanism": "table",
        "when": {"sm_major": 9},
        "then": {"rate": 2600.0, "saturation": 32, "power_frac": 0.55, "util_pct": 80},
        "source": "analogue of the seed rows on 8x H100 SXM (NVLink), modelled",
    },
    {
        "id": "sm100-tuned",
        "phase": "serve",
        "mechanism": "table",
        "when": {"sm_major": 10, "moe_tuned": True, "batch_limit": (">=", 1024)},
        "then": {"rate": 8200.0, "saturation": 64, "power_frac": 0.76, "util_pct": 95},
        "source": "analogue of the seed rows on 8x B200 (NVLink), modelled",
    },
    {
        "id": "sm100-untuned",
        "phase": "serve",
        "mechanism": "table",
        "when": {"sm_major": 10},
        "then": {"rate": 5200.0, "saturation": 32, "power_frac": 0.56, "util_pct": 80},
        "source": "analogue of the seed rows on 8x B200 (NVLink), modelled",
    },
    {
        "id": "other-gpu",
        "phase": "serve",
        "mechanism": "table",
        "when": {},
        "then": {"rate": 600.0, "saturation": 16, "power_frac": 0.5, "util_pct": 70},
        "source": "fallback for SMs the seed did not cover, modelled",
    },
]

_OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}


def row(row_id: str) -> dict[str, Any]:
    for r in ROWS:
        if r["id"] == row_id:
            return r
    raise KeyError(row_id)


def matches(when: dict[str, Any], facts: dict[str, Any]) -> bool:
    for key, want in when.items():
        have = facts.get(key)
        if isinstance(want, tuple):
            op, value = want
            if have is None or not _OPS[op](have, value):
                return False
        elif have != want:
            return False
    return True


def decide(phase: str, facts: dict[str, Any]) -> list[dict[str, Any]]:
    """Table-decided rows of a start-up phase that hold, in table order."""
    return [r for r in ROWS if r["phase"] == phase and r["mechanism"] == "table" and matches(r["when"], facts)]


def serve_profile(facts: dict[str, Any], power_limit_w: float, speed: float = 1.0) -> dict[str, Any]:
    """How the started server serves: rate, per-request rate, power, utilisation, output quality."""
    result: dict[str, Any] = {"output": "correct", "rows": []}
    for r in ROWS:
        if r["phase"] != "serve" or not matches(r["when"], facts):
            continue
        then = r["then"]
        result["rows"].append(r["id"])
        if then.get("continue"):
            result.update({k: v for k, v in then.items() if k != "continue"})
            continue
        if "relative_to_no_fusion" in then:
            base = serve_profile({**facts, "fusion_applied": False}, power_limit_w, speed)
            result.update(
                rate=base["rate"] * then["relative_to_no_fusion"],
                saturation=base["saturation"],
                power_w=min(power_limit_w, base["power_w"] * then.get("power_factor", 1.0)),
                util_pct=base["util_pct"],
            )
            result["rows"] += [x for x in base["rows"] if x not in result["rows"]]
            return result
        result["rate"] = then["rate"] * speed
        result["saturation"] = then["saturation"]
        result["power_w"] = then.get("power_w", then.get("power_frac", 0.5) * power_limit_w)
        result["util_pct"] = then["util_pct"]
        return result
    raise AssertionError("the table has a catch-all serve row")
