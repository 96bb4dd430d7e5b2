"""One load level, start to end: the requests still missing, the schedule, the client's own health, the
server's speculative-decoding counters before and after, and the summary stored with the level.

A level that ends early (a dead server, a run of failures, a dead worker process, Ctrl-C) is stored as
incomplete with every request it finished, so `--resume` sends only the missing ones. With `--workers`
above 1 the requests are sent by worker processes (`fleet`) and this process only stores and counts them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from firstlight.benchmark import schedule, sharing, specdecode
from firstlight.benchmark.client import CANCELLED
from firstlight.benchmark.config import BenchConfig, LevelSpec
from firstlight.benchmark.failures import FailureRun
from firstlight.benchmark.fleet import Fleet, jobs
from firstlight.benchmark.health import ClientWatch, fleet_health, judge_reads
from firstlight.benchmark.metrics import summarise
from firstlight.benchmark.pool import ConnectionPool
from firstlight.benchmark.recorder import RecordWriter
from firstlight.benchmark.waiting import wait_set
from firstlight.errors import BenchAborted
from firstlight.records import RequestRecord
from firstlight.store import Store

WARMUP_INDEX = -1  # the warm-up is stored as a level of its own, never summarised with the others
TICK_S = 0.25


@dataclass
class LevelState:
    """What the live view shows while a level runs."""

    index: int
    concurrency: int | None
    rate: float | None
    total: int
    done: int = 0
    failed: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.perf_counter)
    warmup: bool = False


ProgressFn = Callable[[LevelState], None]


@dataclass
class RunContext:
    """What every level of one run shares: where results go, how requests are sent, who is told."""

    cfg: BenchConfig
    store: Store
    run_id: int
    pool: ConnectionPool
    bodies: list[bytes]  # every request body, encoded before the run
    writer: RecordWriter
    progress: ProgressFn
    itl_s: float | None = None  # the warm-up's median inter-token latency, for `--workers auto`


class LevelRunner:
    """Sends one level's requests and counts them; stops the level when the server is gone."""

    def __init__(self, ctx: RunContext, level_id: int, state: LevelState) -> None:
        self.ctx, self.level_id, self.state = ctx, level_id, state
        self.failures = FailureRun(state.concurrency)
        self.abort_reason: str | None = None
        self.stop = asyncio.Event()

    async def one(self, index: int, scheduled: float) -> None:
        rec = RequestRecord(index, scheduled, warmup=self.state.warmup)
        bodies = self.ctx.bodies
        try:
            await self.ctx.pool.send(rec, bodies[index % len(bodies)], self.ctx.cfg.timeout)
        except asyncio.CancelledError:
            self.ctx.writer.put(self.level_id, rec)  # marked cancelled by the pool
            raise
        self.account(rec)

    def account(self, rec: RequestRecord) -> None:
        """One finished request, sent here or by a worker process: stored, counted, and judged."""
        self.ctx.writer.put(self.level_id, rec)
        if rec.error_kind == CANCELLED:
            return  # interrupted, not failed: the level is already stopping
        if self.ctx.writer.error is not None:
            self.abort(f"records can no longer be stored: {self.ctx.writer.error}")
        self.state.done += 1
        if rec.ok:
            self.state.tokens += rec.output_tokens
        else:
            self.state.failed += 1
        reason = self.failures.see(rec)
        if reason is not None:
            self.abort(reason)

    def abort(self, reason: str) -> None:
        if self.abort_reason is None:
            self.abort_reason = reason
        self.stop.set()


async def warm_up(ctx: RunContext) -> None:
    """A few requests before the first level, stored but not measured; raises BenchAborted when they fail."""
    cfg = ctx.cfg
    level_id = ctx.store.add_level(ctx.run_id, WARMUP_INDEX, None, None)
    state = LevelState(WARMUP_INDEX, None, None, cfg.warmup, warmup=True)
    runner = LevelRunner(ctx, level_id, state)
    first = cfg.levels()[0].concurrency or 1
    n = len(ctx.bodies)
    indices = list(range(n - cfg.warmup, n))  # prompts of their own: no cache reuse later
    await schedule.closed_loop(runner.one, indices, min(first, cfg.warmup), runner.stop, None)
    ctx.progress(state)
    ctx.store.update_level(level_id, state="warmup", ended=time.time())
    if runner.abort_reason:
        raise BenchAborted(f"warm-up failed: {runner.abort_reason}")


async def run_level(ctx: RunContext, level: LevelSpec, previous: dict[str, Any] | None) -> str | None:
    """Run one level to the end (or, resumed, only its missing requests); returns why it stopped early,
    or None."""
    cfg, store = ctx.cfg, ctx.store
    n = cfg.requests_for(level)
    if previous is not None:
        level_id = previous["id"]
        finished = {rec.index for rec in store.requests(level_id) if rec.ok}
        store.update_level(level_id, state="running", reason=None)
    else:
        level_id = store.add_level(ctx.run_id, level.index, level.concurrency, level.rate)
        finished = set()
    indices = [i for i in range(n) if i not in finished]
    state = LevelState(level.index, level.concurrency, level.rate, len(indices))
    runner = LevelRunner(ctx, level_id, state)
    before = await asyncio.to_thread(specdecode.scrape, cfg.url)
    workers = workers_for(ctx, level)
    fleet = None
    if workers > 1:
        fleet = Fleet(runner, jobs(cfg, level, indices, workers, ctx.bodies, ctx.pool.target))
        await fleet.ready()  # processes started, connections opened: the level's clock starts after
    elif await ctx.pool.prewarm(min(level.concurrency or 64, len(indices), 4096)):
        await asyncio.sleep(0.2)  # connected is not yet accepted: let the server take them before the load
    watch, ticking = ClientWatch(), asyncio.Event()
    watch.start()
    ticker = asyncio.create_task(_tick(ctx.progress, state, ticking))
    deadline = time.perf_counter() + cfg.duration if cfg.duration else None
    try:
        if fleet is not None:
            await fleet.run()
        elif level.rate is not None:
            offsets = schedule.level_arrivals(cfg, level)
            await schedule.open_loop(runner.one, indices, offsets, level.concurrency, runner.stop, deadline)
        else:
            await schedule.closed_loop(runner.one, indices, level.concurrency or 1, runner.stop, deadline)
    except asyncio.CancelledError:
        _finish(ctx, level_id, level, None, _health(watch, fleet), "incomplete", "interrupted")
        raise
    finally:
        ticking.set()
        await watch.stop()
        await asyncio.gather(ticker, return_exceptions=True)
    health = _health(watch, fleet)
    after = await asyncio.to_thread(specdecode.scrape, cfg.url) if runner.abort_reason is None else None
    spec = specdecode.acceptance(before, after)
    ctx.progress(state)
    state_name = "complete" if runner.abort_reason is None else "incomplete"
    _finish(ctx, level_id, level, spec, health, state_name, runner.abort_reason)
    return runner.abort_reason


def workers_for(ctx: RunContext, level: LevelSpec) -> int:
    """How many processes send this level: the configured number, or for `auto` enough for the level's
    expected chunk rate (`sharing.auto_workers`). 1: this process, as without --workers."""
    if ctx.cfg.workers != "auto":  # validated when the run started
        return int(ctx.cfg.workers)
    rate = sharing.expected_chunk_rate(level, ctx.cfg.output_len, ctx.itl_s)
    return sharing.auto_workers(rate, sharing.free_cores())


def warmup_itl(store: Store, run_id: int) -> float | None:
    """The median inter-token latency of a run's stored warm-up, or None without one."""
    warm = [lv for lv in store.levels(run_id) if lv["idx"] == WARMUP_INDEX]
    return sharing.median_itl(store.requests(warm[-1]["id"])) if warm else None


def _health(watch: ClientWatch, fleet: Fleet | None) -> dict[str, Any]:
    """The client's health over the level: this process's, or with workers each worker's and theirs merged."""
    return watch.health() if fleet is None else fleet_health(watch.health(), fleet.health())


def _finish(
    ctx: RunContext,
    level_id: int,
    level: LevelSpec,
    spec: dict[str, Any] | None,
    health: dict[str, Any],
    state: str,
    reason: str | None,
) -> None:
    """Summarise the level from what the store holds (a resumed level: both parts) and store the summary."""
    ctx.writer.flush()
    summary = summarise(ctx.store.requests(level_id), ctx.cfg.slo, rate_mode=level.rate is not None)
    ctx.store.update_level(
        level_id,
        state=state,
        ended=time.time(),
        summary=summary,
        spec_decode=spec,
        client=judge_reads(health, summary),
        reason=reason,
    )


async def _tick(progress: ProgressFn, state: LevelState, stop: asyncio.Event) -> None:
    while not stop.is_set():
        progress(state)
        await wait_set(stop, TICK_S)
