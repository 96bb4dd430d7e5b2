"""When requests are sent: a closed loop (a fixed number in flight), or an open loop whose arrival times
come from a schedule (Poisson or constant), optionally capped in flight.

The arrival schedules are plain generators of offsets from the level's start, so a new one (bursts,
a recorded trace) is one more generator. Sending and accounting are the caller's (`send`); a level
stops when `stop` is set or its deadline passes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from firstlight.benchmark.config import BenchConfig, LevelSpec

Send = Callable[[int, float], Awaitable[None]]  # (prompt index, scheduled time on the perf_counter clock)


def poisson(rate: float, seed: int) -> Iterator[float]:
    """Offsets of a Poisson process at `rate` per second: exponential gaps, the first request at once."""
    rng = np.random.default_rng(seed)
    t = 0.0
    while True:
        yield t
        t += rng.exponential(1 / rate)


def constant(rate: float) -> Iterator[float]:
    """Offsets one 1/rate apart, the first at once."""
    t = 0.0
    while True:
        yield t
        t += 1 / rate


def arrivals(kind: str, rate: float, seed: int) -> Iterator[float]:
    return poisson(rate, seed) if kind == "poisson" else constant(rate)


def level_arrivals(cfg: BenchConfig, level: LevelSpec) -> Iterator[float]:
    """An open-loop level's schedule, seeded by the run's seed and the level's index: the same whether one
    process sends it or it is dealt to worker processes."""
    assert level.rate is not None
    return arrivals(cfg.arrival, level.rate, cfg.seed + level.index)


async def closed_loop(
    send: Send, indices: Sequence[int], concurrency: int, stop: asyncio.Event, deadline: float | None
) -> None:
    """`concurrency` workers, each sending its next request as soon as its last one ended."""
    queue = iter(indices)

    async def worker() -> None:
        for index in queue:
            if stop.is_set() or (deadline is not None and time.perf_counter() >= deadline):
                return
            await send(index, time.perf_counter())

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(indices))))))


async def open_loop(
    send: Send,
    indices: Sequence[int],
    offsets: Iterator[float],
    cap: int | None,
    stop: asyncio.Event,
    deadline: float | None,
    start: float | None = None,
) -> None:
    """Each request sent at its scheduled time, whatever the server's pace; at most `cap` in flight.

    The offsets count from `start` (default: now), an instant on the perf_counter clock: the worker
    processes of one level are given the same one, CLOCK_MONOTONIC being the whole machine's on Linux."""
    start = time.perf_counter() if start is None else start
    slots = asyncio.Semaphore(cap) if cap else None
    tasks: set[asyncio.Task[None]] = set()

    async def capped(index: int, scheduled: float) -> None:
        if slots is None:
            await send(index, scheduled)
            return
        async with slots:  # the wait for a slot counts: latency from the schedule includes it
            if not stop.is_set():
                await send(index, scheduled)

    try:
        for index, offset in zip(indices, offsets, strict=False):  # the schedule is endless
            t = start + offset
            if stop.is_set() or (deadline is not None and t >= deadline):
                break
            # uvloop's timers tick in whole milliseconds of a cached clock and can wake a little before `t`:
            # sleep again until it has passed, so no request leaves before its scheduled time
            while (delay := t - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(capped(index, t))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        # Interrupted: the requests in flight record themselves as cancelled before the level is summarised.
        await asyncio.gather(*tasks, return_exceptions=True)
