"""Timing shared by the self-benchmarks (imported as a sibling: `python perf/NAME.py` puts perf/ on the path)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of `repeat` calls, in seconds: the least disturbed by everything else the machine runs."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
