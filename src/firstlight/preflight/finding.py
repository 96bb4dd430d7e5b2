"""A preflight result, and the small helpers every check uses to read the spec."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from firstlight.deployment import Deployment
from firstlight.facts import Facts, Gpu

SEVERITY_RANK = {"ok": 0, "warn": 1, "fail": 2}


@dataclass
class Finding:
    id: str
    severity: str  # ok | warn | fail
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    remedy: str = ""
    # the sections of the facts the finding stands on, and where each came from (kind: live, recorded with
    # its date, host and file, or synthetic)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Findings(list[Finding]):
    """Every finding of a preflight, in check order; the worst severity decides the exit code."""

    @property
    def worst(self) -> str:
        return max((f.severity for f in self), key=SEVERITY_RANK.__getitem__, default="ok")

    @property
    def exit_code(self) -> int:
        """0 every check passed, 1 a warning, 2 a failure."""
        return SEVERITY_RANK[self.worst]

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self if f.severity == "fail"]

    def to_list(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self]


def ok(id: str, message: str, **evidence: Any) -> Finding:
    return Finding(id, "ok", message, evidence)


def warn(id: str, message: str, remedy: str, **evidence: Any) -> Finding:
    return Finding(id, "warn", message, evidence, remedy)


def fail(id: str, message: str, remedy: str, **evidence: Any) -> Finding:
    return Finding(id, "fail", message, evidence, remedy)


def version_tuple(v: str | None) -> tuple[int, ...]:
    if not v:
        return ()
    out = []
    for part in v.split("+")[0].split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def used_gpus(facts: Facts, dep: Deployment) -> list[Gpu]:
    """The GPUs the launch will use: those CUDA_VISIBLE_DEVICES in the spec shows, the first tp*pp*dp of them."""
    return available_gpus(facts, dep)[: dep.parallel.gpus_per_node]


def available_gpus(facts: Facts, dep: Deployment) -> list[Gpu]:
    return facts.gpus.visible(dep.env.get("CUDA_VISIBLE_DEVICES"))
