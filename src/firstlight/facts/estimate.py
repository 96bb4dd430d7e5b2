"""The weights of a checkpoint from its config.json alone, for planning before the shards are anywhere near.

Parameters are counted per part from the architecture's own dimensions (embeddings, attention: MLA's
low-rank projections or GQA's heads, dense MLPs, routed and shared experts, routers, norms), the way the
modelling code of transformers lays them out; multi-token-prediction layers are left out, since the
engines load them only for speculative decoding. Bytes follow the quantization config: the linear layers it
quantizes (minus its `ignore` list) at the format's size with its scales, everything else in 16 bits.
An estimate, labelled so wherever it is used; the safetensors index's `total_size` replaces it when present.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A representative module name of each part, to test the quantization config's ignore list against.
PART_NAMES = {
    "attention": "model.layers.5.self_attn.q_proj",
    "dense_mlp": "model.layers.0.mlp.gate_proj",
    "shared_experts": "model.layers.5.mlp.shared_experts.gate_proj",
    "experts": "model.layers.5.mlp.experts.0.gate_proj",
}
SIXTEEN_BIT = ("embeddings", "lm_head", "router", "norms")


class WeightEstimate(BaseModel):
    model_config = ConfigDict(extra="ignore")
    params_by_part: dict[str, int] = Field(default_factory=dict)
    bytes_by_part: dict[str, int] = Field(default_factory=dict)
    params: int = 0
    bytes: int = 0
    linear_bytes_per_param: float = 2.0  # of the quantized linear layers


def estimate_weights(config: dict[str, Any]) -> WeightEstimate | None:
    """Parameters and bytes of the model's serving weights; None when config.json lacks the dimensions."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    params = count_parameters(text)
    if params is None:
        return None
    quant = config.get("quantization_config") or text.get("quantization_config") or {}
    stored = 4.0 if str(text.get("torch_dtype") or config.get("torch_dtype") or "") == "float32" else 2.0
    linear = quantized_bytes_per_param(quant) if quant else stored
    ignored = [_pattern(p) for p in quant.get("ignore") or [] if isinstance(p, str)]
    nbytes = {}
    for part, count in params.items():
        quantized = part in PART_NAMES and not any(match(PART_NAMES[part]) for match in ignored)
        nbytes[part] = int(count * (linear if quantized else stored))
    return WeightEstimate(
        params_by_part=params,
        bytes_by_part=nbytes,
        params=sum(params.values()),
        bytes=sum(nbytes.values()),
        linear_bytes_per_param=linear,
    )


def count_parameters(text: dict[str, Any]) -> dict[str, int] | None:
    h, layers, vocab = text.get("hidden_size"), text.get("num_hidden_layers"), text.get("vocab_size")
    heads = text.get("num_attention_heads")
    if not (h and layers and vocab and heads):
        return None
    experts = next((text[k] for k in ("n_routed_experts", "num_experts", "num_local_experts") if text.get(k)), 0)
    moe_layers = _moe_layers(text, layers) if experts else 0
    dense_layers = layers - moe_layers
    expert_width = text.get("moe_intermediate_size") or text.get("intermediate_size") or 0
    shared_width = text.get("shared_expert_intermediate_size") or expert_width * (text.get("n_shared_experts") or 0)
    return {
        "embeddings": vocab * h,
        "lm_head": 0 if text.get("tie_word_embeddings") else vocab * h,
        "attention": layers * _attention(text, h, heads),
        "dense_mlp": dense_layers * 3 * h * (text.get("intermediate_size") or 0),
        "experts": moe_layers * experts * 3 * h * expert_width,
        "shared_experts": moe_layers * 3 * h * shared_width,
        "router": moe_layers * experts * h,
        "norms": (2 * layers + 1) * h,
    }


def _attention(text: dict[str, Any], h: int, heads: int) -> int:
    if text.get("kv_lora_rank"):  # MLA (DeepSeek-V2/V3, Kimi-K2)
        kv_rank, rope = text["kv_lora_rank"], text.get("qk_rope_head_dim") or 0
        nope, v = text.get("qk_nope_head_dim") or 0, text.get("v_head_dim") or 0
        q_rank = text.get("q_lora_rank")
        q = h * q_rank + q_rank * heads * (nope + rope) if q_rank else h * heads * (nope + rope)
        return q + h * (kv_rank + rope) + kv_rank * heads * (nope + v) + heads * v * h + kv_rank + (q_rank or 0)
    head_dim = text.get("head_dim") or h // heads
    kv_heads = text.get("num_key_value_heads") or heads
    return h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h


def _moe_layers(text: dict[str, Any], layers: int) -> int:
    """Layers with experts: DeepSeek's first `first_k_dense_replace` are dense; Qwen's `decoder_sparse_step`
    and `mlp_only_layers` pick them."""
    first_dense = text.get("first_k_dense_replace") or 0
    step = text.get("decoder_sparse_step") or 1
    dense_only = set(text.get("mlp_only_layers") or [])
    return sum(1 for i in range(first_dense, layers) if i not in dense_only and (i + 1) % step == 0)


def quantized_bytes_per_param(quant: dict[str, Any]) -> float:
    """Bytes per weight of a quantized linear layer, scales included."""
    method = str(quant.get("quant_method") or "").lower()
    algorithm = str(quant.get("quant_algo") or "").lower()
    formats = " ".join(str(quant.get(k) or "") for k in ("format", "fmt")).lower()
    groups = [g.get("weights") or {} for g in (quant.get("config_groups") or {}).values() if isinstance(g, dict)]
    bits = next((w.get("num_bits") for w in groups if w.get("num_bits")), None) or quant.get("bits")
    group = next((w.get("group_size") for w in groups if w.get("group_size")), None) or quant.get("group_size")
    kind = next((w.get("type") for w in groups if w.get("type")), None)
    if "nvfp4" in algorithm + formats or (bits == 4 and kind == "float" and group == 16):
        return 0.5 + 1 / 16  # an FP8 scale per 16 weights
    if "mxfp4" in method + algorithm + formats:
        return 0.5 + 1 / 32
    if bits == 4 or method in ("awq", "gptq") or "int4" in algorithm:
        return 0.5 + 2 / (group or 128)  # a 16-bit scale per group
    if bits == 8 or "fp8" in method + algorithm + formats or "e4m3" in formats:
        return 1.0
    return 2.0


def _pattern(entry: str):  # type: ignore[no-untyped-def]
    """One `ignore` entry as a test on a module name: `re:` regexes, or globs with any prefix (VLMs put
    `language_model.` before the text model's names)."""
    if entry.startswith("re:"):
        rx = re.compile(entry[3:])
        return lambda name: rx.search(name) is not None
    glob = entry.removeprefix("language_model.")
    return lambda name: fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(name, glob + ".*")
