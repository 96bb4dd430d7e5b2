"""firstlight: bring an LLM server up, prove it serves, measure it, and say why when it does not.

The library under the command line::

    import firstlight

    findings = firstlight.check("kimi.yaml")                # preflight: Findings, .exit_code
    launch = firstlight.up("kimi.yaml")                     # checks, starts, returns at once
    record = launch.wait()                                  # ready, failed or stalled
    if record.state == firstlight.LaunchState.READY:
        result = firstlight.bench(firstlight.BenchConfig(url=launch.url, concurrency=[1, 8, 64]))
    else:
        print(record.diagnosis["diagnosis"])                # category, root-cause line, remedy
    launch.down()

    plan = firstlight.load_plan("campaign.yaml")            # variants × load × repeats, a fallback ladder
    outcome = firstlight.sweep(plan)                        # each variant up, every cell measured, down
    data = firstlight.sweep_report(outcome.sweep_id)        # speedups, crossover, SLO knee, Pareto

Names are imported when first used, so `import firstlight` (and every quick command) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from firstlight.errors import (
    BenchAborted,
    BenchError,
    FactsError,
    FirstlightError,
    LaunchError,
    LaunchInTheWay,
    LaunchNotFound,
    PreflightFailed,
    RenderError,
    RunNotFound,
    SpecError,
    StoreError,
    SystemdUnavailable,
)
from firstlight.version import __version__

# public name → the module that defines it
_LAZY: dict[str, str] = {
    "Deployment": "firstlight.deployment",
    "load_spec": "firstlight.deployment",
    "Facts": "firstlight.facts",
    "gather_facts": "firstlight.facts",
    "load_facts": "firstlight.facts",
    "check": "firstlight.preflight",
    "Finding": "firstlight.preflight",
    "Findings": "firstlight.preflight",
    "up": "firstlight.launch",
    "wait": "firstlight.launch",
    "down": "firstlight.launch",
    "get_launch": "firstlight.launch",
    "Launch": "firstlight.launch",
    "LaunchState": "firstlight.launch",
    "diagnose": "firstlight.diagnosis",
    "Report": "firstlight.diagnosis",
    "bench": "firstlight.benchmark",
    "BenchConfig": "firstlight.benchmark",
    "BenchResult": "firstlight.benchmark",
    "report": "firstlight.reports",
    "render": "firstlight.rendering",
    "sweep": "firstlight.sweep",
    "load_plan": "firstlight.sweep",
    "sweep_report": "firstlight.sweep",
    "SweepPlan": "firstlight.sweep",
    "Artefact": "firstlight.rendering",
}
# where the public name differs from the defining module's
_RENAMED = {"load_spec": "load_deployment", "bench": "run_bench", "sweep": "run_sweep"}

if TYPE_CHECKING:
    from firstlight.benchmark import BenchConfig, BenchResult
    from firstlight.benchmark import run_bench as bench
    from firstlight.deployment import Deployment
    from firstlight.deployment import load_deployment as load_spec
    from firstlight.diagnosis import Report, diagnose
    from firstlight.facts import Facts, gather_facts, load_facts
    from firstlight.launch import Launch, LaunchState, down, get_launch, up, wait
    from firstlight.preflight import Finding, Findings, check
    from firstlight.rendering import Artefact, render
    from firstlight.reports import report
    from firstlight.sweep import SweepPlan, load_plan, sweep_report
    from firstlight.sweep import run_sweep as sweep


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'firstlight' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value  # later lookups skip this function
    return value


__all__ = [
    "Artefact",
    "BenchAborted",
    "BenchConfig",
    "BenchError",
    "BenchResult",
    "Deployment",
    "Facts",
    "FactsError",
    "Finding",
    "Findings",
    "FirstlightError",
    "Launch",
    "LaunchError",
    "LaunchInTheWay",
    "LaunchNotFound",
    "LaunchState",
    "PreflightFailed",
    "RenderError",
    "Report",
    "RunNotFound",
    "SpecError",
    "StoreError",
    "SweepPlan",
    "SystemdUnavailable",
    "__version__",
    "bench",
    "check",
    "diagnose",
    "down",
    "gather_facts",
    "get_launch",
    "load_facts",
    "load_plan",
    "load_spec",
    "render",
    "report",
    "sweep",
    "sweep_report",
    "up",
    "wait",
]
