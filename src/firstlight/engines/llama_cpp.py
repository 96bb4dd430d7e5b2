"""llama.cpp's own HTTP server, `llama-server` (a C++ program, not a Python package).

The spec names the binary (`program:`) and a GGUF file as the model. Every log line goes to stderr as
`M.SS.mmm.uuu L tag func: message` (L = I/W/E/D). Line texts are from the server's source
(tools/server/server.cpp, server-context.cpp, common/common.cpp, src/llama-*.cpp) and from recorded
runs (tests/data/startup/llama-server-*.log, tests/data/failures/llama-server/).

At the default verbosity the loader, context and warm-up lines are hidden (library INFO counts as
trace), so a start shows: loading model → threadpool init (the context, KV cache included, exists) →
`initializing, n_slots` (warm-up done) → `model loaded` → `listening on`. `-lv 4` adds the weight
buffer, KV cache and warm-up lines. The HTTP socket is bound before the model loads and answers 503
"Loading model" until it is ready; then `/health` answers 200 (server.cpp, server-http.cpp).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from firstlight.engines.base import (
    EngineAdapter,
    MemoryFlags,
    SpecDecodeMetrics,
    compile_all,
    extra_args,
)
from firstlight.logs import aside_rules, phase_rules, progress_rules

if TYPE_CHECKING:
    from firstlight.deployment import Deployment


def build_argv(dep: Deployment) -> list[str]:
    return [
        str(dep.program),
        "--model",
        str(dep.model),
        "--alias",
        dep.served_model_name,
        "--host",
        dep.host,
        "--port",
        str(dep.port),
        *extra_args(dep.args),
    ]


# The server's last word on a failed start; the cause is the first error-level line before it.
EXITING = r"exiting due to (model loading|HTTP server) error"

LLAMA_CPP = EngineAdapter(
    name="llama.cpp",
    build_argv=build_argv,
    runs_with="program",
    phases=(
        *phase_rules(
            (
                "weights_loading",
                r"load_model: loading model '|llama_model_loader: loaded meta data|l(oad|lm_load)_tensors: "
                r"(loading model tensors|offloading|ggml ctx size)",
            ),
            # the loader prints a dot per tensor group and ends the row when the last one is in; a build that logs
            # less (2026, verbosity 3) says nothing of the tensors, but its context is made only once they are loaded
            (
                "weights_loaded",
                r"l(oad|lm_load)_tensors: +\S+ model buffer size|llama_model_load: .*done|^\.{10,}\s*$|"
                r"\bllama_(context|new_context_with_model): ",
            ),
            # the threadpool starts once the model and its context (the KV cache) exist
            (
                "kv_cache_allocated",
                r"llama_kv_cache\w*: +(size =|kv_size =|\S+ KV buffer size)|KV self size|init: llama threadpool init",
            ),
            ("warmup_done", r"(load_model|init): initializing(, n_slots| slots, n_slots) = \d+"),
        ),
        # llama-server (2025) listens before it loads the model, and answers 503 until it has (2026 builds
        # listen after it is loaded): either way a listening line is recorded where it is, without moving the machine.
        # Builds that bind first and say `listening` only once loaded print `start: binding port ...` as they bind
        # (a bind that fails says so and exits).
        *aside_rules(
            (
                "http_listening",
                r"listening on http|HTTP server (is )?listening|server is listening|start: binding port",
            )
        ),
    ),
    progress=progress_rules(
        ("kv_cache_allocated", r"warming up the model with an empty run", "warming up"),
    ),
    ready_line=re.compile(r"llama_server: model loaded|main: model loaded|server is listening on|all slots are idle"),
    fatal_lines=compile_all(EXITING),
    wrapper_lines=compile_all(
        EXITING,
        # the summary only: "llama_model_loader: failed to load model from PATH" carries its own reason
        r"\b\w+: (error: )?failed to (load model|create.?context with model)(,? '[^']*')?\s*$",
        r"common_fit_params: encountered an error while trying to fit params",
        # ggml_cuda_error aborts with only the backend's name (`ggml-cuda.cu:70: CUDA error`) after logging the error
        # itself (`CUDA error: out of memory`, `ROCm error: CUBLAS_STATUS_INTERNAL_ERROR`); buffering may print it first
        r"ggml-cuda\.cu:\d+: (?:CUDA|ROCm|MUSA|HIP) error\s*$",
    ),
    error_line=re.compile(r"^\d+\.\d{2}\.\d{3}\.\d{3} E "),
    line_prefix=re.compile(r"\d+\.\d{2}\.\d{3}\.\d{3} [IWED] (?:(?:srv|slot|cmn|spec) +)?"),  # 0.00.045.459 I srv
    log_time=re.compile(r"^(?P<ts>\d+\.\d{2}\.\d{3}\.\d{3}) "),  # minutes.seconds.ms.µs since start
    # not a bare "gguf": vLLM and transformers load .gguf files too
    fingerprints=compile_all(
        r"\bllama_\w+:", r"\bggml_\w+", r"\bgguf_\w+", r"GGUF V\d", r"llama_server", r"\bsrv\s+\w+:"
    ),
    metrics_prefix="llamacpp:",
    spec_decode=SpecDecodeMetrics(
        accepted="llamacpp:spec_decode_num_accepted_tokens",
        draft_tokens="llamacpp:spec_decode_num_draft_tokens",
        drafts="llamacpp:spec_decode_num_drafts",
        per_position="llamacpp:spec_decode_num_accepted_tokens_per_pos",
    ),
    memory=MemoryFlags(context_flag="ctx-size", concurrency_flag="parallel", kv_dtype_flag="cache-type-k"),
    api_key_env=("LLAMA_API_KEY",),
)
ADAPTERS = (LLAMA_CPP,)
