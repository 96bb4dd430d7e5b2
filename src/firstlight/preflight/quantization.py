"""The checkpoint's quantization against what the engine's environment knows.

compressed-tensors formats by release (reference/engine-anchors.md §2): a checkpoint saved in a
format newer than the installed release fails at load with an unknown enum value.
"""

from __future__ import annotations

from firstlight.deployment import Deployment
from firstlight.engines import EngineAdapter
from firstlight.facts import Facts
from firstlight.preflight.finding import Finding, fail, ok, version_tuple, warn

# compressed-tensors: the first release whose CompressionFormat enum has each value (git tags).
COMPRESSION_FORMAT_SINCE: dict[str, str] = {
    "dense": "0.4.0",
    "sparse-bitmask": "0.4.0",
    "int-quantized": "0.4.0",
    "pack-quantized": "0.4.0",
    "marlin-24": "0.4.0",
    "float-quantized": "0.5.0",
    "naive-quantized": "0.5.0",
    "sparse-24-bitmask": "0.9.0",
    "nvfp4-pack-quantized": "0.10.0",
    "mixed-precision": "0.11.0",
    "mxfp4-pack-quantized": "0.13.0",
    "mxfp8-quantized": "0.15.0",
    "mxfp6-pack-quantized": "0.20.1",
}

# Quantization methods (config.json quant_method) the engines know; a method outside the list is a
# warning (the list grows with releases), not a failure.
KNOWN_QUANT_METHODS = {
    "compressed-tensors",
    "fp8",
    "awq",
    "awq_marlin",
    "gptq",
    "gptq_marlin",
    "bitsandbytes",
    "gguf",
    "modelopt",
    "modelopt_fp4",
    "mxfp4",
    "fbgemm_fp8",
    "w8a8_int8",
    "w8a8_fp8",
    "marlin",
    "quark",
    "petit_nvfp4",
    "torchao",
    "experts_int8",
    "moe_wna16",
    "awq_triton",
    "qoq",
    "blockwise_int8",
    "auto-round",
    "inc",
    "bitnet",
}


def check_quantization(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    config = facts.model.config if facts.model else None
    quant = config.quantization if config else None
    if quant is None:
        return [ok("quantization", "the checkpoint is not quantized")]
    out = []
    if quant.method == "compressed-tensors":
        out = [_compressed_tensors_format(facts, fmt, engine) for fmt in quant.formats]
        out = [f for f in out if f is not None]
    elif quant.method and quant.method not in KNOWN_QUANT_METHODS:
        out.append(
            warn(
                "quantization",
                f"quantization method {quant.method} is not one firstlight knows engines support",
                f"Check that {engine.name} supports {quant.method} (--quantization).",
                method=quant.method,
            )
        )
    if not out:
        out.append(
            ok(
                "quantization",
                f"{quant.method} {', '.join(quant.formats or [quant.algorithm or ''])} is supported".replace("  ", " "),
                **quant.model_dump(),
            )
        )
    return out


def _compressed_tensors_format(facts: Facts, fmt: str, engine: EngineAdapter) -> Finding | None:
    sw = facts.software
    installed = sw.packages.get("compressed-tensors") if sw else None
    formats = set(sw.compression_formats) if sw else set()
    since = COMPRESSION_FORMAT_SINCE.get(fmt)
    if not installed:
        return fail(
            "quantization",
            f"the checkpoint uses compressed-tensors format {fmt}, but "
            "compressed-tensors is not installed in the engine's environment",
            f"pip install 'compressed-tensors>={since or 'latest'}' into the engine's environment.",
            format=fmt,
        )
    # the installed release's own enum, where it could be read; else the table of first releases
    known = fmt in formats if formats else since is not None and version_tuple(installed) >= version_tuple(since)
    if known:
        return None
    need = f">= {since}" if since else "a newer release"
    return fail(
        "quantization",
        f"compressed-tensors {installed} does not know the checkpoint's "
        f"format {fmt} (first in {since or 'a later release'})",
        f"Upgrade compressed-tensors to {need} in the engine's environment (within what "
        f"{engine.name} pins), e.g. pip install 'compressed-tensors{need.replace(' ', '')}'.",
        format=fmt,
        installed=installed,
        first_release=since,
    )
