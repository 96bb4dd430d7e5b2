"""Preflight: every launch-killer found before the launch, each with its evidence and remedy."""

from __future__ import annotations

from typing import Any

from firstlight.deployment import Deployment
from firstlight.facts import SECTIONS, gather_facts
from firstlight.preflight.checks import run_checks
from firstlight.preflight.finding import SEVERITY_RANK, Finding


def facts_for(dep: Deployment, recorded: dict[str, Any] | None = None) -> dict[str, Any]:
    """Facts for a spec: the recorded sections where given, observed now for the rest."""
    recorded = recorded or {}
    missing = [s for s in SECTIONS if s not in recorded]
    if not missing:
        return recorded
    live = gather_facts(
        dep.python if "software" in missing else None,
        dep.model if "model" in missing else None,
        dep.host,
        dep.port if "host" in missing else None,
    )
    return {**{k: v for k, v in live.items() if k in missing or k == "recorded"}, **recorded}


def worst(findings: list[Finding]) -> str:
    return max((f.severity for f in findings), key=SEVERITY_RANK.__getitem__, default="ok")


def exit_code(findings: list[Finding]) -> int:
    return SEVERITY_RANK[worst(findings)]


__all__ = ["Finding", "exit_code", "facts_for", "run_checks", "worst"]
