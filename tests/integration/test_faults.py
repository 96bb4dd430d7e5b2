"""Faults injected on purpose, the quick ones (perf/faults.py runs them all, with the slow engine ones):
a benchmark against a server that misbehaves in each way, with too few file descriptors, and with its
store's file system full; a launch whose watcher is killed, and one that stops answering after ready.
Real processes throughout: firstlight's fault and reference servers, llama.cpp's llama-server."""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from firstlight.store import LaunchState, Store
from firstlight.testing.faultserver import FAULTS
from tests.conftest import firstlight, free_port
from tests.integration.test_llama_server import llama_spec

EXPECTED = {
    "http500": "http_500",
    "garbage": "malformed_stream",
    "close_mid_chunk": "connection_reset",
    "huge_chunk": None,
    "slowloris": "timeout",
    "reset": "connection_reset",
    "no_done": "timeout",
}


def start_server(module: str, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", f"firstlight.testing.{module}", "--port", str(port), *args])
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(url + "/v1/models", timeout=1)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    pytest.fail(f"{module} did not start")


def stored(store: Path) -> int:
    with sqlite3.connect(store) as db:
        query = "SELECT COUNT(*) FROM bench_requests r JOIN bench_levels l ON r.level_id = l.id WHERE l.idx >= 0"
        return int(db.execute(query).fetchone()[0])


@pytest.mark.parametrize("fault", FAULTS)
def test_a_misbehaving_server_is_counted_by_kind_and_every_request_kept(fault: str, tmp_path: Path) -> None:
    proc, url = start_server("faultserver", "--fault", fault)
    store, out = tmp_path / "store.db", tmp_path / "run.json"
    try:
        res = firstlight(
            "bench", "--url", url, "--concurrency", "2", "--num-requests", "4", "--warmup", "0", "--timeout", "3",
            "--output-len", "8", "--input-len", "16", "--json", str(out), store=store, timeout=120,
        )  # fmt: skip
    finally:
        proc.kill()
    assert "Traceback" not in res.stdout + res.stderr
    level = json.loads(out.read_text())["levels"][0]
    if EXPECTED[fault] is None:
        assert level["completed"] == 4 and level["output_tokens"] == 32
    else:
        assert {k: v["count"] for k, v in level["errors"].items()} == {EXPECTED[fault]: 4}
    assert stored(store) == 4


def test_too_few_file_descriptors_fail_requests_not_the_benchmark(tmp_path: Path) -> None:
    proc, url = start_server("refserver", "--ttft-ms", "20", "--itl-ms", "5")
    store, out = tmp_path / "store.db", tmp_path / "run.json"
    try:
        res = subprocess.run(
            [sys.executable, "-m", "firstlight", "bench", "--url", url, "--concurrency", "128", "--num-requests",
             "256", "--warmup", "0", "--output-len", "8", "--json", str(out), "--store", str(store)],
            capture_output=True, text=True, timeout=120,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96)),
        )  # fmt: skip
    finally:
        proc.kill()
    assert "Traceback" not in res.stderr and res.returncode == 1
    assert res.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "open-files limit" in res.stderr
    level = json.loads(out.read_text())["levels"][0]
    assert level["completed"] > 0 and level["errors"]["connection_error"]["count"] > 0
    assert stored(store) == level["completed"] + level["failed"]


def test_a_full_store_ends_the_run_with_one_line_and_keeps_what_was_committed(tmp_path: Path) -> None:
    proc, url = start_server("refserver", "--ttft-ms", "5", "--itl-ms", "1")
    store = tmp_path / "store.db"
    limit = 1024 * 1024

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    try:
        res = subprocess.run(
            [sys.executable, "-m", "firstlight", "bench", "--url", url, "--concurrency", "8", "--num-requests",
             "3000", "--warmup", "0", "--output-len", "64", "--store", str(store)],
            capture_output=True, text=True, timeout=300, preexec_fn=small_disk,
        )  # fmt: skip
    finally:
        proc.kill()
    assert "Traceback" not in res.stderr and res.returncode != 0
    assert "cannot be used" in res.stderr.strip().splitlines()[-1]
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert 0 < stored(store) < 3000


def test_a_killed_watcher_is_reported_and_a_new_one_takes_over(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    assert firstlight("up", str(llama_spec(tmp_path)), "--detach", store=store).returncode == 0
    db = Store(store)
    deadline = time.monotonic() + 30
    while db.latest_launch().state != LaunchState.READY and time.monotonic() < deadline:  # type: ignore[union-attr]
        time.sleep(0.05)
    first = db.latest_launch()
    assert first is not None and first.state == LaunchState.READY and first.watcher_pid
    os.kill(first.watcher_pid, signal.SIGKILL)
    time.sleep(0.3)
    row = json.loads(firstlight("status", "--json", store=store).stdout)[0]
    assert row["running"] and row["watcher_lost"]
    watch = firstlight("watch", store=store, timeout=60)
    assert watch.returncode == 0 and "a new watcher took over" in watch.stderr
    second = db.latest_launch()
    assert second is not None and second.state == LaunchState.READY and second.watcher_pid != first.watcher_pid
    assert not json.loads(firstlight("status", "--json", store=store).stdout)[0]["watcher_lost"]
    # the new watcher notices the engine's end, as the first would have
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while db.latest_launch().state == LaunchState.READY and time.monotonic() < deadline:  # type: ignore[union-attr]
        time.sleep(0.05)
    ended = db.latest_launch()
    assert ended is not None and ended.state == LaunchState.EXITED and "after it was ready" in (ended.reason or "")


def test_a_server_that_stops_answering_after_ready_is_stalled_then_ready_again(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    assert firstlight("up", str(llama_spec(tmp_path)), store=store, timeout=60).returncode == 0
    db = Store(store)
    launch = db.latest_launch()
    assert launch is not None and launch.pgid
    os.killpg(launch.pgid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 60
        while db.latest_launch().state != LaunchState.STALLED and time.monotonic() < deadline:  # type: ignore[union-attr]
            time.sleep(0.2)
        stalled = db.latest_launch()
        assert stalled is not None and stalled.state == LaunchState.STALLED
        assert "stopped answering /health after it was ready" in (stalled.reason or "")
    finally:
        os.killpg(launch.pgid, signal.SIGCONT)
    deadline = time.monotonic() + 20
    while db.latest_launch().state != LaunchState.READY and time.monotonic() < deadline:  # type: ignore[union-attr]
        time.sleep(0.2)
    assert db.latest_launch().state == LaunchState.READY  # type: ignore[union-attr]
    assert firstlight("down", store=store).returncode == 0
