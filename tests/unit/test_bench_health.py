"""The client's watch over its own process during a level: the garbage collector kept off the load, and a
level judged client-limited when its reads merged chunks (constructed records)."""

from __future__ import annotations

import gc
from array import array

import pytest

from firstlight.benchmark.health import CollectorPauses, judge_reads
from firstlight.benchmark.metrics import summarise
from firstlight.records import RequestRecord


def test_the_collector_is_off_and_frozen_during_a_level_and_restored_after() -> None:
    assert gc.isenabled()
    before = gc.get_freeze_count()
    pauses = CollectorPauses()
    pauses.hold()
    try:
        assert not gc.isenabled() and gc.get_freeze_count() > before
        gc.collect()  # a library that collects anyway: timed, and shown in the level's health
        assert pauses.pause_max_s > 0 and pauses.pause_s >= pauses.pause_max_s
    finally:
        pauses.release()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    seen = pauses.pause_s
    gc.collect()  # after the level: no longer counted
    assert pauses.pause_s == seen
    pauses.release()  # twice is harmless
    assert gc.isenabled()


def test_a_collector_the_caller_had_off_stays_off() -> None:
    gc.disable()
    try:
        pauses = CollectorPauses()
        pauses.hold()
        pauses.release()
        assert not gc.isenabled()
    finally:
        gc.enable()


def _streams(merged_every: int | None, gap_s: float = 0.010, streams: int = 20, tokens: int = 100) -> list:
    """Constructed records: `streams` streams of `tokens` chunks `gap_s` apart; with `merged_every`, every that
    many chunks one arrives in the same read as the next (a client that fell a gap behind): same stamp."""
    records = []
    for i in range(streams):
        rec = RequestRecord(i, 0.0, sent=0.0, status=200, done=1.0)
        times = [0.05 + k * gap_s for k in range(tokens)]
        if merged_every:
            times = [times[k + 1] if (k % merged_every == 0 and k + 1 < tokens) else t for k, t in enumerate(times)]
        rec.chunks = array("d", times)
        rec.chunk_tokens = array("i", [1] * tokens)
        records.append(rec)
    return records


HEALTHY = {"loop_lag_p99_ms": 3.0, "loop_lag_max_ms": 19.5, "cpu_pct": 80.0, "cpu_s": 8.0, "client_limited": False}


def test_chunks_read_together_after_a_stall_longer_than_the_gap_make_the_level_client_limited() -> None:
    summary = summarise(_streams(merged_every=50))  # 2% of gaps 0, as many doubled: ITL p99 is the client's
    assert summary["itl_same_read_pct"] == pytest.approx(2.0, abs=0.1)
    judged = judge_reads(HEALTHY, summary)
    assert judged["client_limited"] and "stalled for up to 19.5 ms" in judged["warning"]
    assert not HEALTHY["client_limited"]  # the health given is not changed in place


def test_reads_are_not_judged_without_a_stall_as_long_as_the_gap_or_with_few_merged_chunks() -> None:
    merged = summarise(_streams(merged_every=50))
    assert not judge_reads(dict(HEALTHY, loop_lag_max_ms=8.0), merged)["client_limited"]  # no stall that long
    few = summarise(_streams(merged_every=400, tokens=400))  # 0.25%: not enough to move ITL p99
    assert not judge_reads(HEALTHY, few)["client_limited"]


def test_a_server_that_writes_several_events_at_once_is_not_taken_for_a_slow_client() -> None:
    batched = _streams(merged_every=None, tokens=99)
    for rec in batched:  # three events a write: two gaps in three are 0
        rec.chunks = array("d", [rec.chunks[k - k % 3 + 2] for k in range(len(rec.chunks))])
    batched = summarise(batched)
    assert batched["itl_ms"]["p50"] == 0.0
    assert not judge_reads(HEALTHY, batched)["client_limited"]
