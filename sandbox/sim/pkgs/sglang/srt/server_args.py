"""The arguments of the inference server (SIMULATED sglang 0.5.9).

The command line is v0.5.9's: every `add_argument` of the release (flags, aliases, types, choices,
actions, nargs) is read from server_args_v0_5_9.json beside this file and registered on a plain
argparse.ArgumentParser(), so unknown flags, bad choices, abbreviations (`--tp`) and ambiguous
prefixes (`--pp`) behave exactly as argparse makes them behave for sglang. ServerArgs.__post_init__
carries the v0.5.9 logic that decides things on the simulated hosts: memory defaults by GPU size,
the attention backend default, MoE kernel checks and the auto-enable of FlashInfer allreduce fusion
(SM90/SM100 only, model allow-list). Edit those lines and the server behaves accordingly.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from pathlib import Path
from typing import Any

from sglang_sim_core import models

from sglang.srt import sim_release
from sglang.srt.utils import (
    get_device_memory_capacity,
    get_device_name,
    is_blackwell_supported,
    is_flashinfer_available,
    is_hopper_with_cuda_12_3,
    is_sm90_supported,
    is_sm100_supported,
)

logger = logging.getLogger(__name__)

_SPEC_FILE = Path(__file__).with_name("server_args_v0_5_9.json")

# Dataclass defaults of v0.5.9's ServerArgs that the simulator relies on; every other default is None.
DEFAULTS: dict[str, Any] = {
    "host": "127.0.0.1",
    "port": 30000,
    "tp_size": 1,
    "pp_size": 1,
    "dp_size": 1,
    "ep_size": 1,
    "attn_cp_size": 1,
    "moe_dp_size": 1,
    "nnodes": 1,
    "node_rank": 0,
    "tokenizer_mode": "auto",
    "tokenizer_worker_num": 1,
    "load_format": "auto",
    "model_impl": "auto",
    "dtype": "auto",
    "kv_cache_dtype": "auto",
    "max_prefill_tokens": 16384,
    "schedule_policy": "fcfs",
    "schedule_conservativeness": 1.0,
    "stream_interval": 1,
    "watchdog_timeout": 300,
    "base_gpu_id": 0,
    "gpu_id_step": 1,
    "log_level": "info",
    "log_requests_level": 2,
    "log_requests_format": "text",
    "decode_log_interval": 40,
    "load_balance_method": "auto",
    "moe_runner_backend": "auto",
    "moe_a2a_backend": "none",
    "flashinfer_mxfp4_moe_precision": "default",
    "fp8_gemm_runner_backend": "auto",
    "fp4_gemm_runner_backend": "auto",
    "disaggregation_mode": "null",
    "disaggregation_transfer_backend": "mooncake",
    "disaggregation_bootstrap_port": 8998,
    "elastic_ep_backend": "none",
    "radix_eviction_policy": "lru",
    "sampling_defaults": "model",
    "lora_eviction_policy": "lru",
    "lora_backend": "csgmv",
    "max_lora_chunk_size": 16,
    "hicache_ratio": 2.0,
    "hicache_size": 0,
    "hicache_write_policy": "write_through",
    "hicache_io_backend": "kernel",
    "hicache_mem_layout": "layer_first",
    "hicache_storage_prefetch_policy": "best_effort",
    "mamba_scheduler_strategy": "auto",
    "mamba_backend": "triton",
    "mamba_full_memory_ratio": 0.9,
    "swa_full_tokens_ratio": 0.8,
    "piecewise_cuda_graph_compiler": "eager",
    "encoder_transfer_backend": "zmq_to_scheduler",
    "remote_instance_weight_loader_backend": "nccl",
    "speculative_attention_mode": "prefill",
    "num_continuous_decode_steps": 1,
    "dist_timeout": None,
    "tokenizer_metrics_custom_labels_header": "x-custom-labels",
    "weight_version": "default",
}

# Help texts of the flags this project cares about (v0.5.9 wording, FACTS.md §1).
HELP: dict[str, str] = {
    "--model-path": "The path of the model weights. This can be a local folder or a Hugging Face repo ID.",
    "--tensor-parallel-size": "The tensor parallelism size.",
    "--pipeline-parallel-size": "The pipeline parallelism size.",
    "--data-parallel-size": "The data parallelism size.",
    "--expert-parallel-size": "The expert parallelism size.",
    "--max-running-requests": "The maximum number of running requests.",
    "--mem-fraction-static": "The fraction of the memory used for static allocation (model weights and KV "
    "cache memory pool). Use a smaller value if you see out-of-memory errors.",
    "--quantization": "The quantization method.",
    "--chunked-prefill-size": "The maximum number of tokens in a chunk for the chunked prefill. Setting "
    "this to -1 means disabling chunked prefill.",
    "--attention-backend": "Choose the kernels for attention layers.",
    "--moe-runner-backend": "Choose the runner backend for MoE.",
    "--enable-flashinfer-allreduce-fusion": "Enable FlashInfer allreduce fusion with Residual RMSNorm.",
    "--cuda-graph-max-bs": "Set the maximum batch size for cuda graph. It will extend the cuda graph capture "
    "batch size to this value.",
    "--disable-cuda-graph": "Disable cuda graph.",
    "--disable-custom-all-reduce": "Disable the custom all-reduce kernel and fall back to NCCL.",
    "--host": "The host of the HTTP server.",
    "--port": "The port of the HTTP server.",
    "--trust-remote-code": "Whether or not to allow for custom models defined on the Hub in their own "
    "modeling files.",
    "--enable-metrics": "Enable log prometheus metrics.",
    "--api-key": "Set API key of the server. It is also used in the OpenAI API compatible server.",
    "--disable-flashinfer-autotune": "Disable FlashInfer autotuning.",
    "--config": "Read CLI options from a config file. Must be a YAML file with configuration options.",
    "--hybrid-kvcache-ratio": "NOTE: --hybrid-kvcache-ratio is deprecated. Please use "
    "--swa-full-tokens-ratio instead.",
    "--prefill-round-robin-balance": "NOTE: --prefill-round-robin-balance is deprecated. Please use "
    "--load-balance-method follow_bootstrap_room instead.",
}

# v0.5.9 server_args.py: models that get TRTLLM AllReduce Fusion by default on SM90/SM100.
ALLREDUCE_FUSION_AUTO_MODELS = [
    "DeepseekV3ForCausalLM",
    "GptOssForCausalLM",
    "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM",
    "Qwen3MoeForCausalLM",
    "KimiK25ForConditionalGeneration",
]


class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        raise ValueError(self.help)


class LoRAPathAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, list(values or []))


def _nullable_str(value: str) -> str | None:
    return None if value.lower() in ("none", "null", "") else value


def _json_list_type(value: str) -> list:
    return json.loads(value)


_TYPES = {
    "str": str,
    "int": int,
    "float": float,
    "json.loads": json.loads,
    "json_list_type": _json_list_type,
    "nullable_str": _nullable_str,
}

_ACTIONS = {"DeprecatedAction": DeprecatedAction, "LoRAPathAction": LoRAPathAction}


def _dest(flags: list[str]) -> str:
    special = {
        "--tensor-parallel-size": "tp_size",
        "--pipeline-parallel-size": "pp_size",
        "--data-parallel-size": "dp_size",
        "--expert-parallel-size": "ep_size",
        "--attention-context-parallel-size": "attn_cp_size",
        "--moe-data-parallel-size": "moe_dp_size",
        "--fp8-gemm-backend": "fp8_gemm_runner_backend",
        "--fp4-gemm-backend": "fp4_gemm_runner_backend",
    }
    return special.get(flags[0], flags[0][2:].replace("-", "_"))


def _spec() -> list[dict[str, Any]]:
    return json.loads(_SPEC_FILE.read_text())


def _default(entry: dict[str, Any], dest: str) -> Any:
    raw = entry.get("default")
    if entry.get("action") == "store_true":
        return False
    if isinstance(raw, str) and raw.startswith("ServerArgs."):
        return DEFAULTS.get(raw.split(".", 1)[1], DEFAULTS.get(dest))
    if isinstance(raw, str) and raw.startswith("list("):
        return ["/metrics"]
    if raw is None:
        return DEFAULTS.get(dest)
    return raw


def _v0_5_9_defaults() -> dict[str, Any]:
    """What the simulator reads, for a release whose parser does not declare it: 0.5.9's defaults."""
    out: dict[str, Any] = {}
    for entry in _spec():
        dest = _dest(entry["flags"])
        out[dest] = False if entry.get("action") in ("store_true", "DeprecatedAction") else _default(entry, dest)
    return out


class ServerArgs:
    """The server's arguments: every v0.5.9 field, then __post_init__'s adjustments."""

    def __init__(self, **kwargs: Any) -> None:
        for key, value in kwargs.items():
            setattr(self, key, value)
        self.__post_init__()

    # ------------------------------------------------------------------ CLI
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        released = sim_release.flags()
        if released is not None:  # another release than 0.5.9: its own flags, read from its wheel
            for entry in released:
                if entry["negatable"]:
                    parser.add_argument(*entry["flags"], dest=entry["dest"], action=argparse.BooleanOptionalAction)
                elif entry["switch"]:
                    parser.add_argument(*entry["flags"], dest=entry["dest"], action="store_true")
                else:
                    parser.add_argument(*entry["flags"], dest=entry["dest"], type=_TYPES[entry["type"]])
            return
        for entry in _spec():
            flags = entry["flags"]
            dest = _dest(flags)
            kwargs: dict[str, Any] = {"dest": dest}
            action = entry.get("action")
            if action in _ACTIONS:
                kwargs["action"] = _ACTIONS[action]
                if action == "LoRAPathAction":
                    kwargs["nargs"] = "*"
                    kwargs["default"] = None
            elif action:
                kwargs["action"] = action
                kwargs["default"] = _default(entry, dest)
            else:
                kwargs["type"] = _TYPES.get(entry.get("type") or "str", str)
                kwargs["default"] = _default(entry, dest)
                if isinstance(entry.get("choices"), list):
                    kwargs["choices"] = entry["choices"]
                if entry.get("nargs"):
                    kwargs["nargs"] = entry["nargs"].strip("'")
            if flags[0] in HELP:
                kwargs["help"] = HELP[flags[0]]
            if flags[0] == "--model-path":
                kwargs["required"] = True
            parser.add_argument(*flags, **kwargs)

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> ServerArgs:
        given = vars(args)
        if sim_release.flags() is not None:
            given = {**_v0_5_9_defaults(), **{k: v for k, v in given.items() if v is not None}}
            # the 0.5.14+ spellings, in the terms the simulator models (0.5.9's fields)
            if given.get("cuda_graph_max_bs_decode") is not None:
                given["cuda_graph_max_bs"] = given["cuda_graph_max_bs_decode"]
            if given.get("cuda_graph_backend_decode") == "disabled":
                given["disable_cuda_graph"] = True
            given.setdefault("flashinfer_allreduce_fusion_backend", None)
        return cls(**given)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"ServerArgs({fields})"

    # ------------------------------------------------------------------ post init
    def __post_init__(self) -> None:
        if self.tokenizer_path is None:
            self.tokenizer_path = self.model_path
        if self.served_model_name is None:
            self.served_model_name = self.model_path
        if self.device is None:
            self.device = "cuda"
        if self.random_seed is None:
            self.random_seed = random.randint(0, 1 << 30)
        self._handle_gpu_memory_settings(get_device_memory_capacity())
        self._handle_model_specific_adjustments()
        self._handle_attention_backend_compatibility()
        self._handle_moe_kernel_config()
        self.check_server_args()

    def _handle_gpu_memory_settings(self, gpu_mem: float | None) -> None:
        if gpu_mem is None:
            raise RuntimeError("No CUDA GPUs are available")  # torch's own words (torch/cuda/__init__.py _lazy_init)
        if gpu_mem < 20 * 1024:
            chunked, graph_bs = 2048, 8
        elif gpu_mem < 35 * 1024:  # A10, 4090, 5090
            chunked, graph_bs = 2048, (24 if self.tp_size < 4 else 80)
        elif gpu_mem < 60 * 1024:
            chunked, graph_bs = 4096, (32 if self.tp_size < 4 else 160)
        elif gpu_mem < 90 * 1024:  # H100
            chunked, graph_bs = 8192, (256 if self.tp_size < 4 else 512)
        elif gpu_mem < 160 * 1024:  # H20, H200, RTX PRO 6000
            chunked, graph_bs = 8192, (256 if self.tp_size < 4 else 512)
        else:
            chunked, graph_bs = 16384, 512
        if self.chunked_prefill_size is None:
            self.chunked_prefill_size = chunked
        if self.cuda_graph_max_bs is None:
            self.cuda_graph_max_bs = graph_bs
        if self.mem_fraction_static is None:
            reserved_mem = 1024  # MB: CUDA context, NCCL buffers
            reserved_mem += max(self.chunked_prefill_size, 2048) * 1.5  # activations of a prefill chunk
            reserved_mem += self.cuda_graph_max_bs * 2  # CUDA graphs
            reserved_mem += self.tp_size * self.pp_size / 8 * 1024  # communication buffers
            self.mem_fraction_static = round((gpu_mem - reserved_mem) / gpu_mem, 3)

    def _handle_model_specific_adjustments(self) -> None:
        self._model = models.resolve(self.model_path)
        model_arch = self._model.architecture

        # TRTLLM AllReduce Fusion supports SM90/100, enable it by default
        # for models with explicit support (DeepseekV3, GptOss, Glm4Moe, Qwen3Moe)
        # TODO: currently, it is only supported in the single node scenario.
        # TODO: there is currently a bug on H20 device specifically.
        if sim_release.gates_as_released():  # 0.5.2x: arg_groups/overrides.py, the release's own statement
            from sglang.srt.arg_groups.overrides import sim_block

            self.__dict__.update(sim_block(view=self, model_arch=model_arch, is_mimo=False, prefer_custom_dsv41=False))
            return
        device_name = get_device_name()
        is_h20_device = "H20" in device_name and "H200" not in device_name
        if (
            not self.enable_flashinfer_allreduce_fusion
            and model_arch in ALLREDUCE_FUSION_AUTO_MODELS
            and (is_sm90_supported() or is_sm100_supported())
            and not self.enable_dp_attention
            and self.nnodes == 1
            and not is_h20_device
            and self.moe_a2a_backend == "none"
        ):
            self.enable_flashinfer_allreduce_fusion = True

    def _handle_attention_backend_compatibility(self) -> None:
        if self.attention_backend is None:
            if self._model.attention == "dsa":
                backend = "nsa"
            elif self._model.attention == "mla":
                if is_hopper_with_cuda_12_3():
                    backend = "fa3"
                elif is_sm100_supported():
                    backend = "flashinfer"
                else:
                    backend = "triton"
            elif is_hopper_with_cuda_12_3():
                backend = "fa3"
            elif is_sm100_supported():
                backend = "trtllm_mha"
            elif is_flashinfer_available():
                # trtllm_mha does not support SM120, which will fall back to flashinfer
                backend = "flashinfer"
            else:
                backend = "triton"
            self.attention_backend = backend
            logger.info(f"Attention backend not specified. Use {backend} backend by default.")
        if self.attention_backend == "trtllm_mha" and not is_sm100_supported():
            raise ValueError(
                "TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). Please use a different backend."
            )
        if self.attention_backend == "trtllm_mla" and not is_blackwell_supported():
            raise ValueError(
                "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use a different backend."
            )

    def _handle_moe_kernel_config(self) -> None:
        if self.moe_runner_backend == "flashinfer_cutlass":
            assert self.quantization in ["modelopt_fp4", "modelopt_fp8", None], (
                f"Invalid quantization '{self.quantization}'. \nFlashInfer Cutlass MOE supports only: "
                "'modelopt_fp4', 'modelopt_fp8', or bfloat16 (None)."
            )
            assert self.ep_size in [1, self.tp_size], (
                "The expert parallel size must be 1 or the same as the tensor parallel size"
            )
        if self.moe_runner_backend == "flashinfer_trtllm":
            assert self.quantization in ["modelopt_fp4", "fp8", "modelopt_fp8", "compressed-tensors", None], (
                f"Invalid quantization '{self.quantization}'."
            )
            self.disable_shared_experts_fusion = True
            logger.warning(
                "FlashInfer TRTLLM MoE is enabled. --disable-shared-experts-fusion is automatically set."
            )

    def check_server_args(self) -> None:
        assert (self.tp_size * self.pp_size) % self.nnodes == 0, "tp_size must be divisible by number of nodes"
        assert not (self.dp_size > 1 and self.nnodes != 1 and not self.enable_dp_attention), (
            "multi-node data parallel is not supported unless dp attention!"
        )


_global_server_args: ServerArgs | None = None


def set_global_server_args_for_scheduler(server_args: ServerArgs) -> None:
    global _global_server_args
    _global_server_args = server_args


def get_global_server_args() -> ServerArgs:
    if _global_server_args is None:
        raise ValueError("Global server args is not set yet!")
    return _global_server_args


def _yaml_scalar(text: str) -> Any:
    text = text.strip()
    if text[:1] in "\"'" and text[-1:] == text[:1] and len(text) >= 2:
        return text[1:-1]
    low = text.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("null", "none", "~", ""):
        return None
    return text


def _read_config(path: str) -> dict[str, Any]:
    """A minimal YAML reader for --config files (flat `key: value`, inline or block lists)."""
    if not path.endswith((".yaml", ".yml")):
        raise ValueError(f"Unsupported config file format: {path}. Only YAML files are supported.")
    config: dict[str, Any] = {}
    last_key: str | None = None
    for raw in Path(path).read_text().splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.lstrip().startswith("- ") and last_key is not None:
            if not isinstance(config.get(last_key), list):
                config[last_key] = []
            config[last_key].append(_yaml_scalar(line.lstrip()[2:]))
            continue
        key, _, value = line.partition(":")
        last_key = key.strip()
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            config[last_key] = [_yaml_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            config[last_key] = _yaml_scalar(value)
    return config


def _merge_config(argv: list[str]) -> list[str]:
    if "--config" not in argv:
        return argv
    i = argv.index("--config")
    if i + 1 >= len(argv):
        return argv
    path = argv[i + 1]
    rest = argv[:i] + argv[i + 2 :]
    merged: list[str] = []
    for key, value in _read_config(path).items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            merged.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            merged += [flag, *map(str, value)]
        else:
            merged += [flag, str(value)]
    return merged + rest  # command-line values win


def prepare_server_args(argv: list[str]) -> ServerArgs:
    argv = _merge_config(list(argv))
    parser = argparse.ArgumentParser(prog=sim_release.prog())
    ServerArgs.add_cli_args(parser)
    raw_args = parser.parse_args(argv)
    return ServerArgs.from_cli_args(raw_args)
