"""Where an error happened as the log shows it, on short constructed logs (written here from the engines' and
libraries' real message and traceback formats, not recorded): the function that raised, the engine's frame that
called into torch or Triton, a speculative-decoding draft's code, a native crash's stack, and a logger's message of
several lines before its traceback."""

from __future__ import annotations

import io

from firstlight.diagnosis import diagnose_lines
from firstlight.logs import iter_lines


def diagnosis(lines: list[str]):
    report = diagnose_lines(iter_lines(io.BytesIO("".join(f"{line}\n" for line in lines).encode())))
    assert report.outcome == "failed"
    return report.diagnosis


def traceback(frames: list[tuple[str, str]], exception: str) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for path, function in frames:
        lines += [f'  File "{path}", line 10, in {function}', "    call()"]
    return [*lines, exception]


SITE = "/usr/lib/python3.12/site-packages"


def test_a_bare_exception_raised_by_a_settings_check_is_about_the_settings() -> None:
    frames = [
        (f"{SITE}/vllm/engine/arg_utils.py", "create_engine_config"),
        (f"{SITE}/vllm/platforms/cuda.py", "check_and_update_config"),
    ]
    d = diagnosis(traceback(frames, "NotImplementedError"))
    assert (d.category, d.root_cause_line) == ("invalid_config", "NotImplementedError")
    # the same exception raised by a function that checks nothing names no cause
    frames[-1] = (f"{SITE}/vllm/platforms/cuda.py", "get_device_name")
    assert diagnosis(traceback(frames, "NotImplementedError")).category == "unknown"


def test_a_kernel_launch_error_is_placed_by_the_engine_frame_that_called_triton() -> None:
    frames = [
        (f"{SITE}/sglang/srt/layers/attention/triton_ops/extend_attention.py", "extend_attention_fwd"),
        (f"{SITE}/triton/runtime/jit.py", "run"),
        (f"{SITE}/triton/backends/amd/driver.py", "__call__"),
    ]
    error = "RuntimeError: Triton Error [HIP]:  Code: 1, Messsage: invalid argument"
    assert diagnosis(traceback(frames, error)).category == "attention_backend_unsupported"
    # called from the scheduler, not from an attention kernel: nothing says where
    frames[0] = (f"{SITE}/sglang/srt/managers/scheduler.py", "run_batch")
    assert diagnosis(traceback(frames, error)).category == "unknown"


def test_a_shape_mismatch_in_a_draft_models_code_says_the_draft_does_not_fit() -> None:
    frames = [
        (f"{SITE}/sglang/srt/speculative/eagle_worker.py", "draft_forward"),
        (f"{SITE}/sglang/srt/models/llama_eagle.py", "forward"),
        (f"{SITE}/torch/nn/modules/linear.py", "forward"),
    ]
    error = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x12288 and 8192x4096)"
    d = diagnosis(traceback(frames, error))
    assert (d.category, d.signature) == ("invalid_config", "raised_in_draft_model")
    assert "draft" in d.remedy
    # the same mismatch in the target model's own forward names no cause
    frames[:2] = [
        (f"{SITE}/sglang/srt/model_executor/model_runner.py", "forward"),
        (f"{SITE}/sglang/srt/models/llama.py", "forward"),
    ]
    assert diagnosis(traceback(frames, error)).category == "unknown"


def test_a_draft_with_another_vocabulary_fails_its_assert() -> None:
    lines = [
        "Traceback (most recent call last):",
        f'  File "{SITE}/vllm/spec_decode/spec_decode_worker.py", line 1106, in _vocab_size',
        "    assert all(vocab_sizes[0] == vocab_size for vocab_size in vocab_sizes)",
        "AssertionError",
    ]
    d = diagnosis(lines)
    assert (d.category, d.root_cause_line) == ("invalid_config", lines[2])


RAY = "(RayWorkerWrapper pid=2191, ip=10.0.0.2)"


def test_a_signal_inside_nccl_is_an_nccl_failure_told_by_the_function_it_hit() -> None:
    log = [
        f"{RAY} *** SIGSEGV received at time=1746566409 on cpu 131 ***",
        f"{RAY} PC: @     0x7fcfcd849b8a  (unknown)  addProxyOpIfNeeded()",
        f"{RAY}     @     0x7ffff7c9e520  267994832  (unknown)",
        f"{RAY} Fatal Python error: Segmentation fault",
        f"{RAY} Stack (most recent call first):",
        f'{RAY}   File "{SITE}/vllm/distributed/device_communicators/pynccl_wrapper.py", line 290 in ncclAllReduce',
        f'{RAY}   File "{SITE}/vllm/distributed/device_communicators/pynccl.py", line 126 in all_reduce',
        "ERROR 05-06 14:20:15 [core.py:387] ray.exceptions.ActorDiedError: The actor died unexpectedly before "
        "finishing this task.",
    ]
    d = diagnosis(log)
    assert (d.category, d.root_cause_line) == ("nccl_error", log[1])


def test_a_heap_check_inside_nccl_init_is_told_by_its_own_notice() -> None:
    log = [
        f"{RAY} free(): double free detected in tcache 2",
        f"{RAY} *** SIGABRT received at time=1743139179 on cpu 162 ***",
        f"{RAY} PC: @     0x7fe64731b9fc  (unknown)  pthread_kill",
        f'{RAY}   File "{SITE}/vllm/distributed/device_communicators/pynccl_wrapper.py", line 277 in ncclCommInitRank',
        "ERROR 03-27 22:19:40 [core.py:367] ray.exceptions.ActorDiedError: The actor died unexpectedly before "
        "finishing this task.",
    ]
    d = diagnosis(log)
    assert (d.category, d.root_cause_line) == ("nccl_error", log[0])


def test_a_native_crash_elsewhere_names_no_cause() -> None:
    log = [
        "*** SIGSEGV received at time=1746566409 on cpu 131 ***",
        "PC: @     0x7fcfcd849b8a  (unknown)  at::native::index_select_out_cuda()",
        "Fatal Python error: Segmentation fault",
        f'  File "{SITE}/vllm/model_executor/models/llama.py", line 300 in forward',
        # NCCL further down the stack is not where it crashed
        f'  File "{SITE}/vllm/distributed/device_communicators/pynccl.py", line 126 in all_reduce',
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    ]
    assert diagnosis(log).category == "unknown"


def test_a_logged_message_of_several_lines_and_its_traceback_are_one_statement() -> None:
    # FastAPI logs the message with how to install, then raises it: the exception line gives its type
    message = 'Form data requires "python-multipart" to be installed.'
    log = [
        message,
        'You can install "python-multipart" with:',
        "",
        "pip install python-multipart",
        "",
        *traceback([(f"{SITE}/fastapi/dependencies/utils.py", "check_file_field")], f"RuntimeError: {message}"),
        'You can install "python-multipart" with:',
    ]
    d = diagnosis(log)
    assert (d.category, d.root_cause_line) == ("import_dependency_error", f"RuntimeError: {message}")


def test_an_actor_ray_gave_no_gpu_is_a_placement_problem_not_a_missing_gpu() -> None:
    line = "(_MapWorker pid=13019) ERROR 03-07 05:56:27 worker_base.py:581] RuntimeError: No CUDA GPUs are available"
    assert diagnosis([line]).category == "nccl_error"
    plain = "ERROR 03-07 05:56:27 worker_base.py:581] RuntimeError: No CUDA GPUs are available"
    assert diagnosis([plain]).category == "hardware_unsupported"


def test_the_speculative_worker_loading_the_target_is_no_draft_that_does_not_fit() -> None:
    # vLLM V0's spec-decode worker loads the target too: a target checkpoint that does not fit is not the draft's
    lines = [
        "Traceback (most recent call last):",
        f'  File "{SITE}/vllm/spec_decode/spec_decode_worker.py", line 340, in load_model',
        "    self.scorer_worker.load_model()",
        f'  File "{SITE}/vllm/model_executor/models/llama.py", line 500, in load_weights',
        "    weight_loader(param, loaded_weight)",
        f'  File "{SITE}/vllm/model_executor/layers/linear.py", line 400, in weight_loader',
        "    assert param_data.shape == loaded_weight.shape",
        "AssertionError",
    ]
    # the target's checkpoint does not fit the target's code (weight_shape_mismatch), not the draft
    assert diagnosis(lines).category == "model_arch_unsupported"
    # the draft model's own load_weights on the way: the draft does not fit
    lines[3] = f'  File "{SITE}/vllm/model_executor/models/eagle.py", line 222, in load_weights'
    assert diagnosis(lines).category == "invalid_config"


def test_each_process_crash_is_read_from_its_own_stack() -> None:
    other = "(RayWorkerWrapper pid=2192, ip=10.0.0.3)"
    log = [
        f"{RAY} *** SIGSEGV received at time=1746566409 on cpu 131 ***",
        f"{RAY} PC: @     0x7fcfcd849b8a  (unknown)  cuLaunchKernel",
        f"{other} *** SIGSEGV received at time=1746566409 on cpu 12 ***",
        f"{other} PC: @     0x7fcfcd849b8a  (unknown)  ncclProxyProgress",
        "ERROR 05-06 14:20:15 [core.py:387] ray.exceptions.ActorDiedError: The actor died unexpectedly before "
        "finishing this task.",
    ]
    d = diagnosis(log)
    assert (d.category, d.root_cause_line) == ("nccl_error", log[3])


def test_two_ranks_crashing_together_interleave_their_stacks() -> None:
    other = "(RayWorkerWrapper pid=2192, ip=10.0.0.3)"
    log = [
        f"{RAY} *** SIGSEGV received at time=1746566409 on cpu 131 ***",
        f"{other} *** SIGSEGV received at time=1746566409 on cpu 12 ***",
        f"{other} PC: @     0x7fcfcd849b8a  (unknown)  cuLaunchKernel",
        f"{RAY} PC: @     0x7fcfcd849b8a  (unknown)  ncclProxyProgress",
        "ERROR 05-06 14:20:15 [core.py:387] ray.exceptions.ActorDiedError: The actor died unexpectedly before "
        "finishing this task.",
    ]
    d = diagnosis(log)
    # the first process's stack is read as its own, though another's notice and frame came between
    assert (d.category, d.root_cause_line) == ("nccl_error", log[3])


def test_no_gpu_inside_a_ray_actor_is_the_actors_placement() -> None:
    frames = [
        (f"{SITE}/ray/serve/_private/replica.py", "initialize"),
        (f"{SITE}/vllm/worker/worker.py", "init_device"),
        (f"{SITE}/torch/cuda/__init__.py", "_lazy_init"),
    ]
    lines = traceback(frames, "RuntimeError: No CUDA GPUs are available")
    assert diagnosis(lines).category == "nccl_error"
    # the same message outside Ray: the machine shows no GPU
    assert diagnosis(traceback(frames[1:], lines[-1])).category == "hardware_unsupported"


def test_a_reply_that_is_not_json_is_told_by_the_type_that_re_raises_it() -> None:
    message = "JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    first = traceback([(f"{SITE}/requests/models.py", "json")], f"json.decoder.{message}")
    then = traceback([(f"{SITE}/sglang/srt/server.py", "_wait_and_warmup")], f"requests.exceptions.{message}")
    log = [*first, "", "During handling of the above exception, another exception occurred:", "", *then]
    d = diagnosis(log)
    # json's message is the first of the chain; requests' type says it was an HTTP reply, not a model file
    assert (d.category, d.root_cause_line) == ("invalid_config", first[-1])
    assert diagnosis(first).category == "missing_model_files"


def test_nvshmem_names_the_peer_it_cannot_reach_before_its_transport_map_fails() -> None:
    src = "/dvs/p4/build/sw/rel/gpgpu/toolkit/r13.0/main_nvshmem/src/host"
    log = [
        f"{src}/transport/transport.cpp:nvshmemi_transport_init:282: init failed for transport: IBGDA",
        f"{src}/topo/topo.cpp:469: [GPU 1] Peer GPU 8 is not accessible, exiting ... ",
        f"{src}/init/init.cu:1037: non-zero status: 3 building transport map failed",
        "EOFError",
    ]
    d = diagnosis(log)
    assert (d.category, d.root_cause_line) == ("nccl_error", log[1])


def test_a_key_error_in_a_models_weight_loader_is_a_tensor_the_model_code_lacks() -> None:
    frames = [(f"{SITE}/vllm/model_executor/model_loader.py", "get_model")]
    loader = (f"{SITE}/vllm/model_executor/models/qwen.py", "load_weights")
    lines = traceback([*frames, loader], "KeyError: 'transformer.visual.positional_embedding'")
    assert diagnosis(lines).category == "model_arch_unsupported"
    # a quantization tensor the loader does not expect names the format, wherever it is raised
    quant = traceback([*frames, loader], "KeyError: 'model.layers.3.mlp.gate_up_proj.weight_scale'")
    assert diagnosis(quant).category == "unsupported_quantization_format"
    # the same KeyError raised outside a weight loader says nothing of the model
    assert diagnosis(traceback(frames, lines[-1])).category == "unknown"


# A weight loader's shape assertion, as vLLM 0.2-0.7 and SGLang (which called vLLM's linear layers) raise it
# (constructed from the frames of vllm/model_executor/models/llama.py and layers/linear.py).
WEIGHT_SHAPE_TRACEBACK = [
    "Traceback (most recent call last):",
    f'  File "{SITE}/vllm/model_executor/model_loader/loader.py", line 1135, in _load_weights',
    "    loaded_weights = model.load_weights(qweight_iterator)",
    f'  File "{SITE}/vllm/model_executor/models/llama.py", line 400, in load_weights',
    "    weight_loader(param, loaded_weight, shard_id)",
    f'  File "{SITE}/vllm/model_executor/layers/linear.py", line 589, in weight_loader',
    "    assert param_data.shape == loaded_weight.shape",
    "AssertionError",
]


def test_a_weight_shape_mismatch_reads_the_quantization_stated_before_it() -> None:
    # no quantization stated: the checkpoint is a variant of the architecture the code does not implement
    plain = diagnosis(WEIGHT_SHAPE_TRACEBACK)
    assert (plain.category, plain.signature) == ("model_arch_unsupported", "weight_shape_mismatch")
    assert plain.root_cause_line == "    assert param_data.shape == loaded_weight.shape"
    # vLLM's engine config names the method: the quantized layout is what does not fit
    config = "INFO 02-07 05:08:33 llm_engine.py:234] Initializing an LLM engine with config: quantization=bitsandbytes"
    quantized = diagnosis([config, *WEIGHT_SHAPE_TRACEBACK])
    assert (quantized.category, quantized.signature) == ("unsupported_quantization_format", "quantized_weights_unfit")
    # `quantization=None` (the argument Namespace of an unquantized launch) states none
    unquantized = diagnosis(
        ["INFO api_server.py:841] args: Namespace(quantization=None, dtype='auto')", *WEIGHT_SHAPE_TRACEBACK]
    )
    assert unquantized.category == "model_arch_unsupported"
    # torch's narrow() past a dimension is the same mismatch, and SGLang's command line states the method as a flag
    narrowed = [*WEIGHT_SHAPE_TRACEBACK[:-2], "RuntimeError: start (0) + length (14336) exceeds dimension size (896)."]
    flag = "$ python3 -m sglang.launch_server --model-path m --quantization awq --port 30000"
    assert diagnosis(narrowed).category == "model_arch_unsupported"
    assert diagnosis([flag, *narrowed]).category == "unsupported_quantization_format"


def test_a_key_error_in_a_loader_is_a_tensor_the_code_lacks_or_a_quantized_one() -> None:
    # SGLang's loader mapping a saved state onto the model (model_loader/loader.py load_model: `state_dict[key]`)
    lines = [
        "Traceback (most recent call last):",
        f'  File "{SITE}/sglang/srt/model_loader/loader.py", line 605, in load_model',
        "    param_data = state_dict[key].data",
        "KeyError: 'model.layers.10.mlp.experts.e_score_correction_bias'",
    ]
    assert diagnosis(lines).category == "model_arch_unsupported"
    # with a quantization method stated (here in the user's own code), a tensor of the method the code has no
    # parameter for (SqueezeLLM's `rows`)
    stated = '    llm = LLM(model=model_path, quantization="squeezellm", dtype=torch.float16)'
    lines[1] = f'  File "{SITE}/vllm/model_executor/models/llama.py", line 395, in load_weights'
    lines[3] = "KeyError: 'model.layers.0.self_attn.qkv_proj.rows'"
    assert diagnosis([stated, *lines]).category == "unsupported_quantization_format"


def test_an_exception_of_vllms_base_platform_is_no_accelerator_found() -> None:
    lines = [
        "Traceback (most recent call last):",
        f'  File "{SITE}/vllm/attention/selector.py", line 215, in which_attn_to_use',
        "    if current_platform.get_device_capability()[0] < 8:",
        f'  File "{SITE}/vllm/platforms/interface.py", line 28, in get_device_capability',
        "    raise NotImplementedError",
        "NotImplementedError",
    ]
    assert diagnosis(lines).category == "hardware_unsupported"
    # vLLM said at DEBUG why it found no CUDA platform: that is the cause
    why = "DEBUG 04-10 22:38:54 [__init__.py:93] CUDA platform is not available because: NVML Shared Library Not Found"
    told = diagnosis([why, *lines])
    assert (told.category, told.root_cause_line) == ("import_dependency_error", why)
    assert told.signature == "driver_library_missing"


def test_an_index_error_taking_the_first_of_an_empty_listing_is_a_missing_file() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/app/modules/models.py", line 247, in llamacpp_loader',
        "    model_file = list(Path(f'{shared.args.model_dir}/{model_name}').glob('*.gguf'))[0]",
        "IndexError: list index out of range",
    ]
    found = diagnosis(lines)
    assert (found.category, found.signature) == ("missing_model_files", "first_of_an_empty_listing")
    # an IndexError on any other line says nothing of files
    other = [*lines[:2], "    layer = self.layers[layer_idx]", lines[3]]
    assert diagnosis(other).category != "missing_model_files"
