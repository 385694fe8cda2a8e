"""What the simulated server knows about a model: the files a real one would read.

Resolution order, as a real sglang on an offline host would find them:
  1. --model-path is a local folder with config.json;
  2. a Hugging Face cache snapshot (HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub);
  3. the host's pre-downloaded models (CATALOGUE below, matched by repo id or its last part);
otherwise the download fails, as it does on a host without internet.

From config.json: `architectures`, `quantization_config`, `max_position_embeddings`; the weight
size comes from `model.safetensors.index.json` (metadata.total_size) or the *.safetensors sizes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class ModelInfo:
    path: str
    architecture: str
    weights_gb: float  # all ranks together
    kv_bytes_per_token: int  # per GPU at TP 1
    kv_split_by_tp: bool  # GQA heads split across TP ranks; MLA latents are replicated
    context_len: int
    quantization: str | None
    is_moe: bool
    attention: str  # "mha", "mla" or "dsa"
    dtype: str = "torch.bfloat16"
    speed: float = 1.0  # throughput relative to the seed's model on the same rung


# Pre-downloaded models of the simulated hosts. GLM-5-NVFP4 is the seed's model (744B MoE,
# GlmMoeDsaForCausalLM, MLA + DSA, 78 layers); sizes are estimates from public model cards.
CATALOGUE: dict[str, ModelInfo] = {
    "GLM-5-NVFP4": ModelInfo(
        path="GLM-5-NVFP4", architecture="GlmMoeDsaForCausalLM", weights_gb=440.0,
        kv_bytes_per_token=100_000, kv_split_by_tp=False, context_len=202752,
        quantization="modelopt_fp4", is_moe=True, attention="dsa", speed=1.0,
    ),
    "GLM-4.6": ModelInfo(
        path="GLM-4.6", architecture="Glm4MoeForCausalLM", weights_gb=660.0,
        kv_bytes_per_token=376_832, kv_split_by_tp=True, context_len=202752,
        quantization=None, is_moe=True, attention="mha", speed=1.1,
    ),
    "Qwen3-30B-A3B": ModelInfo(
        path="Qwen3-30B-A3B", architecture="Qwen3MoeForCausalLM", weights_gb=61.0,
        kv_bytes_per_token=98_304, kv_split_by_tp=True, context_len=40960,
        quantization=None, is_moe=True, attention="mha", speed=3.0,
    ),
    "gpt-oss-120b": ModelInfo(
        path="gpt-oss-120b", architecture="GptOssForCausalLM", weights_gb=65.0,
        kv_bytes_per_token=73_728, kv_split_by_tp=True, context_len=131072,
        quantization="mxfp4", is_moe=True, attention="mha", speed=2.5,
    ),
    "Llama-3.1-8B-Instruct": ModelInfo(
        path="Llama-3.1-8B-Instruct", architecture="LlamaForCausalLM", weights_gb=16.1,
        kv_bytes_per_token=131_072, kv_split_by_tp=True, context_len=131072,
        quantization=None, is_moe=False, attention="mha", speed=4.0,
    ),
}

OFFLINE_ERROR = (
    "We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the "
    "cached files.\nCheck your internet connection or see how to run the library in offline mode at "
    "'https://huggingface.co/docs/transformers/installation#offline-mode'."
)


def _hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def _quantization(cfg: dict) -> str | None:
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        return None
    method = str(q.get("quant_method", "")).lower()
    algo = str(q.get("quant_algo", "")).upper()
    if method == "modelopt":
        return "modelopt_fp4" if "FP4" in algo else "modelopt_fp8"
    return method or None


def _weights_gb(folder: Path, fallback: float) -> float:
    index = folder / "model.safetensors.index.json"
    try:
        total = json.loads(index.read_text())["metadata"]["total_size"]
        return float(total) / 2**30
    except (OSError, ValueError, KeyError, TypeError):
        pass
    sizes = [p.stat().st_size for p in folder.glob("*.safetensors")]
    if sizes and sum(sizes) > 2**20:
        return sum(sizes) / 2**30
    return fallback


def _from_folder(folder: Path, model_path: str) -> ModelInfo:
    cfg = json.loads((folder / "config.json").read_text())
    archs = cfg.get("architectures") or ["LlamaForCausalLM"]
    base = _catalogue_lookup(model_path) or _catalogue_lookup(folder.name)
    is_moe = any(k in cfg for k in ("num_experts", "n_routed_experts", "num_local_experts"))
    if base is None:
        base = ModelInfo(
            path=model_path, architecture=archs[0], weights_gb=16.0, kv_bytes_per_token=131_072,
            kv_split_by_tp=True, context_len=32768, quantization=None, is_moe=is_moe,
            attention="mla" if "kv_lora_rank" in cfg else "mha",
        )
    return replace(
        base,
        path=model_path,
        architecture=archs[0],
        quantization=_quantization(cfg) or base.quantization,
        context_len=int(cfg.get("max_position_embeddings") or base.context_len),
        weights_gb=_weights_gb(folder, base.weights_gb),
        is_moe=is_moe or base.is_moe,
    )


def _catalogue_lookup(model_path: str) -> ModelInfo | None:
    key = model_path.rstrip("/").split("/")[-1]
    for name, info in CATALOGUE.items():
        if name.lower() == key.lower():
            return info
    return None


def resolve(model_path: str) -> ModelInfo:
    folder = Path(model_path)
    if (folder / "config.json").is_file():
        return _from_folder(folder, model_path)
    if "/" in model_path and not model_path.startswith(("/", ".")):
        repo = _hub_cache() / ("models--" + model_path.replace("/", "--")) / "snapshots"
        snaps = sorted(repo.glob("*/config.json")) if repo.is_dir() else []
        if snaps:
            return _from_folder(snaps[-1].parent, model_path)
    info = _catalogue_lookup(model_path)
    if info is not None:
        return replace(info, path=model_path)
    raise OSError(OFFLINE_ERROR)
