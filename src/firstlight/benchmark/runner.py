"""Running a benchmark: the requests prepared once, a warm-up, then the levels in order.

Every finished request goes to the store at once (through the record writer); a level that ends
early (Ctrl-C, a dead server) is marked incomplete with what it finished, and a resumed run sends
only what is missing. `run_bench` is the synchronous entry point; `run` is the same on a running
event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import uvloop

from firstlight.benchmark import endpoint
from firstlight.benchmark.client import Target
from firstlight.benchmark.config import BenchConfig
from firstlight.benchmark.levels import WARMUP_INDEX, ProgressFn, RunContext, run_level, warm_up, warmup_itl
from firstlight.benchmark.pool import ConnectionPool
from firstlight.benchmark.recorder import Clock, RecordWriter
from firstlight.benchmark.result import BenchResult
from firstlight.benchmark.workload import build_workload
from firstlight.errors import BenchAborted, BenchError
from firstlight.store import Store

DRAIN_S = 1.0


def run_bench(
    config: BenchConfig | None = None,
    *,
    store: Store | Path | str | None = None,
    on_progress: ProgressFn | None = None,
    resume: int | None = None,
    launch_id: int | None = None,
    on_start: Callable[[int], None] | None = None,
) -> BenchResult:
    """Benchmark a server at every level of `config` (or complete the stored run `resume`, with its own
    configuration unless one is given) and return the stored result.

    `on_progress` sees each level's live counts; `on_start` gets the run id as soon as the run is
    stored, so a caller interrupted half-way knows which run to report or resume. Raises BenchError for
    a configuration that cannot run, BenchAborted (with `run_id`, None when no run was stored) when the
    run stops early with what finished kept; Ctrl-C propagates as KeyboardInterrupt, the run marked
    incomplete.
    """
    db = Store.open(store)
    if config is None:
        if resume is None:
            raise BenchError("give a benchmark configuration, or a stored run to resume")
        config = BenchConfig.of_run(db, resume)
    config.validate()
    if not config.url:
        raise BenchError("no server to benchmark: give --url, or --launch a spec")
    started: list[int] = []

    def start(run_id: int) -> None:
        started.append(run_id)
        if on_start is not None:
            on_start(run_id)

    try:
        run_id = uvloop.run(run(config, db, on_progress or _quiet, resume=resume, launch_id=launch_id, on_start=start))
    except BenchAborted as e:
        raise BenchAborted(str(e), started[0] if started else None) from e
    return BenchResult.load(db, run_id)


async def run(
    cfg: BenchConfig,
    store: Store,
    progress: ProgressFn,
    *,
    resume: int | None = None,
    launch_id: int | None = None,
    on_start: Callable[[int], None] | None = None,
) -> int:
    """Run (or resume) a benchmark on the running loop; returns the run id."""
    try:
        target = Target.from_url(cfg.url, endpoint.path(cfg.endpoint), cfg.api_key)
    except ValueError as e:
        raise BenchError(str(e)) from e
    cfg.model = cfg.model or endpoint.served_model(cfg.url, cfg.api_key)
    workload = await asyncio.to_thread(build_workload, cfg, cfg.model, cfg.prompts_needed())
    wanted = {"temperature": cfg.temperature, "ignore_eos": True}
    extra = await asyncio.to_thread(
        endpoint.accepted_extras, cfg.url, cfg.endpoint, cfg.model, wanted, cfg.api_key, cfg.timeout
    )
    bodies = workload.bodies(cfg.model, cfg.endpoint, extra)
    if resume is None:
        run_id = store.add_run(cfg.label or cfg.model, cfg.url, cfg.model, cfg.public(), launch_id)
    else:
        run_id = resume
        store.update_run(run_id, state="running", reason=None)
    if on_start is not None:
        on_start(run_id)
    writer = RecordWriter(store.path, Clock())
    pool = ConnectionPool(target)
    try:
        lengths = (
            "exact output lengths (ignore_eos)"
            if "ignore_eos" in extra
            else "the server rejects ignore_eos: output lengths may end early at EOS"
        )
        store.update_run(run_id, tokenizer=f"{workload.tokenizer}; {workload.source}; {lengths}")
        await _levels(RunContext(cfg, store, run_id, pool, bodies, writer, progress))
        store.update_run(run_id, state="complete")
        return run_id
    except BenchAborted as e:
        store.update_run(run_id, state="incomplete", reason=str(e))
        raise
    except asyncio.CancelledError:
        store.update_run(run_id, state="incomplete", reason="interrupted")
        raise
    finally:
        pool.close()
        writer.close()


async def _levels(ctx: RunContext) -> None:
    """The warm-up and every level not yet complete, in order; raises BenchAborted when one stops early."""
    done = {lv["idx"]: lv for lv in ctx.store.levels(ctx.run_id)}
    if ctx.cfg.warmup and WARMUP_INDEX not in done:
        await warm_up(ctx)
    if ctx.cfg.workers == "auto":  # sized by the warm-up's pace (a resumed run's stored one)
        ctx.writer.flush()
        ctx.itl_s = warmup_itl(ctx.store, ctx.run_id)
    levels = ctx.cfg.levels()
    for level in levels:
        previous = done.get(level.index)
        if previous is not None and previous["state"] == "complete":
            continue
        reason = await run_level(ctx, level, previous)
        if reason:
            raise BenchAborted(reason)
        if level is not levels[-1]:
            await asyncio.sleep(DRAIN_S)  # let the server drain its queues between levels


def _quiet(_state: object) -> None:
    pass
