"""Will the model fit? Weights per GPU + KV cache + a stated overhead, against the memory the engine claims."""

from __future__ import annotations

import math

from firstlight.deployment import Deployment
from firstlight.engines import EngineAdapter
from firstlight.facts import Facts, ModelConfig
from firstlight.preflight.finding import Finding, fail, ok, used_gpus, warn

GIB = 1024**3
# Activations, CUDA graphs, NCCL and allocator slack per GPU: a stated, deliberately round figure.
OVERHEAD_GIB = 2.0
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "auto": 2}


def memory_fraction(dep: Deployment, engine: EngineAdapter) -> float:
    flag = engine.memory.fraction_flag
    value = dep.arg(flag) if flag else None
    return float(value) if value is not None else engine.memory.default_fraction


def kv_bytes_per_token(config: ModelConfig, dep: Deployment, engine: EngineAdapter) -> float | None:
    """KV bytes one token costs on one GPU: MLA keeps one latent vector per layer, replicated on every
    TP rank; MHA/GQA keep K and V per KV head, split across TP ranks (replicated when TP > KV heads)."""
    layers = config.num_hidden_layers
    if not layers:
        return None
    kv_dtype = str(dep.arg(engine.memory.kv_dtype_flag) or "auto")
    if kv_dtype.startswith("fp8"):
        elem = 1.0
    elif kv_dtype.startswith("fp4"):
        elem = 0.5
    else:
        model_dtype = str(dep.arg("dtype") or config.dtype or "bfloat16").replace("torch.", "")
        elem = DTYPE_BYTES.get(model_dtype, 2)
    layers_per_gpu = math.ceil(layers / dep.parallel.pp)
    if config.attention == "MLA":
        latent = (config.kv_lora_rank or 0) + (config.qk_rope_head_dim or 0)
        return layers_per_gpu * latent * elem
    kv_heads = config.num_key_value_heads or config.num_attention_heads
    head_dim = config.head_dim
    if not kv_heads or not head_dim:
        return None
    heads_per_gpu = math.ceil(kv_heads / dep.parallel.tp)
    return 2 * layers_per_gpu * heads_per_gpu * head_dim * elem


def check_memory_fit(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    return [_memory_fit(facts, dep, engine)]


def _memory_fit(facts: Facts, dep: Deployment, engine: EngineAdapter) -> Finding:
    gpus = used_gpus(facts, dep)
    config = (facts.model.config if facts.model else None) or ModelConfig()
    if not gpus:
        return ok("memory_fit", "no GPU to fit: skipped (a CPU engine sizes its KV cache from host memory)")
    weights = facts.model.weights.bytes if facts.model else 0
    if not weights:
        return warn("memory_fit", "no safetensors weights to size", "Check the model directory's weights.")
    shards = dep.parallel.tp * dep.parallel.pp
    weights_gib = weights / GIB / shards
    per_token = kv_bytes_per_token(config, dep, engine)
    flags = engine.memory
    context = int(
        (dep.arg(flags.context_flag) if flags.context_flag else None) or config.max_position_embeddings or 4096
    )
    concurrency = int((dep.arg(flags.concurrency_flag) if flags.concurrency_flag else None) or 1)
    fraction = memory_fraction(dep, engine)
    gpu = min(gpus, key=lambda g: g.memory.total_gib)
    budget = gpu.memory.total_gib * fraction
    kv_one = (per_token or 0) * context / GIB
    need = weights_gib + OVERHEAD_GIB + kv_one
    capacity = int((budget - weights_gib - OVERHEAD_GIB) * GIB / per_token) if per_token else None
    arithmetic = (
        f"weights {weights / GIB:.1f} GiB / {shards} GPU(s) = {weights_gib:.2f} GiB; KV "
        f"{(per_token or 0) / 1024:.1f} KiB/token x {context} tokens = {kv_one:.2f} GiB; overhead {OVERHEAD_GIB:.1f} "
        f"GiB; need {need:.2f} GiB of {gpu.memory.total_gib:.1f} GiB x {fraction} = {budget:.2f} GiB"
    )
    evidence = {
        "weights_gib_per_gpu": round(weights_gib, 3),
        "kv_gib_one_request": round(kv_one, 3),
        "overhead_gib": OVERHEAD_GIB,
        "budget_gib": round(budget, 3),
        "need_gib": round(need, 3),
        "kv_bytes_per_token": per_token,
        "context": context,
        "kv_capacity_tokens": capacity,
        "arithmetic": arithmetic,
    }
    raise_fraction = f"a higher --{flags.fraction_flag} (now {fraction})" if flags.fraction_flag else "more memory"
    if need > budget:
        return fail(
            "memory_fit",
            f"the model does not fit: {arithmetic}",
            f"Use more GPUs (parallel.tp: {dep.parallel.tp * 2}), a quantized checkpoint, a shorter context, or "
            f"{raise_fraction}.",
            **evidence,
        )
    if capacity is not None and capacity < context * concurrency:
        return warn(
            "memory_fit",
            f"fits, but the KV cache holds {capacity} tokens, fewer than {concurrency} "
            f"request(s) x {context} tokens: {arithmetic}",
            f"Expect queueing above {max(capacity // context, 1)} full-length requests; {raise_fraction} or "
            "more GPUs give room for more.",
            **evidence,
        )
    return ok("memory_fit", f"fits: {arithmetic}", **evidence)
