"""Benchmarking an OpenAI-compatible server, level by level, without losing a request.

    from firstlight.benchmark import BenchConfig, run_bench

    result = run_bench(BenchConfig(url="http://127.0.0.1:8000", concurrency=[1, 8, 64]))
    for level in result.levels:
        print(level["concurrency"], level["ttft_ms"]["p50"], level["output_throughput_tok_s"])

The names load on first use: the launch probe builds its request with `benchmark.endpoint`, and neither
it nor the commands that only touch this package should pay for the client, numpy and uvloop of a run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from firstlight.benchmark.config import BenchConfig, LevelSpec
    from firstlight.benchmark.levels import LevelState
    from firstlight.benchmark.result import BenchResult, run_data
    from firstlight.benchmark.runner import run_bench
    from firstlight.errors import BenchAborted, BenchError, RunNotFound

_WHERE = {
    "BenchConfig": "firstlight.benchmark.config",
    "LevelSpec": "firstlight.benchmark.config",
    "LevelState": "firstlight.benchmark.levels",
    "BenchResult": "firstlight.benchmark.result",
    "run_data": "firstlight.benchmark.result",
    "run_bench": "firstlight.benchmark.runner",
    "BenchAborted": "firstlight.errors",
    "BenchError": "firstlight.errors",
    "RunNotFound": "firstlight.errors",
}

__all__ = [
    "BenchAborted",
    "BenchConfig",
    "BenchError",
    "BenchResult",
    "LevelSpec",
    "LevelState",
    "RunNotFound",
    "run_bench",
    "run_data",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
