"""Where an exception was raised, and what that says of its cause: a traceback's frames name the file and the
function; an engine's argument and config validation, its model registry, its attention backends and quantization
layers, a speculative-decoding draft's code each make a generic exception (a ValueError, a bare AssertionError)
about themselves. Used by frames.TracebackPlace, which reads the frames."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

import yaml

from firstlight.diagnosis.signatures import EXCEPTION_LINE, Signature, any_of
from firstlight.engines import ENGINES

# A traceback frame as Python prints it; the last one before an exception line is where it was raised.
FRAME_LINE = re.compile(r'File "(?P<path>[^"]+)", line \d+(?:, in (?P<function>[\w<>]+))?')
# A function that checks settings, wherever it lives (vLLM's platforms' `check_and_update_config`, an engine's
# `_verify_args`, `validate_args`, SGLang's `_validate_parallel`): what it raises is about the settings it was given.
# Any function named to verify or validate; of those named to check, only a check of the config or the arguments
# (a `check_...` function as often checks the machine: its memory, its GPUs).
SETTINGS_CHECK = re.compile(r"_*(?:(?:verify|validate)(?:_\w+)?|check\w*_(?:config|args|arguments))")

# A generic exception raised where an engine validates its arguments or configuration is about the settings,
# whatever its type (ValueError, AssertionError, a pydantic ValidationError).
RAISED_IN_CONFIG = Signature(
    "raised_in_config_validation",
    "invalid_config",
    0.6,
    EXCEPTION_LINE,
    "The engine's own check of its arguments or the model's configuration rejected the settings: the line says "
    "which. Change the flag or the config value it names.",
)


# A generic exception raised where an engine looks a model up in its registry names a model it does not know.
RAISED_IN_REGISTRY = Signature(
    "raised_in_model_registry",
    "model_arch_unsupported",
    0.75,
    EXCEPTION_LINE,
    "The engine (or transformers) looked the model's type or architecture up in its registry and did not find "
    "it: this version does not know the model. Upgrade the engine (and transformers) to a version that supports "
    "it, or check model_type and architectures in the model's config.json.",
)

# A KeyError raised in a model's weight loader, or in the engine's model loader that maps a saved state onto the
# model, is a checkpoint tensor the engine's code for the model has no parameter for (`params_dict[name]`,
# `state_dict[key]`): a variant of the architecture it does not implement (a vision tower, another layout).
WEIGHT_LOADER = re.compile(r"/models/\w+\.py in (?:load_weights|_load_module|load_\w*weights?)$")
KEYED_LOADER = re.compile(f"{WEIGHT_LOADER.pattern}|/model_loader/\\w+\\.py in (?:load_model|_?load_weights)$")
RAISED_IN_WEIGHT_LOADER = Signature(
    "raised_in_weight_loader",
    "model_arch_unsupported",
    0.7,
    EXCEPTION_LINE,
    "The checkpoint holds a tensor that this engine's code for the model has no parameter for: a variant of the "
    "architecture this version does not implement (a vision tower, a draft head) or a checkpoint in another layout. "
    "Check the architectures in config.json against the engine's supported models, upgrade the engine, or use a "
    "checkpoint in the model's usual layout.",
)

# A tensor shape mismatch raised under a model's weight loader (`assert param_data.shape == loaded_weight.shape`,
# `The size of tensor a (3584) must match ...`): a checkpoint tensor does not fit the parameter the engine's code
# made for it. With a quantization method in effect (settings.StatedSettings), the method's layout of this model's
# layers (packed, split or scaled tensors) is what differs, as it is for a KeyError there; without one, the
# architecture's variant.
WEIGHT_SHAPE = Signature(
    "weight_shape_mismatch",
    "model_arch_unsupported",
    0.6,
    EXCEPTION_LINE,
    "A checkpoint tensor's shape does not fit the parameter this engine's code for the model made for it: a variant "
    "of the architecture this version does not implement (other head counts, a classifier or vision head), or a "
    "config.json that does not describe the checkpoint. Check the architecture and sizes in config.json against the "
    "weights, or use an engine version that implements this variant.",
)
QUANTIZED_WEIGHTS = Signature(
    "quantized_weights_unfit",
    "unsupported_quantization_format",
    0.6,
    EXCEPTION_LINE,
    "A quantized checkpoint's tensor is not one the engine's quantization method lays out for this model's layer "
    "(a tensor it made no parameter for, or one of another shape): the method (or its loader) does not support "
    "this model or this checkpoint's packing. Use a checkpoint quantized in a format this engine supports for the "
    "model, the unquantized model, or an engine version that supports the combination.",
)

# A generic exception raised while the engine runs a model through its Transformers fallback (vLLM's
# model_executor/models/transformers/, SGLang's models/transformers.py: the engine has no code of its own for the
# architecture) is the fallback failing on a model it cannot drive: a forward signature, a layer or a config field
# it needs and this architecture does not have (an encoder-decoder, a model without position ids).
FALLBACK_MODELS = re.compile(r"/models/transformers(?:/\w+)?\.py in ")
RAISED_IN_FALLBACK = Signature(
    "raised_in_transformers_fallback",
    "model_arch_unsupported",
    0.6,
    EXCEPTION_LINE,
    "The engine has no implementation of this architecture and its Transformers fallback could not run the model "
    "where it was raised (an encoder-decoder, a forward without the arguments it passes, a layer type it does not "
    "know). Use an engine version that implements the architecture natively, or another engine.",
)

# A tensor shape mismatch raised while a speculative-decoding draft model loads or runs: the draft does not fit
# the target (a draft trained for another target model, of another hidden size or vocabulary, or for another
# method: EAGLE-3's fused input is three hidden states wide, EAGLE's one). Elsewhere a shape mismatch is placed like
# any other exception.
DRAFT_SOURCES = re.compile(r"/speculative/|/spec_decode/|eagle\w*\.py$|medusa\w*\.py$")  # the innermost frame
DRAFT_MODELS = re.compile(r"/models/\w*(?:eagle|medusa)\w*\.py$")  # any frame: a draft model's own code
SHAPE_MISMATCH = re.compile(
    r"shapes cannot be multiplied|must match the size of tensor|Attempted to load weight|size mismatch for"
    r"|is invalid for input of size|Expected size for first two dimensions|\.shape == \w+\.shape"
    r"|vocab_sizes?\W.{0,40}==|exceeds dimension size|\.shape(?:\[[^\]]*\])?\s*[=!]=|\.shape\[[^\]]*\]=\d"
)
RAISED_IN_DRAFT = Signature(
    "raised_in_draft_model",
    "invalid_config",
    0.6,
    SHAPE_MISMATCH,
    "A tensor did not fit (its shape, or a name the draft's code has no parameter for) while the "
    "speculative-decoding draft model loaded or ran: the draft does not fit the target or the method. Give a draft "
    "trained for this target model (same hidden size and vocabulary) and the method it was trained for "
    "(--speculative-algorithm / speculative_config method: EAGLE vs EAGLE3).",
)


# KV-cache block sizes no attention backend takes (vllm_kv_block_size_backend) when the user set the block size
# (settings.StatedSettings): the setting, not the backend, is what to change.
BLOCK_SIZE_NOT_TAKEN = Signature(
    "block_size_not_taken",
    "invalid_config",
    0.85,
    re.compile(r"No common block size for (?P<size>\d+) \("),
    "The KV-cache block size the launch asked for (--block-size / block_size) is not one the attention backend "
    "takes: the line lists the sizes each backend takes. Drop the override, or give one of those sizes.",
)


# A keyword the engine's own argument class does not take (`EngineArgs.__init__() got an unexpected keyword argument`)
# reads as a call with another release's arguments (call_signature_mismatch), as it is when another package builds
# them (trl, lighteval, a framework's rollout worker); when the user's script called the engine from its top level
# (frames.py), the keyword is the user's own.
ENGINE_KEYWORD_UNKNOWN = Signature(
    "engine_argument_keyword_unknown",
    "invalid_config",
    0.8,
    re.compile(r"(?:Async)?(?:EngineArgs|ServerArgs)\.__init__\(\) got an unexpected keyword argument '(?P<kw>\w+)'"),
    "{kw} is not an engine argument of this version: a keyword given to LLM(...) / sgl.Engine(...) that the engine "
    "does not take. Check the name against the installed version's engine arguments (they are renamed between "
    "releases); a sampling setting such as max_tokens belongs in the request's SamplingParams.",
)


# A generic exception raised in an engine's attention backends (or the attention kernel libraries they call) is
# most often the backend refusing this model's shape, head count or dtype; one raised in its quantization layers,
# the method refusing the checkpoint. Broad: weighted under BROAD_WEIGHT, so their confidence says so. The module
# paths are the engines' own layouts (vLLM, SGLang, TGI) and the kernel libraries'; on real logs whose cause no
# signature named, these frames were right 5 times in 6 and the distributed package's 0 in 2 (left out).
ATTENTION_SOURCES = re.compile(
    r"/(?:v1/)?attention/|/layers/attention/|_attention\.py$|/aiter/mla\.py|/\w*flash_attn\w*/|/flashinfer/(?!jit/)"
)
# vLLM's base platform: what it raises (a bare NotImplementedError from get_device_capability) is vLLM having found no
# accelerator platform, so that it runs on the base class, which implements nothing.
PLATFORM_SOURCES = re.compile(r"/vllm/platforms/interface\.py$")
QUANTIZATION_SOURCES = re.compile(r"/layers/quantization/|/quantization/|/utils/(?:gptq|awq)/|/compressed_tensors/")

RAISED_IN_ATTENTION = Signature(
    "raised_in_attention_backend",
    "attention_backend_unsupported",
    0.55,
    EXCEPTION_LINE,
    "The attention backend (or its kernel library) refused the model or the settings where it was raised: "
    "a head count, head size, dtype or feature it does not support. Choose another backend "
    "(--attention-backend), or settings it supports (the line says which).",
)

RAISED_IN_BASE_PLATFORM = Signature(
    "raised_in_base_platform",
    "hardware_unsupported",
    0.6,
    EXCEPTION_LINE,
    "vLLM detected no accelerator platform (no GPU visible to it, or the driver's NVML library not found in the "
    "container) and fell back to its base platform, which implements nothing. Check that the GPU is visible where "
    "vLLM runs (nvidia-smi in the container: --gpus, the device plugin, the driver's libraries), or install the "
    "vLLM build for this hardware.",
)

# An IndexError raised by a line that takes the first of a directory's listing or a glob's matches
# (`list(Path(d).glob('*.gguf'))[0]`, `os.listdir(path)[0]`): nothing matched, so the file a loader looks for (a
# model's weights, its tokenizer) is not where it looks.
FIRST_OF_LISTING = re.compile(r"\b(?:i?glob|rglob|listdir|scandir)\(.*\)\s*\[\s*-?\d\s*\]")
NOTHING_LISTED = Signature(
    "first_of_an_empty_listing",
    "missing_model_files",
    0.6,
    EXCEPTION_LINE,
    "The code took the first file a directory listing or a glob found, and there was none: the files it looks for "
    "(the model's weights in the format this loader reads, its tokenizer) are not in the folder. Check the path and "
    "what the folder holds (a .gguf where the loader globs for one, safetensors where it wants them).",
)

RAISED_IN_QUANTIZATION = Signature(
    "raised_in_quantization",
    "unsupported_quantization_format",
    0.55,
    EXCEPTION_LINE,
    "The quantization layer for this checkpoint's method failed where it was raised: the method, its format or "
    "this model's shapes are not supported by this engine version. Use a checkpoint in a supported format, or "
    "an engine version that supports this one.",
)


# A generic exception whose message names one of the engine's own arguments (`AssertionError: multi-layer EAGLE requires
# speculative_num_draft_tokens == speculative_num_steps + 1`, `ValueError: --device-ids must not contain duplicates`)
# is about the settings, where no traceback frame says where it was raised. Broad: weighted under BROAD_WEIGHT. Of the
# 827 messages raised (ValueError, AssertionError, NotImplementedError, RuntimeError, TypeError) in vLLM 0.32's config
# classes and arg_utils and SGLang 0.5.23's server_args and arg_groups, 451 named no cause by their words alone, as a
# log shows them without their traceback; this places 239 of them.
NAMES_AN_ARGUMENT = Signature(
    "names_an_engine_argument",
    "invalid_config",
    0.6,
    EXCEPTION_LINE,
    "The engine rejected a setting, and the message names the argument: change that flag (or the value it was given), "
    "as the rest of the line says.",
)
# the exceptions argument checks raise; an error of another kind that names an argument is about something else
_SETTING_EXCEPTIONS = frozenset(
    ("ValueError", "AssertionError", "NotImplementedError", "TypeError", "RuntimeError", "ValidationError", "Exception")
)
_ARGUMENT_WORD = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)+)|\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")
# the parallel sizes as operators and the engines' messages abbreviate them (`decrease DP/TP/PP`, `TP=16 exceeds`)
_PARALLEL_SIZE = re.compile(r"(?<![\w.-])(TP|PP|DP|EP)(?![\w.-])")
_PARALLEL_SIZES = {
    "TP": "tensor_parallel_size",
    "PP": "pipeline_parallel_size",
    "DP": "data_parallel_size",
    "EP": "ep_size",
}


@cache
def engine_arguments() -> frozenset[str]:
    """The engines' argument names of two words or more (arguments.yaml, read from their sources)."""
    text = resources.files("firstlight.diagnosis").joinpath("arguments.yaml").read_text()
    return frozenset(name for engine in yaml.safe_load(text).values() for name in engine["names"])


def argument_named(message: str, exception: str = "AssertionError") -> str | None:
    """The first engine argument (its `--flag` or its field name) that the message of a generic exception of this
    type names, if any; a bare AssertionError's message is the `assert` statement it failed on."""
    if exception.rsplit(".", 1)[-1] not in _SETTING_EXCEPTIONS:
        return None
    names = engine_arguments()
    for m in _ARGUMENT_WORD.finditer(message):
        word = m.group(2) or m.group(1).replace("-", "_")
        if word in names:
            return word
    size = _PARALLEL_SIZE.search(message)
    return _PARALLEL_SIZES[size.group(1)] if size else None


@cache
def registry_sources() -> re.Pattern[str] | None:
    """Every engine's model-registry source files, in one pattern."""
    return any_of([p for a in ENGINES.values() for p in a.registry_sources])


@cache
def raised_in_places() -> tuple[tuple[re.Pattern[str], Signature], ...]:
    """Where a generic exception was raised (its last frame's file), and what that names, in this order."""
    places = (
        (registry_sources(), RAISED_IN_REGISTRY),
        (config_sources(), RAISED_IN_CONFIG),
        (PLATFORM_SOURCES, RAISED_IN_BASE_PLATFORM),
        (ATTENTION_SOURCES, RAISED_IN_ATTENTION),
        (QUANTIZATION_SOURCES, RAISED_IN_QUANTIZATION),
    )
    return tuple((rx, sig) for rx, sig in places if rx is not None)


@cache
def config_sources() -> re.Pattern[str] | None:
    """Every engine's argument- and config-validation source files, and uvicorn's (the HTTP server of every Python
    engine: its SSL files, host and app settings), in one pattern."""
    return any_of([p for a in ENGINES.values() for p in a.config_sources] + [r"uvicorn/config\.py"])
