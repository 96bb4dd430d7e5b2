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


def arg(dep: Deployment, name: str) -> Any:
    """The value of engine flag `name` in the spec's args (mapping or list form), or None."""
    if isinstance(dep.args, dict):
        for key, value in dep.args.items():
            if key.lstrip("-") == name:
                return value
        return None
    args = list(dep.args)
    for i, a in enumerate(args):
        if a == f"--{name}":
            return args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return None


def arg_names(dep: Deployment) -> list[str]:
    if isinstance(dep.args, dict):
        return [k if k.startswith("-") else f"--{k}" for k in dep.args]
    return [a.split("=", 1)[0] for a in dep.args if a.startswith("--")]


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
