"""Running a benchmark: levels in order, each a closed loop (concurrency) or an open loop (request rate).

Every finished request goes to the store at once (through the record writer); a level that ends
early (Ctrl-C, a dead server) is marked incomplete with what it finished, and `--resume` runs only
what is missing. The client watches itself: event-loop lag and CPU use are part of each level's
result, and a level where the client may have been the bottleneck says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from firstlight.bench import specdecode
from firstlight.bench.client import ConnectionPool, Target
from firstlight.bench.metrics import summarise
from firstlight.bench.recorder import Clock, RecordWriter, from_row
from firstlight.bench.records import RequestRecord
from firstlight.bench.workload import Tokenizer, Workload, from_dataset, synthetic
from firstlight.store import Store

DRAIN_S = 1.0
LAG_INTERVAL_S = 0.01
CLIENT_LAG_LIMIT_MS = 10.0
CLIENT_CPU_LIMIT = 90.0
MAX_PROMPTS = 20_000


@dataclass
class BenchConfig:
    url: str
    model: str | None = None
    endpoint: str = "completions"  # completions | chat
    concurrency: list[int] = field(default_factory=list)
    request_rates: list[float] = field(default_factory=list)
    arrival: str = "poisson"  # poisson | constant
    max_concurrency: int | None = None
    num_requests: int | None = None
    duration: float | None = None
    warmup: int = 2
    input_len: int = 128
    output_len: int = 128
    dataset: str | None = None
    slo: dict[str, float] = field(default_factory=dict)
    label: str = ""
    timeout: float = 600.0
    temperature: float = 0.0
    seed: int = 0
    tokenizer_dir: str | None = None
    api_key: str | None = None

    def level_specs(self) -> list[tuple[int | None, float | None]]:
        if self.request_rates:
            return [(self.max_concurrency, r) for r in self.request_rates]
        return [(c, None) for c in self.concurrency]

    def requests_for(self, concurrency: int | None, rate: float | None) -> int:
        if self.num_requests:
            return self.num_requests
        if self.duration:
            return MAX_PROMPTS
        if rate is not None:
            return int(min(max(rate * 30, 20), 2000))
        return int(min(max((concurrency or 1) * 5, 20), 2000))

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("api_key")  # never stored
        return data


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


class Aborted(Exception):
    """The run cannot go on (the server is gone); the message says why."""


class LevelRunner:
    def __init__(
        self,
        pool: ConnectionPool,
        bodies: list[bytes],
        writer: RecordWriter,
        level_id: int,
        state: LevelState,
        timeout: float,
    ) -> None:
        self.pool, self.bodies, self.writer, self.level_id = pool, bodies, writer, level_id
        self.state, self.timeout = state, timeout
        self.consecutive_failures = 0
        self.abort_reason: str | None = None
        self.stop = asyncio.Event()

    async def one(self, index: int, scheduled: float, warmup: bool) -> None:
        rec = RequestRecord(index, scheduled, warmup=warmup)
        try:
            await self.pool.send(rec, self.bodies[index % len(self.bodies)], self.timeout)
        except asyncio.CancelledError:
            rec.error_kind, rec.error = "cancelled", "the run was interrupted before this request finished"
            rec.done = time.perf_counter()
            self.writer.put(self.level_id, rec)
            raise
        self.writer.put(self.level_id, rec)
        self.state.done += 1
        if rec.ok:
            self.state.tokens += rec.output_tokens
            self.consecutive_failures = 0
            return
        self.state.failed += 1
        self.consecutive_failures += 1
        if rec.error_kind == "connection_refused":
            self.abort(f"the server refused connections ({rec.error}): it is down")
        elif self.consecutive_failures >= max(10, (self.state.concurrency or 1)):
            self.abort(
                f"{self.consecutive_failures} requests failed in a row, the last with {rec.error_kind}: {rec.error}"
            )

    def abort(self, reason: str) -> None:
        if self.abort_reason is None:
            self.abort_reason = reason
        self.stop.set()

    async def closed_loop(self, indices: list[int], concurrency: int, deadline: float | None, warmup: bool) -> None:
        queue = iter(indices)

        async def worker() -> None:
            for index in queue:
                if self.stop.is_set() or (deadline is not None and time.perf_counter() >= deadline):
                    return
                await self.one(index, time.perf_counter(), warmup)

        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(indices))))))

    async def open_loop(
        self, indices: list[int], rate: float, arrival: str, cap: int | None, seed: int, deadline: float | None
    ) -> None:
        rng = np.random.default_rng(seed)
        gaps = rng.exponential(1 / rate, len(indices)) if arrival == "poisson" else np.full(len(indices), 1 / rate)
        start = time.perf_counter()
        due = start + np.concatenate(([0.0], np.cumsum(gaps)[:-1]))
        slots = asyncio.Semaphore(cap) if cap else None
        tasks: set[asyncio.Task[None]] = set()

        async def capped(index: int, scheduled: float) -> None:
            if slots is None:
                await self.one(index, scheduled, False)
                return
            async with slots:  # the wait for a slot counts: latency from the schedule includes it
                if not self.stop.is_set():
                    await self.one(index, scheduled, False)

        try:
            for index, t in zip(indices, due, strict=True):
                if self.stop.is_set() or (deadline is not None and t >= deadline):
                    break
                delay = t - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                task = asyncio.create_task(capped(index, float(t)))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()


async def lag_monitor(samples: list[float], stop: asyncio.Event) -> None:
    """How late the event loop wakes up: the client's own lag, reported with every level."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(LAG_INTERVAL_S)
        samples.append(time.perf_counter() - t - LAG_INTERVAL_S)


def client_health(lags: list[float], cpu_s: float, wall_s: float) -> dict[str, Any]:
    lag_p99 = float(np.percentile(lags, 99) * 1000) if lags else 0.0
    cpu_pct = 100 * cpu_s / wall_s if wall_s > 0 else 0.0
    limited = lag_p99 > CLIENT_LAG_LIMIT_MS or cpu_pct > CLIENT_CPU_LIMIT
    health: dict[str, Any] = {
        "loop_lag_p99_ms": lag_p99,
        "loop_lag_max_ms": float(max(lags) * 1000) if lags else 0.0,
        "cpu_pct": cpu_pct,
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


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def resolve_model(url: str, api_key: str | None) -> str:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(url + "/v1/models", timeout=10, headers=headers, trust_env=False)
        r.raise_for_status()
        return str(r.json()["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
        raise Aborted(f"cannot ask {url}/v1/models for the model name ({e}); pass --model") from e


def accepted_extras(cfg: BenchConfig, model: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The sampling fields this server accepts: `ignore_eos` makes output lengths exact on vLLM and SGLang,
    but transformers serve rejects unknown fields (422). One tiny request finds out; a rejected field is
    dropped (the server's usage still gives each request's true length)."""
    path = "/v1/chat/completions" if cfg.endpoint == "chat" else "/v1/completions"
    body: dict[str, Any] = {"model": model, "max_tokens": 1, "stream": False, **extra}
    if cfg.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": "hi"}]
    else:
        body["prompt"] = "hi"
    headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
    try:
        r = httpx.post(cfg.url + path, json=body, headers=headers, timeout=cfg.timeout, trust_env=False)
    except httpx.HTTPError:
        return extra  # the level itself will say what is wrong with the server
    if r.status_code in (400, 422) and "ignore_eos" in r.text:
        return {k: v for k, v in extra.items() if k != "ignore_eos"}
    return extra


def build_workload(cfg: BenchConfig, model: str, n: int) -> Workload:
    tokenizer = Tokenizer.from_server(cfg.url, model)
    if tokenizer is None and cfg.tokenizer_dir:
        tokenizer = Tokenizer.from_dir(Path(cfg.tokenizer_dir))
    if cfg.dataset:
        return from_dataset(Path(cfg.dataset), n, cfg.output_len, tokenizer, cfg.seed)
    return synthetic(n, cfg.input_len, cfg.output_len, tokenizer, cfg.seed)


ProgressFn = Callable[[LevelState], None]


async def run(
    cfg: BenchConfig,
    store_path: Path,
    progress: ProgressFn,
    resume_run: int | None = None,
    launch_id: int | None = None,
    created: list[int] | None = None,
) -> int:
    """Run (or resume) a benchmark; returns the run id (also appended to `created` as soon as the run
    exists, so a caller interrupted half-way knows it). Raises Aborted with a one-line reason."""
    store = Store(store_path)
    model = cfg.model or resolve_model(cfg.url, cfg.api_key)
    cfg.model = model
    specs = cfg.level_specs()
    n_max = min(max(cfg.requests_for(c, r) for c, r in specs), MAX_PROMPTS)
    workload = await asyncio.to_thread(build_workload, cfg, model, n_max + cfg.warmup)
    extra = await asyncio.to_thread(accepted_extras, cfg, model, {"temperature": cfg.temperature, "ignore_eos": True})
    bodies = workload.bodies(model, cfg.endpoint, extra)
    if resume_run is None:
        run_id = store.add_run(cfg.label or model, cfg.url, model, cfg.public(), launch_id)
        if created is not None:
            created.append(run_id)
    else:
        run_id = resume_run
        store.update_run(run_id, state="running", reason=None)
    lengths = (
        "exact output lengths (ignore_eos)"
        if "ignore_eos" in extra
        else ("the server rejects ignore_eos: output lengths may end early at EOS")
    )
    store.update_run(run_id, tokenizer=f"{workload.tokenizer}; {workload.source}; {lengths}")
    done_levels = {lv["idx"]: lv for lv in store.levels(run_id)}
    clock = Clock()
    writer = RecordWriter(store.path, clock)
    path = "/v1/chat/completions" if cfg.endpoint == "chat" else "/v1/completions"
    pool = ConnectionPool(Target.from_url(cfg.url, path, cfg.api_key))
    try:
        if cfg.warmup and -1 not in done_levels:
            await warm_up(cfg, store, run_id, pool, bodies, writer, progress)
        for idx, (conc, rate) in enumerate(specs):
            previous = done_levels.get(idx)
            if previous is not None and previous["state"] == "complete":
                continue
            reason = await run_level(
                cfg, store, run_id, idx, conc, rate, previous, pool, bodies, writer, clock, progress
            )
            if reason:
                store.update_run(run_id, state="incomplete", reason=reason)
                raise Aborted(reason)
            if idx < len(specs) - 1:
                await asyncio.sleep(DRAIN_S)  # let the server drain its queues between levels
        store.update_run(run_id, state="complete")
        return run_id
    except asyncio.CancelledError:
        store.update_run(run_id, state="incomplete", reason="interrupted")
        raise
    finally:
        pool.close()
        writer.close()


async def warm_up(
    cfg: BenchConfig,
    store: Store,
    run_id: int,
    pool: ConnectionPool,
    bodies: list[bytes],
    writer: RecordWriter,
    progress: ProgressFn,
) -> None:
    level_id = store.add_level(run_id, -1, None, None)
    state = LevelState(-1, None, None, cfg.warmup, warmup=True)
    runner = LevelRunner(pool, bodies, writer, level_id, state, cfg.timeout)
    first_c = cfg.level_specs()[0][0] or 1
    indices = list(range(len(bodies) - cfg.warmup, len(bodies)))  # prompts of their own: no cache reuse later
    await runner.closed_loop(indices, min(first_c, cfg.warmup), None, warmup=True)
    progress(state)
    store.update_level(level_id, state="warmup", ended=time.time())
    if runner.abort_reason:
        raise Aborted(f"warm-up failed: {runner.abort_reason}")


async def run_level(
    cfg: BenchConfig,
    store: Store,
    run_id: int,
    idx: int,
    conc: int | None,
    rate: float | None,
    previous: dict[str, Any] | None,
    pool: ConnectionPool,
    bodies: list[bytes],
    writer: RecordWriter,
    clock: Clock,
    progress: ProgressFn,
) -> str | None:
    """Run one level to the end; returns why it stopped early, or None."""
    n = cfg.requests_for(conc, rate)
    if previous is not None:
        level_id = previous["id"]
        finished = {row["idx"] for row in store.request_rows(level_id) if row["error_kind"] is None}
        store.update_level(level_id, state="running", reason=None)
    else:
        level_id = store.add_level(run_id, idx, conc, rate)
        finished = set()
    indices = [i for i in range(n) if i not in finished]
    state = LevelState(idx, conc, rate, len(indices))
    runner = LevelRunner(pool, bodies, writer, level_id, state, cfg.timeout)
    before = await asyncio.to_thread(specdecode.scrape, cfg.url)
    if await pool.prewarm(min(conc or 64, len(indices), 4096)):
        await asyncio.sleep(0.2)  # connected is not yet accepted: let the server take them before the load
    lags: list[float] = []
    stop_monitor = asyncio.Event()
    monitor = asyncio.create_task(lag_monitor(lags, stop_monitor))
    ticker = asyncio.create_task(_tick(progress, state, stop_monitor))
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    deadline = wall0 + cfg.duration if cfg.duration else None
    try:
        if rate is not None:
            await runner.open_loop(indices, rate, cfg.arrival, conc, cfg.seed + idx, deadline)
        else:
            await runner.closed_loop(indices, conc or 1, deadline, warmup=False)
    except asyncio.CancelledError:
        _finish_level(
            store,
            level_id,
            writer,
            cfg,
            rate,
            None,
            client_health(lags, cpu_seconds() - cpu0, time.perf_counter() - wall0),
            "incomplete",
            "interrupted",
        )
        raise
    finally:
        stop_monitor.set()
        await asyncio.gather(monitor, ticker, return_exceptions=True)
    health = client_health(lags, cpu_seconds() - cpu0, time.perf_counter() - wall0)
    after = await asyncio.to_thread(specdecode.scrape, cfg.url) if runner.abort_reason is None else None
    spec = specdecode.acceptance(before, after)
    progress(state)
    complete = runner.abort_reason is None
    _finish_level(
        store, level_id, writer, cfg, rate, spec, health, "complete" if complete else "incomplete", runner.abort_reason
    )
    return runner.abort_reason


def _finish_level(
    store: Store,
    level_id: int,
    writer: RecordWriter,
    cfg: BenchConfig,
    rate: float | None,
    spec: dict[str, Any] | None,
    health: dict[str, Any],
    state: str,
    reason: str | None,
) -> None:
    writer.flush()
    records = [from_row(row) for row in store.request_rows(level_id)]
    summary = summarise(records, cfg.slo, rate_mode=rate is not None)
    store.update_level(
        level_id, state=state, ended=time.time(), summary=summary, spec_decode=spec, client=health, reason=reason
    )


async def _tick(progress: ProgressFn, state: LevelState, stop: asyncio.Event) -> None:
    while not stop.is_set():
        progress(state)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.25)


def parse_list(text: str, kind: type) -> list[Any]:
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise ValueError(f"{text!r}: expected a comma-separated list of numbers, e.g. 1,8,64") from e
    if not values or any(v <= 0 or (isinstance(v, float) and math.isinf(v)) for v in values):
        raise ValueError(f"{text!r}: expected positive numbers, e.g. 1,8,64")
    return values
