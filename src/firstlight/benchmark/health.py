"""The client watching itself: event-loop lag and CPU use over a level, and whether the client may have
been the bottleneck. A load generator must measure the server, not itself; when it cannot, it says so.
"""

from __future__ import annotations

import asyncio
import resource
import time
from typing import Any

import numpy as np

LAG_INTERVAL_S = 0.01
CLIENT_LAG_LIMIT_MS = 10.0
CLIENT_CPU_LIMIT = 90.0


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def lag_monitor(samples: list[float], stop: asyncio.Event) -> None:
    """How late the event loop wakes up: the client's own lag, reported with every level."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(LAG_INTERVAL_S)
        # uvloop's timers have millisecond resolution and may fire a little early: that is no lag
        samples.append(max(0.0, time.perf_counter() - t - LAG_INTERVAL_S))


def client_health(lags: list[float], cpu_s: float, wall_s: float) -> dict[str, Any]:
    lag_p99 = float(np.percentile(lags, 99) * 1000) if lags else 0.0
    cpu_pct = 100 * cpu_s / wall_s if wall_s > 0 else 0.0
    limited = lag_p99 > CLIENT_LAG_LIMIT_MS or cpu_pct > CLIENT_CPU_LIMIT
    health: dict[str, Any] = {
        "loop_lag_p99_ms": lag_p99,
        "loop_lag_max_ms": float(max(lags) * 1000) if lags else 0.0,
        "cpu_pct": cpu_pct,
        "cpu_s": cpu_s,
        "client_limited": limited,
    }
    if cpu_pct > CLIENT_CPU_LIMIT:
        health["warning"] = (
            f"the client was CPU-bound ({cpu_pct:.0f}% of a core, event-loop lag p99 "
            f"{lag_p99:.1f} ms): latencies include client delay"
        )
    elif limited:
        health["warning"] = (
            f"the client's event loop woke late (lag p99 {lag_p99:.1f} ms at {cpu_pct:.0f}% CPU): "
            "the host's cores were busy, e.g. with the server itself; latencies include that delay"
        )
    return health


def fleet_health(parent: dict[str, Any], workers: list[dict[str, Any]]) -> dict[str, Any]:
    """A level sent by worker processes: each worker's own health (one entry each, in order), the worst of
    them on top in the shape of one process's (so a reader of `loop_lag_p99_ms`, `cpu_pct` and
    `client_limited` needs no change: limited when any worker was), and the parent's, which only merges and
    stores what the workers measured and so never makes the level client-limited."""
    measured = [w for w in workers if "cpu_pct" in w]  # a worker that died sent no health
    limited = [w for w in measured if w["client_limited"]]
    health: dict[str, Any] = {
        "loop_lag_p99_ms": max((w["loop_lag_p99_ms"] for w in measured), default=0.0),
        "loop_lag_max_ms": max((w["loop_lag_max_ms"] for w in measured), default=0.0),
        "cpu_pct": max((w["cpu_pct"] for w in measured), default=0.0),  # per core, like the limit
        "cpu_s": sum(w["cpu_s"] for w in measured),
        "client_limited": bool(limited),
        "workers": workers,
        "parent": parent,
    }
    if limited:
        health["warning"] = f"worker {limited[0]['worker']}: {limited[0]['warning']}"
    return health


class ClientWatch:
    """Lag samples and CPU time from `start()`; `health()` at any moment (an interrupted level too)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._cpu0 = self._wall0 = 0.0

    def start(self) -> None:
        self._task = asyncio.create_task(lag_monitor(self.lags, self._stop))
        self._cpu0, self._wall0 = cpu_seconds(), time.perf_counter()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    def health(self) -> dict[str, Any]:
        return client_health(self.lags, cpu_seconds() - self._cpu0, time.perf_counter() - self._wall0)
