"""The model, from its directory alone: config.json, the safetensors headers, the tokenizer files.

No tensor is ever loaded: a shard's header is read through `safetensors.safe_open`, which also
refuses a truncated file the way the engines will ("incomplete metadata, file not fully covered").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F4": 0.5,
    "F6_E2M3": 0.75,
    "F6_E3M2": 0.75,
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "tiktoken.model", "vocab.json")
PLACEHOLDER_FORMATS = {None, "", "fakequant"}


def gather_model_facts(path: Path | str) -> dict[str, Any]:
    path = Path(path).expanduser()
    facts: dict[str, Any] = {"path": str(path), "exists": path.is_dir()}
    if not path.is_dir():
        return facts
    config_path = path / "config.json"
    facts["config_present"] = config_path.is_file()
    if facts["config_present"]:
        try:
            config = json.loads(config_path.read_text())
            facts["config"] = describe_config(config)
        except (ValueError, UnicodeDecodeError) as e:
            facts["config_error"] = f"config.json is not valid JSON: {e}"
    facts["shards"] = [read_shard(p) for p in sorted(path.glob("*.safetensors"))]
    facts["other_weights"] = sorted(p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".gguf"))
    facts["tokenizer_files"] = [n for n in TOKENIZER_FILES if (path / n).is_file()]
    facts["weights"] = summarise_shards(facts["shards"])
    return facts


def describe_config(config: dict[str, Any]) -> dict[str, Any]:
    """The fields that decide memory, parallelism and kernels. VLMs keep them under text_config."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    heads = text.get("num_attention_heads")
    kv_heads = text.get("num_key_value_heads", heads)
    hidden = text.get("hidden_size")
    head_dim = text.get("head_dim") or (hidden // heads if hidden and heads else None)
    if text.get("kv_lora_rank"):
        attention = "MLA"
    elif heads and kv_heads and kv_heads < heads:
        attention = "GQA"
    else:
        attention = "MHA"
    experts = next(
        (text[k] for k in ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts") if text.get(k)),
        None,
    )
    quant = config.get("quantization_config") or text.get("quantization_config")
    return {
        "architectures": config.get("architectures") or text.get("architectures") or [],
        "model_type": config.get("model_type"),
        "attention": attention,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_size": hidden,
        "num_hidden_layers": text.get("num_hidden_layers"),
        "kv_lora_rank": text.get("kv_lora_rank"),
        "qk_rope_head_dim": text.get("qk_rope_head_dim"),
        "q_lora_rank": text.get("q_lora_rank"),
        "experts": experts,
        "experts_per_token": text.get("num_experts_per_tok") or text.get("moe_topk"),
        "max_position_embeddings": text.get("max_position_embeddings"),
        "dtype": config.get("torch_dtype") or config.get("dtype") or text.get("torch_dtype"),
        "quantization": describe_quantization(quant) if isinstance(quant, dict) else None,
    }


def describe_quantization(quant: dict[str, Any]) -> dict[str, Any]:
    formats: set[str] = set()
    group_size = None
    bits = None
    if quant.get("format") not in PLACEHOLDER_FORMATS:
        formats.add(str(quant["format"]))
    for group in (quant.get("config_groups") or {}).values():
        if not isinstance(group, dict):
            continue
        if group.get("format") not in PLACEHOLDER_FORMATS:
            formats.add(str(group["format"]))
        weights = group.get("weights") or {}
        group_size = group_size or weights.get("group_size")
        bits = bits or weights.get("num_bits")
    return {
        "method": quant.get("quant_method"),
        "formats": sorted(formats),
        "group_size": group_size or quant.get("group_size"),
        "bits": bits or quant.get("bits") or quant.get("w_bit"),
    }


def read_shard(path: Path) -> dict[str, Any]:
    from safetensors import safe_open  # imported here: only model facts need it

    shard: dict[str, Any] = {"file": path.name, "size": path.stat().st_size}
    params: dict[str, int] = {}
    nbytes: dict[str, float] = {}
    try:
        with safe_open(str(path), framework="numpy") as f:
            for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                s = f.get_slice(key)
                dtype = s.get_dtype()
                numel = 1
                for dim in s.get_shape():
                    numel *= dim
                params[dtype] = params.get(dtype, 0) + numel
                nbytes[dtype] = nbytes.get(dtype, 0) + numel * DTYPE_BYTES.get(dtype, 1)
    except Exception as e:  # SafetensorError for a truncated or corrupt header, OSError for unreadable files
        shard["error"] = f"{type(e).__name__}: {e}"
        return shard
    shard["params"] = params
    shard["bytes"] = {k: int(v) for k, v in nbytes.items()}
    return shard


def summarise_shards(shards: list[dict[str, Any]]) -> dict[str, Any]:
    params: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    for shard in shards:
        for k, v in shard.get("params", {}).items():
            params[k] = params.get(k, 0) + v
        for k, v in shard.get("bytes", {}).items():
            nbytes[k] = nbytes.get(k, 0) + v
    return {
        "params_by_dtype": params,
        "bytes_by_dtype": nbytes,
        "params": sum(params.values()),
        "bytes": sum(nbytes.values()),
        "corrupt_shards": [s["file"] for s in shards if "error" in s],
    }
