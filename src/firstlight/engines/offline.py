"""Engines firstlight reads logs of but does not launch (yet): llama.cpp server, TGI, TensorRT-LLM."""

from __future__ import annotations

import re

from firstlight.deployment import Deployment
from firstlight.engines.base import EngineAdapter, compile_all
from firstlight.launch.phases import phase_rules


def _not_launchable(dep: Deployment) -> list[str]:
    raise NotImplementedError(f"firstlight reads {dep.engine} logs but does not launch it")


LLAMA_CPP = EngineAdapter(
    name="llama.cpp",
    build_argv=_not_launchable,
    phases=phase_rules(
        ("weights_loading", r"load_model: loading model|llama_model_loader: loaded meta data|loading model"),
        (
            "weights_loaded",
            r"load_tensors: .*(done|buffer size)|llama_model_load: .*done|srv\s+load_model: .*loaded",
        ),
        ("kv_cache_allocated", r"llama_kv_cache|KV self size|llama_context: .*KV|kv_unified"),
        ("http_listening", r"listening on http|HTTP server (is )?listening|server is listening"),
    ),
    ready_line=re.compile(
        r"server is listening on|main: server is listening|all slots are idle|"
        r"llama_server: listening on|model loaded"
    ),
    fatal_lines=compile_all(r"exiting due to model loading error", r"failed to load model"),
    fingerprints=compile_all(r"\bllama_\w+:", r"\bggml_\w+", r"\bgguf\b", r"llama_server", r"\bsrv\s+\w+:"),
)

TGI = EngineAdapter(
    name="tgi",
    build_argv=_not_launchable,
    phases=phase_rules(
        ("distributed_init", r"Starting shard|Sharding model on"),
        ("weights_loading", r"Waiting for shard to be ready|Loading model|Starting download"),
        ("weights_loaded", r"Shard (\d+ )?ready in|Shard ready"),
        ("kv_cache_allocated", r"Setting max batch total tokens to|KV-cache blocks"),
        ("warmup_done", r"Warming up model|Warmup"),
        ("http_listening", r"Starting HTTP server|Invalid hostname, defaulting"),
    ),
    ready_line=re.compile(r"\bConnected\b"),
    fatal_lines=compile_all(r"ShardCannotStart", r"Shard \d+ failed to start", r"Method \w+ encountered an error"),
    fingerprints=compile_all(r"text_generation_(launcher|router|server)", r"ShardCannotStart"),
)

TRTLLM = EngineAdapter(
    name="trtllm",
    build_argv=_not_launchable,
    phases=phase_rules(
        ("distributed_init", r"MPI size|mpi_rank|world_size"),
        ("weights_loading", r"Loading engine|Loading weights|Loading checkpoint"),
        ("weights_loaded", r"Loaded engine|Engine loaded|weights loaded"),
        ("kv_cache_allocated", r"Allocated .*KV cache|paged KV cache|KV cache"),
        ("http_listening", r"Uvicorn running on|Started server process"),
    ),
    ready_line=re.compile(r"Application startup complete\."),
    fatal_lines=compile_all(r"terminate called after throwing", r"\[TensorRT-LLM\]\[ERROR\]"),
    fingerprints=compile_all(r"tensorrt_llm", r"\[TensorRT-LLM\]", r"\[TRT\]", r"trtllm"),
)
