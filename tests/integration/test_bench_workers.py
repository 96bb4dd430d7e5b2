"""bench --workers against the reference streaming server: the same requests, schedule and records as one
process; a worker killed mid-level and Ctrl-C keep every finished request, and --resume completes the level."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from firstlight.benchmark import fleet
from firstlight.records import RequestRecord
from firstlight.store import Store
from firstlight.testing import refserver
from tests.conftest import firstlight, free_port, interruptible


@pytest.fixture(scope="module")
def ref() -> Iterator[str]:
    port = free_port()
    proc = refserver.start_process(port, 20.0, 5.0)
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


def served(url: str) -> int:
    """Requests the server finished since the last call (its own record: /truth resets on every read)."""
    return int(httpx.get(url + "/truth", trust_env=False).json()["requests"])


def level_records(store: Path, run_id: int, idx: int = 0) -> list[RequestRecord]:
    db = Store(store)
    (level,) = [lv for lv in db.levels(run_id) if lv["idx"] == idx]
    return db.requests(level["id"])


def bench_args(url: str, *options: str) -> list[str]:
    return ["bench", "--url", url, "--input-len", "16", *options]


def test_closed_loop_with_two_workers_sends_and_stores_what_one_process_does(ref: str, tmp_path: Path) -> None:
    stores = {}
    for workers in ("1", "2"):
        store, out = tmp_path / f"w{workers}.db", tmp_path / f"w{workers}.json"
        served(ref)
        res = firstlight(
            *bench_args(ref, "--concurrency", "8", "--num-requests", "40", "--output-len", "16"),
            "--warmup", "0", "--workers", workers, "--json", str(out), store=store, timeout=60,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        (lv,) = json.loads(out.read_text())["levels"]
        records = level_records(store, json.loads(out.read_text())["run"])
        assert served(ref) == len(records)  # the server's own count: nothing sent twice, nothing lost
        stores[workers] = (lv, sorted(r.index for r in records))
        assert lv["state"] == "complete" and lv["completed"] == 40 and lv["output_tokens"] == 40 * 16
    (one, one_indexes), (two, two_indexes) = stores["1"], stores["2"]
    assert one_indexes == two_indexes == list(range(40))  # the same requests, no duplicate, no gap
    assert "workers" not in one["client"]  # one process: today's shape
    workers = two["client"]["workers"]
    assert [(w["worker"], w["streams"], w["requests"]) for w in workers] == [(0, 4, 20), (1, 4, 20)]
    for w in workers:
        assert {"loop_lag_p99_ms", "cpu_pct", "cpu_s", "client_limited", "pid"} <= set(w)
    assert two["client"]["client_limited"] == any(w["client_limited"] for w in workers)
    assert abs(two["ttft_ms"]["p50"] - one["ttft_ms"]["p50"]) < 5  # both measure the server's 20 ms


def test_open_loop_schedule_is_the_one_process_schedule(ref: str, tmp_path: Path) -> None:
    schedules = {}
    for workers in ("1", "2"):
        store, out = tmp_path / f"w{workers}.db", tmp_path / f"w{workers}.json"
        res = firstlight(
            *bench_args(ref, "--request-rate", "60", "--arrival", "poisson", "--seed", "7", "--num-requests", "30"),
            "--output-len", "4", "--max-concurrency", "8", "--warmup", "0", "--workers", workers,
            "--json", str(out), store=store, timeout=60,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        data = json.loads(out.read_text())
        assert data["levels"][0]["completed"] == 30
        records = level_records(store, data["run"])
        first = min(r.scheduled for r in records)
        schedules[workers] = {r.index: r.scheduled - first for r in records}
    assert sorted(schedules["1"]) == sorted(schedules["2"]) == list(range(30))
    for index, offset in schedules["1"].items():  # stored on the wall clock: float precision ~1e-6 s
        assert abs(schedules["2"][index] - offset) < 1e-5, index
    assert max(schedules["1"].values()) > 0.1  # a real schedule, not everything at once


def worker_processes(parent: psutil.Process, n: int, timeout: float = 20) -> list[psutil.Process]:
    """The bench's spawned workers (not multiprocessing's resource tracker), once there are n."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in parent.children() if "spawn_main" in " ".join(p.cmdline())]
        if len(found) == n:
            return found
        time.sleep(0.02)
    pytest.fail(f"{n} worker processes did not appear")


def wait_for_stored(store: Path, n: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        db = Store(store)
        run = db.latest_run()
        levels = [lv for lv in db.levels(run["id"]) if lv["idx"] == 0] if run else []
        if levels and sum(r.ok for r in db.requests(levels[0]["id"])) >= n:
            return
        time.sleep(0.02)
    pytest.fail(f"{n} requests were not stored")


@contextlib.contextmanager
def two_workers_mid_level(store: Path) -> Iterator[tuple[str, subprocess.Popen[str], psutil.Process]]:
    """A bench of 16 requests, 4 at a time, on 2 workers, against a slow server (12 tokens: 680 ms a request, 4
    in step), once its first round is stored: the server's URL, the bench process and one of its workers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = refserver.start_process(port, 20.0, 60.0)
    try:
        bench = subprocess.Popen(
            [sys.executable, "-m", "firstlight", *bench_args(url, "--concurrency", "4", "--num-requests", "16"),
             "--output-len", "12", "--warmup", "0", "--workers", "2", "--store", str(store)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        victim, _ = worker_processes(psutil.Process(bench.pid), 2)
        wait_for_stored(store, 4)
        yield url, bench, victim
    finally:
        server.kill()


def test_a_killed_worker_ends_the_level_keeping_what_finished_and_resume_completes_it(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with two_workers_mid_level(store) as (url, bench, victim):
        time.sleep(0.3)  # half-way through the second round: no request is about to end
        victim.send_signal(signal.SIGKILL)
        out, err = bench.communicate(timeout=30)
        assert bench.returncode == 1, out + err
        assert "worker process 0" in err and "killed by SIGKILL" in err and "Traceback" not in err
        run = Store(store).latest_run()
        assert run is not None and run["state"] == "incomplete"
        (level,) = [lv for lv in Store(store).levels(run["id"]) if lv["idx"] == 0]
        kept = level_records(store, run["id"])
        # every request the server finished is stored (the survivor finished its requests in flight), once
        assert served(url) == len(kept) and all(r.ok for r in kept)
        assert level["state"] == "incomplete" and 4 <= len(kept) < 16
        assert len({r.index for r in kept}) == len(kept)
        died = [w for w in level["client"]["workers"] if "died" in w]
        assert [(w["worker"], w["died"]) for w in died] == [(0, "killed by SIGKILL")]

        res = firstlight("bench", "--resume", str(run["id"]), store=store, timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        assert served(url) == 16 - len(kept)  # exactly the missing requests
        records = level_records(store, run["id"])
        assert sorted(r.index for r in records) == list(range(16))
        (level,) = [lv for lv in Store(store).levels(run["id"]) if lv["idx"] == 0]
        assert level["state"] == "complete" and level["summary"]["completed"] == 16
        assert len(level["client"]["workers"]) == 2  # --workers 2 came back from the stored configuration


def test_a_stopped_worker_is_killed_and_the_level_ends_keeping_what_finished(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with two_workers_mid_level(store) as (_, bench, victim):
        victim.send_signal(signal.SIGSTOP)  # alive, silent: without a watchdog the level would wait forever
        started = time.monotonic()
        out, err = bench.communicate(timeout=60)
        assert bench.returncode == 1, out + err
        assert "worker process 0" in err and "stopped answering" in err and "Traceback" not in err
        assert time.monotonic() - started < fleet.SILENCE_S + 10
        run = Store(store).latest_run()
        assert run is not None and run["state"] == "incomplete"
        (level,) = [lv for lv in Store(store).levels(run["id"]) if lv["idx"] == 0]
        kept = level_records(store, run["id"])
        assert level["state"] == "incomplete" and 4 <= len(kept) < 16 and all(r.ok for r in kept)
        assert len({r.index for r in kept}) == len(kept)
        died = [w for w in level["client"]["workers"] if "died" in w]
        assert [(w["worker"], w["died"]) for w in died] == [(0, "stopped answering, then killed by SIGKILL")]


def test_ctrl_c_stops_the_workers_and_keeps_every_finished_request(ref: str, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    bench = subprocess.Popen(
        [sys.executable, "-m", "firstlight", *bench_args(ref, "--concurrency", "4", "--num-requests", "2000"),
         "--output-len", "20", "--warmup", "0", "--workers", "2", "--store", str(store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
    )  # fmt: skip
    workers = worker_processes(psutil.Process(bench.pid), 2)
    wait_for_stored(store, 8)
    bench.send_signal(signal.SIGINT)
    out, err = bench.communicate(timeout=30)
    assert bench.returncode == 130, out + err
    assert "interrupted" in err and "Traceback" not in err
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in workers)
    run = Store(store).latest_run()
    assert run is not None and run["state"] == "incomplete"
    (level,) = [lv for lv in Store(store).levels(run["id"]) if lv["idx"] == 0]
    records = level_records(store, run["id"])
    finished = [r for r in records if r.ok]
    assert level["state"] == "incomplete" and level["summary"]["completed"] == len(finished) >= 8
    # the requests in flight at Ctrl-C are stored as cancelled, one per stream at most
    assert {r.error_kind for r in records if not r.ok} <= {"cancelled"} and len(records) - len(finished) <= 4
    assert len({r.index for r in records}) == len(records)
