"""The client watching itself: event-loop lag and CPU use over a level, and whether the client may have
been the bottleneck. A load generator must measure the server, not itself; when it cannot, it says so.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import time
from typing import Any

import numpy as np

LAG_INTERVAL_S = 0.01
CLIENT_LAG_LIMIT_MS = 10.0
CLIENT_CPU_LIMIT = 90.0
SAME_READ_LIMIT_PCT = 0.5  # of a level's gaps: above it, ITL p99 can be the client's


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


def judge_reads(health: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """The level's health, made client-limited when the client read chunks together because it fell behind.

    A chunk is timed by the read that returned it (the kernel's stamp of that read), which is exact while the
    loop gets back to every socket within one inter-token gap. A stall longer than the gap leaves two chunks
    of a stream in its socket, read at once and stamped alike: one gap of 0 and one of twice the ITL, so ITL's
    tail is the client's. At C=1024 on one core a 19.5 ms stall did that with the lag p99 still under the limit
    (ITL p99 20 ms against a truth of 10). A server that itself sends several events in one write has most
    gaps at 0 (ITL p50 0) and is not judged."""
    itl_p50 = (summary.get("itl_ms") or {}).get("p50") or 0.0
    same_read = summary.get("itl_same_read_pct") or 0.0
    lag_max = health.get("loop_lag_max_ms", 0.0)
    if itl_p50 <= 0 or lag_max < itl_p50 or same_read <= SAME_READ_LIMIT_PCT:
        return health
    judged = dict(health, client_limited=True)
    if not health.get("client_limited"):
        judged["warning"] = (
            f"the client's event loop stalled for up to {lag_max:.1f} ms, longer than the inter-token gap "
            f"({itl_p50:.1f} ms): {same_read:.1f}% of chunks were read together with the one before and timed "
            "alike, so ITL's tail includes client delay"
        )
    return judged


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
        "gc_pause_max_ms": max((w.get("gc_pause_max_ms", 0.0) for w in measured), default=0.0),
        "client_limited": bool(limited),
        "workers": workers,
        "parent": parent,
    }
    if limited:
        health["warning"] = f"worker {limited[0]['worker']}: {limited[0]['warning']}"
    return health


class CollectorPauses:
    """Python's garbage collector kept off the measured load, and any pause it still takes counted.

    A full collection walks every tracked object: in a benchmark process, every connection, future and record.
    Such a walk stopped the loop for up to 36 ms mid-level at C=1024, and for 8-30 ms even with the objects
    that existed before the level frozen out of it. A level makes no cyclic garbage (a level of 2,048
    requests at C=1024 left none for the collector), so the collector is off while the load runs, and what
    existed before is frozen so the first collection after the level does not walk it again. A collection that
    runs anyway (an explicit gc.collect() in some library) is timed, and shows in the level's health."""

    def __init__(self) -> None:
        self.pause_max_s = self.pause_s = 0.0
        self._began = 0.0
        self._was_enabled = False

    def hold(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()
        gc.freeze()
        gc.callbacks.append(self._timed)

    def release(self) -> None:
        if self._timed in gc.callbacks:
            gc.callbacks.remove(self._timed)
            gc.unfreeze()
            if self._was_enabled:
                gc.enable()

    def _timed(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        pause = time.perf_counter() - self._began
        self.pause_s += pause
        self.pause_max_s = max(self.pause_max_s, pause)


class ClientWatch:
    """Lag samples, CPU time and garbage-collection pauses from `start()` to `stop()`; `health()` at any
    moment (an interrupted level too)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.collector = CollectorPauses()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._cpu0 = self._wall0 = 0.0

    def start(self) -> None:
        self.collector.hold()
        self._task = asyncio.create_task(lag_monitor(self.lags, self._stop))
        self._cpu0, self._wall0 = cpu_seconds(), time.perf_counter()

    async def stop(self) -> None:
        self._stop.set()
        self.collector.release()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    def health(self) -> dict[str, Any]:
        health = client_health(self.lags, cpu_seconds() - self._cpu0, time.perf_counter() - self._wall0)
        health["gc_pause_max_ms"] = self.collector.pause_max_s * 1000
        health["gc_s"] = self.collector.pause_s
        return health
