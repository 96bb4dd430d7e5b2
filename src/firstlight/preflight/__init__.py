"""Preflight: every launch-killer found before the launch, each with its evidence and remedy.

The checks are pure functions `(facts, deployment, engine adapter) -> list[Finding]`; nothing in them
touches the host. `check(spec)` observes the facts once and runs them all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from firstlight.deployment import Deployment, as_deployment
from firstlight.engines import EngineAdapter, get_engine
from firstlight.facts import SECTIONS, Facts, gather_facts, load_facts
from firstlight.facts.software import with_entrypoint
from firstlight.preflight.engine import (
    check_attention_backend,
    check_engine_environment,
    check_engine_flags,
    check_engine_variables,
    check_speculative,
)
from firstlight.preflight.finding import SEVERITY_RANK, Finding, Findings
from firstlight.preflight.gpus import check_gpu_processes, check_parallelism
from firstlight.preflight.host import check_host
from firstlight.preflight.memory import check_memory_fit
from firstlight.preflight.model import check_model_files
from firstlight.preflight.quantization import check_quantization

Check = Callable[[Facts, Deployment, EngineAdapter], list[Finding]]

CHECKS: tuple[Check, ...] = (
    check_model_files,
    check_engine_environment,
    check_engine_flags,
    check_engine_variables,
    check_speculative,
    check_gpu_processes,
    check_parallelism,
    check_quantization,
    check_attention_backend,
    check_host,
    check_memory_fit,
)


def run_checks(facts: Facts, dep: Deployment) -> Findings:
    engine = get_engine(dep.engine)
    return Findings(finding for check in CHECKS for finding in check(facts, dep, engine))


def facts_for(dep: Deployment, recorded: Facts | None = None) -> Facts:
    """Facts for a spec: the recorded sections where given, observed now for the rest."""
    have = recorded.sections() if recorded is not None else set()
    missing = [s for s in SECTIONS if s not in have]
    if not missing:
        assert recorded is not None
        return recorded
    # the spec names one of python and program, the one its engine runs with
    live = gather_facts(dep.python, dep.model, dep.host, dep.port, dep.program, sections=missing)
    if live.software is not None:
        live.software = with_entrypoint(live.software, get_engine(dep.engine))
    if recorded is None:
        return live
    return live.model_copy(update={s: getattr(recorded, s) for s in have} | {"recorded": recorded.recorded})


def check(spec: Deployment | Path | str, facts: Facts | Path | str | None = None) -> Findings:
    """Every preflight finding for a spec (a Deployment or a spec file), with facts recorded in `facts` (a
    Facts value or a `facts --save` file) where given and observed now for the rest."""
    dep = as_deployment(spec)
    recorded = load_facts(facts) if isinstance(facts, Path | str) else facts
    return run_checks(facts_for(dep, recorded), dep)


__all__ = ["CHECKS", "SEVERITY_RANK", "Finding", "Findings", "check", "facts_for", "run_checks"]
