"""bench against the C truth server (perf/truthserver) in two processes sharing the port: the server's own
record, merged over its processes, agrees with what firstlight bench measured."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from perf import truthserver
from tests.conftest import firstlight, free_port

TTFT_MS, ITL_MS, TOKENS, C, REQUESTS = 20.0, 5.0, 32, 8, 24
WARMUP = 2  # bench's default warm-up requests, streamed like the others and so in the truth


def test_bench_matches_the_truth_of_two_server_processes(tmp_path: Path) -> None:
    port = free_port()
    server = truthserver.start_process(port, TTFT_MS, ITL_MS, procs=2)
    url = f"http://127.0.0.1:{port}"
    try:
        out = tmp_path / "r.json"
        res = firstlight(
            "bench", "--url", url, "--model", "ref", "--concurrency", str(C), "--num-requests", str(REQUESTS),
            "--output-len", str(TOKENS), "--input-len", "32", "--json", str(out),
            store=tmp_path / "s.db", timeout=60,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        truth = httpx.get(url + "/truth", timeout=10).json()
        again = httpx.get(url + "/truth", timeout=10).json()
    finally:
        server.kill()
        server.wait()
    lv = json.loads(out.read_text())["levels"][0]
    assert lv["state"] == "complete" and lv["completed"] == REQUESTS and lv["failed"] == 0
    assert lv["output_tokens"] == REQUESTS * TOKENS and lv["tokens_per_chunk"] == {"1": REQUESTS * TOKENS}
    # every stream bench finished, and no other, in the truth merged over both processes
    assert truth["procs"] == 2 and truth["dropped"] == 0 and truth["queued_writes"] == 0
    assert truth["requests"] == REQUESTS + WARMUP and truth["tokens"] == truth["requests"] * TOKENS
    assert truth["ttft_ms"]["n"] == truth["tpot_ms"]["n"] == truth["requests"]
    assert truth["itl_ms"]["n"] == truth["requests"] * (TOKENS - 1)
    assert truth["lateness_ms"]["n"] == truth["tokens"] and truth["lateness_ms"]["p50"] >= 0
    # the server kept its schedule, and bench measured what it did
    assert abs(truth["ttft_ms"]["p50"] - TTFT_MS) < 2 and abs(truth["tpot_ms"]["p50"] - ITL_MS) < 0.2
    assert abs(lv["ttft_ms"]["p50"] - truth["ttft_ms"]["p50"]) < 3
    # the kernel's receipt of each request: what a perfect client would see is the server's TTFT plus the
    # time the request waited to be read, never less, and not much more at this load
    receipt, ingest = truth["ttft_from_receipt_ms"], truth["ingest_ms"]
    assert receipt["n"] == ingest["n"] == truth["requests"] and ingest["p50"] >= 0
    assert truth["ttft_ms"]["p50"] <= receipt["p50"] < truth["ttft_ms"]["p50"] + 2
    assert abs(lv["tpot_ms"]["p50"] - truth["tpot_ms"]["p50"]) < 0.5
    # /truth reports what happened since the last call
    assert again["requests"] == again["tokens"] == 0 and again["ttft_ms"] is None
