"""What a log states of the launch's own settings before it fails: the quantization method in effect, and a KV-cache
block size the user asked for.

A configuration dump is never a cause (levels.is_settings_dump), but it says how the engine was asked to load the
model, and that changes what a later, generic failure means: a weight whose shape does not fit is a quantized
checkpoint the method cannot lay out when a method is in effect, and a model variant the code does not implement
when none is."""

from __future__ import annotations

import re

# vLLM's argument Namespace and its engine config (`quantization='awq'`, `quantization=fp8`), SGLang's ServerArgs,
# the command line (`--quantization gptq`), SGLang's early loader (`quant_config: AWQConfig(...)`), vLLM's
# bitsandbytes loader (`Loading weights with BitsAndBytes quantization`) and its load format.
_STATED = re.compile(
    r"""\bquantization['"]?\s*[=:]\s*['"]?(?P<arg>[A-Za-z][\w.-]*)"""
    r"|--quantization[= ]+(?P<flag>[A-Za-z][\w.-]*)"
    r"|\bquant_config: (?P<config>\w+?)Config\b"
    r"|Loading weights with (?P<loader>\w+) quantization"
    r"""|\bload_format['"]?\s*[=:]\s*['"]?(?:LoadFormat\.)?(?P<format>bitsandbytes)""",
    re.IGNORECASE,
)
# values that say no quantization (or only the unquantized dtype)
_NONE = frozenset(("none", "null", "auto", "bf16", "fp16", "float16", "bfloat16", "float32", "fp32"))


# A block size the user set: vLLM's `non-default args: {..., 'block_size': 7}` (the arguments the user gave, not the
# engine's defaults) or the command line's --block-size.
_BLOCK_SIZE = re.compile(r"non-default args: .*'block_size': (?P<arg>\d+)|--block-size[= ]+(?P<flag>\d+)")


class StatedSettings:
    """Feed every line in order; `quantization` then names the method the log said is in effect, if any, and
    `block_size` the KV-cache block size the user asked for."""

    def __init__(self) -> None:
        self.quantization: str | None = None
        self.block_size: str | None = None

    def read(self, line: str) -> None:
        if "block" in line and (m := _BLOCK_SIZE.search(line)) is not None:
            self.block_size = m["arg"] or m["flag"]
        if "quant" not in line and "load_format" not in line and "LoadFormat" not in line:
            return  # the substring test spares the regex on nearly every line
        for m in _STATED.finditer(line):
            method = next(v for v in m.groups() if v is not None)
            if method.lower() not in _NONE:
                self.quantization = method
                return
