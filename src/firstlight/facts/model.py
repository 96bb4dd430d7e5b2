"""The model, from its directory alone: config.json, the safetensors headers, the tokenizer files.

No tensor is ever loaded: a shard's header is read through `safetensors.safe_open`, which also
refuses a truncated file the way the engines will ("incomplete metadata, file not fully covered").
A single GGUF file (llama.cpp) is a model too: its magic bytes and size are read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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
GGUF_MAGIC = b"GGUF"


class Quantization(BaseModel):
    model_config = ConfigDict(extra="ignore")
    method: str | None = None
    formats: list[str] = Field(default_factory=list)
    group_size: int | None = None
    bits: int | None = None


class ModelConfig(BaseModel):
    """The fields of config.json that decide memory, parallelism and kernels."""

    model_config = ConfigDict(extra="ignore")
    architectures: list[str] = Field(default_factory=list)
    model_type: str | None = None
    attention: str = "MHA"  # MHA | GQA | MLA
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    hidden_size: int | None = None
    num_hidden_layers: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    q_lora_rank: int | None = None
    experts: int | None = None
    experts_per_token: int | None = None
    max_position_embeddings: int | None = None
    dtype: str | None = None
    quantization: Quantization | None = None


class Shard(BaseModel):
    model_config = ConfigDict(extra="ignore")
    file: str
    size: int
    params: dict[str, int] = Field(default_factory=dict)
    bytes: dict[str, int] = Field(default_factory=dict)
    error: str | None = None


class Weights(BaseModel):
    model_config = ConfigDict(extra="ignore")
    params_by_dtype: dict[str, int] = Field(default_factory=dict)
    bytes_by_dtype: dict[str, int] = Field(default_factory=dict)
    params: int = 0
    bytes: int = 0
    corrupt_shards: list[str] = Field(default_factory=list)


class ModelFacts(BaseModel):
    model_config = ConfigDict(extra="ignore")
    path: str
    exists: bool
    gguf: bool = False  # a single GGUF file rather than a directory
    config_present: bool = False
    config: ModelConfig | None = None
    config_error: str | None = None
    shards: list[Shard] = Field(default_factory=list)
    other_weights: list[str] = Field(default_factory=list)
    tokenizer_files: list[str] = Field(default_factory=list)
    weights: Weights = Field(default_factory=Weights)


def gather_model_facts(path: Path | str) -> ModelFacts:
    path = Path(path).expanduser()
    if path.is_file():
        return gguf_facts(path)
    if not path.is_dir():
        return ModelFacts(path=str(path), exists=False)
    facts = ModelFacts(path=str(path), exists=True, config_present=(path / "config.json").is_file())
    if facts.config_present:
        try:
            facts.config = ModelConfig.model_validate(describe_config(json.loads((path / "config.json").read_text())))
        except (ValueError, UnicodeDecodeError) as e:
            facts.config_error = f"config.json is not valid JSON: {e}"
    facts.shards = [Shard.model_validate(read_shard(p)) for p in sorted(path.glob("*.safetensors"))]
    facts.other_weights = sorted(p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".gguf"))
    facts.tokenizer_files = [n for n in TOKENIZER_FILES if (path / n).is_file()]
    facts.weights = summarise_shards(facts.shards)
    return facts


def gguf_facts(path: Path) -> ModelFacts:
    """A GGUF file carries its config and tokenizer inside; its size is its weights (plus a small header)."""
    with open(path, "rb") as f:
        magic = f.read(4)
    facts = ModelFacts(path=str(path), exists=True, gguf=True)
    if magic != GGUF_MAGIC:
        facts.config_error = f"{path.name} is not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r})"
        return facts
    facts.other_weights = [path.name]
    facts.weights = Weights(bytes=path.stat().st_size)
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


def summarise_shards(shards: list[Shard]) -> Weights:
    params: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    for shard in shards:
        for k, v in shard.params.items():
            params[k] = params.get(k, 0) + v
        for k, v in shard.bytes.items():
            nbytes[k] = nbytes.get(k, 0) + v
    return Weights(
        params_by_dtype=params,
        bytes_by_dtype=nbytes,
        params=sum(params.values()),
        bytes=sum(nbytes.values()),
        corrupt_shards=[s.file for s in shards if s.error is not None],
    )
