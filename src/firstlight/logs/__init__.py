"""Reading engine logs: segments split on `\\n` and `\\r`, a growing file followed, and the phase machine.

Used by engines (their phase rules), launch (the live watcher) and diagnose (offline), so it sits
below all three and imports none of them.
"""

from firstlight.logs.follow import LogFollower
from firstlight.logs.lines import RELAY_PREFIX, LineSplitter, fold_digits, iter_lines, without_relay
from firstlight.logs.phases import (
    GENERIC_CLOCK,
    PHASE_INDEX,
    PHASES,
    PhaseEvent,
    PhaseMachine,
    PhaseRule,
    ProgressRule,
    aside_rules,
    log_time,
    phase_rules,
    progress_rules,
)

__all__ = [
    "GENERIC_CLOCK",
    "PHASES",
    "PHASE_INDEX",
    "RELAY_PREFIX",
    "LineSplitter",
    "LogFollower",
    "PhaseEvent",
    "PhaseMachine",
    "PhaseRule",
    "ProgressRule",
    "aside_rules",
    "fold_digits",
    "iter_lines",
    "log_time",
    "phase_rules",
    "progress_rules",
    "without_relay",
]
