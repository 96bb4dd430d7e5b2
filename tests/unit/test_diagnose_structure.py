"""The structural rules of diagnosis, each on a short constructed log (written here from the engines' real
message formats, not recorded): levels, settings dumps, traceback source lines, causality, and a log that
stops on a fatal line."""

from __future__ import annotations

import io

import pytest

from firstlight.diagnosis import diagnose_lines
from firstlight.diagnosis.levels import is_quiet, is_settings_dump, states_error
from firstlight.diagnosis.places import argument_named, engine_arguments
from firstlight.diagnosis.reader import DETECT_EVERY, detect_engine
from firstlight.diagnosis.signatures import (
    EXCEPTION_LINE,
    Signature,
    heaviest,
    load_signatures,
)
from firstlight.diagnosis.trigger import TRIGGER
from firstlight.logs import iter_lines
from tests.conftest import DATA
from tests.unit.pattern_branches import branch_samples


def diagnose_text(text: str):
    return diagnose_lines(iter_lines(io.BytesIO(text.encode())))


def diagnose_log(lines: list[str]):
    """A log given as its lines, each ended as a file ends it."""
    return diagnose_text("".join(f"{line}\n" for line in lines))


VLLM_CONFIG_DUMP = (
    "INFO 06-03 15:26:30 [core.py:61] Initializing a V1 LLM engine (v0.9.1) with config: model='/m/Qwen2.5-7B', "
    "speculative_config=None, tokenizer='/m/Qwen2.5-7B', skip_tokenizer_init=False, tokenizer_mode=auto, "
    "revision=None, trust_remote_code=True, dtype=torch.bfloat16, max_seq_len=32768, download_dir=None"
)


def test_a_config_dump_is_never_the_cause() -> None:
    log = "\n".join(
        [
            VLLM_CONFIG_DUMP,
            "ERROR 06-03 15:26:31 [core.py:489] EngineCore failed to start.",
            "ERROR 06-03 15:26:31 [core.py:489] Traceback (most recent call last):",
            'ERROR 06-03 15:26:31 [core.py:489]   File "/v/vllm/v1/engine/core.py", line 80, in __init__',
            "ERROR 06-03 15:26:31 [core.py:489]     self._init()",
            "ERROR 06-03 15:26:31 [core.py:489] RuntimeError: the model's weights could not be sharded this way",
        ]
    )
    report = diagnose_text(log)
    assert report.outcome == "failed"
    assert "RuntimeError: the model's weights" in report.diagnosis.root_cause_line
    assert is_settings_dump(VLLM_CONFIG_DUMP)


def test_an_argument_echo_is_a_dump_but_an_exception_with_settings_is_not() -> None:
    echo = (
        "2025-06-01 10:00:00 INFO Starting decode node 0 with args: ['--model', '/m', '--trust-remote-code', "
        "'--tp', '8', '--port', '8000', '--host', '0.0.0.0', '--max-model-len', '4096']"
    )
    assert is_settings_dump(echo)
    pydantic_detail = (
        "  Value error, max_num_batched_tokens (512) is smaller than max_model_len (4096). [type=value_error, "
        "input_value=ArgsKwargs((), {'runner_type': 'generate', 'max_num_batched_tokens': 512, 'max_num_seqs': 256, "
        "'max_model_len': 4096, 'enable_chunked_prefill': False, 'is_multimodal_model': False}), input_type=ArgsKwargs]"
    )
    assert not is_settings_dump(pydantic_detail)


def test_pydantic_detail_line_not_its_header() -> None:
    log = """\
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/v/vllm/engine/arg_utils.py", line 1200, in create_engine_config
(APIServer pid=1)     scheduler_config = SchedulerConfig(
(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig
(APIServer pid=1)   Value error, the chosen KV layout cannot be combined with this attention backend [type=value_error, input_value=ArgsKwargs((), {'max_num_batched_tokens': 512}), input_type=ArgsKwargs]
(APIServer pid=1)     For further information visit https://errors.pydantic.dev/2.11/v/value_error
"""
    d = diagnose_text(log).diagnosis
    assert d.category == "invalid_config"
    assert "Value error, the chosen KV layout" in d.root_cause_line
    assert "the chosen KV layout cannot be combined with this attention backend." in d.remedy


def test_an_error_line_outranks_a_warning_that_matches_a_signature() -> None:
    log = """\
[2025-05-01 10:00:00 TP0] WARNING: the flag --trust-remote-code is not needed for this model
[2025-05-01 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/s/sglang/srt/managers/scheduler.py", line 2300, in run_scheduler_process
    scheduler = Scheduler(server_args)
RuntimeError: something the signatures do not know about broke here
[2025-05-01 10:00:02] Received sigquit from a child process. It usually means the child failed.
"""
    d = diagnose_text(log).diagnosis
    assert d.root_cause_line == "RuntimeError: something the signatures do not know about broke here"


def test_the_source_line_under_a_frame_is_code_not_a_cause() -> None:
    log = """\
Traceback (most recent call last):
  File "/t/torch/distributed/distributed_c10d.py", line 3000, in barrier
    raise RuntimeError(f"NCCL error: {error_str}")
RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)
"""
    d = diagnose_text(log).diagnosis
    assert d.category == "nccl_error" and d.root_cause_line.startswith("RuntimeError: NCCL error")


def test_an_exception_right_under_a_frame_without_source_is_still_the_cause() -> None:
    log = """\
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)
"""
    assert diagnose_text(log).diagnosis.root_cause_line.startswith("RuntimeError: NCCL error")


def test_the_first_named_cause_beats_its_consequence() -> None:
    log = """\
/t/torch/cuda/__init__.py:287: UserWarning: NVIDIA RTX PRO 6000 with CUDA capability sm_120 is not compatible with the current PyTorch installation.
INFO 05-01 10:00:01 [parallel_state.py:1000] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0
INFO 05-01 10:00:02 [gpu_model_runner.py:1800] Starting to load model /models/x...
INFO 05-01 10:00:03 [loader.py:40] Loading weights took 3.2 seconds
ERROR 05-01 10:00:05 [core.py:489] RuntimeError: CUDA error: no kernel image is available for execution on the device
"""
    d = diagnose_text(log).diagnosis
    assert d.category == "cuda_arch_mismatch"
    assert "sm_120 is not compatible" in d.root_cause_line


def test_shared_memory_before_the_nccl_error_it_causes() -> None:
    log = """\
node1:123:456 [0] include/alloc.h:48 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)
Traceback (most recent call last):
  File "/s/sglang/srt/distributed/parallel_state.py", line 300, in init
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.cpp:81, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
"""
    d = diagnose_text(log).diagnosis
    assert d.category == "nccl_error" and "creating shared memory segment" in d.root_cause_line
    assert "--shm-size" in d.remedy


def test_a_summary_and_its_details_are_one_cause_told_in_the_detail() -> None:
    log = """\
[sgl_kernel] CRITICAL: Could not load any common_ops library!
Attempted locations:
- ImportError: /s/sgl_kernel/sm100/common_ops.abi3.so: undefined symbol: _ZNK3c106SymInt6sym_neERKS0_
"""
    d = diagnose_text(log).diagnosis
    assert d.category == "import_dependency_error" and "undefined symbol" in d.root_cause_line


def test_a_log_that_stops_on_a_fatal_line_failed() -> None:
    log = """\
INFO 05-01 10:00:00 [api_server.py:1000] vLLM API server version 0.10.0
OSError: the weights directory /models/x is on a filesystem that went away
"""
    report = diagnose_text(log)
    assert report.outcome == "failed" and report.diagnosis.category == "unknown"
    assert report.diagnosis.root_cause_line.startswith("OSError: the weights directory")
    assert "stops on a fatal line" in report.rule


def test_a_named_cause_with_no_exit_line_failed() -> None:
    log = """\
INFO 05-01 10:00:00 [api_server.py:1000] vLLM API server version 0.10.0
The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
"""
    report = diagnose_text(log)
    assert report.outcome == "failed" and report.diagnosis.category == "insufficient_kv_cache"


def test_a_warning_then_progress_is_not_a_failure() -> None:
    log = """\
[2025-05-01 10:00:00 TP0] Init torch distributed begin.
RuntimeError: a recoverable error that the engine printed and carried on from
[2025-05-01 10:00:05 TP0] Load weight begin. avail mem=70.00 GB
[2025-05-01 10:00:06 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB
"""
    report = diagnose_text(log)
    assert report.outcome == "not_ready" and report.diagnosis.category == "hang_timeout"


def test_an_exception_named_by_its_module_path() -> None:
    line = (
        "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/x/y/resolve/main/config.json"
    )
    m = EXCEPTION_LINE.search(line)
    assert m is not None and m.group("exc") == "huggingface_hub.errors.OfflineModeIsEnabled"
    assert EXCEPTION_LINE.search("INFO 05-01 10:00:00 [loader.py:40] Loading weights took 3.2 seconds") is None


def test_a_generic_exception_is_placed_by_the_module_that_raised_it() -> None:
    """Constructed tracebacks: the same bare AssertionError, raised in an engine's argument checks, its attention
    backends, its quantization layers, or elsewhere (distributed init: no place that names a cause)."""

    def raised_in(path: str) -> tuple[str, float]:
        log = f"""\
Traceback (most recent call last):
  File "/s/sglang/srt/model_executor/model_runner.py", line 200, in init
    self.load()
  File "{path}", line 90, in check
    assert head_dim in (64, 128)
AssertionError
"""
        d = diagnose_text(log).diagnosis
        assert d is not None and d.root_cause_line.strip() == "assert head_dim in (64, 128)"
        return d.category, d.confidence

    assert raised_in("/s/sglang/srt/server_args.py")[0] == "invalid_config"
    category, confidence = raised_in("/s/sglang/srt/layers/attention/triton_backend.py")
    assert category == "attention_backend_unsupported" and confidence < 0.8  # a family of causes: broad
    assert raised_in("/s/vllm/v1/attention/backends/flashinfer.py")[0] == "attention_backend_unsupported"
    # flash-attn as engines vendor it (vllm_flash_attn, its CuTe kernels)
    assert raised_in(".../vllm/vllm_flash_attn/cute/flash_fwd_sm100.py")[0] == "attention_backend_unsupported"
    assert raised_in("/s/vllm/model_executor/layers/quantization/awq.py")[0] == "unsupported_quantization_format"
    assert raised_in("/s/sglang/srt/distributed/parallel_state.py")[0] == "unknown"


def test_a_generic_exception_under_the_transformers_fallback_is_the_architecture() -> None:
    """Constructed in vLLM's form: its Transformers fallback (no code of its own for T5) fails on the model."""
    log = """\
Traceback (most recent call last):
  File "/s/vllm/model_executor/models/transformers/base.py", line 290, in _decorate_for_torch_compile
    self._decorate_cls_for_torch_compile(
  File "/s/vllm/compilation/decorators.py", line 236, in cls_decorator_helper
    raise ValueError(
ValueError: Argument position_ids not found in the forward method of <class 'transformers.models.t5.T5Stack'>
"""
    d = diagnose_text(log).diagnosis
    assert d is not None and d.category == "model_arch_unsupported" and d.confidence < 0.8  # broad
    assert diagnose_text(log.replace("models/transformers/base.py", "worker/gpu_worker.py")).diagnosis.category == (
        "unknown"
    )


def test_a_module_not_there_is_told_where_the_engine_says_how_to_get_it() -> None:
    """Constructed in vLLM's form: the ImportError raised while handling the missing module names its version."""
    missing = """\
Traceback (most recent call last):
  File "/s/vllm/model_executor/layers/quantization/torchao.py", line 174, in from_config
    from torchao.core.config import config_from_dict
ModuleNotFoundError: No module named 'torchao'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/s/vllm/model_executor/layers/quantization/torchao.py", line 176, in from_config
    raise ImportError(
"""
    told = "ImportError: Please install torchao>=0.10.0 via `pip install torchao>=0.10.0` to use torchao quantization."
    d = diagnose_text(missing + told + "\n").diagnosis
    assert d is not None and d.root_cause_line.strip() == told and d.category == "import_dependency_error"
    # an exception that does not name the package says nothing of how to get it
    other = diagnose_text(missing + "ImportError: Please install the quantization extras.\n").diagnosis
    assert other is not None and other.root_cause_line.strip() == "ModuleNotFoundError: No module named 'torchao'"


@pytest.mark.parametrize("sig", load_signatures(), ids=lambda s: s.id)
def test_every_signature_names_its_source_and_passes_the_prefilter(sig) -> None:
    assert sig.source and sig.versions, f"{sig.id}: add `source` and `versions`"
    assert sig.example, f"{sig.id}: add an `example` line"
    assert sig.pattern.search(sig.example), f"{sig.id}: the pattern does not match its example"
    assert TRIGGER.search(sig.example), f"{sig.id}: the prefilter (trigger.TRIGGER) never lets its lines through"


@pytest.mark.parametrize("sig", load_signatures(), ids=lambda s: s.id)
def test_every_branch_of_every_signature_passes_the_prefilter(sig) -> None:
    # a message printed without an error word (UCX's `VRAM memory is detected as host by UCX` under a bare `E` prefix)
    # must still reach the signature that names it
    texts = [t for t in branch_samples(sig.pattern.pattern) if sig.pattern.search(t)]  # lookarounds aside
    assert texts, f"{sig.id}: no text built from the pattern matches it"
    for text in texts:
        assert TRIGGER.search(text), f"{sig.id}: add a word of {text!r} to trigger.TRIGGER"


def test_terminal_colour_codes_are_not_part_of_a_line() -> None:
    log = (
        "\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m INFO 07-31 15:52:18 [core.py:70] Initializing a V1 LLM engine\n"
        "\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m ERROR 07-31 15:52:26 [core.py:708] RuntimeError: Triton Error "
        "[CUDA]: device kernel image is invalid\n"
    )
    report = diagnose_text(log)
    assert report.engine == "vllm" and report.diagnosis.category == "cuda_driver_mismatch"
    assert report.diagnosis.root_cause_line.startswith("(EngineCore_DP0 pid=7) ERROR 07-31")


def test_a_service_log_read_from_syslog_keeps_its_messages() -> None:
    """rsyslog escapes the colour codes (#033[1;36m) and puts its own prefix before each line."""
    log = (
        "Apr  3 17:38:57 gpu52 vllm[140343]: #033[1;36m(VllmWorker rank=3 pid=140343)#033[0;0m Traceback (most "
        "recent call last):\n"
        "Apr  3 17:38:57 gpu52 vllm[140343]: #033[1;36m(VllmWorker rank=3 pid=140343)#033[0;0m OSError: "
        "/root/.cache/torch_extensions/py312_cu124/xgrammar/xgrammar.so: cannot open shared object file: No such "
        "file or directory\n"
    )
    report = diagnose_text(log)
    assert report.diagnosis.category == "import_dependency_error"
    assert "#033" not in report.diagnosis.root_cause_line
    assert "xgrammar.so" in report.diagnosis.remedy


def test_a_log_copied_from_less_or_cat_v_loses_its_colour_codes() -> None:
    """`less` shows the escape character as ESC, `cat -v` as ^[: the codes arrive as text (constructed lines)."""
    log = (
        "(EngineCore_DP0 pid=35109)ESC[0;0m ERROR 09-17 05:40:55 [core.py:712] EngineCore failed to start.\n"
        "^[[1;36m(EngineCore_DP0 pid=35109)^[[0;0m ERROR 09-17 05:40:55 [core.py:712] torch.OutOfMemoryError: CUDA "
        "out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is "
        "free.\n"
    )
    report = diagnose_text(log)
    assert report.diagnosis.category == "cuda_oom"
    assert report.diagnosis.root_cause_line.startswith("(EngineCore_DP0 pid=35109) ERROR 09-17")


def test_signature_ids_are_unique() -> None:
    ids = [s.id for s in load_signatures()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize(
    "line",
    [
        "src/llama.cpp:5142: GGML_ASSERT(hparams.n_expert <= LLAMA_MAX_EXPERTS) failed",  # ggml's assert
        "llama.cpp/ggml/src/ggml-backend.cpp:748: pre-allocated tensor (w) in a buffer (CUDA0_Split) that cannot run",
        "E0608 10:49:50.145396     474 ucx_utils.cpp:592] VRAM memory is detected as host by UCX.",  # glog, severity E
        "ptxas /tmp/compile-ptx-src-b5, line 372; error   : Feature '.bf16' requires .target sm_80 or higher",
        'GGML_ASSERT: ggml-backend.c:224: buf != NULL && "tensor buffer not set"',  # ggml's assert before 2024
        "CUDA error 2 at /go/src/github.com/ollama/ollama/llm/llama.cpp/ggml-cuda.cu:9132: out of memory",
    ],
)
def test_native_code_aborts_and_error_severities_are_fatal_lines(line: str) -> None:
    """A log that stops on an abort of native code died of it: it is not a hang."""
    report = diagnose_text(f"load_tensors: loading model tensors, this can take a while...\n{line}\n")
    assert report.outcome == "failed", report.rule
    assert report.diagnosis.root_cause_line == line


def test_a_glog_line_at_info_is_not_an_error() -> None:
    line = "I0608 10:49:50.145396     474 server.cc:592] Polling the model repository; unable: 0 models"
    report = diagnose_text(f"load_tensors: loading model tensors, this can take a while...\n{line}\n")
    assert report.outcome == "not_ready" and report.candidates == []
    assert diagnose_text(f"{line.replace('I0608', 'E0608')}\n").outcome == "failed"  # the same line at severity E


def test_a_loader_line_that_carries_its_reason_is_the_cause_not_a_summary() -> None:
    """llama.cpp's summaries ("failed to load model", "unable to load model") only say that loading failed; a
    line that names the file it failed on (`failed to load model from PATH`) is the cause."""
    log = """\
llama_model_load: error loading model: llama_model_loader: failed to load model from ./models/7b.gguf
llama_load_model_from_file: failed to load model
llama_init_from_gpt_params: error: failed to load model './models/7b.gguf'
main: error: unable to load model
"""
    report = diagnose_text(log)
    assert report.diagnosis.root_cause_line.startswith("llama_model_load: error loading model: llama_model_loader")
    assert report.diagnosis.category == "missing_model_files"


def test_a_bare_assertion_error_is_told_by_the_assert_statement_it_failed_on() -> None:
    log = """\
[2025-03-10 08:00:01 TP1] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl/python/sglang/srt/models/qwen2.py", line 151, in __init__
    assert self.total_num_heads % tp_size == 0
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
AssertionError
"""
    report = diagnose_text(log)
    assert report.diagnosis.root_cause_line.strip() == "assert self.total_num_heads % tp_size == 0"
    assert report.diagnosis.line == 3
    assert report.diagnosis.category == "invalid_config"  # the divisibility check, told as an assert


@pytest.mark.parametrize(
    ("line", "category"),
    [
        # Xinference puts the worker's address inside the exception's message
        (
            "ImportError: [address=0.0.0.0:40067, pid=32176] cannot import name 'build_regex_from_schema' from "
            "'outlines.fsm.json_schema' (/env/lib/python3.10/site-packages/outlines/fsm/json_schema.py)",
            "library_version_mismatch",
        ),
        (
            "ValueError: awq quantization requires some operators from vllm. Please install vllm by "
            "`pip install vllm==0.9.0.1`",
            "import_dependency_error",
        ),
    ],
)
def test_dependency_messages_in_other_words(line: str, category: str) -> None:
    assert diagnose_text(line + "\n").diagnosis.category == category


def test_a_program_that_says_it_aborts_its_start_failed_there() -> None:
    log = "[06-17 13:05:59] Server warmup failed; aborting startup: Invalid port: ':'\nTraceback (most recent call last):\n"
    report = diagnose_text(log)
    assert report.outcome == "failed"
    assert report.diagnosis.root_cause_line.startswith("[06-17 13:05:59] Server warmup failed; aborting startup")


def test_a_hang_is_told_by_the_last_line_the_log_has() -> None:
    log = """\
[2025-02-18 09:34:05 TP0] Init torch distributed begin.
[2025-02-18 09:34:05 TP0] sglang is using nccl==2.21.5
NCCL version 2.21.5+cuda12.4
"""
    report = diagnose_text(log)
    assert report.outcome == "not_ready" and report.last_phase == "distributed_init"
    assert report.diagnosis.root_cause_line == "NCCL version 2.21.5+cuda12.4"
    # docker compose prefixes even the empty segment a progress bar's `\r` leaves: that is no line the log has
    relayed = (
        "".join(f"sglang-1  | {line}\n" for line in log.splitlines())
        + "sglang-1  | \r  0%|          | 0/1 [00:00<?, ?it/s]\n"
    )
    assert diagnose_text(relayed).diagnosis.root_cause_line == "sglang-1  | NCCL version 2.21.5+cuda12.4"


@pytest.mark.parametrize(
    "line",
    [
        # NCCL's INFO: a network plugin it does not find, and falls back from
        "gpu-0:936:936 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file",
        # Python logging's `name - WARNING - message`
        "2026-03-13 10:15:05,676 - lmdeploy - WARNING - transformers.py:22 - LMDeploy requires transformers version: "
        "[4.33.0 ~ 4.57.3], but found version: 5.2.0",
        # Rust's tracing with a hyphenated target (TGI's shard manager)
        "2023-07-05T19:53:48.448329Z  WARN shard-manager: text_generation_launcher: Could not import Flash Attention "
        "enabled models: CUDA is not available",
    ],
)
def test_info_and_warning_lines_in_other_formats_are_quiet(line: str) -> None:
    report = diagnose_text(f"[2025-02-18 09:34:05 TP0] Init torch distributed begin.\n{line}\n")
    assert report.outcome == "not_ready"


def test_an_error_a_tool_relays_at_its_own_info_level_keeps_its_level() -> None:
    log = """\
INFO     Starting vllm serve on port 51234
INFO     OSError: [Errno 48] Address already in use
"""
    report = diagnose_text(log)
    assert report.outcome == "failed" and report.diagnosis.category == "port_in_use"


def test_a_single_gpu_sglang_log_is_sglangs_though_transformers_warns_in_it() -> None:
    log = "\n".join(
        ["[transformers] Unrecognized keys in `rope_parameters` for 'rope_type'='default'"] * 5
        + [
            "[2026-08-01 23:37:49] Init torch distributed begin.",
            "[2026-08-01 23:37:50] Load weight begin. avail mem=115.36 GB",
            "[2026-08-01 23:39:39] Load weight end. elapsed=109.33 s, type=LagunaForCausalLM, avail mem=47.80 GB",
            "[2026-08-01 23:40:01] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 148717",
        ]
    )
    report = diagnose_text(log)
    assert report.engine == "sglang" and report.last_phase == "kv_cache_allocated"


def test_a_line_that_restates_an_exception_yields_to_the_exception() -> None:
    """vLLM V0's worker states the message, then its traceback shows the exception: the exception is the cause."""
    log = """\
(VllmWorkerProcess pid=67) ERROR 11-05 03:21:52 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess while processing method determine_num_available_blocks: CUDA out of memory. Tried to allocate 1.95 GiB.
(VllmWorkerProcess pid=67) ERROR 11-05 03:21:52 multiproc_worker_utils.py:233] Traceback (most recent call last):
(VllmWorkerProcess pid=67) ERROR 11-05 03:21:52 multiproc_worker_utils.py:233]   File "/v/vllm/worker/worker.py", line 195, in determine_num_available_blocks
(VllmWorkerProcess pid=67) ERROR 11-05 03:21:52 multiproc_worker_utils.py:233]     self.model_runner.profile_run()
(VllmWorkerProcess pid=67) ERROR 11-05 03:21:52 multiproc_worker_utils.py:233] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB.
"""
    report = diagnose_text(log)
    assert report.diagnosis.category == "cuda_oom"
    assert "torch.OutOfMemoryError" in report.diagnosis.root_cause_line
    alone = diagnose_text(log.splitlines()[0] + "\n")
    assert alone.diagnosis.category == "cuda_oom"  # alone, the statement still names the cause


@pytest.mark.parametrize(
    ("line", "category"),
    [
        (
            "[TM][FATAL][0814.22:31:20.267204][gemm.cu:327] No feasible kernel found for the problem: "
            "sm75_f16_e4m3b128_f16_ttt_fff_8x2048x1024_1",
            "hardware_unsupported",
        ),
        ("error: invalid value 'True' for '--disable-custom-kernels'", "invalid_config"),  # clap (TGI)
        (
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to "
            "a newer version, or use an earlier cuda container: unknown",
            "cuda_driver_mismatch",
        ),
        ("error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)", "cuda_oom"),
        (
            "AttributeError: Qwen2Tokenizer has no attribute all_special_tokens_extended. Did you mean: "
            "'num_special_tokens_to_add'?",
            "library_version_mismatch",
        ),
        # Triton's driver lookup, in words without an error word
        (
            "> Possible files are located at ['/lib64/libcuda.so.1'].Please create a symlink of libcuda.so to any of "
            "the file.",
            "import_dependency_error",
        ),
        # no driver library at all is not a driver of another version
        ("OSError: libcuda.so.1: cannot open shared object file: No such file or directory", "import_dependency_error"),
        ("RuntimeError: Failed to retrieve cuLaunchKernelEx from libcuda.so.1", "cuda_driver_mismatch"),
        # Go's os.PathError, as Ollama reports an OLLAMA_MODELS it cannot create (its systemd journal's form)
        ("Feb 25 17:49:00 host ollama[3156]: Error: mkdir /mnt/raid/ollama: permission denied", "invalid_config"),
        # a private module the installed release lacks is still another release of the package
        ("ModuleNotFoundError: No module named 'starlette._exception_handler'", "library_version_mismatch"),
        # but a compiled extension missing is the build, whatever the release
        ("ModuleNotFoundError: No module named 'vllm._C'", "import_dependency_error"),
    ],
)
def test_messages_of_runtimes_under_the_engines(line: str, category: str) -> None:
    report = diagnose_text(line + "\n")
    assert report.outcome == "failed" and report.diagnosis.category == category


def test_a_named_error_that_recurs_after_the_ready_line_fails_the_launch() -> None:
    """llama-server's warm-up ran out of Metal memory and it carried on to ready; the first request ran out again."""
    log = """\
llama_kv_cache_init:      Metal KV buffer size = 49152.00 MiB
error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)
main: model loaded
srv  update_slots: all slots are idle
slot launch_slot_: id  0 | task 0 | processing task
error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)
"""
    report = diagnose_text(log)
    assert report.outcome == "failed" and report.diagnosis.category == "cuda_oom"
    assert report.diagnosis.repeats == 2


def test_a_bare_assertion_logged_as_a_warning_stays_quiet_and_its_evidence_shows_both_lines() -> None:
    log = """\
  File "/sgl/python/sglang/srt/models/qwen2.py", line 151, in __init__
    assert self.total_num_heads % tp_size == 0
WARNING 01-01 00:00:00 [loader.py:1] AssertionError
"""
    report = diagnose_text(log)
    top = report.candidates[0]
    assert top["text"].strip() == "assert self.total_num_heads % tp_size == 0"
    assert top["score"] <= 0.28 and any("divisibility" in why for why in top["why"])
    assert report.outcome == "not_ready"  # a warning alone does not fail a launch
    loud = diagnose_text(log.replace("WARNING", "ERROR"))
    assert loud.diagnosis.evidence[-1].endswith("AssertionError")
    assert sum("assert self.total_num_heads" in e for e in loud.diagnosis.evidence) == 1


@pytest.mark.parametrize("notice", ["[1]    3804384 segmentation fault (core dumped)", "Aborted (core dumped)"])
def test_a_shells_crash_notice_means_the_process_died(notice: str) -> None:
    """zsh and bash report a process that crashed; a log that ends on it failed, it did not hang."""
    report = diagnose_text(f"llama_new_context_with_model: graph splits = 779\n{notice}\n")
    assert report.outcome == "failed" and report.diagnosis.category == "unknown"


VLLM_MOVED_ON = """\
INFO 04-26 12:03:50 [core.py:77] Initializing a V1 LLM engine
ERROR 04-26 12:03:57 [importing.py:60] ModuleNotFoundError: No module named 'triton_kernels'
INFO 04-26 12:04:20 [gpu_model_runner.py:1] Starting to load model /m/Qwen2.5-7B...
INFO 04-26 12:04:58 [gpu_model_runner.py:2] Model loading took 14.2 GiB and 37.5 seconds
"""


def test_an_error_the_launch_went_on_past_is_not_what_stopped_it() -> None:
    """An error followed by a phase entered seconds later (by the log's own clock) did not stop the engine: the
    cause is the fatal line after that phase, or, with none and no exit line, the log stopped printing."""
    failed = diagnose_text(
        VLLM_MOVED_ON + "ERROR 04-26 12:05:05 [core.py:1108] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 1.02 GiB. GPU 0 has a total capacity of 14.56 GiB of which 2 MiB is free.\n"
    )
    assert failed.outcome == "failed" and failed.diagnosis.category == "cuda_oom"
    assert "went on past line 2" in failed.rule
    stalled = diagnose_text(VLLM_MOVED_ON)
    assert stalled.outcome == "not_ready" and stalled.diagnosis.category == "hang_timeout"
    # the same error with the phase in the same second: nothing says the engine went on past it
    same_second = diagnose_text(VLLM_MOVED_ON.replace("12:04:20", "12:03:57").replace("12:04:58", "12:03:58"))
    assert same_second.outcome == "failed" and same_second.diagnosis.line == 2
    five = diagnose_text(VLLM_MOVED_ON.replace("12:04:20", "12:04:02").replace("12:04:58", "12:04:03"))
    assert five.outcome == "not_ready"  # 5 s after it, by the log's clock, is going on past it


def test_another_rank_that_carries_on_does_not_move_the_launch_past_an_error() -> None:
    """TP0 ran out of memory; TP1 went on loading, then failed because TP0 was gone: TP0's error is the cause."""
    log = (
        "(VllmWorker TP0 pid=11) ERROR 04-26 12:04:00 [gpu_worker.py:1] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 2.00 GiB.\n"
        "(VllmWorker TP1 pid=12) INFO 04-26 12:04:08 [gpu_model_runner.py:2] Model loading took 14.2 GiB and 8 s\n"
        "(VllmWorker TP1 pid=12) ERROR 04-26 12:04:09 [multiproc_executor.py:3] torch.distributed.DistBackendError: "
        "NCCL error in: ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error\n"
    )
    report = diagnose_text(log)
    assert report.outcome == "failed" and report.diagnosis.category == "cuda_oom" and report.diagnosis.line == 1
    assert "went on past" not in report.rule


def test_a_hang_stopped_by_sigterm_is_a_hang() -> None:
    log = (
        "INFO 05-26 18:53:50 [gpu_model_runner.py:1] Starting to load model /m/Qwen2.5-7B...\n"
        "ERROR 05-26 18:58:11 [engine.py:448] SystemExit: 15\n"
    )
    report = diagnose_text(log)
    assert report.outcome == "not_ready" and report.diagnosis.category == "hang_timeout"
    assert "SIGTERM" in report.rule


def test_vllms_sigterm_with_its_traceback_is_a_hang() -> None:
    # vLLM's API server raises KeyboardInterrupt("terminated") on SIGTERM, inside whatever it was waiting on
    log = (
        "(APIServer pid=8) INFO 05-26 18:53:50 [api_server.py:1] vLLM API server version 0.11.0\n"
        "(APIServer pid=8) Traceback (most recent call last):\n"
        '(APIServer pid=8)   File "/v/lib/python3.12/ssl.py", line 1152, in read\n'
        "(APIServer pid=8)     return self._sslobj.read(len)\n"
        '(APIServer pid=8)   File "/v/vllm/entrypoints/openai/api_server.py", line 579, in signal_handler\n'
        '(APIServer pid=8)     raise KeyboardInterrupt("terminated")\n'
        "(APIServer pid=8) KeyboardInterrupt: terminated\n"
    )
    report = diagnose_text(log)
    assert report.outcome == "not_ready" and report.diagnosis.category == "hang_timeout"
    assert report.diagnosis.line == 7 and "SIGTERM" in report.rule


def test_a_stall_is_placed_where_the_repeated_wait_began() -> None:
    waits = "".join(
        f"(APIServer pid=3) DEBUG 09-02 17:29:{s:02d} [utils.py:777] Waiting for 1 local, 0 remote core engine "
        "proc(s) to start.\n"
        for s in (6, 16, 26)
    )
    report = diagnose_text("INFO 09-02 17:28:50 [api_server.py:1] vLLM API server version 0.10.1\n" + waits)
    assert report.outcome == "not_ready" and report.diagnosis.line == 2


def test_ranks_printing_one_line_together_are_not_a_wait() -> None:
    ranks = "".join(f"[2025-06-23 15:07:01 TP{r}] Connecting to tcp://127.0.0.1:57063\n" for r in range(4))
    report = diagnose_text("[2025-06-23 15:06:40] server_args=ServerArgs(model_path='/m')\n" + ranks)
    assert report.outcome == "not_ready" and report.diagnosis.line == 5


def test_vllm_falls_back_from_a_flash_attention_version_it_logs_as_an_error() -> None:
    fa = (
        "(EngineCore_DP0 pid=1) ERROR 07-31 15:52:18 [fa_utils.py:57] Cannot use FA version 2 is not supported due "
        "to FA2 is only supported on devices with compute capability >= 8"
    )
    kernel = "(EngineCore_DP0 pid=1) ERROR 07-31 15:52:18 [core.py:708] RuntimeError: Triton Error [CUDA]: device kernel image is invalid"
    report = diagnose_text(f"{fa}\n{kernel}\n")
    assert report.diagnosis.line == 2 and report.diagnosis.category == "cuda_driver_mismatch"


# Examples another signature names first, on purpose: the line carries both, and the other is the more specific
# (or, for the last five, of another category: the line carries both causes).
EXAMPLE_ELSEWHERE = {
    "vllm_free_memory_generic": "vllm_free_memory_below_utilization",
    "generic_cuda_oom": "sampler_warmup_oom",
    "kv_cache_generic": "llama_kv_cache_alloc_failed",
    "quant_not_supported_generic": "unknown_quant_method",
    "transformers_too_old": "version_required",
    "gguf_unreadable": "gguf_file_invalid",
    "cuda_init_failed": "driver_mismatch",
    "missing_tool_or_package": "tokenizer_backend_missing",
    "config_template_unfilled": "serving_config_rejected",
    "generic_timeout": "vllm_startup_timeout",
    "config_value_error": "compute_capability_too_low",  # its example is a compute-capability check
    "attribute_missing_module": "ct_attribute_missing",  # compressed-tensors' format enum
    "import_error_generic": "version_required",  # its example asks for a version
    "llama_model_load_error": "gguf_pretokenizer_unknown",  # its example names a pre-tokenizer the build predates
}


@pytest.mark.parametrize("sig", load_signatures(), ids=lambda s: s.id)
def test_every_signatures_example_is_diagnosed_by_it(sig: Signature) -> None:
    # a message an engine logs at INFO (vLLM's negative KV cache budget) names the cause of the failure that follows
    failed = "Traceback (most recent call last):\n" if is_quiet(sig.example) else ""
    report = diagnose_text(sig.example + "\n" + failed)
    assert report.diagnosis is not None, f"{sig.id}: its example is not an error line"
    assert report.diagnosis.signature == EXAMPLE_ELSEWHERE.get(sig.id, sig.id), sig.id


def test_pytorchs_rank_prefixed_warnings_are_quiet() -> None:
    """c10d's `[rank2]:[W626 ...]` lines report a peer that went away; the error that killed it is the cause."""
    log = (
        "(Worker_TP0 pid=1) ERROR 06-26 16:06:56 [multiproc_executor.py:962] torch.AcceleratorError: CUDA error: an "
        "illegal memory access was encountered\n"
        "[rank2]:[W626 16:06:57.489327260 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=104): Failed to "
        "recv, got 0 bytes. Connection was likely closed.\n"
    )
    report = diagnose_text(log)
    assert report.diagnosis.line == 1 and report.diagnosis.signature == "gpu_kernel_fault"
    assert report.diagnosis.category == "unknown"  # a kernel crashed: no setting names itself


def test_a_process_ended_by_sigterm_is_a_wrapper_and_the_warning_before_it_is_the_cause() -> None:
    """vLLM waited for Ray's GPUs until someone stopped it: SystemExit 15 says only that it was stopped."""
    log = (
        "WARNING 05-26 18:53:53 [ray_utils.py:342] The number of required GPUs exceeds the total number of available "
        "GPUs in the placement group.\n"
        "ERROR 05-26 18:58:11 [engine.py:448] SystemExit: 15\n"
    )
    report = diagnose_text(log)
    assert report.outcome == "failed" and report.diagnosis.category == "invalid_config" and report.diagnosis.line == 1


def test_a_rust_panic_header_yields_to_the_message_it_carries() -> None:
    log = (
        'svc  | APIError { data: "missing field `vocab_size` at line 46 column 1" }\n'
        "svc  | thread 'main' panicked at src/main.rs:406:19:\n"
        "svc  | called `Result::unwrap()` on an `Err` value: Error\n"
    )
    report = diagnose_text(log)
    assert report.diagnosis.line == 1 and report.diagnosis.category == "model_arch_unsupported"
    alone = diagnose_text(
        "thread 'main' panicked at src/main.rs:406:19:\n"
        "called `Result::unwrap()` on an `Err` value: Os { code: 2, kind: NotFound }\n"
    )
    assert alone.outcome == "failed" and alone.diagnosis.line == 2


def test_one_requests_failure_after_the_ready_line_does_not_fail_the_launch() -> None:
    """SGLang's PD transfer failing for a request names a cause, but a server that was ready goes on serving."""
    log = (
        "[2025-05-29 23:20:01] The server is fired up and ready to roll!\n"
        "[2025-05-29 23:23:23] Decode transfer failed for request rank=0 decode_req.req.rid='06a4' "
        "with exception KVTransferError(bootstrap_room=3583)\n"
    )
    report = diagnose_text(log)
    assert report.outcome == "ready"
    before_ready = diagnose_text(log.split("\n", 1)[1])
    assert before_ready.outcome == "failed" and before_ready.diagnosis.category == "nccl_error"
    # a request's failure does not hide the crash right after it
    crashed = diagnose_text(
        log + "[2025-05-29 23:23:24 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    assert crashed.outcome == "failed" and crashed.diagnosis.category == "cuda_oom"


def test_llama_cpps_error_level_lets_a_line_without_error_words_through() -> None:
    log = (
        "0.00.297.636 I srv    load_model: loading model 'm.gguf'\n"
        "0.00.451.797 E gguf_init_from_reader: tensor 'output_norm.weight' has offset 337715200, expected 357580800\n"
        "0.00.451.806 E gguf_init_from_reader: failed to read tensor data\n"
    )
    report = diagnose_text(log)
    assert report.diagnosis.line == 2 and report.diagnosis.category == "unsupported_quantization_format"


def test_a_loggers_level_among_the_first_words_makes_an_error_line() -> None:
    line = (
        "2026-08-21 09:14:22.815 1 kserve ERROR [__main__.py:<module>():341] Failed to start model server: You must "
        "provide a model_id or model_dir"
    )
    report = diagnose_text(line + "\n")
    assert report.outcome == "failed" and report.diagnosis.line == 1


def test_engine_detection_stops_counting_once_one_engine_leads_by_far() -> None:
    def sglang_then_broken():
        for i in range(DETECT_EVERY):
            yield f"[2026-10-02 09:14:{i % 60:02d} TP{i % 8}] Load weight begin. avail mem=138.02 GB"
        raise AssertionError("read past a decided lead")

    assert detect_engine(sglang_then_broken()) == "sglang"


def test_engine_detection_counts_on_while_the_lead_is_narrow() -> None:
    vllm = "(APIServer pid=1) INFO 09-02 17:29:06 [api_server.py:1] vLLM API server version 0.10.1"
    sglang = "[2026-10-02 09:14:01 TP0] Load weight begin. avail mem=138.02 GB"
    lines = [vllm] * (DETECT_EVERY // 2) + [sglang] * (DETECT_EVERY // 2) + [sglang] * 400
    assert detect_engine(lines) == "sglang"


def test_nccls_last_error_names_the_cause_of_the_nccl_error_before_it() -> None:
    log = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.cpp:76, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "Last error:\n"
        "Failed to CUDA calloc 67108864 bytes\n"
    )
    report = diagnose_text(log)
    assert report.diagnosis.category == "cuda_oom" and report.diagnosis.line == 4


def test_a_detail_of_another_category_does_not_replace_a_cause_that_is_not_detailed() -> None:
    log = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
    )
    report = diagnose_text(log)
    assert report.diagnosis.category == "cuda_oom" and report.diagnosis.line == 1


def test_an_exception_outranks_an_earlier_line_that_only_says_error() -> None:
    log = (
        "[2026-06-08 01:41:40 TP0] Load weight begin. avail mem=65.08 GB\n"
        "[2026-06-08 01:41:46] Unexpected error during package walk: cutlass.cute.experimental\n"
        "[2026-06-08 01:41:47 TP0] Capture cuda graph begin.\n"
        "RuntimeError: NVFP4 KV cache global scales must be calibrated before CUDA graph capture.\n"
    )
    report = diagnose_text(log)
    assert report.outcome == "failed" and report.diagnosis.line == 4


def test_a_model_that_failed_to_be_inspected_defers_to_the_inspection_error() -> None:
    log = (
        "(APIServer pid=1) ERROR 06-10 23:08:47 [registry.py:963] ImportError: vllm.vllm_flash_attn requires the "
        "CUDA flash attention extensions (_vllm_fa2_C or _vllm_fa3_C).\n"
        "(APIServer pid=1)   Value error, Model architectures ['Gemma4ForConditionalGeneration'] failed to be "
        "inspected. Please check the logs for more details.\n"
    )
    report = diagnose_text(log)
    assert report.diagnosis.category == "import_dependency_error" and report.diagnosis.line == 1


def test_an_ignored_errors_message_that_runs_on_is_ignored_with_it() -> None:
    """SGLang logs an import error it ignores with the exception's text; its unprefixed lines are that message."""
    log = (
        "[2025-04-27 07:30:55 TP0] Load weight begin. avail mem=10.60 GB\n"
        "[2025-04-27 07:30:56 TP0] Ignore import error when loading sglang.srt.models.janus_pro. Failed to import "
        "transformers.modeling_utils because of the following error (look up to see its traceback):\n"
        "HIP error: invalid device function\n"
        "For debugging consider passing AMD_SERIALIZE_KERNEL=3\n"
        "\n"
        "[2025-04-27 07:30:56 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/python/sglang/srt/layers/rotary_embedding.py", line 99, in _compute_inv_freq\n'
        "RuntimeError: HIP error: invalid device function\n"
    )
    report = diagnose_text(log)
    assert report.outcome == "failed" and report.diagnosis.line == 8
    # the same words not under an ignored error are a cause of their own
    alone = diagnose_text("[2025-04-27 07:30:55 TP0] Load weight begin.\nHIP error: invalid device function\n")
    assert alone.diagnosis.line == 2


def test_a_process_that_dies_after_the_ready_line_fails_the_launch() -> None:
    """A kernel fault names no category, yet the abort after it ends the server: failed, the fault as its line."""
    ready = (
        "INFO:     Application startup complete.\n"
        "INFO:     Uvicorn running on http://0.0.0.0:23333 (Press CTRL+C to quit)\n"
    )
    fault = (
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  [TM][ERROR] CUDA runtime error: an illegal memory access was encountered LlamaBatch.cc:876\n"
        "Aborted\n"
    )
    report = diagnose_text(ready + fault)
    assert report.outcome == "failed" and report.diagnosis.category == "unknown" and report.diagnosis.line == 4
    # the same fault without a process that died: one request failed, the server may go on
    assert diagnose_text(ready + fault.splitlines()[1] + "\n").outcome == "ready"


def test_a_log_cut_off_in_a_repeated_line_stalled_where_the_wait_began() -> None:
    waits = "".join(
        f"(APIServer pid=3) DEBUG 09-02 17:29:{s:02d} [utils.py:777] Waiting for 1 local, 0 remote core engine "
        "proc(s) to start.\n"
        for s in (6, 16)
    )
    cut = "(APIServer pid=3) DEBUG 09-02 17:29:26 [utils.py:777] Waiting for 1 loca"
    report = diagnose_text("INFO 09-02 17:28:50 [api_server.py:1] vLLM API server version 0.10.1\n" + waits + cut)
    assert report.outcome == "not_ready" and report.diagnosis.line == 2


# an op or class that is not registered follows from the extension library that did not load
OP_AFTER_LOAD_FAILURE = (
    "WARNING 02-28 20:57:36 _core_ext.py:180] Failed to import from vllm._core_C with ImportError('libtorch_hip.so: "
    "cannot open shared object file: No such file or directory')\n"
    "INFO 02-28 20:57:38 config.py:510] This model supports multiple tasks.\n"
    "RuntimeError: Tried to instantiate class '_core_C.ScalarType', but it does not exist! Ensure that it is "
    "registered via torch::class_\n"
)
TGI_FLASH_IMPORT = (
    "2023-07-20T12:31:14.506674Z  WARN text_generation_launcher: Could not import Flash Attention enabled models: "
    "No module named 'vllm_cache_ops'\n"
    "NotImplementedError: Sharded Llama requires Flash Attention enabled models.\n"
)
TRANSFORMERS_TOO_OLD = (
    "2026-02-09 13:58:19,068 - lmdeploy - WARNING - tokenizer.py:89 - The current version of `transformers` is "
    "transformers==4.57.6, which is lower than the required version transformers==5.0.0rc0. Please upgrade.\n"
    "2026-02-09 13:59:17,123 - lmdeploy - ERROR - base.py:55 - ValueError: The checkpoint you are trying to "
    "load has model type `glm4_moe_lite` but Transformers does not recognize this architecture.\n"
)


@pytest.mark.parametrize(
    "log, category",
    [
        (OP_AFTER_LOAD_FAILURE, "import_dependency_error"),
        (TGI_FLASH_IMPORT, "import_dependency_error"),
        (TRANSFORMERS_TOO_OLD, "library_version_mismatch"),
    ],
    ids=["op-after-extension-load-failure", "tgi-flash-attention-models", "transformers-older-than-required"],
)
def test_a_failure_that_follows_from_a_warning_before_it_is_told_by_the_warning(log: str, category: str) -> None:
    """A warning ranks below an error, but not the warning a failure follows from."""
    report = diagnose_text(log)
    assert report.outcome == "failed" and report.diagnosis.line == 1
    assert report.diagnosis.category == category
    # without the warning before it, the failure is the cause
    alone = diagnose_text(log.split("\n", 1)[1])
    assert alone.diagnosis.root_cause_line == log.splitlines()[-1]


def test_an_architecture_transformers_does_not_know_is_the_architecture_without_a_version_warning() -> None:
    alone = diagnose_text(TRANSFORMERS_TOO_OLD.splitlines(keepends=True)[1])
    assert alone.diagnosis.category == "model_arch_unsupported"


def test_a_message_in_another_case_is_still_named() -> None:
    # engines change a message's case between versions and between their parts (Rust's `failed to ...` where
    # the Python side wrote `Failed to ...`): the words decide, and the explanation says the case differed
    log = (
        "2025-06-02T10:00:00.123Z  INFO dynamo_runtime: starting worker\n"
        'Error: FAILED TO CONNECT TO ETCD SERVER with config ClientOptions { etcd_url: ["http://etcd:2379"] }\n'
    )
    report = diagnose_text(log)
    assert report.diagnosis.category == "nccl_error" and report.diagnosis.line == 2
    chosen = report.candidates[0]
    assert any("another case" in reason for reason in chosen["why"])


def test_a_signature_in_its_own_case_outranks_one_that_names_the_line_only_in_another() -> None:
    sigs = load_signatures()
    exact = next(s for s in sigs if s.id == "address_in_use")
    line = "OSError: [Errno 98] Address already in use; NO KERNEL IMAGE IS AVAILABLE FOR EXECUTION ON THE DEVICE"
    assert heaviest(sigs, line) is exact
    # a pattern that tells by case itself (`[A-Z]`: a library's class, not a builtin's) is never folded
    assert heaviest(sigs, "AttributeError: 'str' object has no attribute 'shape'") is None


@pytest.mark.parametrize(
    "log, line, category",
    [
        # Rust prints the panic's message on the line after its header; no signature need know the words
        (
            "2024-07-24T18:26:25.496879Z  INFO mistralrs_core::pipeline::normal: Loading `tokenizer.json`\n"
            "thread 'main' panicked at mistralrs-core/src/pipeline/normal.rs:200:58:\n"
            "Could not get the quux widget from the frobnicator\n"
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
            3,
            "unknown",
        ),
        (
            "thread 'main' panicked at mistralrs-core/src/pipeline/normal.rs:200:58:\n"
            'Could not get file "tokenizer.json" from API: RequestError(Status(403, Response[status: 403, '
            "status_text: Forbidden, url: https://huggingface.co/org/gated/resolve/main/tokenizer.json]))\n",
            2,
            "missing_model_files",
        ),
        # `[libprotobuf ERROR file.cc:N] msg`: the level inside the bracket, before the source location; the log
        # stops on it, so the launch failed there
        (
            "I1212 04:49:30.046418 1230 cuda_memory_manager.cc:107] CUDA memory pool is created on device 0\n"
            "[libprotobuf ERROR /build/protobuf/src/google/protobuf/text_format.cc:335] Error parsing text-format "
            "inference.ModelConfig: 29:17: Expected integer, got: $\n",
            2,
            "invalid_config",
        ),
        # a compiler's diagnostic (a kernel or shader compiled at start-up), with its column
        (
            "ggml_metal_library_init: compiling the Metal library from source\n"
            "/System/Library/Frameworks/MPP.framework/Headers/MatMul2dImpl.h:3267:5: error: static_assert failed due "
            "to requirement 'is_same_v<half, bfloat>' \"Input types must match\"\n",
            2,
            "unknown",
        ),
        # `FATAL ERROR` says so whatever follows it (Habana's lazy-mode runtime); the paste ends mid-traceback
        (
            "INFO 02-04 12:35:23 hpu_model_runner.py:794] Loading model weights took in total 15.05 GiB\n"
            "ERROR 02-04 12:35:23 engine.py:387] [Rank:0] FATAL ERROR :: MODULE:PT_LAZY Error, ValidateSyncInputTensors "
            "tensor_data is empty.\n"
            "ERROR 02-04 12:35:23 engine.py:387] Traceback (most recent call last):\n",
            2,
            "unknown",
        ),
        # a paste cut off after the frame that raises: the raise statement stands for its exception line
        (
            "Traceback (most recent call last):\n"
            '  File "/opt/conda/lib/python3.10/site-packages/text_generation_server/server.py", line 231, in serve_inner\n'
            "    model = get_model(\n"
            '  File "/opt/conda/lib/python3.10/site-packages/text_generation_server/models/__init__.py", line 1064\n'
            '    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")\n',
            5,
            "cuda_oom",
        ),
    ],
    ids=[
        "panic-message",
        "panic-message-hub-403",
        "protobuf-error",
        "compiler-diagnostic",
        "fatal-error",
        "cut-off-raise",
    ],
)
def test_an_error_in_a_libraries_own_format_is_the_cause(log: str, line: int, category: str) -> None:
    report = diagnose_text(log)
    assert report.outcome == "failed" and report.diagnosis.line == line
    assert report.diagnosis.category == category


def test_an_error_wrapped_on_its_way_up_is_told_where_it_was_first_stated() -> None:
    log = (
        "2026-01-20T15:24:43.340496Z ERROR engine::alloc: frobnication failed: widget pool has 3 slots, needs 9\n"
        "2026-01-20T15:24:43.341716Z  INFO engine::core: shutting down\n"
        "RuntimeError: Failed to start engine: frobnication failed: widget pool has 3 slots, needs 9\n"
    )
    report = diagnose_text(log)
    assert report.diagnosis.line == 1
    # a short common phrase repeated is not the same statement
    short = "ERROR engine::alloc: failed: x\nRuntimeError: Failed to start engine: failed: x\n"
    assert diagnose_text(short).diagnosis.line == 2
    # nor a common ending of another error (an errno's words), nor a message the later line does not end with
    unrelated = (
        "2026-01-01 ERROR metrics: could not write metrics snapshot: No such file or directory\n"
        "FileNotFoundError: [Errno 2] No such file or directory: '/models/llama/config.json'\n"
    )
    assert diagnose_text(unrelated).diagnosis.line == 2


SCALED_MM = (
    "ERROR 05-01 10:00:10 [core.py:396] ValueError: Failed to find a kernel that can implement the ScaledMM linear "
    "layer. Reasons: CutlassFP8ScaledMMLinearKernel requires capability 89, current compute capability is {cc}"
)


@pytest.mark.parametrize(
    ("gpu_line", "category"),
    [
        ("", "hardware_unsupported"),  # the line's own capability (70) is too low
        ("  Device 0: NVIDIA GB10, compute capability 12.1, VMM: yes", "cuda_arch_mismatch"),
        ("INFO 05-01 10:00:01 [cuda.py:1] Using GPU NVIDIA GeForce RTX 5090", "cuda_arch_mismatch"),
        # vLLM's symmetric-memory check states the device's own capability
        (
            "WARNING 04-25 05:28:40 [symm_mem.py:66] SymmMemCommunicator: Device capability 12.1 not supported, "
            "communicator is not available.",
            "cuda_arch_mismatch",
        ),
        # a requirement names no GPU: "requires compute capability 10.0" says nothing of the one here
        ("WARNING 05-01 10:00:01 [fp8.py:1] this kernel requires compute capability 10.0", "hardware_unsupported"),
    ],
)
def test_a_kernel_that_cannot_run_on_a_gpu_newer_than_the_build_is_the_builds_architecture(
    gpu_line: str, category: str
) -> None:
    log = "\n".join(line for line in (gpu_line, SCALED_MM.format(cc=70)) if line)
    report = diagnose_text(log)
    assert report.diagnosis.category == category
    assert ("newer than the build" in report.rule) == (category == "cuda_arch_mismatch")


def test_the_gpu_named_in_the_failing_line_itself_decides() -> None:
    report = diagnose_text(SCALED_MM.format(cc=120))
    assert report.diagnosis.category == "cuda_arch_mismatch"
    assert "current compute capability is 120" in report.diagnosis.remedy


@pytest.mark.parametrize(
    "died",
    [
        'time=2025-03-01T10:00:00.000+01:00 level=ERROR source=sched.go:455 msg="error loading llama server" '
        'error="llama runner process has terminated: exit status 0xc000001d"',
        "[2025-03-01 10:00:00] llama-server exited with code 3221225501",
    ],
)
def test_a_process_death_that_names_how_it_died_is_that_cause(died: str) -> None:
    report = diagnose_text("\n".join(["loading model /m/model.gguf", died]))
    assert report.diagnosis.root_cause_line == died
    assert report.diagnosis.category == "hardware_unsupported"


def test_a_process_death_by_a_broad_cause_stays_a_wrapper() -> None:
    report = diagnose_text("\n".join(["loading model", "ValueError: bad rope", "worker exited with code 137"]))
    assert report.diagnosis.root_cause_line == "ValueError: bad rope"


REGISTRY_CHAIN = [
    "Traceback (most recent call last):",
    '  File "/v/transformers/models/auto/configuration_auto.py", line 1271, in from_pretrained',
    '    config_class = CONFIG_MAPPING[config_dict["model_type"]]',
    '  File "/v/transformers/models/auto/configuration_auto.py", line 966, in __getitem__',
    "    raise KeyError(key)",
    "KeyError: 'glm_moe_dsa'",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
    "Traceback (most recent call last):",
    '  File "/v/transformers/models/auto/configuration_auto.py", line 1273, in from_pretrained',
    "    raise ValueError(",
    "ValueError: The checkpoint you are trying to load has model type `glm_moe_dsa` but Transformers does not "
    "recognize this architecture. This could be because of an issue with the checkpoint, or because your version "
    "of Transformers is out of date.",
]


def test_a_chain_of_exceptions_of_one_cause_is_told_at_the_one_that_explains_it() -> None:
    """The registry's bare KeyError is what happened; the ValueError raised while handling it says what it means."""
    report = diagnose_text("\n".join(REGISTRY_CHAIN))
    assert report.diagnosis.root_cause_line.startswith("ValueError: The checkpoint you are trying to load")
    assert report.diagnosis.category == "model_arch_unsupported"
    assert report.diagnosis.signature == "arch_not_supported"
    assert report.diagnosis.line == 13


def test_a_chain_whose_later_exceptions_only_carry_the_first_ones_message_is_told_at_the_first() -> None:
    message = "[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation of protocol (_ssl.c:1007)"
    log = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.10/ssl.py", line 1342, in do_handshake',
        f"ssl.SSLEOFError: {message}",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/urllib3/connectionpool.py", line 845, in urlopen',
        "urllib3.exceptions.MaxRetryError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded"
        f" with url: /org/model/resolve/main/config.json (Caused by SSLError(SSLEOFError(8, '{message}')))",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/requests/adapters.py", line 517, in send',
        "requests.exceptions.SSLError: (MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Max"
        f" retries exceeded with url: /org/model/resolve/main/config.json (Caused by SSLError(SSLEOFError(8, '{message}'"
        ")))\"), '(Request ID: 1)')",
    ]
    report = diagnose_text("\n".join(log))
    assert report.diagnosis is not None
    assert report.diagnosis.line == 3


def test_a_chain_whose_first_exception_names_another_cause_is_told_where_the_cause_is_named() -> None:
    log = [
        "Traceback (most recent call last):",
        '  File "/app/server.py", line 10, in load',
        "    cfg = json.load(f)",
        "KeyError: 'model'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/app/server.py", line 20, in main',
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    ]
    report = diagnose_text("\n".join(log))
    assert report.diagnosis.category == "cuda_arch_mismatch"
    assert report.diagnosis.line == 10


def test_a_log_pasted_newest_line_first_is_read_in_time_order() -> None:
    """A cloud log viewer's export: the second rank's error is logged 10 ms after the first's, and printed above it."""
    in_time_order = [
        "2025-04-05T00:01:19.100Z INFO [TP0] Init torch distributed begin.",
        "2025-04-05T00:01:19.101Z INFO [TP1] Init torch distributed begin.",
        "2025-04-05T00:01:19.199Z ERROR Error while creating shared memory segment /dev/shm/nccl-ufmqwQ (size 7340384)",
        "2025-04-05T00:01:19.200Z ERROR torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:317, "
        "unhandled system error",
        "2025-04-05T00:01:19.209Z ERROR Error while creating shared memory segment /dev/shm/nccl-lNPZ0f (size 7340384)",
        "2025-04-05T00:01:19.210Z ERROR torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:317, "
        "unhandled system error",
        "2025-04-05T00:01:19.300Z ERROR Received sigquit from a child process. It usually means the child failed.",
    ]
    newest_first = in_time_order[::-1]
    report = diagnose_text("\n".join(newest_first))
    assert "nccl-ufmqwQ" in report.diagnosis.root_cause_line
    assert newest_first[report.diagnosis.line - 1] == report.diagnosis.root_cause_line  # numbered as in the file
    assert report.rule.startswith("the log runs newest line first")
    assert diagnose_text("\n".join(in_time_order)).diagnosis.root_cause_line == in_time_order[2]


def test_an_exception_restating_the_warning_above_it_is_not_its_detail() -> None:
    """PyTorch's warning names the GPU; the exception two lines on is the same cause in the same signature's words:
    the warning, first, is the cause (a detail is a more specific signature, not an exception's bonus)."""
    log = [
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    ]
    report = diagnose_text("\n".join(log))
    assert report.diagnosis.line == 1
    assert report.diagnosis.category == "cuda_arch_mismatch"


def test_a_wrapper_that_quotes_the_error_its_worker_failed_with_is_told_by_it() -> None:
    line = (
        "(EngineCore_DP1 pid=541) RuntimeError: Worker failed with error 'Could not find nvcc and default "
        "cuda_home='/usr/local/cuda' doesn't exist', please check the stack trace above for the root cause"
    )
    report = diagnose_text("\n".join(["(EngineCore_DP1 pid=541)     raise RuntimeError(", line]))
    assert report.diagnosis.root_cause_line == line
    assert report.diagnosis.category == "import_dependency_error"


def test_a_runtime_that_exited_with_a_code_and_no_reason_fails_the_launch_with_no_cause() -> None:
    log = ["Failed to load the model", "", "(Exit code: 18446744073709515000). Unknown error. Try a different model."]
    report = diagnose_text("\n".join(log))
    assert report.outcome == "failed"
    assert report.diagnosis.category == "unknown"


def test_an_optional_kernel_library_announced_missing_is_not_the_cause() -> None:
    log = [
        "FlashAttention is not installed.",
        "Device does not support bf16.",
        "RuntimeError: [TM][ERROR] CUDA runtime error: out of memory /lmdeploy/src/turbomind/utils/memory_utils.cu:32",
    ]
    report = diagnose_text("\n".join(log))
    assert report.diagnosis.category == "cuda_oom"
    assert diagnose_text("ImportError: flash_attn is not installed").diagnosis.category == "import_dependency_error"


def test_an_extension_an_engine_loads_optionally_is_not_the_cause_of_the_same_error_raised_later() -> None:
    log = [
        "[2025-03-26 11:03:17 TP0] Failed to import from custom_ar with ImportError('libcuda.so.1: cannot open shared "
        "object file: No such file or directory')",
        "[2025-03-26 11:03:18 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/layers/activation.py", line 30, in <module>',
        "    from sgl_kernel import silu_and_mul",
        "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
    ]
    report = diagnose_text("\n".join(log))
    assert report.diagnosis.line == 5


def test_open_mpis_failed_initialisation_is_told_by_what_its_runtime_returned() -> None:
    log = [
        "It looks like MPI_INIT failed for some reason; your parallel process is",
        "likely to abort.  There are many reasons that a parallel process can",
        "  ompi_mpi_init: ompi_rte_init failed",
        '  --> Returned "No permission" (-17) instead of "Success" (0)',
        "*** An error occurred in MPI_Init_thread",
        'E0417 07:24:47.139419 1939 backend_model.cc:692] "ERROR: Failed to create instance: Stub process '
        "'multimodal_encoders_0_0' is not healthy.\"",
    ]
    report = diagnose_text("\n".join(log))
    assert report.diagnosis.line == 4
    assert report.diagnosis.category == "nccl_error"
    assert "No permission" in report.diagnosis.remedy


def test_a_log_that_stops_on_a_bare_exception_failed() -> None:
    report = diagnose_text("INFO loading the model\nNotImplementedError:\n")
    assert report.outcome == "failed"
    assert report.diagnosis.root_cause_line == "NotImplementedError:"


def test_a_wait_that_began_on_the_end_of_another_processs_line_is_placed_there() -> None:
    wait = "(APIServer pid=1) DEBUG 08-09 20:55:{s} [utils.py:1262] Waiting for 1 local, 0 remote core engine proc(s) to start."
    log = [
        "(APIServer pid=1) INFO 08-09 20:55:00 [api_server.py:1] vLLM API server version 0.10.1",
        "node:958:958 [1] NCCL INFO Channel 01/0 : " + wait.format(s="10"),
        wait.format(s="20"),
        wait.format(s="30"),
    ]
    report = diagnose_text("\n".join(log))
    assert report.outcome == "not_ready"
    assert report.diagnosis.line == 2


def test_exit_codes_are_told_apart_though_verdicts_are_cached_by_shape() -> None:
    """Two ranks' death lines differ only in their digits: the code decides (137 says nothing, 3221225501 is SIGILL)."""
    report = diagnose_text("rank 0 exited with code 137\nrank 1 exited with code 3221225501\n")
    assert report.diagnosis.line == 2 and report.diagnosis.category == "hardware_unsupported"
    assert diagnose_text("worker exited with code 0\nworker exited with code 1\n").outcome == "failed"


def test_a_bare_exception_sigterm_raises_does_not_make_a_stopped_launch_failed() -> None:
    log = [
        "INFO 06-01 10:00:00 [api_server.py:1] Starting",
        "asyncio.exceptions.CancelledError",
        "KeyboardInterrupt: terminated",
    ]
    assert diagnose_text("\n".join(log)).outcome == "not_ready"


def test_only_what_a_gpu_generation_decides_changes_on_a_newer_gpu() -> None:
    report = diagnose_text("INFO Using GPU NVIDIA B200\nRuntimeError: InfiniBand sysfs path not found\n")
    assert report.diagnosis.category == "hardware_unsupported"


def test_a_gpu_named_as_a_requirement_is_not_the_gpu_here() -> None:
    log = ["WARNING 05-01 10:00:01 [fp4.py:1] NVFP4 kernels need an NVIDIA B200 or GB200", SCALED_MM.format(cc=80)]
    report = diagnose_text("\n".join(log))
    assert report.diagnosis.category == "hardware_unsupported"


def test_a_kernel_crash_is_not_told_at_an_unrelated_exception_it_was_raised_while_handling() -> None:
    log = [
        "ValueError: too many values to unpack (expected 2)",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    report = diagnose_text("\n".join(log))
    assert report.diagnosis.line == 5


@pytest.mark.parametrize(
    "refused",
    [
        # constructed in the forms uvicorn and Go's net package print, with Windows' localised reasons
        "ERROR:    [Errno 13] error while attempting to bind on address ('127.0.0.1', 5000): "
        "der Zugriff auf einen Socket war aufgrund der Zugriffsrechte des Sockets unzulässig",
        "Error: listen tcp 127.0.0.1:11434: bind: Normal olarak her yuva adresi için yalnızca bir kullanıma izin veriliyor.",
    ],
)
def test_a_refused_bind_is_the_port_in_whatever_language_the_system_says_why(refused: str) -> None:
    report = diagnose_text(
        f"INFO:     Started server process [4242]\nINFO:     Waiting for application startup.\n{refused}\n"
    )
    assert report.outcome == "failed" and report.diagnosis is not None
    assert report.diagnosis.category == "port_in_use" and report.diagnosis.root_cause_line == refused


# constructed in the engines' forms: uvicorn's access log after vLLM's ready line, and a failure after it
READY = "(APIServer pid=1) INFO:     Application startup complete."
SERVED = '(APIServer pid=1) INFO:     127.0.0.1:44542 - "POST /v1/completions HTTP/1.1" 200 OK'
HEALTH = '(APIServer pid=1) INFO:     127.0.0.1:44542 - "GET /health HTTP/1.1" 200 OK'
OOM = "(EngineCore pid=2) ERROR 06-13 20:09:13 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def test_a_failure_after_ready_before_any_request_is_a_failed_start() -> None:
    report = diagnose_text(f"{READY}\n{OOM}\n{SERVED}\n")
    assert report.outcome == "failed" and report.diagnosis.category == "cuda_oom"


def test_a_server_that_answered_a_generation_and_then_failed_started() -> None:
    report = diagnose_text(f"{READY}\n{SERVED}\n{OOM}\n")
    assert report.outcome == "ready" and report.diagnosis.category == "cuda_oom"
    assert "answered a generation (line 2)" in report.rule


def test_a_health_check_answered_before_the_failure_is_no_generation() -> None:
    report = diagnose_text(f"{READY}\n{HEALTH}\n{OOM}\n")
    assert report.outcome == "failed" and report.diagnosis.category == "cuda_oom"


def test_a_message_logged_with_its_traceback_is_told_at_the_exception_line_that_gives_its_type() -> None:
    # constructed in vLLM V0's form: `logger.exception(e)` writes the message, then the traceback raising it
    prefix = "ERROR 03-10 21:30:59 engine.py:400] "
    log = [
        f"{prefix}Error while deserializing header: InvalidHeaderDeserialization",
        f"{prefix}Traceback (most recent call last):",
        f'{prefix}  File "/usr/lib/python3/safetensors/torch.py", line 313, in load_file',
        f"{prefix}safetensors_rust.SafetensorError: Error while deserializing header: InvalidHeaderDeserialization",
    ]
    report = diagnose_log(log)
    assert report.diagnosis.root_cause_line == log[3] and report.diagnosis.category == "missing_model_files"


def test_a_warning_logged_again_without_its_level_is_still_a_warning() -> None:
    # constructed in the form of SGLang's root logger repeating CUTLASS DSL's own warning, at the end of a stall
    log = [
        "[2026-06-07 18:51:06] Capture cuda graph begin. This can take up to several minutes. avail mem=65.31 GB",
        "2026-06-07 18:51:07,171 - CUTE_DSL - WARNING - [handle_import_error] - Unexpected error during package walk: "
        "cutlass.cute.experimental",
        "[2026-06-07 18:51:07] Unexpected error during package walk: cutlass.cute.experimental",
    ]
    report = diagnose_log(log)
    assert report.outcome == "not_ready" and report.diagnosis.category == "hang_timeout"


def test_a_stall_is_placed_before_a_bar_that_never_moved_and_a_warning_printed_at_exit() -> None:
    log = [
        "[2026-08-01 22:15:55] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 34097",
        "[2026-08-01 22:15:56] Capture target prefill CUDA graph begin. backend=breakable",
        "  0%|          | 0/58 [00:00<?, ?it/s]",
        "/usr/lib/python3.12/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to "
        "be 1 leaked semaphore objects to clean up at shutdown",
        "  warnings.warn('resource_tracker: There appear to be %d '",
    ]
    report = diagnose_log(log)
    assert report.outcome == "not_ready" and report.diagnosis.root_cause_line == log[1]


def test_a_transport_error_is_told_by_ucx_before_the_status_nixl_returns() -> None:
    ucx = (
        "[1744963752.379059] [node1:14252:0]            sock.c:334  UCX  ERROR   connect(fd=120, "
        "dest_addr=10.0.0.2:34313) failed: Connection refused"
    )
    report = diagnose_text(f"{ucx}\nNIXL_ERR_BACKEND\nTraceback (most recent call last):\n")
    assert report.diagnosis.root_cause_line == ucx and report.diagnosis.category == "nccl_error"


def test_an_nserror_with_its_user_info_is_an_error_not_a_settings_dump() -> None:
    # constructed in the form ggml's Metal backend logs Foundation's NSError
    line = (
        'ggml_metal_init: error: Error Domain=NSCocoaErrorDomain Code=260 "The file “ggml-metal.metal” couldn’t be '
        'opened because there is no such file." UserInfo={NSFilePath=ggml-metal.metal, NSUnderlyingError=0x6000 '
        '{Error Domain=NSPOSIXErrorDomain Code=2 "No such file or directory"}}'
    )
    assert not is_settings_dump(line)
    report = diagnose_text(f"ggml_metal_init: loading 'ggml-metal.metal'\n{line}\n")
    assert report.diagnosis.root_cause_line == line and report.diagnosis.category == "import_dependency_error"


def test_a_rust_panic_whose_header_names_the_thread_id_is_told_by_its_message() -> None:
    message = (
        'Unable to get model arch from config file Os { code: 2, kind: NotFound, message: "No such file or directory" }'
    )
    report = diagnose_text(f"thread 'main' (7412) panicked at src/openai/models/mod.rs:722:23:\n{message}\n")
    assert report.outcome == "failed" and report.diagnosis.root_cause_line == message
    assert report.diagnosis.category == "missing_model_files"


def test_ollamas_runner_death_is_told_by_the_runner_error_it_carries() -> None:
    line = (
        "Error: llama runner process has terminated: signal: aborted (core dumped) error loading model: "
        "check_tensor_dims: tensor 'blk.0.attn_q.weight' has wrong shape; expected  5120,  5120, got  5120,  4096"
    )
    report = diagnose_text(f"$ ollama run mistral-nemo\n{line}\n")
    assert report.diagnosis.root_cause_line == line and report.diagnosis.category == "model_arch_unsupported"


def test_llama_server_answered_a_generation_after_its_listening_line_and_then_failed() -> None:
    # the recorded start-up up to its listening line (recorded after its ready line), then constructed lines
    head = (DATA / "startup" / "llama-server-ready.log").read_text().splitlines()[:8]
    log = [
        *head,
        "0.00.050.000 I srv  log_server_r: request: POST /completion 127.0.0.1 200",
        "0.00.600.000 E ggml_cuda_compute_forward: CUDA error 2 at ggml-cuda.cu:9132: out of memory",
        "Aborted (core dumped)",
    ]
    report = diagnose_log(log)
    assert report.outcome == "ready" and report.diagnosis.category == "cuda_oom"


def test_an_error_that_names_its_level_is_no_copy_of_the_warning_above_it() -> None:
    log = [
        "WARNING 06-01 10:00:01 [utils.py:1] Attempt 1 of 3 failed: Connection to 10.0.0.5:29500 timed out after 30 s",
        "ERROR 06-01 10:01:31 [utils.py:1] Connection to 10.0.0.5:29500 timed out after 30 s",
    ]
    report = diagnose_log(log)
    assert report.outcome == "failed" and report.diagnosis.root_cause_line == log[1]


def test_a_stall_on_the_bar_that_opens_its_phase_is_placed_on_that_bar() -> None:
    log = [
        "INFO 08-16 02:14:35 [gpu_worker.py:255] Available KV cache memory: 35.74 GiB",
        "INFO 08-16 02:14:35 [kv_cache_utils.py:833] Maximum concurrency for 32,768 tokens per request: 42.92x",
        "Capturing CUDA graph shapes:   0%|          | 0/67 [00:00<?, ?it/s]",
    ]
    report = diagnose_log(log)
    assert report.outcome == "not_ready" and report.diagnosis.root_cause_line == log[2]


def test_a_connection_windows_refused_is_no_port_in_use() -> None:
    line = (
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries "
        "exceeded with url: /api/models/x (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object>: "
        "Failed to establish a new connection: [WinError 10013] An attempt was made to access a socket in a way "
        "forbidden by its access permissions'))"
    )
    assert diagnose_text(line + "\n").diagnosis.category != "port_in_use"


def test_a_case_kept_group_leaves_a_signature_foldable() -> None:
    # the environment-variable branch keeps its capitals; the rest of the signature still matches in any case
    sig = heaviest(load_signatures(), "ERROR: Invalid config. Use --max-model-len 4096")
    assert sig is not None and sig.id == "exception_names_a_flag_to_change"


def test_an_exception_naming_an_engine_argument_without_its_traceback_is_about_the_settings() -> None:
    # constructed: SGLang's draft worker asserts on its own arguments; the log shows only the exception line
    line = (
        "AssertionError: multi-layer EAGLE requires speculative_num_draft_tokens == speculative_num_steps + 1, "
        "got 8 and 5"
    )
    report = diagnose_text(f"[2026-01-01 10:00:00] Init torch distributed begin.\n{line}\n")
    assert report.diagnosis.root_cause_line == line and report.diagnosis.category == "invalid_config"
    assert report.diagnosis.signature == "names_an_engine_argument"


@pytest.mark.parametrize(
    ("message", "named"),
    [  # constructed, in the engines' own abbreviations of the parallel sizes
        ("Please try to bind threads manually or decrease DP/TP/PP.", "data_parallel_size"),  # the first
        ("PP=4 exceeds the number of layers", "pipeline_parallel_size"),
        ("No TPU found on this host", None),  # a word that holds the letters is no abbreviation
        ("weights saved with HF-TP layout", None),
    ],
)
def test_a_parallel_size_by_its_abbreviation_is_an_argument(message: str, named: str | None) -> None:
    assert argument_named(message, "AssertionError") == named


def test_a_compile_error_before_metal_fails_to_initialise_is_the_cause() -> None:
    # constructed in the shape of Ollama's runner on a new macOS: the header's static_assert, then ggml's words
    log = [
        "In file included from program_source:2837:",
        "/System/Library/Frameworks/X.framework/Headers/__impl/Impl.h:3267:5: error: static_assert failed due to "
        'requirement "Input types must match cooperative tensor types"',
        "ggml_metal_init: error: failed to initialize the Metal library",
        "ggml_backend_metal_device_init: error: failed to allocate context",
        "panic: unable to create llama context",
    ]
    report = diagnose_log(log)
    assert report.diagnosis.root_cause_line == log[1]
    assert report.diagnosis.category == "import_dependency_error"
    assert report.diagnosis.signature == "metal_library_compile_failed"


def test_an_error_of_another_kind_that_names_an_argument_is_not_placed_by_it() -> None:
    line = "KeyError: 'max_model_len'"
    assert diagnose_text(f"{line}\n").diagnosis.category != "invalid_config"


def test_the_engine_argument_names_are_read_from_both_engines() -> None:
    names = engine_arguments()
    assert {"max_model_len", "gpu_memory_utilization", "mem_fraction_static", "speculative_num_steps"} <= names
    assert not any("_" not in n for n in names)  # a one-word name is a common word too


@pytest.mark.parametrize(
    ("line", "category"),
    [  # constructed: each states its cause in general words that no engine's own message in the catalogue uses
        ("Error: not enough VRAM to load the model (need 24.1 GiB, have 16.0 GiB)", "cuda_oom"),
        ("Error: failed to open model file '/models/x.gguf': No such file or directory", "missing_model_files"),
        ("error: unknown model architecture 'qwen35moe'", "model_arch_unsupported"),
        (
            "RuntimeError: This model requires a newer version of transformers. Please upgrade.",
            "library_version_mismatch",
        ),
        ("Error: no compatible GPUs were found", "hardware_unsupported"),
        ("Error: invalid value for --ctx-size: must be a positive integer", "invalid_config"),
    ],
)
def test_a_cause_in_plain_words_is_placed_broadly(line: str, category: str) -> None:
    d = diagnose_text(f"{line}\n").diagnosis
    assert (d.category, d.root_cause_line) == (category, line)
    assert d.signature.startswith("plain_") and d.confidence < 0.8  # a reading of the words, and it says so


def test_plain_words_yield_to_an_engines_own_message_on_the_same_line() -> None:
    # mistral.rs' KV-cache check says "not enough memory": its own signature, though lighter, tells the cache
    line = "Error: Num GPU blocks is 0. This means there is not enough memory. Either reduce the context size."
    assert diagnose_text(f"{line}\n").diagnosis.category == "insufficient_kv_cache"
    assert all(not s.plain for s in load_signatures() if s.id == "kv_cache_generic")


def test_a_driver_too_old_is_not_read_as_a_package_too_old() -> None:
    sig = heaviest(load_signatures(), "RuntimeError: your driver version is too old for this build")
    assert sig is None or sig.category != "library_version_mismatch"


def test_a_cause_printed_without_an_error_word_reaches_its_signature() -> None:
    # constructed after NIXL's form under TensorRT-LLM: the cause carries no level word and no exception type
    report = diagnose_log(
        [
            "W ucx_utils.cpp:631] 4 NVIDIA GPU(s) were detected, but UCX CUDA support was not found!",
            "E ucx_utils.cpp:585] VRAM memory is detected as host by UCX.",
            "RuntimeError: Executor worker returned error",
        ]
    )
    assert report.diagnosis.category == "nccl_error" and report.diagnosis.line == 2


def test_warnings_said_in_words_or_glued_to_another_process_are_quiet() -> None:
    # SGLang's logger prints no level: its warnings say so in words
    assert is_quiet("[2025-12-23 01:53:59] Warning: User-specified context_length (65536) is greater than the derived")
    # Python's warnings module states no error, whatever its words (it is no quiet line: it may name the cause)
    warning = "/opt/py/site-packages/torch_npu/compiler_config.py:106: UserWarning: may report error in mode: x"
    assert not states_error(warning) and states_error("RuntimeError: error in mode: x")
    assert not states_error(f"(EngineCore_DP0 pid=1) {warning}")  # under vLLM V1's process prefix too
    # vLLM's level and clock after another process's output that was cut mid-line
    assert is_quiet("(VllmINFO 04-18 14:10:22 ray_utils.py:214] Waiting for creating a placement group of specs")
    # behind what relayed the log (docker compose, kubectl --timestamps) too
    assert is_quiet("sglang-1  | [2025-12-23 01:53:59] Warning: User-specified context_length (65536) is greater")
    assert is_quiet("2026-04-03T17:38:57.123Z (VllmINFO 04-18 14:10:22 ray_utils.py:214] Waiting for creating a")
    assert not is_quiet("vllm-1  | ERROR 04-18 14:10:22 [core.py:1] WARNING: the engine failed")
    # an error cut mid-word by that output keeps its level (from a review: an OOM read as quiet before)
    assert not is_quiet(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.19 "
        "GiB of which 1.02 GiB is frINFO 12-18 06:02:04 [ray_utils.py:214] Waiting for creating a placement group"
    )
    assert not is_quiet("(VllmERROR 04-18 14:47:42 engine.py:389] Cannot provide a placement group")
    assert not is_quiet("[2025-12-23 01:58:28 TP0] Scheduler hit an exception: Traceback (most recent call last):")


def test_gos_slog_levels_are_quiet() -> None:
    assert is_quiet('time=2025-05-02T08:00:01.123Z level=WARN source=gpu.go:605 msg="version mismatch"')
    assert is_quiet('time=2025-05-02T08:00:01.123Z level=INFO source=gpu.go:377 msg="no compatible GPUs"')
    assert not is_quiet('time=2025-05-02T08:00:01.123Z level=ERROR source=sched.go:455 msg="error loading"')


def test_a_compilers_option_warning_is_not_a_refused_flag() -> None:
    # constructed after a ROCm log: LLVM prints it and the launch goes on; the cause comes later
    report = diagnose_log(
        [
            "clang (LLVM option parsing): Unknown command line argument '-amdgpu-coerce-illegal-types=1'.",
            *[f"Loading shard {i}" for i in range(5)],
            "TypeError: not a string",
        ]
    )
    assert report.diagnosis.line == 7 and report.diagnosis.category == "missing_model_files"


def test_the_registrys_subprocess_wrapper_gives_way_to_the_error_it_carries() -> None:
    # vLLM's registry.py raises `Error raised in subprocess:` and prints the subprocess's error after it
    report = diagnose_log(
        [
            "ERROR 06-10 23:08:47 [registry.py:963] RuntimeError: Error raised in subprocess:",
            "ERROR 06-10 23:08:47 [registry.py:963] Traceback (most recent call last):",
            "ERROR 06-10 23:08:47 [registry.py:963] ImportError: vllm.vllm_flash_attn requires the CUDA flash attention"
            " extensions (_vllm_fa2_C or _vllm_fa3_C).",
        ]
    )
    assert report.diagnosis.line == 3 and report.diagnosis.category == "import_dependency_error"


def test_a_cache_on_a_full_disk_is_a_directory_the_engine_cannot_write() -> None:
    line = "RuntimeError: Failed to run autotuning code block: [Errno 122] Disk quota exceeded: '/home/u/.cache/vllm/x'"
    assert diagnose_text(line + "\n").diagnosis.category == "invalid_config"


def test_ollamas_load_failed_at_info_is_an_error_and_its_record_header_no_settings_dump() -> None:
    # constructed after Ollama's server/sched.go: a failed load is logged at INFO, with the runner's error
    line = (
        'time=2026-04-25T14:35:06.482Z level=INFO source=sched.go:511 msg="Load failed" model=/m/blobs/sha256-66 '
        'error="llama runner process has terminated: %!w(<nil>)"'
    )
    assert not is_settings_dump(line) and not is_quiet(line)
    report = diagnose_log(['time=2026-04-25T14:34:38.000Z level=INFO source=server.go:400 msg="starting runner"', line])
    assert report.outcome == "failed" and report.diagnosis.line == 2


READY_LOGS = sorted((DATA / "startup").glob("*.log"))


@pytest.mark.parametrize("path", READY_LOGS, ids=lambda p: p.stem)
def test_a_healthy_start_cut_short_is_not_ready_wherever_it_is_cut(path) -> None:
    # every line of a start-up that went on to serve is harmless: notes about memory, files, GPUs and versions
    # included, so no cut of it before its ready line may read as a failure
    lines = path.read_bytes().split(b"\n")
    full = diagnose_lines(iter_lines(io.BytesIO(b"\n".join(lines))))
    if full.outcome != "ready":
        pytest.skip("this start-up does not reach its ready line")
    ready_at = next(p.line for p in full.phases if p.phase == "ready")
    for cut in sorted({max(1, ready_at * k // 8) for k in range(1, 8)}):
        report = diagnose_lines(iter_lines(io.BytesIO(b"\n".join(lines[: cut - 1]) + b"\n")))
        assert report.outcome == "not_ready", (cut, report.diagnosis and report.diagnosis.root_cause_line)


@pytest.mark.parametrize(
    "note",
    [  # the engines' own notes, as their sources print them (a review of the plain words found each read as a cause)
        "[2025-12-01 10:02:08 TP0] Available memory 3.1GB is less than required memory 4.2GB for warmup, reducing "
        "max_m to 8192 to avoid out of memory",  # SGLang 0.5.23 srt/layers/deep_gemm_wrapper/compile_utils.py
        "[2025-12-01 10:00:02] Multimodal is disabled for this MiMoV2 checkpoint: vision_config/audio_config not "
        "found in the model config (likely a text-only MiMoV2 variant).",  # SGLang srt/configs/model_config.py
        "ggml_backend_sycl_host_malloc: failed to allocate 512.00 MiB of pinned memory",  # ggml-sycl, falls back
        "ggml_vulkan: Failed to allocate pinned memory (vk::Device::allocateMemory: ErrorOutOfDeviceMemory)",
    ],
)
def test_an_engines_note_in_plain_words_is_no_failure(note: str) -> None:
    report = diagnose_log(["[2025-12-01 10:00:00] Load weight begin.", note, "[2025-12-01 10:03:00] Capture begin."])
    assert report.outcome == "not_ready"
    real = diagnose_log([note, *[f"loading {i}" for i in range(5)], "KeyError: 'model.layers.0.attention_sink_bias'"])
    assert real.diagnosis.line == 7  # and a real error later in the log is the cause, not the note


def test_a_failed_jit_build_is_told_by_the_compilers_first_error_not_by_the_build_command() -> None:
    # constructed after FlashInfer's jit/cpp_ext.py (run_ninja) under SGLang: ninja's CalledProcessError comes first,
    # then the chain, then the ninja output with the compiler's own error
    flashinfer = "/usr/local/lib/python3.12/dist-packages/flashinfer"

    def build_failed(module: str, error: str) -> list[str]:
        return [
            "[2026-06-07 18:49:51] Scheduler hit an exception: Traceback (most recent call last):",
            f'  File "{flashinfer}/jit/cpp_ext.py", line 342, in run_ninja',
            f"subprocess.CalledProcessError: Command '['ninja', '-v', '-C', '/root/.cache/flashinfer/121a/cached_ops/"
            f"{module}']' returned non-zero exit status 1.",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "Traceback (most recent call last):",
            f'  File "{flashinfer}/jit/cpp_ext.py", line 354, in run_ninja',
            "RuntimeError: Ninja build failed. Ninja output:",
            f"FAILED: [code=1] /root/.cache/flashinfer/121a/cached_ops/{module}/kernel.cuda.o",
            error,
            "ninja: build stopped: subcommand failed.",
        ]

    # an attention kernel that does not build for these settings: the attention backend, by its own source
    decode = f"{flashinfer}/data/include/flashinfer/attention/decode.cuh(117): error: no suitable conversion function"
    report = diagnose_log(build_failed("batch_decode_with_kv_cache_dtype_kv_fp4_e2m1", decode))
    assert report.diagnosis.category == "attention_backend_unsupported" and report.diagnosis.line == 3
    # FlashInfer's fused MoE shares its headers: not the attention backend's, a failed JIT build
    moe = f"{flashinfer}/data/csrc/fused_moe/cutlass_fused_moe_kernels.cuh(1213): error: identifier is undefined"
    report = diagnose_log(build_failed("fused_moe_120", moe))
    assert report.diagnosis.category == "import_dependency_error"
    # a missing header is the environment's, wherever the header was included from
    header = f"{flashinfer}/data/include/flashinfer/utils.cuh:19:10: fatal error: cuda_fp8.h: No such file or directory"
    assert diagnose_log(["RuntimeError: Ninja build failed. Ninja output:", header]).diagnosis.category == (
        "import_dependency_error"
    )
    # and a library the link step cannot find, before the compiler driver's summary of it
    linked = diagnose_log(
        [
            "RuntimeError: ninja exited with status 1",
            "/usr/bin/ld: cannot find -lcudart",
            "collect2: error: ld returned 1 exit status",
        ]
    )
    assert linked.diagnosis.category == "import_dependency_error" and linked.diagnosis.line == 2


def test_gloos_connection_report_at_info_is_no_failure() -> None:
    # constructed after gloo's transport/tcp/context.cc (torch 2.13, TORCH_GLOO_LAZY_INIT=1): every rank reports the
    # peers it has not connected to yet, at INFO, on a start that then succeeds
    report = diagnose_log(
        [
            "[2026-01-10 10:00:01] Init torch distributed begin.",
            "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/context.cc:243] INFO Rank 1 is connected to 0. "
            "Expected number of connected peers is: 2",
            "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/context.cc:254] INFO Rank 1 is NOT connected "
            "to: [0, 2]",
            "[2026-01-10 10:00:05] Load weight begin. avail mem=70.00 GB",
        ]
    )
    assert report.outcome == "not_ready"


def test_a_cpp_exceptions_message_and_a_failed_assert_are_error_lines() -> None:
    # constructed after llama.cpp's uncaught exception and glibc's assert() as Triton's MLIR passes print them
    report = diagnose_log(
        [
            "main: model loaded",
            "terminate called after throwing an instance of 'std::runtime_error'",
            "  what():  this custom template is not supported",
            "Aborted (core dumped)",
        ]
    )
    assert report.outcome == "failed" and report.diagnosis.line == 3
    assert report.diagnosis.category == "invalid_config"
    assert states_error(
        "python3: /project/lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp:42: int f(int): "
        'Assertion `false && "computeCapability not supported"\' failed.'
    )
    # Apple's frameworks state theirs so (Metal's API validation, before the shell's `zsh: abort`)
    assert states_error(
        "-[MTLComputePipelineDescriptorInternal setComputeFunction:withType:]:722: failed assertion "
        "`computeFunction must not be nil.'"
    )


@pytest.mark.parametrize(
    ("death", "category"),
    [
        ("Segmentation fault: 11", "unknown"),
        ("Illegal instruction: 4", "hardware_unsupported"),
        ("fish: Job 1, './llama-cli -m \"m.gguf\"' terminated by signal SIGSEGV (Address boundary error)", "unknown"),
        ("zsh: abort      ./main -m ../models/llama-3.gguf -n 128", "unknown"),
        ("zsh: killed     ./main -m ../models/llama-3.gguf -n 128", "cuda_oom"),
        ("fish: Job 1, './llama-server -m m.gguf' terminated by signal SIGKILL (Forced quit)", "cuda_oom"),
        ("Exception caught at file:/app/ggml/src/ggml-sycl/ggml-sycl.cpp, line:3600", "unknown"),
    ],
)
def test_a_shells_notice_of_a_signal_is_a_death(death: str, category: str) -> None:
    # a shell's notice that its child died (macOS's by number, fish's and zsh's by name), or ggml's SYCL backend
    # catching an exception and exiting: the log stops on a death, not in a hang
    report = diagnose_log(["llama_model_loader: loaded meta data with 19 key-value pairs", death])
    assert report.outcome == "failed" and report.diagnosis.category == category


def test_a_launch_stopped_with_ctrl_c_while_it_waited_is_a_hang() -> None:
    # constructed after vLLM's offline LLM waiting for its engine processes until the user pressed Ctrl-C
    log = [
        "INFO 04-14 10:00:00 [core.py:61] Initializing a V1 LLM engine (v0.8.4) with config: model='m'",
        "Traceback (most recent call last):",
        '  File "/py/lib/python3.12/multiprocessing/connection.py", line 1136, in wait',
        "    ready = selector.select(timeout)",
        "KeyboardInterrupt",
    ]
    report = diagnose_log(log)
    assert report.outcome == "not_ready" and report.diagnosis.category == "hang_timeout"
    # an error before the Ctrl-C is what stopped it
    failed = diagnose_log([log[0], "RuntimeError: CUDA error: out of memory", *log[1:]])
    assert failed.outcome == "failed" and failed.diagnosis.category == "cuda_oom"


def test_a_line_that_states_an_error_is_no_settings_dump() -> None:
    specs = ", ".join("{'GPU': 1.0}" for _ in range(8))
    assert not is_settings_dump(f"Error: Cannot provide a placement group of placement_group_specs=[{specs}]")
    assert is_settings_dump(f"INFO 04-16 03:18:29 [ray_utils.py:233] Waiting for a placement group of specs=[{specs}]")


def test_a_python_warning_of_another_cause_is_no_link_of_the_chain() -> None:
    # constructed after a CPU build's log: a warning about an unrelated library before the op that is missing
    report = diagnose_log(
        [
            "/py/site-packages/oneccl_bindings_for_pytorch/__init__.py:25: UserWarning: Warning: Cannot load xpu CCL "
            "due to /py/liboneccl_bindings_for_pytorch_xpu.so: cannot open shared object file: No such file or directory",
            "  warnings.warn(f'Warning: Cannot load xpu CCL. {e}')",
            "ERROR 01-21 08:44:44 _custom_ops.py:61] Error in calling custom op gptq_marlin_repack: '_OpNamespace' '_C' "
            "object has no attribute 'gptq_marlin_repack'",
        ]
    )
    assert report.diagnosis.line == 3 and report.diagnosis.category == "library_version_mismatch"


@pytest.mark.parametrize(
    "wrapper",
    [
        "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD with errorcode 1.",
        "/src/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:70: ROCm error",
    ],
)
def test_a_summary_printed_around_the_error_is_a_wrapper(wrapper: str) -> None:
    # constructed: ggml's abort may be printed before its own message (stdout and stderr buffered apart)
    report = diagnose_log([wrapper, "ROCm error: CUBLAS_STATUS_INTERNAL_ERROR", "Aborted (core dumped)"])
    assert report.diagnosis.root_cause_line == "ROCm error: CUBLAS_STATUS_INTERNAL_ERROR"


def test_an_optional_part_said_lost_is_carried_on_from() -> None:
    report = diagnose_log(
        [
            "Failed to import nixl: No module named 'nixl'. NixlRelay will not work. Install with: pip install nixl",
            "ValueError: Cannot find model module. 'Cosmos3ForConditionalGeneration' is not a registered model in the "
            "Transformers library",
        ]
    )
    assert report.diagnosis.line == 2 and report.diagnosis.category == "model_arch_unsupported"


def test_a_traceback_cut_off_under_an_assert_is_told_by_it() -> None:
    # constructed after a pasted vLLM traceback that stops at the frame's source line
    report = diagnose_log(
        [
            "Traceback (most recent call last):",
            '  File "/opt/vllm/lib64/python3.12/site-packages/vllm/model_executor/models/mllama.py", line 1392, in forward',
            "    assert actual_len >= last_group_len",
        ]
    )
    assert report.outcome == "failed" and report.diagnosis.root_cause_line == "    assert actual_len >= last_group_len"


def test_an_error_said_at_the_start_of_its_line_is_one_behind_a_relay_too() -> None:
    # constructed: llama.cpp's uncaught exception and torch_npu's error table under docker compose's prefix
    report = diagnose_log(
        [
            "llama-server-1  | terminate called after throwing an instance of 'std::length_error'",
            "llama-server-1  |   what():  vector::_M_default_append",
            "llama-server-1  | Aborted (core dumped)",
        ]
    )
    assert report.diagnosis.line == 2
    assert states_error("vllm_1  | [Error]: Invalid device ID.")


def test_hips_queue_out_of_resources_is_no_out_of_memory_by_its_words() -> None:
    # HIP's queues abort so with tens of GB free (a review's examples from public threads)
    line = (
        ":0:rocdevice.cpp :2984: 7176453285 us: Callback: Queue 0x7f2b4c000000 Aborting with error : "
        "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources."
    )
    sig = heaviest(load_signatures(), line)
    assert sig is None or sig.category != "cuda_oom"


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: Invalid CUDA_VISIBLE_DEVICES: 0,1,9",
        "RuntimeError: NCCL_SOCKET_IFNAME must be set to the interface of the cluster network",
        "ValueError: ACL graph is incompatible with ASCEND_LAUNCH_BLOCKING=1. Please unset ASCEND_LAUNCH_BLOCKING",
    ],
)
def test_only_an_engines_own_environment_variable_is_a_platform_setting(line: str) -> None:
    sig = heaviest(load_signatures(), line)
    assert (sig is not None and sig.id == "platform_setting_rejected") == ("ASCEND_" in line)


def test_macos_killed_9_is_the_oom_killers_signal() -> None:
    report = diagnose_log(["llama_model_loader: loaded meta data with 19 key-value pairs", "Killed: 9"])
    assert report.diagnosis.category == "cuda_oom"


def test_an_error_glued_to_a_progress_bar_is_told_without_the_bar() -> None:
    error = "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:368 'an illegal memory access was encountered'"
    log = [
        "INFO 03-01 10:00:00 [model_runner.py:1500] Capturing cudagraphs for decoding.",
        f" 13%|██▏          | 3/23 [00:11<00:55,  2.79s/it]{error}",
        f" 13%|██▏          | 3/23 [00:12<01:21,  4.08s/it]{error}",
        "ERROR 03-01 10:00:13 [multiproc_executor.py:140] Worker proc VllmWorker-1 died unexpectedly, shutting down.",
    ]
    report = diagnose_log(log)
    assert report.outcome == "failed"
    assert report.diagnosis.root_cause_line == error
    assert report.diagnosis.line == 2


@pytest.mark.parametrize(
    ("line", "category"),
    [
        # Python's subprocess and multiprocessing give a child killed by signal N the exit code -N
        ("20:53:22-829894 ERROR    Server process terminated unexpectedly with exit code: -4", "hardware_unsupported"),
        ("  exitcode  : -9 (pid: 2939)", "cuda_oom"),
        ("RuntimeError: llama-server exited, returncode=-4", "hardware_unsupported"),
        ("FileNotFoundError: Shared library with base name 'llama' not found", "import_dependency_error"),
        # Mesa's amdgpu winsys when the kernel refuses a Vulkan submission for memory; Dawn refusing a WebGPU feature
        ("radv/amdgpu: Not enough memory for command submission.", "cuda_oom"),
        (
            "ggml_webgpu: Failed to get a device: Invalid feature required: Requested feature "
            "FeatureName::ShaderF16 is not supported.",
            "hardware_unsupported",
        ),
    ],
)
def test_a_named_cause_in_one_line(line: str, category: str) -> None:
    assert diagnose_text(line + "\n").diagnosis.category == category


def test_torch_npu_names_the_failed_call_and_canns_report_after_it_says_why() -> None:
    """torch_npu's RuntimeError names only the ACL call and a code; CANN's error report follows (constructed lines in
    the format of real Ascend logs)."""
    log = (
        "RuntimeError: cat:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:265 NPU function error: call aclnnCat "
        "failed, error code is 161002\n"
        "[ERROR] 2025-09-13-05:28:15 (PID:55172, Device:4, RankID:-1) ERR00100 PTA call acl api failed.\n"
        "EZ1001: [PID: 55172] 2025-09-13-05:28:15.526.256 tensor 0 not implemented for DT_UINT64, should be in dtype "
        "support list [DT_FLOAT,DT_INT32,DT_INT64].\n"
    )
    found = diagnose_text(log).diagnosis
    assert found.category == "hardware_unsupported" and found.root_cause_line.startswith("EZ1001: [PID: 55172]")
    # an internal error's header says nothing; the report's next line says what failed
    internal = (
        "RuntimeError: zero_:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:26 NPU function error: call "
        "aclnnInplaceZero failed, error code is 561103\n"
        "EZ9999: Inner Error!\n"
        "EZ9999[PID: 412] 2026-08-14-19:25:05.987.300 AclNN_Inner_Error(EZ9999):  Parse dynamic kernel config fail.\n"
    )
    assert diagnose_text(internal).diagnosis.root_cause_line.startswith("EZ9999[PID: 412]")


def test_a_log_of_wrappers_alone_points_at_one_that_says_what_failed() -> None:
    """vLLM's executor reports that a worker failed; a traceback's header above it says only that one follows."""
    log = (
        "(EngineCore pid=451) ERROR 09-22 07:22:28 [core.py:1385] Traceback (most recent call last):\n"
        '(EngineCore pid=451) ERROR 09-22 07:22:28 [core.py:1385]   File "/x/vllm/v1/executor/multiproc_executor.py",'
        " line 601, in wait_for_ready\n"
        "(EngineCore pid=451) ERROR 09-22 07:22:28 [core.py:1385]     raise e from None\n"
        "(EngineCore pid=451) ERROR 09-22 07:22:28 [core.py:1385] Exception: WorkerProc initialization failed due to "
        "an exception in a background process. See stack trace for root cause.\n"
    )
    found = diagnose_text(log).diagnosis
    assert found.category == "unknown" and found.confidence == 0.1  # a wrapper, not a generic exception
    assert "WorkerProc initialization failed" in found.root_cause_line


def test_an_attempt_retried_with_the_words_the_last_attempt_fails_with_is_where_the_cause_was_first_stated() -> None:
    """vLLM's repo_utils logs a failed config parse, tries again, logs the same words, then raises (constructed)."""
    why = "Unrecognized model in /models/m. Should have a `model_type` key in its config.json."
    log = [
        f"(APIServer pid=1) ERROR 12-03 18:26:33 [repo_utils.py:126] Error parsing config for /models/m: {why}, "
        "retrying 1 of 2",
        f"(APIServer pid=1) ERROR 12-03 18:26:35 [repo_utils.py:124] Error parsing config for /models/m: {why}",
        "Traceback (most recent call last):",
        '  File "/v/vllm/transformers_utils/config.py", line 600, in get_config',
        f"ValueError: {why}",
    ]
    report = diagnose_text("\n".join(log))
    assert report.diagnosis is not None
    assert report.diagnosis.category == "missing_model_files"
    assert report.diagnosis.line == 1


def test_a_keyword_the_engine_does_not_take_is_the_users_from_a_script_and_another_releases_from_a_package() -> None:
    """Constructed from the shape of the recorded script (tests/data/failures/scripts/) and of trl's vllm-serve."""
    error = "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_extension_cls'"
    engine = [
        '  File "/usr/lib/python3/dist-packages/vllm/entrypoints/llm.py", line 212, in __init__',
        "    engine_args = EngineArgs(",
        error,
    ]
    from_script = ["Traceback (most recent call last):", '  File "/home/me/run.py", line 4, in <module>', *engine]
    from_package = [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/trl", line 8, in <module>',
        '  File "/usr/lib/python3/dist-packages/trl/scripts/vllm_serve.py", line 238, in main',
        *engine,
    ]
    assert diagnose_text("\n".join(from_script)).diagnosis.category == "invalid_config"
    assert diagnose_text("\n".join(from_package)).diagnosis.category == "library_version_mismatch"
