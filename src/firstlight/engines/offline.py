"""Engines firstlight reads logs of but does not launch (yet): TGI and TensorRT-LLM."""

from __future__ import annotations

import re

from firstlight.engines.base import EngineAdapter, compile_all
from firstlight.logs import aside_rules, phase_rules

# A shard that failed: the launch will not come up, and the cause is in the shard's lines before.
TGI_SHARD_FAILED = compile_all(
    r"ShardCannotStart",
    r"Shard \d+ failed to start",
    r"Method \w+ encountered an error",
    r"Shard \d+ crashed",
    r"Webserver Crashed",
    r"Failed to start webserver",
    r"Error when initializing model",
    r"Could not connect to Text Generation server",
    r"Shard complete standard error output",
)

TGI = EngineAdapter(
    name="tgi",
    phases=(
        *phase_rules(
            ("distributed_init", r"Starting shard|Sharding model on"),
            ("weights_loading", r"Waiting for shard to be ready|Loading model|Starting download"),
            ("weights_loaded", r"Shard (\d+ )?ready in|Shard ready"),
            # the router's "Warming up model" is the shard sizing its KV cache, which "Setting max batch total
            # tokens" then reports: not a warm-up after start-up
            ("kv_cache_allocated", r"Setting max batch total tokens to|KV-cache blocks"),
        ),
        # Out of the usual order: the router reads its hostname before the shards warm up (it serves only at
        # "Connected"), and the shard captures its CUDA graphs inside that warm-up, before the router reports
        # the KV cache's size.
        *aside_rules(
            ("http_listening", r"Starting HTTP server|Invalid hostname, defaulting"),
            ("cuda_graph_capture", r"Cuda Graphs are enabled for sizes"),
        ),
    ),
    ready_line=re.compile(r"\bConnected\b"),
    fatal_lines=TGI_SHARD_FAILED,
    line_prefix=re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z\s+\w+\s+[\w:]+:\s*"),  # 2023-09-26T21:48:00Z ERROR target:
    wrapper_lines=TGI_SHARD_FAILED,
    fingerprints=compile_all(r"text_generation_(launcher|router|server)", r"ShardCannotStart"),
    # get_model picks the model class by model_type and refuses what it has no class (or no sharded class) for
    registry_sources=(r"text_generation_server/models/__init__\.py",),
)

TRTLLM = EngineAdapter(
    name="trtllm",
    phases=phase_rules(
        ("distributed_init", r"MPI size|mpi_rank|world_size"),
        # the TensorRT engine flow, and the PyTorch flow of trtllm-serve (1.x)
        (
            "weights_loading",
            r"Loading engine|Loading weights|Loading checkpoint|Use [\d.]+ GB for model weights|"
            r"Start to load safetensor file|Loading safetensors weights",
        ),
        (
            "weights_loaded",
            r"Loaded engine|Engine loaded|weights loaded|Model init total -- [\d.]+ ?s|Loading weights: 100%",
        ),
        # not any line naming the KV cache: its quantization and config are validated before the weights load
        ("kv_cache_allocated", r"Allocated .*KV cache|paged KV cache|Max KV cache blocks|Number of blocks in KV cache"),
        ("cuda_graph_capture", r"Creating CUDA graph instances for \d+ batch sizes"),
        ("http_listening", r"Uvicorn running on|Started server process"),
    ),
    ready_line=re.compile(r"Application startup complete\."),
    fatal_lines=compile_all(r"terminate called after throwing", r"\[TensorRT-LLM\]\[ERROR\]"),
    log_time=re.compile(r"\[(?P<ts>\d{2}/\d{2}/\d{4}-\d{2}:\d{2}:\d{2})\]"),
    # not a bare "trtllm": SGLang and vLLM name attention backends trtllm_mha, trtllm_mla, flashinfer_trtllm
    fingerprints=compile_all(r"tensorrt_llm", r"\[TensorRT-LLM\]", r"\[TRT\]", r"trtllm-serve", r"trtllm-build"),
)
ADAPTERS = (TGI, TRTLLM)
