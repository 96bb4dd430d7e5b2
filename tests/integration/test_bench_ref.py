"""bench against the reference streaming server, whose timing is known; a server killed mid-level; Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from firstlight.store import Store
from firstlight.testing import refserver
from tests.conftest import firstlight, free_port, interruptible

TTFT_MS, ITL_MS = 30.0, 5.0


def start_refserver(port: int, ttft: float = TTFT_MS, itl: float = ITL_MS, per_chunk: int = 1) -> subprocess.Popen:
    return refserver.start_process(port, ttft, itl, per_chunk)


@pytest.fixture(scope="module")
def ref() -> Iterator[str]:
    port = free_port()
    proc = start_refserver(port)
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


def test_levels_match_the_server_truth(ref: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = firstlight(
        "bench",
        "--url",
        ref,
        "--concurrency",
        "1,8",
        "--num-requests",
        "24",
        "--output-len",
        "20",
        "--input-len",
        "32",
        "--label",
        "ref",
        "--json",
        str(out),
        store=tmp_path / "s.db",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    truth = httpx.get(ref + "/truth").json()
    data = json.loads(out.read_text())
    assert [lv["concurrency"] for lv in data["levels"]] == [1, 8]
    # the server kept its timing (its own record of when each chunk was written)...
    assert abs(truth["ttft_ms"]["p50"] - TTFT_MS) < 2 and abs(truth["itl_ms"]["p50"] - ITL_MS) < 0.5
    assert truth["requests"] == 2 + 2 * 24 and truth["tokens"] == truth["requests"] * 20
    for lv in data["levels"]:
        assert lv["completed"] == 24 and lv["failed"] == 0 and lv["state"] == "complete"
        assert lv["output_tokens"] == 24 * 20  # exact output lengths, N from the server's usage
        # ...and the client measured what the server did (loopback adds well under a millisecond a chunk)
        assert abs(lv["ttft_ms"]["p50"] - truth["ttft_ms"]["p50"]) < 5
        assert abs(lv["tpot_ms"]["p50"] - truth["tpot_ms"]["p50"]) < 0.5
        assert abs(lv["itl_ms"]["p50"] - truth["itl_ms"]["p50"]) < 1
        assert lv["tokens_per_chunk"] == {"1": 480}
        assert set(lv["client"]) >= {"loop_lag_p99_ms", "cpu_pct"}
        assert lv["spec_decode"] is None
    # the warm-up requests are stored but not in the numbers
    store = Store(tmp_path / "s.db")
    warm = [lv for lv in store.levels(data["run"]) if lv["idx"] == -1]
    assert warm and len(store.requests(warm[0]["id"])) == 2


def test_multi_token_chunks_tpot_vs_itl(tmp_path: Path) -> None:
    port = free_port()
    proc = start_refserver(port, itl=8, per_chunk=4)
    try:
        out = tmp_path / "r.json"
        res = firstlight(
            "bench",
            "--url",
            f"http://127.0.0.1:{port}",
            "--concurrency",
            "2",
            "--num-requests",
            "6",
            "--output-len",
            "16",
            "--input-len",
            "16",
            "--json",
            str(out),
            store=tmp_path / "s.db",
        )
        assert res.returncode == 0, res.stderr
        lv = json.loads(out.read_text())["levels"][0]
        assert lv["tokens_per_chunk"] == {"4": 24}
        assert abs(lv["itl_ms"]["p50"] - 8) < 1.5  # one gap per chunk
        assert abs(lv["tpot_ms"]["p50"] - 3 * 8 / 15) < 0.5  # (E2E − TTFT) / (N − 1) with N = 16
    finally:
        proc.kill()


def test_request_rate_mode_reports_schedule_relative_latency(ref: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = firstlight(
        "bench",
        "--url",
        ref,
        "--request-rate",
        "40",
        "--arrival",
        "constant",
        "--num-requests",
        "20",
        "--output-len",
        "8",
        "--input-len",
        "16",
        "--max-concurrency",
        "4",
        "--slo",
        "ttft=200,tpot=50",
        "--json",
        str(out),
        store=tmp_path / "s.db",
    )
    assert res.returncode == 0, res.stderr
    lv = json.loads(out.read_text())["levels"][0]
    assert lv["request_rate"] == 40 and lv["max_concurrency"] == 4
    assert lv["completed"] == 20
    assert lv["ttft_from_schedule_ms"]["p50"] >= lv["ttft_ms"]["p50"]
    assert lv["good_fraction"] == 1.0 and lv["goodput_req_s"] > 0


def test_server_killed_mid_level_keeps_results_and_resumes(tmp_path: Path) -> None:
    port = free_port()
    store = tmp_path / "s.db"
    proc = start_refserver(port, ttft=20, itl=50)  # 20 tokens: about 1 s a request
    bench = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "firstlight",
            "bench",
            "--url",
            f"http://127.0.0.1:{port}",
            "--concurrency",
            "4",
            "--num-requests",
            "24",
            "--output-len",
            "20",
            "--input-len",
            "16",
            "--warmup",
            "0",
            "--store",
            str(store),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3.5)
    proc.kill()
    proc.wait()
    out, err = bench.communicate(timeout=60)
    assert bench.returncode == 1, out + err
    assert "error:" in err and err.count("\n") <= 3  # a one-line reason, no traceback
    assert "Traceback" not in err
    db = Store(store)
    run = db.latest_run()
    assert run["state"] == "incomplete"
    (level,) = [lv for lv in db.levels(run["id"]) if lv["idx"] == 0]
    assert level["state"] == "incomplete"
    done_before = level["summary"]["completed"]
    assert 4 <= done_before < 24
    assert sum(e["count"] for e in level["summary"]["errors"].values()) >= 1
    assert "--resume" in out
    proc = start_refserver(port, ttft=20, itl=5)
    try:
        res = firstlight("bench", "--resume", str(run["id"]), store=store)
        assert res.returncode == 0, res.stdout + res.stderr
    finally:
        proc.kill()
    (level,) = [lv for lv in db.levels(run["id"]) if lv["idx"] == 0]
    assert level["state"] == "complete" and level["summary"]["completed"] == 24
    assert db.get_run(run["id"])["state"] == "complete"


def test_ctrl_c_keeps_every_finished_request(ref: str, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    bench = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "firstlight",
            "bench",
            "--url",
            ref,
            "--concurrency",
            "2",
            "--num-requests",
            "400",
            "--output-len",
            "20",
            "--input-len",
            "16",
            "--store",
            str(store),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    time.sleep(3)
    bench.send_signal(signal.SIGINT)
    out, err = bench.communicate(timeout=60)
    assert bench.returncode == 130, out + err
    assert "interrupted" in err and "Traceback" not in err
    db = Store(store)
    run = db.latest_run()
    assert run["state"] == "incomplete"
    (level,) = [lv for lv in db.levels(run["id"]) if lv["idx"] == 0]
    finished = [r for r in db.requests(level["id"]) if r.ok]
    assert level["state"] == "incomplete" and len(finished) >= 2
    assert level["summary"]["completed"] == len(finished)


def test_bad_options_are_clear(tmp_path: Path) -> None:
    for args, text in (
        (["--concurrency", "1"], "--url"),
        (["--url", "http://x:1", "--concurrency", "a,b"], "1,8,64"),
        (["--url", "http://x:1", "--slo", "fast"], "ttft=500"),
    ):
        res = firstlight("bench", *args, store=tmp_path / "s.db", timeout=60)
        assert res.returncode == 2 and text in res.stderr and "Traceback" not in res.stderr
    res = firstlight("bench", "--url", f"http://127.0.0.1:{free_port()}", store=tmp_path / "s.db", timeout=60)
    assert res.returncode == 1 and "Traceback" not in res.stderr


def test_library_api_runs_and_reports(ref: str, tmp_path: Path) -> None:
    from firstlight.benchmark import BenchConfig, run_bench
    from firstlight.reports import report

    seen: list[int] = []
    cfg = BenchConfig(url=ref, concurrency=[2], num_requests=6, input_len=8, output_len=8, warmup=0)
    result = run_bench(cfg, store=tmp_path / "s.db", on_progress=lambda state: seen.append(state.done))
    assert result.state == "complete" and result.levels[0]["completed"] == 6 and seen[-1] == 6
    assert report([result.run_id], store=tmp_path / "s.db") == [result.data]


def test_library_api_keeps_an_aborted_run(tmp_path: Path) -> None:
    from firstlight.benchmark import BenchAborted, BenchConfig, run_bench

    cfg = BenchConfig(url=f"http://127.0.0.1:{free_port()}", model="m", concurrency=[1], num_requests=2)
    with pytest.raises(BenchAborted, match="refused connections") as caught:
        run_bench(cfg, store=tmp_path / "s.db")
    run = Store(tmp_path / "s.db").get_run(caught.value.run_id)
    assert run is not None and run["state"] == "incomplete" and "warm-up failed" in run["reason"]
