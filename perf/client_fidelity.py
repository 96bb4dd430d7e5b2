"""How close do benchmark clients come to the truth? firstlight bench, `vllm bench serve` and
`sglang.bench_serving` against a server whose timing is known, in the same run (each peer where its environment
has it: .venv-engine for vLLM, .venv-sglang with `datasets` for SGLang).

Usage: python perf/client_fidelity.py [--levels 1,64,256,1024] [--big 4096] [--no-vllm] [--no-sglang]
                                     [--server c|python] [--server-procs N] [--server-cpus LIST]
                                     [--server-cores 0] [--client-cores 1] [--workers N|auto]

The server whose timing is known (TTFT 50 ms, one token every 10 ms, 128 tokens) is the C truth server
(perf/truthserver, in --server-procs processes sharing the port, process i pinned to the i-th core of
--server-cpus when given; about 100k chunks/s a core with lateness p99 under 1 ms, perf/README.md) or, with
--server python, the reference server (firstlight.testing.refserver, one Python process). The TTFT a client
is held to is the C server's `ttft_from_receipt_ms`: first chunk written - the kernel's receipt of the request,
what a perfect client would measure, including the time a burst of requests waits for the server to read it
(`ingest_ms`, the server's own and printed beside it); refserver has no receipts, so there it is its TTFT
from its read. The server runs on the
--server-cores and each client on the --client-cores (taskset; on this 2-core machine core 0 and core 1;
on a 16-core machine e.g. --server-cores 0-3 --client-cores 4-15). For every level the server's own record
of when it wrote each event is the truth; printed per tool: TTFT p50/p99, ITL p50/p99 and TPOT p50 against
the truth, and output throughput against the ideal (C x 128 tokens per TTFT + 127 ITL), with the server's
own lateness (write time - due time). The --big level uses a 40 ms ITL. --workers N is passed to
`firstlight bench --workers` (only when given). Targets (issue 7): TTFT p50 within max(5%, 0.5 ms), ITL p50
within 5%, ITL p99 within 2 ms, >= 99% of the ideal throughput up to C=1024; TTFT p50 within 10% and >= 97%
at C=4096.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import truthserver

from firstlight.testing import refserver

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / ".venv-engine" / "bin"
SGLANG = ROOT / ".venv-sglang" / "bin" / "python"  # sglang.bench_serving also needs `datasets` there
TOKENS = 128
TTFT_MS = 50.0


def pin(cores: str) -> list[str]:
    return ["taskset", "-c", cores] if cores and shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []


def start_server(port: int, itl: float, args: argparse.Namespace) -> subprocess.Popen:
    if args.server == "python":
        return refserver.start_process(port, TTFT_MS, itl, prefix=pin(args.server_cores))
    return truthserver.start_process(
        port, TTFT_MS, itl, procs=args.server_procs, cpus=args.server_cpus, prefix=pin(args.server_cores)
    )


def truth(port: int) -> dict:
    return httpx.get(f"http://127.0.0.1:{port}/truth", timeout=30).json()


def requests_for(c: int) -> int:
    return max(2 * c, 10)


def run_firstlight(port: int, c: int, tmp: Path, args: argparse.Namespace) -> dict:
    out = tmp / f"fl-{c}.json"
    subprocess.run(
        [
            *pin(args.client_cores),
            sys.executable,
            "-m",
            "firstlight",
            "bench",
            "--url",
            f"http://127.0.0.1:{port}",
            "--model",
            "ref",
            "--concurrency",
            str(c),
            "--num-requests",
            str(requests_for(c)),
            "--output-len",
            str(TOKENS),
            "--input-len",
            "32",
            "--warmup",
            "8" if args.workers == "auto" else "0",  # auto sizes the workers from the warm-up's ITL
            "--json",
            str(out),
            "--store",
            str(tmp / "fl.db"),
            *(["--workers", str(args.workers)] if args.workers else []),  # only when asked: a newer option
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    lv = json.loads(out.read_text())["levels"][0]
    return {
        "ttft": lv["ttft_ms"],
        "itl": lv["itl_ms"],
        "tpot": lv["tpot_ms"],
        "tok_s": lv["output_throughput_tok_s"],
        "client": lv["client"],
    }


def run_vllm(port: int, c: int, tmp: Path, args: argparse.Namespace) -> dict | None:
    vllm = ENGINE / "vllm"
    if not vllm.exists():
        return None
    out = tmp / f"vllm-{c}.json"
    return run_peer(
        "vllm bench serve",
        [
            *pin(args.client_cores),
            str(vllm),
            "bench",
            "serve",
            "--backend",
            "openai",
            "--base-url",
            f"http://127.0.0.1:{port}",
            "--endpoint",
            "/v1/completions",
            "--model",
            "ref",
            "--tokenizer",
            str(ROOT / "models" / "tiny-llama"),
            "--dataset-name",
            "random",
            "--random-input-len",
            "32",
            "--random-output-len",
            str(TOKENS),
            "--ignore-eos",
            "--num-prompts",
            str(requests_for(c)),
            "--max-concurrency",
            str(c),
            "--percentile-metrics",
            "ttft,tpot,itl",
            "--metric-percentiles",
            "50,99",
            "--save-result",
            "--result-dir",
            str(tmp),
            "--result-filename",
            out.name,
        ],
        out,
    )


def run_sglang(port: int, c: int, tmp: Path, args: argparse.Namespace) -> dict | None:
    if not SGLANG.exists():
        return None
    out = tmp / f"sglang-{c}.jsonl"
    return run_peer(
        "sglang.bench_serving",
        [
            *pin(args.client_cores),
            str(SGLANG),
            "-m",
            "sglang.bench_serving",
            "--backend",
            "sglang-oai",
            "--base-url",
            f"http://127.0.0.1:{port}",
            "--model",
            "ref",
            "--tokenizer",
            str(ROOT / "models" / "tiny-llama"),
            "--dataset-name",
            "random-ids",  # "random" samples ShareGPT from the hub
            "--random-input-len",
            "32",
            "--random-output-len",
            str(TOKENS),
            "--random-range-ratio",
            "1",
            "--num-prompts",
            str(requests_for(c)),
            "--max-concurrency",
            str(c),
            "--warmup-requests",
            "0",
            "--output-file",
            str(out),
        ],
        out,
    )


def run_peer(name: str, argv: list[str], out: Path) -> dict | None:
    """Run a peer benchmark client (offline, in the results' folder) and read the summary it wrote to `out`:
    `vllm bench serve` a JSON file, `sglang.bench_serving` JSON lines (the last is this run's). Both name the
    figures alike."""
    offline = {**os.environ, "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(argv, capture_output=True, text=True, cwd=out.parent, env=offline)
    if res.returncode != 0 or not out.exists():
        print(f"  {name} failed: {res.stderr.strip()[-300:]}")
        return None
    text = out.read_text()
    d = json.loads(text if out.suffix == ".json" else text.splitlines()[-1])
    return {
        "ttft": {"p50": d["median_ttft_ms"], "p99": d["p99_ttft_ms"]},
        "itl": {"p50": d["median_itl_ms"], "p99": d["p99_itl_ms"]},
        "tpot": {"p50": d["median_tpot_ms"]},
        "tok_s": d["output_throughput"],
    }


def client_own_error(port: int, c: int) -> dict[str, float]:
    """The same client code, in this process, reading the server's X-Arrival and X-Received headers (when it
    read each request, and when the kernel received it, on the shared monotonic clock): splits firstlight's
    TTFT into the time from its send stamp to the kernel's receipt (the client's own: its write), to the
    server's read (plus the server's ingest), and the rest, whose difference from the server's own TTFT is the
    client's delay in reading the first token."""
    import asyncio

    import numpy as np
    import uvloop

    from firstlight.benchmark import endpoint
    from firstlight.benchmark.client import StreamConnection, Target
    from firstlight.benchmark.pool import ConnectionPool
    from firstlight.records import RequestRecord

    arrivals: dict[int, float] = {}
    receipts: dict[int, float] = {}

    def on_header(self: StreamConnection, name: bytes, value: bytes) -> None:
        if self._record is not None and name.lower() in (b"x-arrival", b"x-received"):
            (arrivals if name.lower() == b"x-arrival" else receipts)[id(self._record)] = float(value)

    StreamConnection.on_header = on_header  # type: ignore[attr-defined]
    body = endpoint.encode(endpoint.request_body("completions", "ref", "hi " * 30, TOKENS))  # as `bench` sends

    async def go() -> list[RequestRecord]:
        pool = ConnectionPool(Target.from_url(f"http://127.0.0.1:{port}", endpoint.path("completions")))
        recs: list[RequestRecord] = []
        todo = iter(range(requests_for(c)))

        async def worker() -> None:
            for i in todo:
                r = RequestRecord(i, time.perf_counter())
                await pool.send(r, body, 120)
                recs.append(r)

        await asyncio.gather(*(worker() for _ in range(c)))
        return recs

    recs = uvloop.run(go())
    del StreamConnection.on_header  # type: ignore[attr-defined]
    intake = np.array([arrivals[id(r)] - r.sent for r in recs if id(r) in arrivals]) * 1000
    rest = np.array([r.chunks[0] - arrivals[id(r)] for r in recs if id(r) in arrivals and r.chunks]) * 1000
    sending = np.array([receipts[id(r)] - r.sent for r in recs if id(r) in receipts]) * 1000
    return {
        "sending_p50": float(np.median(sending)) if sending.size else None,
        "intake_p50": float(np.median(intake)),
        "rest_p50": float(np.median(rest)),
        "rest_p99": float(np.percentile(rest, 99)),
    }


def client_view(t: dict) -> dict:
    """The TTFT a perfect client would measure: from the kernel's receipt of each request (the C server),
    else the server's TTFT from its read (refserver)."""
    return t.get("ttft_from_receipt_ms") or t["ttft_ms"]


def lateness(late: dict) -> str:
    """The server's own lateness: p99, and max where the server reports it (the C one does)."""
    return f"p99 {late['p99']:.2f} ms" + (f", max {late['max']:.2f} ms" if "max" in late else "")


def line(name: str, got: dict, t: dict, ideal: float) -> str:
    ttft = client_view(t)
    return (
        f"  {name:<18} TTFT p50 {got['ttft']['p50']:8.2f} ({got['ttft']['p50'] - ttft['p50']:+7.2f})  "
        f"p99 {got['ttft']['p99']:8.2f} ({got['ttft']['p99'] - ttft['p99']:+7.2f})  "
        f"ITL p50 {got['itl']['p50']:6.2f} ({got['itl']['p50'] - t['itl_ms']['p50']:+6.2f})  "
        f"p99 {got['itl']['p99']:6.2f} ({got['itl']['p99'] - t['itl_ms']['p99']:+6.2f})  "
        f"TPOT p50 {got['tpot']['p50']:6.2f} ({got['tpot']['p50'] - t['tpot_ms']['p50']:+6.2f})  "
        f"tok/s {got['tok_s']:9.0f} = {100 * got['tok_s'] / ideal:5.1f}% of ideal"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,64,256,1024")
    parser.add_argument("--big", type=int, default=4096, help="a last level at 40 ms ITL (0 to skip)")
    parser.add_argument("--no-vllm", action="store_true")
    parser.add_argument("--no-sglang", action="store_true")
    parser.add_argument("--server", choices=("c", "python"), default="c", help="the C truth server or refserver")
    parser.add_argument("--server-procs", type=int, default=1, help="C truth server processes")
    parser.add_argument("--server-cpus", default=None, help="pin C server process i to the i-th core listed")
    parser.add_argument("--server-cores", default="0", help="taskset for the server ('' for none)")
    parser.add_argument("--client-cores", default="1", help="taskset for each client ('' for none)")
    parser.add_argument("--workers", default=None, help="firstlight bench --workers N|auto")
    parser.add_argument("--no-split", action="store_true", help="skip the in-process split of firstlight's TTFT")
    args = parser.parse_args()
    plan = [(int(c), 10.0) for c in args.levels.split(",")] + ([(args.big, 40.0)] if args.big else [])
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for c, itl in plan:
            port = 18000 + c
            server = start_server(port, itl, args)
            try:
                ideal = c * TOKENS / ((TTFT_MS + (TOKENS - 1) * itl) / 1000)
                print(f"C={c}, ITL {itl:g} ms, {requests_for(c)} requests (ideal {ideal:,.0f} tok/s)", flush=True)
                results = []
                tools = (
                    ("firstlight bench", run_firstlight),
                    ("vllm bench serve", run_vllm),
                    ("sglang.bench_serving", run_sglang),
                )
                for name, fn in tools:
                    if (name.startswith("vllm") and args.no_vllm) or (name.startswith("sglang") and args.no_sglang):
                        continue
                    truth(port)  # reset
                    got = fn(port, c, tmp, args)
                    t = truth(port)
                    if got is None:
                        continue
                    results.append(line(name, got, t, ideal))
                    ttft = client_view(t)
                    print(
                        f"  truth              TTFT p50 {ttft['p50']:8.2f}  p99 {ttft['p99']:8.2f}  "
                        f"ITL p50 {t['itl_ms']['p50']:6.2f}  p99 {t['itl_ms']['p99']:6.2f}  TPOT p50 "
                        f"{t['tpot_ms']['p50']:6.2f}  server lateness {lateness(t['lateness_ms'])}"
                        + (
                            f"; TTFT from its read p50 {t['ttft_ms']['p50']:.2f}, ingest p50 "
                            f"{t['ingest_ms']['p50']:.2f} p99 {t['ingest_ms']['p99']:.2f} ms"
                            if t.get("ingest_ms")
                            else ""
                        )
                    )
                    print(results[-1], flush=True)
                    if "client" in got:
                        workers = got["client"].get("workers") or []
                        own_view = got["client"]
                        print(
                            f"  firstlight's own view: loop lag p99 {own_view['loop_lag_p99_ms']:.1f} ms, CPU "
                            f"{own_view['cpu_pct']:.0f}%, GC pause max {own_view.get('gc_pause_max_ms', 0):.1f} ms, "
                            f"client_limited={own_view['client_limited']}"
                            + (f", {len(workers)} worker processes" if workers else "")
                        )
                    if "client" in got and not args.no_split:
                        own = client_own_error(port, c)
                        t = truth(port)
                        sending = own["sending_p50"]
                        kernel = "" if sending is None else f"stamped → received by the kernel p50 {sending:.2f} ms; "
                        print(
                            "  split of firstlight's TTFT: "
                            + kernel
                            + f"stamped → read by the server p50 {own['intake_p50']:.2f} ms; "
                            f"read → first token p50 {own['rest_p50']:.2f} "
                            f"({own['rest_p50'] - t['ttft_ms']['p50']:+.2f} vs the server's TTFT), "
                            f"p99 {own['rest_p99']:.2f} ({own['rest_p99'] - t['ttft_ms']['p99']:+.2f})"
                        )
            finally:
                server.kill()
                server.wait()


if __name__ == "__main__":
    main()
