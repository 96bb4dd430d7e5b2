"""The engine adapters, found by module: adding an engine is adding one module that defines `ADAPTERS`
(a module without it, a helper, is skipped).

The order is the registry's (launchable engines first, in the order users meet them); the name is the
one a spec's `engine:` field and `diagnose --engine` take.
"""

from __future__ import annotations

import importlib
import pkgutil

from firstlight.engines.base import EngineAdapter, MultiNode

# Where several engines' fingerprints tie, the earlier wins; modules not listed follow alphabetically.
PREFERRED_ORDER = ("vllm", "sglang", "transformers")


def _discover() -> dict[str, EngineAdapter]:
    modules = [m.name for m in pkgutil.iter_modules(__path__) if m.name != "base"]
    modules.sort(key=lambda m: (PREFERRED_ORDER.index(m) if m in PREFERRED_ORDER else len(PREFERRED_ORDER), m))
    found: dict[str, EngineAdapter] = {}
    for name in modules:
        for adapter in getattr(importlib.import_module(f"{__name__}.{name}"), "ADAPTERS", ()):
            found[adapter.name] = adapter
    return found


ENGINES: dict[str, EngineAdapter] = _discover()


def get_engine(name: str) -> EngineAdapter:
    try:
        return ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r}; known: {', '.join(ENGINES)}") from None


def launchable() -> list[str]:
    """The engines firstlight can start, by name."""
    return [name for name, adapter in ENGINES.items() if adapter.launchable]


__all__ = ["ENGINES", "EngineAdapter", "MultiNode", "get_engine", "launchable"]
