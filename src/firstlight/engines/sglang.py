"""SGLang (`python -m sglang.launch_server`). Log strings: reference/engine-anchors.md §1.2.

Both wordings are listed: 0.5.23's "Init parallel begin." and "Capture target decode CUDA graph
begin", and the older "Init torch distributed begin." and "Capture cuda graph begin.".
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
    RequiredVariable,
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

DIST_PORT = 20000


def build_argv(dep: Deployment) -> list[str]:
    argv = [
        str(dep.python),
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(dep.model),
        "--served-model-name",
        dep.served_model_name,
        "--host",
        dep.host,
        "--port",
        str(dep.port),
    ]
    argv += parallel_flags(dep, {"tp": "--tp-size", "pp": "--pp-size", "dp": "--dp-size", "ep": "--ep-size"})
    return argv + extra_args(dep.args)


# --speculative-algorithm names (srt/speculative/spec_info.py; NEXTN is EAGLE over the model's own MTP layers)
ALGORITHMS = {
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "ngram": "NGRAM",
    "dflash": "DFLASH",
    "draft_model": "STANDALONE",
}
TREE_METHODS = ("eagle", "eagle3", "mtp", "draft_model")


def speculative_args(spec: Speculative) -> dict[str, Any]:
    """SGLang's flags (srt/arg_groups/fields/spec.py): EAGLE-style methods draft `tokens` steps of `topk`
    and verify `verify` tokens (a chain: tokens + 1); n-gram and DFlash draft `tokens` per step."""
    if spec.lookup_min is not None or spec.lookup_max is not None:
        raise ValueError("lookup_min/lookup_max are vLLM's n-gram window; SGLang's n-gram flags go in args")
    args: dict[str, Any] = {"speculative-algorithm": ALGORITHMS[spec.method]}
    if spec.draft:
        args["speculative-draft-model-path"] = spec.draft
    if spec.method in TREE_METHODS:
        args["speculative-num-steps"] = spec.tokens
        args["speculative-eagle-topk"] = spec.topk
        args["speculative-num-draft-tokens"] = spec.verify or spec.tokens + 1
    elif spec.topk != 1 or spec.verify is not None:
        raise ValueError(f"topk and verify are for EAGLE-style methods, not {spec.method}")
    else:
        args["speculative-num-draft-tokens"] = spec.tokens
    return args


def node_args(nodes: int, leader: str, rank: str) -> list[str]:
    return ["--dist-init-addr", f"{leader}:{DIST_PORT}", "--nnodes", str(nodes), "--node-rank", rank]


# SGLang attention backends and the SM major versions they run on, per attention kind
# (reference/engine-anchors.md §4): fa3 asserts `(major == 8 and not mla) or major == 9`; trtllm_mla
# needs Blackwell (SM10x/11x/12x); cutedsl_mla SM100; trtllm_mha (0.5.23) SM90/SM100/SM120; hpc_ops SM90, MHA.
ATTENTION = AttentionBackends(
    runs_on={
        "fa3": {"MHA": arch(8, 9), "GQA": arch(8, 9), "MLA": arch(9)},
        "fa4": {"MHA": arch(10, 12), "GQA": arch(10, 12), "MLA": arch(10, 12)},
        "flashinfer": {"MHA": ANY, "GQA": ANY, "MLA": ANY},
        "triton": {"MHA": ANY, "GQA": ANY, "MLA": ANY},
        "torch_native": {"MHA": ANY, "GQA": ANY, "MLA": ANY},
        "flex_attention": {"MHA": ANY, "GQA": ANY, "MLA": NOWHERE},
        "flashmla": {"MHA": NOWHERE, "GQA": NOWHERE, "MLA": arch(9, 10)},
        "cutlass_mla": {"MHA": NOWHERE, "GQA": NOWHERE, "MLA": arch(10)},
        "trtllm_mla": {"MHA": NOWHERE, "GQA": NOWHERE, "MLA": arch(10, 11, 12)},
        "cutedsl_mla": {"MHA": NOWHERE, "GQA": NOWHERE, "MLA": arch(10)},
        "trtllm_mha": {"MHA": arch(9, 10, 12), "GQA": arch(9, 10, 12), "MLA": NOWHERE},
        "hpc_ops": {"MHA": arch(9), "GQA": arch(9), "MLA": NOWHERE},
    },
    ladders={
        "MLA": {
            9: ("fa3", "flashinfer", "triton"),
            10: ("trtllm_mla", "flashinfer", "triton"),
            None: ("flashinfer", "triton"),
        },
        "MHA": {
            9: ("fa3", "flashinfer", "triton"),
            10: ("trtllm_mha", "flashinfer", "triton"),
            None: ("flashinfer", "triton"),
        },
    },
    flags=("attention-backend", "prefill-attention-backend", "decode-attention-backend"),
    removed={"cutlass_mla": "0.5.23"},
)


# A scheduler or subprocess died: the launch will not come up, and the cause is in the lines before.
SCHEDULER_FAILED = compile_all(
    r"Scheduler hit an exception",
    r"Received sigquit from a child",
    r"SIGQUIT received\..*child failed",  # 0.5.23's wording
    r"scheduler (is dead|died during initialization)",
    r"Initialization failed\.",
    r"Subprocess \S+ \(pid=\d+\) crashed",
)

SGLANG = EngineAdapter(
    name="sglang",
    build_argv=build_argv,
    phases=(
        *phase_rules(
            ("distributed_init", r"Init (torch distributed|parallel) begin|sglang is using nccl=="),
            (
                "weights_loading",
                r"Load weight begin\.|Loading safetensors checkpoint shards|Multi-thread loading shards",
            ),
            ("weights_loaded", r"Load weight end\."),
            ("kv_cache_allocated", r"KV Cache is allocated\.|Memory pool end\."),
            # Ascend builds capture "npu graph"
            ("cuda_graph_capture", r"Capture .*(cuda|CUDA|npu|NPU) graph begin"),
            ("cuda_graph_done", r"Capture .*(cuda|CUDA|npu|NPU) graph end"),
            ("http_listening", r"Uvicorn running on |Application startup complete\."),
            ("warmup_done", r"\"POST /generate HTTP/1\.1\" 200"),
        ),
        # piecewise CUDA graphs (default from 0.5.x) compile inside the capture, after the KV cache
        *aside_rules(("torch_compile", r"Compiling a graph for dynamic shape takes|Compiling num tokens \(")),
    ),
    progress=progress_rules(
        (
            "weights_loading",
            r"(?:Loading (?:safetensors|pt) checkpoint shards|Multi-thread loading shards|"
            r"Loading safetensors using [\w ]+):\s+\d+% Completed \| (?P<done>\d+)/(?P<total>\d+)",
            "shards",
        ),
        (
            "cuda_graph_capture",
            r"Capturing (?:batches|num tokens) \((?P<detail>[^)]*)\):\s+\d+%.*?\|\s*"
            r"(?P<done>\d+)/(?P<total>\d+)",
            "graphs",
        ),
    ),
    ready_line=re.compile(r"The server is fired up and ready to roll"),
    fatal_lines=(*SCHEDULER_FAILED, *compile_all(UVICORN_BIND_FAILED)),
    line_prefix=re.compile(r"\[\d{4}-\d\d-\d\d[ T][\d:.,]+(?: \w+)*\]\s*"),  # [2025-03-10 14:17:52 TP6]
    wrapper_lines=SCHEDULER_FAILED,
    # SGLang before 0.3 ran its TP workers over rpyc, which re-raises a worker's exception in the parent as
    # `rpyc.core.vinegar/<type>: <message>` and then prints the worker's own under `=== Remote Traceback (1) ===`
    restating_lines=compile_all(r"(?:^|\s)rpyc\.core\.vinegar/"),
    config_sources=(r"sglang/srt/server_args\.py", r"sglang/srt/arg_groups/", r"sglang/srt/configs/"),
    registry_sources=(r"sglang/srt/models/registry\.py",),
    # srt/models/registry.py logs it and leaves the model out; it matters only if that model is the one served
    # and utils/common.py logs an optional module it could not import ("Failed to import amdsmi with
    # ModuleNotFoundError(...)"), _custom_ops.py its custom all-reduce ("Failed to import from custom_ar with
    # ImportError(...)"), and runs on without it
    ignored_errors=compile_all(
        r"Ignore import error when loading sglang\.srt\.models\.",
        r"Failed to import (from )?[\w.]+ with \w+(Error|Exception)\(",
        r"Failed to load generation config for",  # it serves without one
    ),
    fingerprints=compile_all(
        r"\bsglang[./:]",
        r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?( DP\d+)?( PP\d+)?( TP\d+)",
        # its own start-up lines, which a single-GPU log writes without a rank tag
        r"ServerArgs\(|Load weight (begin|end)\.|KV Cache is allocated\.|Init torch distributed begin\.",
        r"Scheduler hit an exception",
        r"The server is fired up",
        r"sgl[_-]kernel",
    ),
    default_env={"HF_HUB_OFFLINE": "1"},
    required_env=(
        RequiredVariable(
            "device",
            "cpu",
            "SGLANG_USE_CPU_ENGINE",
            "1",
            # srt/layers/rotary_embedding/base.py: without the CPU engine switch, 0.5.23 imports vLLM's ops
            "without it SGLang takes its CUDA code path on the CPU and stops at start-up on "
            "`from vllm._custom_ops import rotary_embedding`",
        ),
    ),
    hang_hints={"weights_loading": "SGLang gives up waiting for the other ranks after 480 s."},
    metrics_prefix="sglang:",
    software=Software(
        distributions=("sglang",),
        companions=("sgl-kernel", "sglang-kernel"),
        module="sglang",
        flag_sources=("srt/server_args.py", "srt/arg_groups"),
        entrypoints=("sglang.launch_server",),
        # 0.5.x (one folder per Triton version); older releases kept them under srt/layers/moe/fused_moe_triton
        moe_configs=("srt/layers/moe/moe_runner/triton_utils/configs", "srt/layers/moe/fused_moe_triton/configs"),
        moe_tuner="benchmark/kernels/fused_moe_triton/tuning_fused_moe_triton.py in the SGLang source tree",
        moe_config_env="SGLANG_MOE_CONFIG_DIR",
        # srt/arg_groups: --moe-a2a-backend {none,deepep,mooncake,...} (0.5), --enable-deepep-moe before it
        needs_library=(
            NeedsLibrary("moe-a2a-backend", "deepep", ("deep_ep", "sgl-deep-ep"), "DeepEP"),
            NeedsLibrary("enable-deepep-moe", None, ("deep_ep", "sgl-deep-ep"), "DeepEP"),
            NeedsLibrary("moe-a2a-backend", "mooncake", ("mooncake-transfer-engine",), "Mooncake's EP"),
        ),
        # the members of `class SpeculativeAlgorithm(Enum)` (NEXTN is an alias of EAGLE, not a member)
        speculative_methods=MethodSource(
            "srt/speculative/spec_info.py",
            r"^class SpeculativeAlgorithm\b[^\n]*:(?P<block>.*?)\n    (?:@|def )",
            r"^\s+(?P<name>[A-Z][A-Z0-9_]*)\s*=\s*(?:auto\(\)|\d+)",
            aliases=("NEXTN",),
        ),
        deprecated_flags={
            "--disable-cuda-graph": ("0.5.23", "--cuda-graph-backend-decode disabled (and -prefill)"),
            "--enable-dp-attention": ("0.5.23", "--attn-dp-size N"),
            "--cuda-graph-max-bs": ("0.5.23", "--cuda-graph-max-bs-decode"),
        },
    ),
    memory=MemoryFlags(
        fraction_flag="mem-fraction-static",
        default_fraction=0.88,
        context_flag="context-length",
        concurrency_flag="max-running-requests",
        tp_balance=0.9,
        tp_balance_error="The memory capacity is unbalanced",
    ),
    attention=ATTENTION,
    # `avg_spec_accept_length` in /server_info and the sglang:spec_accept_length gauge are running
    # averages since the server started: they are labelled so, never scoped to a level.
    spec_decode=SpecDecodeMetrics(
        accept_length_gauge="sglang:spec_accept_length",
        accept_rate_gauge="sglang:spec_accept_rate",
        server_info_key="avg_spec_accept_length",
    ),
    multinode=MultiNode(node_args, workers_serve_health=True, image="lmsysorg/sglang:latest"),
    speculative_args=speculative_args,
    speculative_method=lambda method: ALGORITHMS[method],
)
ADAPTERS = (SGLANG,)
