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

from firstlight.facts.estimate import WeightEstimate, estimate_weights

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
INDEX_FILE = "model.safetensors.index.json"
GGUF_MAGIC = b"GGUF"


class Quantization(BaseModel):
    model_config = ConfigDict(extra="ignore")
    method: str | None = None
    formats: list[str] = Field(default_factory=list)
    group_size: int | None = None
    bits: int | None = None
    weight_block_size: list[int] | None = None  # block-wise FP8 (DeepSeek's [128, 128])
    algorithm: str | None = None  # ModelOpt's quant_algo (NVFP4, FP8)


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
    moe_intermediate_size: int | None = None  # one expert's MLP width
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
    from_index: bool = False  # bytes are the index's total_size, not the sum of the shards' headers
    estimated: bool = False  # bytes are estimated from config.json (no shards, no index)


class ShardIndex(BaseModel):
    """`model.safetensors.index.json`: the checkpoint's total weight bytes and the shards it is cut into."""

    model_config = ConfigDict(extra="ignore")
    total_size: int | None = None
    shards: list[str] = Field(default_factory=list)
    error: str | None = None


class ModelFacts(BaseModel):
    model_config = ConfigDict(extra="ignore")
    path: str
    exists: bool
    gguf: bool = False  # a single GGUF file rather than a directory
    config_present: bool = False
    config: ModelConfig | None = None
    config_error: str | None = None
    index: ShardIndex | None = None
    shards: list[Shard] = Field(default_factory=list)
    missing_shards: list[str] = Field(default_factory=list)  # listed in the index, not in the directory
    other_weights: list[str] = Field(default_factory=list)
    tokenizer_files: list[str] = Field(default_factory=list)
    weights: Weights = Field(default_factory=Weights)
    estimate: WeightEstimate | None = None


def gather_model_facts(path: Path | str) -> ModelFacts:
    path = Path(path).expanduser()
    if path.is_file():
        return gguf_facts(path)
    if not path.is_dir():
        return ModelFacts(path=str(path), exists=False)
    facts = ModelFacts(path=str(path), exists=True, config_present=(path / "config.json").is_file())
    raw: dict[str, Any] | None = None
    if facts.config_present:
        try:
            raw = with_modelopt_quantization(json.loads((path / "config.json").read_text()), path)
            facts.config = ModelConfig.model_validate(describe_config(raw))
        except (ValueError, UnicodeDecodeError, AttributeError) as e:
            facts.config_error = f"config.json is not valid JSON: {e}"
    facts.shards = [Shard.model_validate(read_shard(p)) for p in sorted(path.glob("*.safetensors"))]
    facts.other_weights = sorted(p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".gguf"))
    facts.tokenizer_files = [n for n in TOKENIZER_FILES if (path / n).is_file()]
    facts.weights = summarise_shards(facts.shards)
    if (path / INDEX_FILE).is_file():
        facts.index = read_index(path / INDEX_FILE)
        present = {s.file for s in facts.shards}
        facts.missing_shards = [name for name in facts.index.shards if name not in present]
        if facts.missing_shards and facts.index.total_size:
            # the headers of the shards that are here undercount: the index knows the whole checkpoint
            facts.weights = facts.weights.model_copy(update={"bytes": facts.index.total_size, "from_index": True})
    if not facts.weights.bytes and not facts.other_weights and raw is not None:
        facts.estimate = estimate_weights(raw)  # no shards, no index: sized from the architecture
        if facts.estimate is not None:
            facts.weights = Weights(params=facts.estimate.params, bytes=facts.estimate.bytes, estimated=True)
    return facts


def with_modelopt_quantization(config: dict[str, Any], path: Path) -> dict[str, Any]:
    """NVIDIA ModelOpt checkpoints may keep their quantization in hf_quant_config.json instead of config.json."""
    extra = path / "hf_quant_config.json"
    if config.get("quantization_config") or not extra.is_file():
        return config
    quant = json.loads(extra.read_text()).get("quantization") or {}
    ignore = quant.pop("exclude_modules", None) or []
    return {**config, "quantization_config": {"quant_method": "modelopt", **quant, "ignore": ignore}}


def read_index(path: Path) -> ShardIndex:
    """The index's total size (bytes of every tensor) and its shard names: enough to plan without the shards."""
    try:
        data = json.loads(path.read_text())
        total = (data.get("metadata") or {}).get("total_size")
        shards = sorted(set((data.get("weight_map") or {}).values()))
        return ShardIndex(total_size=int(total) if total is not None else None, shards=shards)
    except (OSError, ValueError, TypeError, AttributeError) as e:
        return ShardIndex(error=f"{path.name} is not a readable index: {e}")


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
        # Mixtral-style experts are whole MLPs of intermediate_size
        "moe_intermediate_size": text.get("moe_intermediate_size")
        or (text.get("intermediate_size") if experts else None),
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
        "weight_block_size": quant.get("weight_block_size"),
        "algorithm": quant.get("quant_algo"),
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
