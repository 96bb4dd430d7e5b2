"""llama.cpp's own HTTP server, `llama-server` (a C++ program, not a Python package).

The spec names the binary (`program:`) and a GGUF file as the model. Log strings are from the server's
source (tools/server/) and from recorded runs (tests/data/startup/llama-server-*.log). Older builds
print `main: server is listening on`, newer ones `llama_server: listening on`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from firstlight.engines.base import EngineAdapter, MemoryFlags, Software, compile_all, extra_args
from firstlight.logs import phase_rules

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


LLAMA_CPP = EngineAdapter(
    name="llama.cpp",
    build_argv=build_argv,
    runs_with="program",
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
    metrics_prefix="llamacpp:",
    software=Software(),
    memory=MemoryFlags(context_flag="ctx-size", concurrency_flag="parallel", kv_dtype_flag="cache-type-k"),
    api_key_env=("LLAMA_API_KEY",),
)
ADAPTERS = (LLAMA_CPP,)
