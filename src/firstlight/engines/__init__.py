"""The engine adapters, found by module: adding an engine is adding one module that defines `ADAPTERS`
(a module without it, a helper, is skipped).

The order is the registry's (launchable engines first, in the order users meet them); the name is the
one a spec's `engine:` field and `diagnose --engine` take.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache

from firstlight.engines.base import EngineAdapter, MultiNode
from firstlight.logs import GENERIC_CLOCK, RELAY_PREFIX

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


@cache
def _any_line_prefix() -> re.Pattern[str]:
    # Indentation, box-drawing pipes and torch.distributed's rank tag come before any engine's own prefix, and
    # what relayed the log (syslog, kubectl, docker compose: logs.RELAY_PREFIX) before them; the relay's last, so
    # that an engine's own prefix that begins with a clock (TGI's) is read whole
    prefixes = [r"[\s|]+", r"\[rank\d+\]:\s*"]
    prefixes += [a.line_prefix.pattern for a in ENGINES.values() if a.line_prefix is not None]
    prefixes.append(RELAY_PREFIX)
    return re.compile("^(?:" + "|".join(f"(?:{p})" for p in prefixes) + ")")


def strip_line_prefix(line: str) -> str:
    """The message of a log line, without the prefixes engines put before it (rank, pid, level, time,
    source file), whichever engine wrote it."""
    prefix = _any_line_prefix()
    previous = None
    while previous != line:
        previous, line = line, prefix.sub("", line)
    return line


@cache
def any_clock() -> tuple[re.Pattern[str], ...]:
    """Every engine's clock, then python logging's (for a log whose engine is not known)."""
    return (*(a.log_time for a in ENGINES.values() if a.log_time is not None), GENERIC_CLOCK)


def launchable() -> list[str]:
    """The engines firstlight can start, by name."""
    return [name for name, adapter in ENGINES.items() if adapter.launchable]


__all__ = ["ENGINES", "EngineAdapter", "MultiNode", "any_clock", "get_engine", "launchable", "strip_line_prefix"]
