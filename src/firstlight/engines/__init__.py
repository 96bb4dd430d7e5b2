"""Engine adapters by name."""

from __future__ import annotations

from firstlight.engines.base import EngineAdapter
from firstlight.engines.offline import LLAMA_CPP, TGI, TRTLLM
from firstlight.engines.sglang import SGLANG
from firstlight.engines.transformers import TRANSFORMERS
from firstlight.engines.vllm import VLLM

ENGINES: dict[str, EngineAdapter] = {e.name: e for e in (VLLM, SGLANG, TRANSFORMERS, LLAMA_CPP, TGI, TRTLLM)}


def get_engine(name: str) -> EngineAdapter:
    try:
        return ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r}; known: {', '.join(ENGINES)}") from None


__all__ = ["ENGINES", "EngineAdapter", "get_engine"]
