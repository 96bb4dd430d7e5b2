"""Preflight checks on facts recorded by firstlight on a real 2x H200 machine (tests/data/facts)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from safetensors.numpy import save_file

import firstlight
from firstlight.deployment import Deployment
from firstlight.engines import ENGINES
from firstlight.facts import Facts, SoftwareFacts, load_facts
from firstlight.facts.model import gather_model_facts
from firstlight.facts.software import gather_software_facts
from firstlight.preflight import run_checks
from tests.conftest import DATA
from tests.conftest import firstlight as run_cli

FACTS = DATA / "facts"
LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "head_dim": 128,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
KIMI = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "kimi_k2",
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "n_routed_experts": 384,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 262144,
    "torch_dtype": "bfloat16",
}
NVFP4 = {
    "quant_method": "compressed-tensors",
    "format": "nvfp4-pack-quantized",
    "quantization_status": "compressed",
    "config_groups": {
        "group_0": {
            "format": "nvfp4-pack-quantized",
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "float", "group_size": 16},
        }
    },
}


def make_model(tmp: Path, config: dict[str, Any], shards: int = 1, name: str = "model") -> Path:
    d = tmp / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    (d / "tokenizer.json").write_text("{}")
    for i in range(shards):
        save_file(
            {
                f"layer.{i}.w": np.zeros((64, 64), dtype=np.float16),
                f"layer.{i}.packed": np.zeros((64, 32), dtype=np.uint8),
            },
            str(d / f"model-{i + 1:05d}-of-{shards:05d}.safetensors"),
        )
    return d


def dep(**fields: Any) -> Deployment:
    base: dict[str, Any] = {"engine": "vllm", "python": "/nonexistent/python", "model": "/m"}
    return Deployment.model_validate({**base, **fields})


def facts_with(
    recorded: str, model: Path | None = None, software: dict[str, Any] | SoftwareFacts | None = None
) -> Facts:
    """Facts recorded on the H200 host, with the model observed here and the software given (constructed)."""
    facts = load_facts(FACTS / recorded)
    sw = software or {
        "packages": {"vllm": "0.33.0", "sglang": "0.5.23", "torch": "2.9.0", "compressed-tensors": "0.17.0"},
        "torch_cuda": "12.9",
    }
    update: dict[str, Any] = {
        "software": sw if isinstance(sw, SoftwareFacts) else SoftwareFacts.model_validate({"interpreter": "py", **sw})
    }
    if model is not None:
        update["model"] = gather_model_facts(model)
    return facts.model_copy(update=update)


def by_id(findings, id_: str):  # type: ignore[no-untyped-def]
    return [f for f in findings if f.id == id_]


# ---------------------------------------------------------------- the story's three failures


def test_stale_40g_process_on_gpu0_fails_naming_pid_and_gpu(tmp_path: Path) -> None:
    model = make_model(tmp_path, LLAMA)
    findings = run_checks(facts_with("h200x2-gpu0-40g.json", model), dep(model=str(model)))
    (gpu,) = by_id(findings, "gpu_processes")
    assert gpu.severity == "fail"
    assert "pid 1509" in gpu.message and "GPU 0" in gpu.message and "40.5 GiB" in gpu.message
    assert "kill 1509" in gpu.remedy and "nvidia-smi --query-compute-apps" in gpu.remedy
    assert findings.exit_code == 2


def test_sglang_tp2_imbalance_rule(tmp_path: Path) -> None:
    model = make_model(tmp_path, LLAMA)
    spec = dep(engine="sglang", model=str(model), parallel={"tp": 2})
    (gpu,) = by_id(run_checks(facts_with("h200x2-gpu0-40g.json", model), spec), "gpu_processes")
    assert gpu.severity == "fail" and "The memory capacity is unbalanced" in gpu.message
    (idle,) = by_id(run_checks(facts_with("h200x2-idle.json", model), spec), "gpu_processes")
    assert idle.severity == "ok"


@pytest.fixture(scope="module")
def old_compressed_tensors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real interpreter (a venv, no network) whose site-packages holds compressed-tensors 0.8.1, the release
    in the story, as recorded from its wheel: its metadata and the CompressionFormat enum the probe reads
    (tests/data/software/compressed-tensors-0.8.1)."""
    venv = tmp_path_factory.mktemp("ct081") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    shutil.copytree(DATA / "software" / "compressed-tensors-0.8.1", site, dirs_exist_ok=True)
    return venv / "bin" / "python"


def test_nvfp4_checkpoint_with_compressed_tensors_081_fails_naming_010(
    tmp_path: Path, old_compressed_tensors: Path
) -> None:
    model = make_model(tmp_path, {**KIMI, "quantization_config": NVFP4})
    software = gather_software_facts(old_compressed_tensors, ENGINES.values())
    assert software.packages["compressed-tensors"] == "0.8.1"
    assert "nvfp4-pack-quantized" not in software.compression_formats
    findings = run_checks(facts_with("h200x2-idle.json", model, software), dep(model=str(model)))
    (quant,) = by_id(findings, "quantization")
    assert quant.severity == "fail"
    assert "0.8.1" in quant.message and "nvfp4-pack-quantized" in quant.message
    assert ">=0.10.0" in quant.remedy


def sm120(recorded: Facts) -> Facts:
    """The H200 recording with the GPU identity of an RTX PRO 6000 Blackwell (SM120), as on the
    story's machine. Derived, not recorded: no SM120 machine was available."""
    facts = recorded.model_copy(deep=True)
    for g in facts.gpus.gpus:
        g.name, g.compute_capability = "NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"
    return facts


@pytest.mark.parametrize("backend", ["fa3", "cutedsl_mla", "trtllm_mha"])
def test_mla_backend_that_cannot_run_on_sm120_fails_with_ladder(tmp_path: Path, backend: str) -> None:
    model = make_model(tmp_path, KIMI)
    facts = sm120(facts_with("h200x2-idle.json", model))
    spec = dep(engine="sglang", model=str(model), args={"attention-backend": backend})
    (att,) = by_id(run_checks(facts, spec), "attention_backend")
    assert att.severity == "fail"
    assert "SM12.0" in att.message and "MLA" in att.message
    assert att.evidence["ladder"] == ["flashinfer", "triton"]
    assert att.remedy.startswith("Set attention-backend flashinfer; try in order: flashinfer → triton")


def test_mla_backends_that_do_run(tmp_path: Path) -> None:
    model = make_model(tmp_path, KIMI)
    on_h200 = facts_with("h200x2-idle.json", model)
    (att,) = by_id(
        run_checks(on_h200, dep(engine="sglang", model=str(model), args={"attention-backend": "fa3"})),
        "attention_backend",
    )
    assert att.severity == "ok"
    (att,) = by_id(
        run_checks(sm120(on_h200), dep(engine="sglang", model=str(model), args={"attention-backend": "triton"})),
        "attention_backend",
    )
    assert att.severity == "ok"


# ---------------------------------------------------------------- other checks


def test_memory_fit_shows_arithmetic_and_fails_when_it_cannot_fit(tmp_path: Path) -> None:
    model = make_model(tmp_path, KIMI)
    facts = facts_with("h200x2-idle.json", model)
    (fit,) = by_id(run_checks(facts, dep(model=str(model), args={"max-model-len": 4096})), "memory_fit")
    assert fit.severity == "ok" and "KV" in fit.message and "overhead 2.0 GiB" in fit.message
    # MLA keeps one 576-wide latent per layer: 61 x 576 x 2 bytes per token
    assert fit.evidence["kv_bytes_per_token"] == 61 * 576 * 2
    (big,) = by_id(run_checks(facts, dep(model=str(model), args={"max-model-len": 10_000_000})), "memory_fit")
    assert big.severity == "fail" and "need" in big.message


def test_gqa_kv_split_across_tp(tmp_path: Path) -> None:
    model = make_model(tmp_path, LLAMA)
    facts = facts_with("h200x2-idle.json", model)
    (tp1,) = by_id(run_checks(facts, dep(model=str(model))), "memory_fit")
    (tp2,) = by_id(run_checks(facts, dep(model=str(model), parallel={"tp": 2})), "memory_fit")
    assert tp1.evidence["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    assert tp2.evidence["kv_bytes_per_token"] == tp1.evidence["kv_bytes_per_token"] / 2


def test_parallelism_rules(tmp_path: Path) -> None:
    model = make_model(tmp_path, LLAMA)
    facts = facts_with("h200x2-idle.json", model)
    findings = by_id(run_checks(facts, dep(model=str(model), parallel={"tp": 3})), "parallelism")
    assert any("does not divide the 32 attention heads" in f.message for f in findings)
    assert any("3 GPUs, but 2 are available" in f.message for f in findings)


def test_engine_flags_unknown_and_deprecated(tmp_path: Path) -> None:
    model = make_model(tmp_path, LLAMA)
    software = {
        "packages": {"sglang": "0.5.23"},
        "engine_flags": {"sglang": [f"--flag-{i}" for i in range(200)] + ["--disable-cuda-graph", "--tp-size"]},
    }
    findings = run_checks(
        facts_with("h200x2-idle.json", model, software),
        dep(engine="sglang", model=str(model), args={"disable-cuda-graph": True, "no-such": 1}),
    )
    flags = {f.evidence.get("flag"): f for f in by_id(findings, "engine_flags")}
    assert (
        flags["--disable-cuda-graph"].severity == "warn"
        and "--cuda-graph-backend-decode" in flags["--disable-cuda-graph"].remedy
    )
    assert flags["--no-such"].severity == "fail"
    # flags are judged against the launched engine's own list only
    tf = run_checks(
        facts_with("h200x2-idle.json", model, software),
        dep(engine="transformers", model=str(model), args={"continuous-batching": True}),
    )
    assert all(f.severity == "ok" for f in by_id(tf, "engine_flags"))


def test_bad_model_directories(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    truncated = make_model(tmp_path, LLAMA, name="trunc")
    shard = next(truncated.glob("*.safetensors"))
    shard.write_bytes(shard.read_bytes()[:40])
    cases = {tmp_path / "missing": "does not exist", empty: "has no config.json", truncated: "truncated or corrupt"}
    for path, text in cases.items():
        facts = facts_with("h200x2-idle.json", path)
        findings = by_id(run_checks(facts, dep(model=str(path))), "model_files")
        assert any(f.severity == "fail" and text in f.message for f in findings), (path, findings)


def test_missing_interpreter_is_a_finding() -> None:
    sw = gather_software_facts("/nonexistent/bin/python", ENGINES.values())
    (env,) = by_id(run_checks(Facts(software=sw), dep()), "engine_env")
    assert env.severity == "fail" and "does not exist" in env.message


@pytest.mark.parametrize(
    "visible", ["0,1", "0, 1", " 1 ,0", "GPU-2f351d10-ad9d-9be2-a181-942fc6c6671f,1", "GPU-676c1136"]
)
def test_cuda_visible_devices_with_spaces_and_uuids_picks_the_same_gpus_everywhere(
    tmp_path: Path, visible: str
) -> None:
    """Both the GPU count (parallelism) and the GPUs checked for memory follow CUDA_VISIBLE_DEVICES as CUDA
    reads it: indices or UUIDs (or a UUID's prefix), spaces allowed."""
    model = make_model(tmp_path, LLAMA)
    facts = facts_with("h200x2-gpu0-40g.json", model)
    tp = 1 if visible == "GPU-676c1136" else 2
    findings = run_checks(facts, dep(model=str(model), parallel={"tp": tp}, env={"CUDA_VISIBLE_DEVICES": visible}))
    assert not any("are available" in f.message for f in by_id(findings, "parallelism")), findings
    (gpu,) = by_id(findings, "gpu_processes")
    if tp == 1:  # only GPU 1, the idle one
        assert gpu.severity == "ok" and [g["index"] for g in gpu.evidence["gpus"]] == [1]
    else:  # GPU 0 holds the stale 40 GiB process
        assert gpu.severity == "fail" and "pid 1509" in gpu.message


def test_public_check_api_reads_a_spec_file_and_recorded_facts(tmp_path: Path) -> None:
    model = make_model(tmp_path, LLAMA)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"engine": "vllm", "python": sys.executable, "model": str(model)}))
    findings = firstlight.check(spec, facts=FACTS / "h200x2-gpu0-40g.json")
    assert findings.exit_code == 2 and findings.worst == "fail"
    assert "gpu_processes" in [f.id for f in findings.failures]


def test_cli_check_with_recorded_facts_json_and_exit_codes(tmp_path: Path) -> None:
    model = make_model(tmp_path, LLAMA)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"engine": "vllm", "python": sys.executable, "model": str(model)}))
    res = run_cli("check", str(spec), "--json", "--facts", str(FACTS / "h200x2-gpu0-40g.json"), timeout=60)
    assert res.returncode == 2, res.stderr
    findings = json.loads(res.stdout)
    assert all(set(f) == {"id", "severity", "message", "evidence", "remedy", "facts"} for f in findings)
    fit = next(f for f in findings if f["id"] == "memory_fit")
    assert fit["facts"]["gpus"]["kind"] == "recorded" and fit["facts"]["model"]["kind"] == "live"
    assert any(f["id"] == "gpu_processes" and f["severity"] == "fail" for f in findings)
    bad = run_cli("check", str(tmp_path / "nope.yaml"), timeout=60)
    assert bad.returncode == 2 and "no such spec file" in bad.stderr and "Traceback" not in bad.stderr
    res = run_cli("check", str(spec), "--facts", str(tmp_path / "nope.json"), timeout=60)
    assert res.returncode == 2 and "cannot read facts" in res.stderr


def test_single_h200_recorded_by_the_typed_gatherer(tmp_path: Path) -> None:
    """h200x1-*.json: recorded on 2026-11-30 by `validation/gpu/record_facts.sh` on a 1x H200 machine with the
    typed facts (idle, then with a process holding 40 GiB on GPU 0). TP 2 cannot fit one GPU; the holder is
    named by pid and command line."""
    model = make_model(tmp_path, LLAMA)
    idle = facts_with("h200x1-idle.json", model)
    assert [g.name for g in idle.gpus.gpus] == ["NVIDIA H200"] and idle.gpus.gpus[0].sm_major == 9
    tp2 = by_id(run_checks(idle, dep(model=str(model), parallel={"tp": 2})), "parallelism")
    assert any("2 GPUs, but 1 are available" in f.message for f in tp2)
    (gpu,) = by_id(run_checks(facts_with("h200x1-gpu0-40g.json", model), dep(model=str(model))), "gpu_processes")
    assert gpu.severity == "fail" and "pid 452 (python3 -) holds 40.5 GiB on GPU 0" in gpu.message
    (ok_gpu,) = by_id(run_checks(idle, dep(model=str(model))), "gpu_processes")
    assert ok_gpu.severity == "ok"


def test_saved_facts_without_a_model_let_check_observe_the_spec_model(tmp_path: Path) -> None:
    """`facts --save` without --model writes no model section; `check --facts` then reads the spec's model
    (and the engine's software) live instead of taking an empty section for a recording."""
    from firstlight.facts import gather_facts, save_facts

    model = make_model(tmp_path, LLAMA)
    saved = tmp_path / "host.json"
    save_facts(gather_facts(sections=("gpus", "host")), saved)
    assert set(json.loads(saved.read_text())) == {"gpus", "host", "recorded"}
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"engine": "vllm", "python": sys.executable, "model": str(model)}))
    (files,) = by_id(firstlight.check(spec, facts=saved), "model_files")
    assert files.severity == "ok", files.message


def test_a_field_the_engine_does_not_run_with_is_refused() -> None:
    from firstlight.errors import SpecError

    with pytest.raises(Exception, match="vllm runs with its python, not a program"):
        dep(program="/opt/llama-server")
    assert issubclass(SpecError, ValueError)
