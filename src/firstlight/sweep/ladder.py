"""The fallback ladder: which engine setting to change, to what, when a launch fails for a reason that
setting addresses.

Each ladder key is one of the engine's flags (or an engine-neutral name for it) with the values to try in
order. A key addresses the failure categories its flag can cure: a backend flag cures a backend that does
not run here; a memory fraction, an out-of-memory or a KV cache too small; a shorter context, a KV cache
too small. No rung is ever tried for a failure it cannot cure (a missing model file, a stale GPU process,
a port in use): those end the variant with their diagnosis.

The positions carry over from one variant to the next: a backend or a memory fraction that failed for the
baseline would fail again for the variant that adds a draft model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from firstlight.errors import SpecError

if TYPE_CHECKING:
    from firstlight.deployment import Deployment
    from firstlight.engines import EngineAdapter
    from firstlight.facts import Facts

BACKEND_FAILURES = frozenset({"attention_backend_unsupported", "cuda_arch_mismatch"})
MEMORY_FAILURES = frozenset({"cuda_oom", "insufficient_kv_cache", "gpu_memory_imbalance"})
CONTEXT_FAILURES = frozenset({"insufficient_kv_cache"})
BATCH_FAILURES = frozenset({"cuda_oom", "insufficient_kv_cache"})

# engine-neutral names a plan may use for a ladder key
NEUTRAL = ("attention-backend", "memory-fraction", "context-length", "max-concurrency")


@dataclass
class Rung:
    """One ladder key: the engine flag, the values in order, the failures it cures, where it stands."""

    flag: str
    values: list[Any]
    cures: frozenset[str]
    position: int = 0

    @property
    def value(self) -> Any:
        return self.values[self.position]


@dataclass
class Ladder:
    rungs: list[Rung] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what `auto` resolved to, or why it is empty

    def current(self) -> dict[str, Any]:
        """The flags of the rung to launch with now."""
        return {r.flag: r.value for r in self.rungs}

    def climb(self, category: str | None) -> str | None:
        """Move to the next rung for a failure of this category; returns what changed, or None when no
        key cures it (or every value that would has been tried)."""
        for rung in self.rungs:
            if category in rung.cures and rung.position + 1 < len(rung.values):
                before = rung.value
                rung.position += 1
                return f"--{rung.flag} {before} → {rung.value}"
        return None

    def place(self, flags: dict[str, Any]) -> None:
        """Stand at the rung these flags were launched with (a resumed sweep starts where it came up)."""
        for rung in self.rungs:
            if rung.flag in flags and flags[rung.flag] in rung.values:
                rung.position = rung.values.index(flags[rung.flag])

    def applied(self, dep: Deployment) -> Deployment:
        """The spec with the current rung's flags set in its args."""
        if not self.rungs:
            return dep
        return dep.with_args(self.current())


def build_ladder(spec: dict[str, Any], engine: EngineAdapter, facts: Facts | None) -> Ladder:
    """The ladder of a plan for one engine; SpecError for a key firstlight cannot climb."""
    ladder = Ladder()
    for key, values in spec.items():
        flag, cures = _role(key, engine)
        if values == "auto":
            values = _auto(flag, engine, facts, ladder.notes)
            if not values:
                continue
        ladder.rungs.append(Rung(flag, list(values), cures))
    return ladder


def _role(key: str, engine: EngineAdapter) -> tuple[str, frozenset[str]]:
    name = key.lstrip("-")
    backends = engine.attention.flags if engine.attention else ()
    memory = engine.memory
    if name == "attention-backend" or name in backends:
        if not backends:
            raise SpecError(f"ladder: {engine.name} has no attention-backend flag firstlight knows")
        return backends[0], BACKEND_FAILURES
    roles = (
        (("memory-fraction", memory.fraction_flag), MEMORY_FAILURES),
        (("context-length", memory.context_flag), CONTEXT_FAILURES),
        (("max-concurrency", memory.concurrency_flag), BATCH_FAILURES),
    )
    for (neutral, flag), cures in roles:
        if flag and name in (neutral, flag):
            return flag, cures
    known = [f for (_, f), _ in roles if f] + list(backends)
    raise SpecError(
        f"ladder: {key!r} is not a setting firstlight knows how to climb for {engine.name}; "
        f"ladder keys: {', '.join(dict.fromkeys([*known, *NEUTRAL]))}"
    )


def _auto(flag: str, engine: EngineAdapter, facts: Facts | None, notes: list[str]) -> list[Any]:
    """`auto` for the backend: check's ladder for this GPU architecture and the model's attention kind."""
    backends = engine.attention
    gpus = facts.gpus.gpus if facts is not None and facts.gpus is not None else []
    major = gpus[0].sm_major if gpus else None
    if backends is None or major is None:
        notes.append(f"{flag}: auto, but no GPU here: the engine picks its own backend")
        return []
    kind = facts.model.config.attention if facts and facts.model and facts.model.config else "MHA"
    ladder = backends.ladder(major, kind)
    notes.append(f"{flag}: auto → {' → '.join(ladder)} (SM{major}, {kind} attention)")
    return ladder
