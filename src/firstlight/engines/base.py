"""The engine adapter contract: what firstlight needs to know about an inference engine.

An adapter is data (patterns, paths, names) plus one small function that builds the command line.
Adding an engine, or a new wording of an engine's log, means adding data here, not control flow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from firstlight.launch.phases import PhaseMachine, PhaseRule, ProgressRule

if TYPE_CHECKING:
    from firstlight.deployment import Deployment


@dataclass(frozen=True)
class EngineAdapter:
    name: str
    build_argv: Callable[[Deployment], list[str]]
    phases: tuple[PhaseRule, ...]
    progress: tuple[ProgressRule, ...] = ()
    # The engine's own "I can serve" line. Offline it means ready; live it only wakes the prober,
    # because ready also needs one generated token.
    ready_line: re.Pattern[str] | None = None
    # Lines after which this launch will not come up (the wrappers that follow a root cause).
    fatal_lines: tuple[re.Pattern[str], ...] = ()
    # Lines that identify the engine in a log of unknown origin.
    fingerprints: tuple[re.Pattern[str], ...] = ()
    health_path: str = "/health"
    metrics_path: str | None = "/metrics"
    default_env: dict[str, str] = field(default_factory=dict)
    # The model name requests must carry; transformers serve pins the path it was given.
    request_model: Callable[[Deployment], str] = lambda d: d.served_model_name

    def machine(self, offline: bool = False) -> PhaseMachine:
        """Offline, the engine's own ready line means ready; live, ready needs a generated token too."""
        rules = self.phases
        if offline and self.ready_line is not None:
            rules = (*rules, PhaseRule("ready", self.ready_line))
        return PhaseMachine(rules, self.progress)

    def is_fatal(self, line: str) -> bool:
        return any(p.search(line) for p in self.fatal_lines)


def extra_args(args: dict[str, Any] | list[str]) -> list[str]:
    """Spec `args` as command-line flags: true → a bare flag, false/None → left out, a list → repeated,
    a mapping → JSON (as `--speculative-config` expects)."""
    if isinstance(args, list):
        return [str(a) for a in args]
    out: list[str] = []
    for key, value in args.items():
        flag = key if key.startswith("-") else f"--{key}"
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, list):
            for item in value:
                out += [flag, str(item)]
        elif isinstance(value, dict):
            out += [flag, json.dumps(value, separators=(",", ":"))]
        else:
            out += [flag, str(value)]
    return out


def compile_all(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)
