"""Mixture-of-experts launch-killers: a fused-MoE kernel with no tuned configuration for this GPU, and an
expert-parallel backend whose library is not installed.

vLLM and SGLang run unquantized, FP8 and INT8/INT4 experts through a Triton fused-MoE kernel whose tile sizes
come from a JSON file per (experts per rank, intermediate size per rank, GPU, dtype, block shape) that the
release ships. Without one they log "Using default MoE kernel config" only once the model is loaded, and the
default tiles are much slower. The file names are the engines' own (`get_config_file_name` in vLLM's
`fused_moe.py` and SGLang's `fused_moe_triton_config.py`): `E=384,N=256,device_name=NVIDIA_H200,
dtype=fp8_w8a8,block_shape=[128, 128].json`.
"""

from __future__ import annotations

from firstlight.deployment import Deployment
from firstlight.engines import EngineAdapter
from firstlight.facts import Facts, ModelConfig
from firstlight.preflight.finding import Finding, fail, ok, used_gpus, warn

# Quantization methods whose experts do not go through the Triton fused-MoE kernel (CUTLASS, Marlin,
# FlashInfer or a backend of their own): no tuned Triton configuration applies to them.
OTHER_KERNELS = ("nvfp4", "mxfp4", "modelopt", "awq_marlin", "gptq_marlin", "bitsandbytes", "gguf", "w4afp8")


def check_moe(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    return [*_tuned_kernel(facts, dep, engine), *_libraries(facts, dep, engine)]


def moe_config_name(config: ModelConfig, dep: Deployment, device: str) -> str | None:
    """The file the engine will look for, without `.json`; None when the experts do not run the Triton kernel."""
    dtype = triton_dtype(config)
    if dtype is None or not config.experts or not config.moe_intermediate_size:
        return None
    par = dep.parallel
    experts = config.experts // par.ep if par.ep > 1 else config.experts
    moe_tp = max(par.tp // par.ep, 1) if par.ep > 1 else par.tp  # the experts' own tensor parallelism
    name = f"E={experts},N={config.moe_intermediate_size // moe_tp},device_name={device.replace(' ', '_')}"
    if dtype:
        name += f",dtype={dtype}"
    block = config.quantization.weight_block_size if config.quantization else None
    if block and dtype:
        name += f",block_shape={list(block)}"
    return name


def triton_dtype(config: ModelConfig) -> str | None:
    """The dtype part of the file name: "" for 16-bit experts, None when another kernel runs them."""
    quant = config.quantization
    if quant is None or not quant.method:
        return ""
    described = " ".join([quant.method, quant.algorithm or "", *quant.formats]).lower()
    if any(k in described for k in OTHER_KERNELS):
        return None
    if "fp8" in described or "float-quantized" in described:
        return "fp8_w8a8"
    if quant.bits == 8:
        return "int8_w8a16"
    if quant.bits == 4:
        return "int4_w4a16"
    return None


def _same(a: str, b: str) -> bool:
    """vLLM writes block shapes as [128,128], SGLang as [128, 128]."""
    return a.replace(" ", "") == b.replace(" ", "")


def _tuned_kernel(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    config = facts.model.config if facts.model else None
    if config is None or not config.experts or not engine.software.moe_configs:
        return []
    gpus = used_gpus(facts, dep)
    if not gpus:
        return [ok("moe_kernels", "no GPU: the tuned fused-MoE configurations are not checked")]
    want = moe_config_name(config, dep, gpus[0].name)
    if want is None:
        method = config.quantization.method if config.quantization else "?"
        return [ok("moe_kernels", f"{method} experts run another kernel than Triton's fused MoE: nothing to tune")]
    shipped = [
        f.removesuffix(".json") for f in (facts.software.moe_configs.get(engine.name, []) if facts.software else [])
    ]
    if not shipped:
        return [ok("moe_kernels", f"the tuned fused-MoE configurations of {engine.name} could not be read")]
    if any(_same(f, want) for f in shipped):
        return [ok("moe_kernels", f"{engine.name} ships a tuned fused-MoE configuration {want}.json", file=want)]
    shape = want.split(",device_name=")[0]
    elsewhere = sorted({f.split("device_name=")[1].split(",")[0] for f in shipped if f.startswith(shape + ",")})
    others = f"; it has this shape only for {', '.join(elsewhere)}" if elsewhere else ""
    return [
        warn(
            "moe_kernels",
            f"{engine.name} ships no tuned fused-MoE configuration {want}.json{others}: it will log "
            '"Using default MoE kernel config" after loading and run the default tiles, much slower',
            f"Tune one on this GPU with {engine.software.moe_tuner} and put it in the folder "
            f"{engine.software.moe_config_env} names, or choose a TP/EP layout whose shape is shipped.",
            file=want,
            shipped_for_this_shape=elsewhere,
        )
    ]


def _libraries(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    packages = facts.software.packages if facts.software else {}
    out = []
    for need in engine.software.needs_library:
        value = dep.arg(need.flag)
        asked = value is True if need.value is None else need.value in str(value or "")
        if not asked or not packages:
            continue
        found = next((f"{n} {packages[n]}" for n in need.distributions if packages.get(n)), None)
        setting = f"--{need.flag}" + (f" {value}" if value is not True else "")
        if found:
            out.append(ok("moe_libraries", f"{setting}: {found} is installed"))
        else:
            out.append(
                fail(
                    "moe_libraries",
                    f"{setting} needs {need.what}, and none of {', '.join(need.distributions)} is installed for "
                    f"{facts.software.interpreter if facts.software else 'the engine'}",
                    f"Install {need.what} into the engine's environment (it builds against the CUDA and NVSHMEM "
                    f"there), or choose another backend for --{need.flag}.",
                    distributions=list(need.distributions),
                )
            )
    return out
