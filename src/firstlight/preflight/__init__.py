"""Preflight: every launch-killer found before the launch, each with its evidence and remedy.

The checks are pure functions `(facts, deployment, engine adapter) -> list[Finding]`; nothing in them
touches the host. `check(spec)` observes the facts once and runs them all.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from firstlight.deployment import Deployment, as_deployment
from firstlight.engines import EngineAdapter, get_engine
from firstlight.facts import SECTIONS, Facts, Source, gather_facts, load_facts
from firstlight.facts.catalogue import parse_gpus, synthetic_gpus, synthetic_host
from firstlight.facts.software import with_entrypoint
from firstlight.preflight.engine import (
    check_attention_backend,
    check_engine_environment,
    check_engine_flags,
    check_engine_variables,
    check_speculative,
)
from firstlight.preflight.finding import SEVERITY_RANK, Finding, Findings, ok, warn
from firstlight.preflight.gpus import check_gpu_processes, check_parallelism
from firstlight.preflight.host import check_host
from firstlight.preflight.memory import check_memory_fit
from firstlight.preflight.model import check_model_files
from firstlight.preflight.moe import check_moe
from firstlight.preflight.quantization import check_quantization

Check = Callable[[Facts, Deployment, EngineAdapter], list[Finding]]

# Each check and the sections of the facts it stands on: a finding says where those came from.
CHECKS: tuple[tuple[Check, tuple[str, ...]], ...] = (
    (check_model_files, ("model",)),
    (check_engine_environment, ("software",)),
    (check_engine_flags, ("software",)),
    (check_engine_variables, ()),
    (check_speculative, ("software", "model")),
    (check_gpu_processes, ("gpus",)),
    (check_parallelism, ("model", "gpus")),
    (check_quantization, ("model", "software")),
    (check_attention_backend, ("model", "gpus")),
    (check_host, ("host", "gpus")),
    (check_memory_fit, ("model", "gpus")),
    (check_moe, ("model", "gpus", "software")),
)
HOST_SECTIONS = ("gpus", "host")


def run_checks(facts: Facts, dep: Deployment) -> Findings:
    engine = get_engine(dep.engine)
    out = Findings(facts_finding(facts))
    for check, sections in CHECKS:
        for finding in check(facts, dep, engine):
            finding.facts = {
                s: {"kind": facts.source(s).kind, **facts.source(s).model_dump(exclude_defaults=True)} for s in sections
            }
            out.append(finding)
    return out


def _source(facts: Facts, section: str) -> dict[str, str]:
    source = facts.source(section)
    return {"kind": source.kind, **source.model_dump(exclude_defaults=True)}


def facts_finding(facts: Facts) -> list[Finding]:
    """Where the facts came from, when any of them was not observed here and now (and what was left out)."""
    elsewhere = {s: facts.source(s) for s in SECTIONS if facts.source(s).kind != "live"}
    if not elsewhere and not facts.notes:
        return []
    by_label: dict[str, list[str]] = {}
    for section in SECTIONS:
        by_label.setdefault(facts.source(section).label, []).append(section)
    message = "; ".join(f"{', '.join(sections)}: {label}" for label, sections in by_label.items())
    if facts.notes:
        return [warn("facts", message + "; " + "; ".join(facts.notes), NOT_USED_REMEDY)]
    return [ok("facts", message)]


NOT_USED_REMEDY = (
    "Run the check where the model and the engine's environment are, or point the spec at the model and the "
    "interpreter the recording describes."
)


def facts_for(dep: Deployment, recorded: Facts | None = None, gpus: str | None = None) -> Facts:
    """The facts a check of `dep` stands on, each section from where it belongs:
    - GPUs and host: made from the GPU catalogue for `gpus` (`8xB200`), else the recording's, else observed;
    - model and software: observed wherever the spec's model and interpreter exist on this machine, else the
      recording's when it describes that same path; a recording of another model or interpreter is never used
      in their place (a note says so)."""
    chosen: dict[str, object] = {}
    sources: dict[str, Source] = {}
    notes: list[str] = []
    if gpus is not None:
        count, model = parse_gpus(gpus)
        made = Source(kind="synthetic", detail=f"{count}x {model.name} from firstlight's GPU catalogue")
        chosen.update(gpus=synthetic_gpus(count, model), host=synthetic_host(count, model))
        sources.update(gpus=made, host=made)
    have = recorded.sections() if recorded is not None else set()
    if recorded is not None:
        for section in HOST_SECTIONS:
            if section in have and section not in chosen:
                chosen[section], sources[section] = getattr(recorded, section), recorded.source(section)
        for section, path, recorded_path in (
            ("model", dep.model, recorded.model.path if recorded.model else None),
            ("software", dep.python or dep.program, recorded.software.interpreter if recorded.software else None),
        ):
            if section not in have or path is None or _exists_here(path):
                continue
            if recorded_path is not None and os.path.normpath(recorded_path) == os.path.normpath(str(path)):
                chosen[section], sources[section] = getattr(recorded, section), recorded.source(section)
            else:
                notes.append(f"the recorded {section} facts describe {recorded_path}, not the spec's {path}: not used")
    missing = [s for s in SECTIONS if s not in chosen]
    # the spec names one of python and program, the one its engine runs with
    live = gather_facts(dep.python, dep.model, dep.host, dep.port, dep.program, sections=missing)
    if live.software is not None:
        live.software = with_entrypoint(live.software, get_engine(dep.engine))
    here = Source(kind="live", at=live.recorded.at, hostname=live.recorded.hostname)
    sources.update(dict.fromkeys(missing, here))
    return live.model_copy(update={**chosen, "sources": sources, "notes": notes})


def _exists_here(path: Path | str) -> bool:
    """A path on this machine, or a bare command name on PATH (`python3`, `llama-server`)."""
    text = str(path)
    return Path(text).expanduser().exists() if "/" in text else shutil.which(text) is not None


def check(
    spec: Deployment | Path | str,
    facts: Facts | Path | str | None = None,
    gpus: str | None = None,
    context: int | None = None,
) -> Findings:
    """Every preflight finding for a spec (a Deployment or a spec file). The GPUs and the host are made from
    the GPU catalogue for `gpus` (`8xB200`) or taken from `facts` (a Facts value or a `facts --save` file) where
    given; everything else is observed here (see `facts_for`), and each finding says where its facts came from.
    `context` checks the spec as if launched with that context length (tokens per request, prompt and output:
    the KV cache's capacity is said in requests of that length)."""
    dep = as_deployment(spec)
    flag = get_engine(dep.engine).memory.context_flag
    if context is not None and flag is not None:
        dep = dep.with_args({flag: context})
    recorded = load_facts(facts) if isinstance(facts, Path | str) else facts
    return run_checks(facts_for(dep, recorded, gpus), dep)


__all__ = ["CHECKS", "SEVERITY_RANK", "Finding", "Findings", "check", "facts_for", "run_checks"]
