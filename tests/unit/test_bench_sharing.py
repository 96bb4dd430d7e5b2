"""A level shared between worker processes: streams split, requests and arrival times dealt, how many workers
`auto` starts, when failures stop a sender, and the client health of several workers."""

from __future__ import annotations

import asyncio
import time
from array import array
from pathlib import Path
from types import SimpleNamespace

import pytest
import uvloop

from firstlight.benchmark import schedule, sharing
from firstlight.benchmark.client import Target
from firstlight.benchmark.config import BenchConfig, LevelSpec
from firstlight.benchmark.failures import FailureRun
from firstlight.benchmark.fleet import jobs
from firstlight.benchmark.health import client_health, fleet_health
from firstlight.benchmark.levels import WARMUP_INDEX, warmup_itl, workers_for
from firstlight.records import RequestRecord
from firstlight.reports.tables import level_row, worker_lines
from firstlight.store import Store

TARGET = Target.from_url("http://127.0.0.1:8000", "/v1/completions")


@pytest.mark.parametrize(
    ("total", "parts", "expected"),
    [(10, 4, [3, 3, 2, 2]), (8, 2, [4, 4]), (1, 3, [1, 0, 0]), (0, 2, [0, 0]), (7, 1, [7])],
)
def test_split_evenly(total: int, parts: int, expected: list[int]) -> None:
    assert sharing.split_evenly(total, parts) == expected


def test_requests_are_dealt_over_the_streams_in_proportion() -> None:
    assert sharing.deal_by_streams(range(6), [2, 1]) == [[0, 2, 3, 5], [1, 4]]
    assert sharing.deal_by_streams(range(5), [2, 2]) == [[0, 2, 4], [1, 3]]  # equal streams: round-robin


def test_closed_shares_cover_every_index_once_and_leave_idle_workers_out() -> None:
    indices = [i for i in range(50) if i % 7]  # a resumed level: some already done
    shares = sharing.closed_shares(indices, 5, 2)
    assert [s.streams for s in shares] == [3, 2]
    assert sorted(i for s in shares for i in s.indices) == indices
    assert [len(s.indices) for s in shares] == [25, 17]  # 3 : 2, so both run out of work together
    assert all(s.offsets is None for s in shares)
    assert [s.streams for s in sharing.closed_shares(range(10), 1, 4)] == [1]  # C=1: one worker
    assert [s.indices for s in sharing.closed_shares([7], 8, 2)] == [[7]]  # one request left: one worker


def test_open_shares_deal_the_one_schedule_round_robin() -> None:
    offsets = [0.0, 0.1, 0.15, 0.4, 0.41]
    shares = sharing.open_shares([0, 1, 2, 3, 4], offsets, None, 2)
    assert [(s.indices, s.offsets, s.streams) for s in shares] == [
        ([0, 2, 4], [0.0, 0.15, 0.41], None),
        ([1, 3], [0.1, 0.4], None),
    ]
    capped = sharing.open_shares(list(range(5)), offsets, 3, 4)  # a cap of 3: three workers of one each
    assert [s.streams for s in capped] == [1, 1, 1]
    assert sorted(i for s in capped for i in s.indices) == list(range(5))


@pytest.mark.parametrize("arrival", ["poisson", "constant"])
def test_worker_jobs_keep_the_one_process_schedule(arrival: str) -> None:
    cfg = BenchConfig(url="http://127.0.0.1:8000", request_rates=[20.0], arrival=arrival, seed=7, max_concurrency=8)
    level = cfg.levels()[0]
    indices = list(range(3, 40))  # resumed: the first three are done
    one_process = dict(zip(indices, schedule.arrivals(arrival, 20.0, cfg.seed + level.index), strict=False))
    dealt = jobs(cfg, level, indices, 3, [b"a", b"b"], TARGET)
    assert [j.streams for j in dealt] == [3, 3, 2]
    assert {i: o for j in dealt for i, o in zip(j.indices, j.offsets or [], strict=True)} == one_process
    assert all(j.bodies == {i: [b"a", b"b"][i % 2] for i in j.indices} for j in dealt)
    assert [j.prewarm for j in dealt] == [3, 3, 2]


def test_auto_workers_follow_the_chunk_rate_within_the_free_cores() -> None:
    per_worker = sharing.WORKER_CHUNKS_PER_S
    assert sharing.auto_workers(0.5 * per_worker, 15) == 1
    assert sharing.auto_workers(2.5 * per_worker, 15) == 3
    assert sharing.auto_workers(100 * per_worker, 15) == 15  # never more than the free cores
    assert sharing.auto_workers(100 * per_worker, 1) == 1
    assert sharing.free_cores() >= 1


def test_expected_chunk_rate() -> None:
    assert sharing.expected_chunk_rate(LevelSpec(0, 1024, None), 128, 0.01) == pytest.approx(102_400)
    assert sharing.expected_chunk_rate(LevelSpec(0, 64, None), 128, None) == pytest.approx(6_400)  # default ITL
    assert sharing.expected_chunk_rate(LevelSpec(0, None, 50.0), 128, 0.02) == pytest.approx(6_400)
    assert sharing.expected_chunk_rate(LevelSpec(0, 16, 50.0), 128, 0.02) == pytest.approx(800)  # the cap binds


def test_median_itl_of_the_warm_up() -> None:
    a, b = RequestRecord(0, 0.0), RequestRecord(1, 0.0, error_kind="timeout")
    a.chunks = array("d", [1.0, 1.01, 1.03, 1.04])
    b.chunks = array("d", [1.0, 2.0])  # failed: not counted
    assert sharing.median_itl([a, b]) == pytest.approx(0.01)
    assert sharing.median_itl([]) is None


def test_failure_run_stops_on_a_refusal_or_a_run_of_failures() -> None:
    run = FailureRun(concurrency=12)
    assert run.see(RequestRecord(0, 0.0, error_kind="timeout", error="x")) is None
    assert run.see(RequestRecord(1, 0.0)) is None and run.in_a_row == 0
    for i in range(11):
        assert run.see(RequestRecord(i, 0.0, error_kind="http_500", error="boom")) is None
    assert "12 requests failed in a row" in (run.see(RequestRecord(0, 0.0, error_kind="http_500", error="b")) or "")
    refused = RequestRecord(0, 0.0, error_kind="connection_refused", error="ECONNREFUSED")
    assert "it is down" in (FailureRun(None).see(refused) or "")


def test_fleet_health_puts_the_worst_worker_on_top() -> None:
    calm = {"worker": 0, "pid": 1, "streams": 4, "requests": 9, **client_health([0.001] * 10, 1.0, 10.0)}
    busy = {"worker": 1, "pid": 2, "streams": 4, "requests": 8, **client_health([0.02] * 10, 9.5, 10.0)}
    dead = {"worker": 2, "pid": 3, "streams": 4, "requests": 3, "died": "killed by SIGKILL"}
    parent = client_health([0.05] * 10, 0.5, 10.0)  # its lag never makes the level client-limited
    health = fleet_health(parent, [calm, busy, dead])
    assert health["workers"] == [calm, busy, dead] and health["parent"] == parent
    assert health["client_limited"] and health["warning"].startswith("worker 1: the client was CPU-bound")
    assert health["cpu_pct"] == pytest.approx(95.0) and health["cpu_s"] == pytest.approx(10.5)
    assert health["loop_lag_p99_ms"] == pytest.approx(20.0)
    assert not fleet_health(parent, [calm, dead])["client_limited"]
    level = {"concurrency": 12, "request_rate": None, "client": health}
    assert level_row(level)[-1] == "lag 20.0ms cpu 95% 3 workers LIMITED"
    assert worker_lines({"levels": [level]}) == [
        "C=12 workers: #0 9 req, lag 1.0ms cpu 10%; #1 8 req, lag 20.0ms cpu 95% LIMITED; "
        "#2 died (killed by SIGKILL) after 3 requests"
    ]


def test_open_loop_counts_from_a_given_start() -> None:
    """Workers wait for the same absolute instants: offsets from the level's start, not their own."""
    sent: list[tuple[int, float]] = []

    async def send(index: int, scheduled: float) -> None:
        sent.append((index, scheduled))

    async def level() -> float:
        start = time.perf_counter() + 0.05
        await schedule.open_loop(send, [4, 9], iter([0.0, 0.02]), None, asyncio.Event(), None, start=start)
        return start

    start = asyncio.run(level())
    assert [(i, t - start) for i, t in sent] == [(4, 0.0), (9, pytest.approx(0.02))]


def test_open_loop_never_sends_before_the_scheduled_time() -> None:
    """uvloop's millisecond timers wake up to ~0.5 ms early; a request sent before its time would make its
    latency from the schedule shorter than its own latency."""
    early: list[float] = []

    async def send(index: int, scheduled: float) -> None:
        early.append(scheduled - time.perf_counter())

    offsets = iter([i * 0.0013 for i in range(200)])
    uvloop.run(schedule.open_loop(send, list(range(200)), offsets, None, asyncio.Event(), None))
    assert len(early) == 200 and max(early) <= 0


def test_auto_sizes_each_level_from_the_warm_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "s.db")
    run_id = store.add_run("r", "http://x:1", "m", {}, None)
    assert warmup_itl(store, run_id) is None
    warm = RequestRecord(0, 1.0, sent=1.0, done=1.2, status=200, warmup=True)
    warm.chunks = array("d", [1.05, 1.07, 1.09])  # a 20 ms ITL
    store.add_requests([(store.add_level(run_id, WARMUP_INDEX, None, None), warm)], lambda t: t)
    itl = warmup_itl(store, run_id)
    assert itl == pytest.approx(0.02)
    monkeypatch.setattr(sharing, "free_cores", lambda: 15)
    ctx = SimpleNamespace(cfg=BenchConfig(url="http://x:1", workers="auto", output_len=128), itl_s=itl)
    at = {c: workers_for(ctx, LevelSpec(0, c, None)) for c in (64, 1024, 4096)}  # type: ignore[arg-type]
    assert at == {64: 1, 1024: 3, 4096: 10}  # 3,200, 51,200 and 204,800 chunks/s
    ctx.cfg.workers = 4
    assert workers_for(ctx, LevelSpec(0, 1, None)) == 4  # type: ignore[arg-type]
