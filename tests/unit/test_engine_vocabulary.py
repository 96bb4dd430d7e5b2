"""The engines' own start-up error messages, read from their sources (tests/data/engine-messages.jsonl: the
engine, the source file, the versions that print it, the message with its placeholders, one line rendered
from it, and the category its source implies), each diagnosed alone. Collected from the released sources: PyPI's
sdists of vLLM 0.4.3 to 0.33.0 (21 releases), SGLang 0.2.15 to 0.5.23 (14), transformers 4.36.2 to 5.24.0
(8) and the llama.cpp tree vendored in six llama-cpp-python releases (2024-08 to 2026-10); TGI, NCCL,
huggingface_hub, safetensors, FlashInfer and compressed-tensors from their git history; TensorRT-LLM and
PyTorch from a code index (their version ranges are approximate). A second reading (2026-11-30) added Triton
(core, python_backend, tensorrtllm_backend v0.7-v0.19), more TensorRT-LLM (runtime, plugins, executor; a code
index, approximate), TGI (main, 2026-01), ollama (v0.20 and main), vLLM 0.33.0 and SGLang 0.5.23; where its
reader's category contradicted the README's definitions (a compute capability too low is
`hardware_unsupported`, prefill-token memory is `insufficient_kv_cache`, a backend not installed is
`import_dependency_error`) the README's is recorded. A third reading (2026-11-30) added LMDeploy, DeepEP,
DeepGEMM and vllm-ascend (their git histories), MLC-LLM and Xinference (release tags), Ray, PyTorch and IPEX (files
in a code index; approximate versions): the messages diagnose places in the category that reading gave them.
A fourth reading (2026-12-01) added the Vulkan result codes (Vulkan-Headers), Apple dyld's library errors, ptxas's
architecture errors and ggml's aborts, allocation and file-magic messages (llama.cpp), found missing by held-out logs.
A fifth reading (2026-12-01) of vLLM 0.10-0.33 and SGLang 0.4.10-0.5.23 (PyPI releases), TGI (git, v3.3.7) and
llama.cpp (a code index) added the newest wordings of their start-up checks (speculative decoding, DP attention,
LoRA, backends per model, memory budgets), those diagnosed in the category the reading gave them.
The platform under the engines (Docker, the NVIDIA container toolkit, NVML, the Kubernetes scheduler, the Linux
OOM killer) added their messages about GPUs, drivers and memory the same day. A sixth reading, of LMDeploy (git, HEAD 2026-08-21
and v0.7.0), added its environment checks, TurboMind's CHECKs and its loaders' messages. A seventh reading
(2026-12-01), of the libraries under the engines (PyTorch's allocators, CUDA and c10d; NCCL; huggingface_hub,
safetensors, tokenizers and transformers' loaders and quantizers; Triton, FlashInfer, Ray, uvicorn, DeepSpeed, DeepEP
and Mooncake; git histories, and a code index for PyTorch and Ray), added the messages diagnose places in the
category that reading gave them. An eighth reading (2026-12-01), of the launchers around the engines (GPUStack,
Xinference, KServe, LocalAI, RamaLama, OpenLLM) and smaller engines (mistral.rs, candle, KTransformers, ExLlamaV2,
TabbyAPI, MLC-LLM, Aphrodite, vllm-ascend, ik_llama.cpp, ipex-llm; their git trees of 2025-2026), added those
diagnose places in the category that reading gave them. A ninth reading (2026-12-03), of the kernel, quantization
and platform libraries under the engines (flash-attention 2-4, FlashMLA, sgl-kernel, Triton 3.1-3.9, bitsandbytes,
GPTQModel, AutoAWQ, ModelOpt, Quark, compressed-tensors, xgrammar, llguidance, LMCache, NIXL, fbgemm_gpu; aiter, HIP
and amdsmi on ROCm, torch_npu, vllm-ascend, vllm-gaudi, tpu-inference, vllm-spyre, MLX and mlx-lm, torch-xpu-ops;
their git trees, or their PyPI wheels where the tree was too large), added 191 messages, 151 of them diagnosed in
the category that reading gave them (40 were not before it, and were recorded as they are).
The rendered lines are constructed from the templates.

Most must come out in their category. Where diagnose says something else on purpose the entry records it in
`diagnosed_as`: `wrapper` (a line that only says something failed before it: `Scheduler hit an exception`,
`ShardCannotStart`), `unknown` (too generic to name a cause alone: `CUDA error: {e}`), `none` (not an
error line) or another category (the message names a cause the catalogue files elsewhere). A change in
what any message is diagnosed as fails here, so the vocabulary cannot drift unnoticed.
"""

from __future__ import annotations

import io
import json

import pytest

from firstlight.diagnosis import diagnose_lines
from firstlight.diagnosis.reader import WRAPPER_RULE
from firstlight.logs import iter_lines
from tests.conftest import DATA

MESSAGES = [json.loads(line) for line in (DATA / "engine-messages.jsonl").read_text().splitlines() if line.strip()]


def diagnosed_as(line: str) -> str:
    report = diagnose_lines(iter_lines(io.BytesIO(line.encode())))
    if report.outcome == "not_ready":
        return "none"
    if report.rule == WRAPPER_RULE:
        return "wrapper"
    assert report.diagnosis is not None
    return report.diagnosis.category


@pytest.mark.parametrize("entry", MESSAGES, ids=[f"{i:03d}-{m['engine'].split()[0]}" for i, m in enumerate(MESSAGES)])
def test_engine_message_is_diagnosed_as_recorded(entry: dict) -> None:
    assert diagnosed_as(entry["line"]) == entry.get("diagnosed_as", entry["category"]), entry["source"]


def test_most_of_the_vocabulary_lands_in_its_own_category() -> None:
    own = sum("diagnosed_as" not in m for m in MESSAGES)
    assert len(MESSAGES) >= 200 and own / len(MESSAGES) >= 0.8
