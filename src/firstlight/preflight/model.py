"""The model directory (or GGUF file): it exists, has a config, readable weights and a tokenizer."""

from __future__ import annotations

from firstlight.deployment import Deployment
from firstlight.engines import EngineAdapter
from firstlight.facts import Facts, ModelFacts
from firstlight.facts.model import INDEX_FILE
from firstlight.preflight.finding import Finding, fail, ok, warn


def check_model_files(facts: Facts, dep: Deployment, engine: EngineAdapter) -> list[Finding]:
    model = facts.model or ModelFacts(path=str(dep.model), exists=False)
    path = model.path
    if not model.exists:
        return [
            fail(
                "model_files",
                f"the model directory {path} does not exist",
                "Fix `model:` in the spec (relative paths are relative to the spec file), or mount the "
                "directory where the engine runs.",
                path=path,
            )
        ]
    if model.gguf:
        return [_gguf(model)]
    out = []
    if not model.config_present:
        out.append(
            fail(
                "model_files",
                f"{path} has no config.json",
                "Point `model:` at the directory that holds "
                "config.json and the weights (a Hugging Face snapshot's directory).",
                path=path,
            )
        )
    elif model.config_error:
        out.append(fail("model_files", model.config_error, "Restore config.json from the source.", path=path))
    corrupt = model.weights.corrupt_shards
    if corrupt:
        errors = {s.file: s.error for s in model.shards if s.error is not None}
        out.append(
            fail(
                "model_files",
                f"{len(corrupt)} safetensors shard(s) have a truncated or corrupt header: {', '.join(corrupt[:5])}",
                "Download or copy these shards again and compare their sizes with the source.",
                errors=errors,
            )
        )
    index = model.index
    if model.missing_shards and index is not None:
        have = len(index.shards) - len(model.missing_shards)
        sized = f"{index.total_size / 1024**3:.1f} GiB by the index" if index.total_size else "size unknown"
        shown = ", ".join(model.missing_shards[:3]) + (" …" if len(model.missing_shards) > 3 else "")
        out.append(
            (warn if have == 0 else fail)(
                "model_files",
                f"{len(model.missing_shards)} of the {len(index.shards)} shard(s) in {INDEX_FILE} are not here "
                f"({shown}); weights {sized}" + ("; enough to plan a launch, not to run one" if have == 0 else ""),
                "Download every shard the index lists into the model directory before launching.",
                missing=model.missing_shards[:20],
                total_size=index.total_size,
            )
        )
    elif not model.shards and not model.other_weights:
        planning = facts.source("gpus").kind != "live"  # checked for other GPUs than these: plan, not launch
        sized = (
            f"; sized from config.json: {model.weights.params / 1e9:.1f} B parameters, "
            f"{model.weights.bytes / 1024**3:.1f} GiB (an estimate)"
            if model.weights.estimated
            else ""
        )
        out.append(
            (warn if planning and sized else fail)(
                "model_files",
                f"{path} holds no weights (*.safetensors, *.bin, *.gguf){sized}",
                "Download the weights into the model directory.",
                path=path,
            )
        )
    if not model.tokenizer_files:
        out.append(
            warn(
                "model_files",
                f"{path} has no tokenizer files",
                "Copy tokenizer.json / tokenizer_config.json next to the weights, or pass --tokenizer.",
                path=path,
            )
        )
    if not out:
        w = model.weights
        out.append(
            ok(
                "model_files",
                f"config.json, {len(model.shards)} shard(s) with "
                f"{w.params / 1e9:.3g} B parameters ({w.bytes / 1024**3:.2f} GiB), tokenizer",
                params_by_dtype=w.params_by_dtype,
                bytes_by_dtype=w.bytes_by_dtype,
            )
        )
    return out


def _gguf(model: ModelFacts) -> Finding:
    if model.config_error:
        return fail(
            "model_files",
            model.config_error,
            "Point `model:` at a .gguf file (llama.cpp's convert_hf_to_gguf.py converts a Hugging Face checkpoint).",
            path=model.path,
        )
    return ok("model_files", f"GGUF file, {model.weights.bytes / 1024**3:.2f} GiB", path=model.path)
