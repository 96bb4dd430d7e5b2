"""Will the model fit? Weights per GPU + KV cache + a stated overhead, against the memory the engine claims."""

from __future__ import annotations

import math
from dataclasses import dataclass

from firstlight.deployment import Deployment
from firstlight.engines import EngineAdapter
from firstlight.facts import Facts, Gpu, ModelConfig
from firstlight.preflight.finding import Finding, available_gpus, fail, ok, used_gpus, warn

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
        elem = DTYPE_BYTES.get(serving_dtype(config, dep), 2)
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


def serving_dtype(config: ModelConfig, dep: Deployment) -> str:
    """The dtype the engine serves in: the spec's --dtype, else the checkpoint's, except that both engines
    serve a float32 checkpoint in 16 bits unless told otherwise (`dtype: auto`)."""
    asked = str(dep.arg("dtype") or "auto").replace("torch.", "")
    if asked != "auto":
        return asked
    stored = str(config.dtype or "bfloat16").replace("torch.", "")
    return "bfloat16" if stored in ("float32", "float") else stored


def check_memory_fit(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    return [_memory_fit(facts, dep, engine)]


@dataclass(frozen=True)
class Fit:
    """One rank's memory at a layout: weights, the KV cache of one full-length request, the overhead, and
    what the engine may take of the GPU."""

    weights_gib: float
    kv_bytes_per_token: float | None
    kv_one_gib: float
    budget_gib: float

    @property
    def need_gib(self) -> float:
        return self.weights_gib + OVERHEAD_GIB + self.kv_one_gib

    @property
    def fits(self) -> bool:
        return self.need_gib <= self.budget_gib

    @property
    def kv_capacity_tokens(self) -> int | None:
        """Tokens of KV cache the rest of the budget holds (the engines' "KV cache size: N tokens")."""
        if not self.kv_bytes_per_token:
            return None
        return max(int((self.budget_gib - self.weights_gib - OVERHEAD_GIB) * GIB / self.kv_bytes_per_token), 0)


def fit_at(config: ModelConfig, weights_bytes: int, dep: Deployment, engine: EngineAdapter, gpu: Gpu) -> Fit:
    per_token = kv_bytes_per_token(config, dep, engine)
    context = request_tokens(config, dep, engine)
    return Fit(
        weights_gib=weights_bytes / GIB / (dep.parallel.tp * dep.parallel.pp),
        kv_bytes_per_token=per_token,
        kv_one_gib=(per_token or 0) * context / GIB,
        budget_gib=gpu.memory.total_gib * memory_fraction(dep, engine),
    )


def request_tokens(config: ModelConfig, dep: Deployment, engine: EngineAdapter) -> int:
    """Tokens of one full-length request: the engine's context flag, else the model's own limit."""
    flag = engine.memory.context_flag
    return int((dep.arg(flag) if flag else None) or config.max_position_embeddings or 4096)


def smallest_tp(
    config: ModelConfig, weights: int, dep: Deployment, engine: EngineAdapter, gpus: list[Gpu]
) -> int | None:
    """The smallest tensor-parallel size (a power of two the attention heads divide, within the GPUs there
    are) at which one full-length request fits."""
    heads = config.num_attention_heads or 1
    tp = 1
    while tp * dep.parallel.pp <= len(gpus):
        layout = dep.model_copy(update={"parallel": dep.parallel.model_copy(update={"tp": tp})})
        if heads % tp == 0 and fit_at(config, weights, layout, engine, min(gpus, key=_total)).fits:
            return tp
        tp *= 2
    return None


def _total(gpu: Gpu) -> float:
    return gpu.memory.total_gib


def _memory_fit(facts: Facts, dep: Deployment, engine: EngineAdapter) -> Finding:
    gpus = used_gpus(facts, dep)
    config = (facts.model.config if facts.model else None) or ModelConfig()
    if not gpus:
        return ok("memory_fit", "no GPU to fit: skipped (a CPU engine sizes its KV cache from host memory)")
    weights = facts.model.weights.bytes if facts.model else 0
    if not weights:
        return warn("memory_fit", "no safetensors weights to size", "Check the model directory's weights.")
    gpu = min(gpus, key=_total)
    fit = fit_at(config, weights, dep, engine, gpu)
    context = request_tokens(config, dep, engine)
    shards = dep.parallel.tp * dep.parallel.pp
    fraction = memory_fraction(dep, engine)
    capacity = fit.kv_capacity_tokens
    per_token = fit.kv_bytes_per_token
    held = facts.model.weights if facts.model else None
    sized = " (the index's total_size)" if held and held.from_index else ""
    sized = " (estimated from config.json)" if held and held.estimated else sized
    arithmetic = (
        f"per rank: weights {weights / GIB:.1f} GiB{sized} / {shards} GPU(s) = {fit.weights_gib:.2f} GiB; KV "
        f"{(per_token or 0) / 1024:.1f} KiB/token x {context} tokens = {fit.kv_one_gib:.2f} GiB; overhead "
        f"{OVERHEAD_GIB:.1f} GiB; need {fit.need_gib:.2f} GiB of {gpu.memory.total_gib:.1f} GiB x {fraction} = "
        f"{fit.budget_gib:.2f} GiB"
    )
    most = capacity // context if capacity is not None else None
    concurrency_text = (
        f"; the KV cache holds {capacity:,} tokens: at most {most} concurrent request(s) of {context} tokens"
        if capacity is not None and fit.fits
        else ""
    )
    smallest = smallest_tp(config, weights, dep, engine, available_gpus(facts, dep))
    evidence = {
        "weights_gib_per_gpu": round(fit.weights_gib, 3),
        "weights_from_index": bool(held and held.from_index),
        "weights_estimated": bool(held and held.estimated),
        "kv_gib_one_request": round(fit.kv_one_gib, 3),
        "overhead_gib": OVERHEAD_GIB,
        "budget_gib": round(fit.budget_gib, 3),
        "need_gib": round(fit.need_gib, 3),
        "kv_bytes_per_token": per_token,
        "context": context,
        "kv_capacity_tokens": capacity,
        "max_concurrency": most,
        "smallest_tp": smallest,
        "arithmetic": arithmetic,
    }
    flags = engine.memory
    raise_fraction = f"a higher --{flags.fraction_flag} (now {fraction})" if flags.fraction_flag else "more memory"
    if not fit.fits:
        more = f"parallel.tp: {smallest} is the smallest that fits" if smallest else "more GPUs than these"
        return fail(
            "memory_fit",
            f"the model does not fit: {arithmetic}",
            f"Use {more}, a quantized checkpoint, a shorter context, or {raise_fraction}.",
            **evidence,
        )
    smaller = f"; parallel.tp: {smallest} would fit too" if smallest and smallest < dep.parallel.tp else ""
    concurrency = int((dep.arg(flags.concurrency_flag) if flags.concurrency_flag else None) or 1)
    if capacity is not None and capacity < context * concurrency:
        return warn(
            "memory_fit",
            f"fits, but the KV cache holds {capacity} tokens, fewer than {concurrency} "
            f"request(s) x {context} tokens: {arithmetic}",
            f"Expect queueing above {max(capacity // context, 1)} full-length requests; {raise_fraction} or "
            "more GPUs give room for more.",
            **evidence,
        )
    return ok("memory_fit", f"fits: {arithmetic}{concurrency_text}{smaller}", **evidence)
