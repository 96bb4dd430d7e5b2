"""What engines support, by release and GPU architecture (reference/engine-anchors.md §2, §4)."""

from __future__ import annotations

# compressed-tensors: the first release whose CompressionFormat enum has each value (git tags).
COMPRESSION_FORMAT_SINCE: dict[str, str] = {
    "dense": "0.4.0",
    "sparse-bitmask": "0.4.0",
    "int-quantized": "0.4.0",
    "pack-quantized": "0.4.0",
    "marlin-24": "0.4.0",
    "float-quantized": "0.5.0",
    "naive-quantized": "0.5.0",
    "sparse-24-bitmask": "0.9.0",
    "nvfp4-pack-quantized": "0.10.0",
    "mixed-precision": "0.11.0",
    "mxfp4-pack-quantized": "0.13.0",
    "mxfp8-quantized": "0.15.0",
    "mxfp6-pack-quantized": "0.20.1",
}

# Quantization methods (config.json quant_method) the engines know; a method outside the list for the
# installed engine is a warning (the list grows with releases), not a failure.
KNOWN_QUANT_METHODS = {
    "compressed-tensors",
    "fp8",
    "awq",
    "awq_marlin",
    "gptq",
    "gptq_marlin",
    "bitsandbytes",
    "gguf",
    "modelopt",
    "modelopt_fp4",
    "mxfp4",
    "fbgemm_fp8",
    "w8a8_int8",
    "w8a8_fp8",
    "marlin",
    "quark",
    "petit_nvfp4",
    "torchao",
    "experts_int8",
    "moe_wna16",
    "awq_triton",
    "qoq",
    "blockwise_int8",
    "auto-round",
    "inc",
    "bitnet",
}

# SGLang attention backends: the SM major versions they run on, per attention kind. None = any.
# fa3 asserts `(major == 8 and not mla) or major == 9`; trtllm_mla needs Blackwell (SM10x/11x/12x);
# cutedsl_mla needs SM100; trtllm_mha (0.5.23) SM90/SM100/SM120; hpc_ops SM90 and MHA only.
SGLANG_BACKENDS: dict[str, dict[str, set[int] | None]] = {
    "fa3": {"MHA": {8, 9}, "GQA": {8, 9}, "MLA": {9}},
    "fa4": {"MHA": {10, 12}, "GQA": {10, 12}, "MLA": {10, 12}},
    "flashinfer": {"MHA": None, "GQA": None, "MLA": None},
    "triton": {"MHA": None, "GQA": None, "MLA": None},
    "torch_native": {"MHA": None, "GQA": None, "MLA": None},
    "flex_attention": {"MHA": None, "GQA": None, "MLA": set()},
    "flashmla": {"MHA": set(), "GQA": set(), "MLA": {9, 10}},
    "cutlass_mla": {"MHA": set(), "GQA": set(), "MLA": {10}},
    "trtllm_mla": {"MHA": set(), "GQA": set(), "MLA": {10, 11, 12}},
    "cutedsl_mla": {"MHA": set(), "GQA": set(), "MLA": {10}},
    "trtllm_mha": {"MHA": {9, 10, 12}, "GQA": {9, 10, 12}, "MLA": set()},
    "hpc_ops": {"MHA": {9}, "GQA": {9}, "MLA": set()},
}
SGLANG_REMOVED_BACKENDS = {"cutlass_mla": "0.5.23"}

# vLLM backend names (VLLM_ATTENTION_BACKEND / --attention-backend) with architecture limits.
VLLM_BACKENDS: dict[str, dict[str, set[int] | None]] = {
    "FLASH_ATTN": {"MHA": {8, 9, 10, 12}, "GQA": {8, 9, 10, 12}, "MLA": set()},
    "FLASHINFER": {"MHA": None, "GQA": None, "MLA": set()},
    "TRITON_ATTN": {"MHA": None, "GQA": None, "MLA": set()},
    "FLEX_ATTENTION": {"MHA": None, "GQA": None, "MLA": set()},
    "TRITON_MLA": {"MHA": set(), "GQA": set(), "MLA": None},
    "FLASHMLA": {"MHA": set(), "GQA": set(), "MLA": {9, 10}},
    "FLASH_ATTN_MLA": {"MHA": set(), "GQA": set(), "MLA": {9}},
    "CUTLASS_MLA": {"MHA": set(), "GQA": set(), "MLA": {10}},
    "FLASHINFER_MLA": {"MHA": set(), "GQA": set(), "MLA": {10}},
}


def backend_ladder(engine: str, sm_major: int, attention: str) -> list[str]:
    """The backends to try in order on this architecture: the fastest known-good first, triton last."""
    kind = "MLA" if attention == "MLA" else "MHA"
    if engine == "vllm":
        if kind == "MLA":
            return {
                9: ["FLASHMLA", "FLASH_ATTN_MLA", "TRITON_MLA"],
                10: ["CUTLASS_MLA", "FLASHINFER_MLA", "FLASHMLA", "TRITON_MLA"],
            }.get(sm_major, ["TRITON_MLA"])
        return {9: ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"], 10: ["FLASHINFER", "FLASH_ATTN", "TRITON_ATTN"]}.get(
            sm_major, ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"] if sm_major == 8 else ["FLASHINFER", "TRITON_ATTN"]
        )
    if kind == "MLA":
        return {9: ["fa3", "flashinfer", "triton"], 10: ["trtllm_mla", "flashinfer", "triton"]}.get(
            sm_major, ["flashinfer", "triton"]
        )
    return {9: ["fa3", "flashinfer", "triton"], 10: ["trtllm_mha", "flashinfer", "triton"]}.get(
        sm_major, ["flashinfer", "triton"]
    )


# Flags renamed or deprecated by engine releases: flag → (since, what to use instead).
DEPRECATED_FLAGS: dict[str, dict[str, tuple[str, str]]] = {
    "sglang": {
        "--disable-cuda-graph": ("0.5.23", "--cuda-graph-backend-decode disabled (and -prefill)"),
        "--enable-dp-attention": ("0.5.23", "--attn-dp-size N"),
        "--cuda-graph-max-bs": ("0.5.23", "--cuda-graph-max-bs-decode"),
    },
    "vllm": {},
}

# Default memory fractions when the spec does not set one.
DEFAULT_MEMORY_FRACTION = {"vllm": 0.9, "sglang": 0.88, "transformers": 0.9}
MEMORY_FRACTION_FLAG = {"vllm": "gpu-memory-utilization", "sglang": "mem-fraction-static"}
CONTEXT_FLAG = {"vllm": "max-model-len", "sglang": "context-length"}
CONCURRENCY_FLAG = {"vllm": "max-num-seqs", "sglang": "max-running-requests"}
KV_DTYPE_FLAG = {"vllm": "kv-cache-dtype", "sglang": "kv-cache-dtype"}
