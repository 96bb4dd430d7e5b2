"""The store: launches with their states and events, and benchmark requests through their row mapping.
Constructed records (no server): the numbers are chosen so that every field's round trip is visible."""

from __future__ import annotations

import sqlite3
import time
from array import array
from pathlib import Path

import pytest

from firstlight.benchmark.recorder import Clock, RecordWriter
from firstlight.errors import StoreError
from firstlight.records import RequestRecord
from firstlight.store import LaunchState, Store


def test_launch_lifecycle_state_enum_and_events(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    launch_id = store.add_launch("tiny", "vllm", {"engine": "vllm", "env": {"A": "1"}}, "http://127.0.0.1:1", "/l")
    record = store.get_launch(launch_id)
    assert record is not None and record.state is LaunchState.STARTING and not record.state.decided
    store.update_launch(launch_id, state=LaunchState.FAILED, argv=["python", "-m", "x"], diagnosis={"c": 1})
    store.add_event(launch_id, "phase", "weights_loading", entered=True, line_no=7)
    store.add_event(launch_id, "gpu", "weights_loading", gpus=[])
    record = store.get_launch(launch_id)
    assert record is not None
    assert record.state is LaunchState.FAILED and record.state.decided
    assert record.argv == ["python", "-m", "x"] and record.diagnosis == {"c": 1}
    assert record.spec["env"] == {"A": "1"}
    events = store.events(launch_id)
    first = events[0]
    assert (first.kind, first.phase, first.data) == ("phase", "weights_loading", {"entered": True, "line_no": 7})
    assert [e.kind for e in store.events(launch_id, after_id=events[0].id)] == ["gpu"]
    assert [e.kind for e in store.events(launch_id, kinds=("gpu",))] == ["gpu"]
    assert store.latest_launch() is not None and store.latest_launch().id == launch_id  # type: ignore[union-attr]
    # a second process sees what the first committed (WAL): the store is shared by watcher and commands
    assert Store(tmp_path / "s.db").get_launch(launch_id).state is LaunchState.FAILED  # type: ignore[union-attr]


def test_a_stopped_launch_is_never_relabelled_by_its_watcher(tmp_path: Path) -> None:
    """`down` marks the launch stopped, then signals; the watcher may still see a line (a SIGSTOPped engine
    gets SIGCONT to be stopped) and write its own state: that write must not undo the stop."""
    watcher, down = Store(tmp_path / "s.db"), Store(tmp_path / "s.db")
    launch_id = watcher.add_launch("tiny", "vllm", {"engine": "vllm"}, "http://127.0.0.1:1", "/l")
    watcher.update_launch(launch_id, unless=LaunchState.STOPPED, state=LaunchState.STALLED, reason="stalled")
    down.update_launch(launch_id, state=LaunchState.STOPPED, reason="stopped by firstlight down")
    watcher.update_launch(launch_id, unless=LaunchState.STOPPED, state=LaunchState.STARTING, reason=None)
    watcher.update_launch(launch_id, unless=LaunchState.STOPPED, state=LaunchState.FAILED, reason="exited")
    record = down.get_launch(launch_id)
    assert record is not None and record.state is LaunchState.STOPPED and record.reason == "stopped by firstlight down"


def test_requests_round_trip_on_the_wall_clock(tmp_path: Path) -> None:
    """Chunk times are stored as the client's clock readings and come back shifted to the wall clock, so every
    difference the metrics take (TTFT, ITL, E2E) is exactly what the client measured."""
    store = Store(tmp_path / "s.db")
    run_id = store.add_run("r", "http://x", "m", {"concurrency": [1]}, None)
    level_id = store.add_level(run_id, 0, 1, None)
    ok = RequestRecord(0, scheduled=100.0, sent=100.5, done=101.25, status=200, prompt_tokens=12)
    ok.chunks = array("d", [100.75, 100.875, 101.0])
    ok.chunk_tokens = array("i", [1, 2, 1])
    ok.completion_tokens = 4
    failed = RequestRecord(1, scheduled=100.0, sent=100.25, done=100.5, status=500, warmup=True)
    failed.error_kind, failed.error = "http_500", "boom"
    wall = Clock()
    store.add_requests([(level_id, ok), (level_id, failed)], wall.wall)
    back_ok, back_failed = store.requests(level_id)
    assert back_ok.ttft == pytest.approx(ok.ttft) and back_ok.e2e == pytest.approx(ok.e2e)
    assert back_ok.itls() == pytest.approx(ok.itls())
    assert back_ok.sent == pytest.approx(wall.wall(100.5))
    assert list(back_ok.chunk_tokens) == [1, 2, 1] and back_ok.output_tokens == 4 and back_ok.prompt_tokens == 12
    assert back_failed.error_kind == "http_500" and back_failed.error == "boom" and back_failed.warmup
    assert not back_failed.ok and back_failed.chunks.tolist() == []


def test_record_writer_commits_everything_it_was_given(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    level_id = store.add_level(store.add_run("r", "u", "m", {}, None), 0, 4, None)
    writer = RecordWriter(store.path, Clock())
    for i in range(250):
        rec = RequestRecord(i, scheduled=1.0, sent=1.0, done=2.0, status=200)
        rec.chunks = array("d", [1.5, 2.0])
        writer.put(level_id, rec)
    writer.flush()
    assert len(store.requests(level_id)) == 250  # flushed: visible to another connection at once
    writer.close()
    assert sorted(r.index for r in Store(store.path).requests(level_id)) == list(range(250))


def test_record_writer_commits_on_its_own_without_being_woken(tmp_path: Path) -> None:
    """put() only appends (the loop never wakes the thread): the thread's own 50 ms wake-ups commit, so a
    crash mid-level loses at most that much, and a flush still covers every record put before it."""
    store = Store(tmp_path / "s.db")
    level_id = store.add_level(store.add_run("r", "u", "m", {}, None), 0, 4, None)
    writer = RecordWriter(store.path, Clock())
    writer.put(level_id, RequestRecord(0, scheduled=1.0, sent=1.0, done=2.0, status=200))
    deadline = time.monotonic() + 10
    while not store.requests(level_id) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r.index for r in store.requests(level_id)] == [0]
    for i in range(1, 40):  # put and flushed in quick turns: none may fall between a batch and its flush
        writer.put(level_id, RequestRecord(i, scheduled=1.0, sent=1.0, done=2.0, status=200))
        writer.flush()
        assert len(store.requests(level_id)) == i + 1
    writer.close()


def test_a_file_that_is_not_a_store_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"this is not SQLite " * 100)
    with pytest.raises(StoreError, match="cannot open the store"):
        Store(bad)
    assert issubclass(StoreError, Exception) and StoreError.exit_code == 2
    sqlite3.connect(tmp_path / "ok.db").close()
    assert Store(tmp_path / "ok.db").launches() == []  # an empty SQLite file becomes a store
