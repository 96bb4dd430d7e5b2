"""How many chunks a second can the C truth server write on time? Its capacity per core, by its own truth.

Usage: python perf/truth_capacity.py [--levels 256,512,768,1024,1280,1536] [--itl-ms 10] [--duration 8]
                                     [--procs 1] [--server-cores 0] [--client-cores 1] [--burst 1024]

For each concurrency C the server (perf/truthserver, TTFT 50 ms, 128 tokens a request) is pinned to the
server cores and perf/truthserver/loadgen to the client cores. loadgen is C: raw keep-alive sockets, no
per-chunk timestamps, a fraction of the server's cost per chunk, so it is never the bottleneck (its CPU is
printed). Its C connections send requests back to back for --duration seconds, the first ones spread over
one ITL, so chunks fall due evenly in time: a steady rate of about C x 128 / (TTFT + 127 ITL) chunks a
second. Per level: the rate carried (chunks loadgen received between its warm-up and the end, per second),
how busy the server's cores were over that window (from /proc/stat, so with the kernel's softirq work, which
a process's own CPU time leaves out; without pinning, the server processes' CPU time) and that per chunk, and
the server's own lateness (write time - due time) from GET /truth. The capacity is the highest rate whose
lateness p99 stays under 1 ms. --burst C adds a level whose first requests all start at once: every stream's chunk k is
then due at the same instant, and the last of each burst of C is late by the time C writes take.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time

import httpx
import psutil
import truthserver

TTFT_MS = 50.0
TOKENS = 128
WARMUP_S = 2.0
LATENESS_LIMIT_MS = 1.0


def pin(cores: str) -> list[str]:
    return ["taskset", "-c", cores] if cores and shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []


def cores(spec: str) -> list[int]:
    """A taskset list ("0-3,8") as core numbers."""
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def busy_seconds(server_cores: list[int], procs: list[psutil.Process]) -> float:
    """Time the server's cores spent busy (softirq included), or without pinning its processes' CPU time."""
    if server_cores:
        per_cpu = psutil.cpu_times(percpu=True)
        return sum(sum(per_cpu[i]) - per_cpu[i].idle - getattr(per_cpu[i], "iowait", 0.0) for i in server_cores)
    return sum(t.user + t.system for t in (p.cpu_times() for p in procs))


def level(args: argparse.Namespace, c: int, ramp_ms: float, port: int) -> dict:
    server = truthserver.start_process(
        port, TTFT_MS, args.itl_ms, procs=args.procs, cpus=args.server_cpus, prefix=pin(args.server_cores)
    )
    try:
        workers = psutil.Process(server.pid).children()
        server_cores = cores(args.server_cores) if pin(args.server_cores) else []
        httpx.get(f"http://127.0.0.1:{port}/truth", timeout=30)  # nothing yet, but said so
        cmd = [
            *pin(args.client_cores),
            str(truthserver.LOADGEN),
            "--port",
            str(port),
            "-c",
            str(c),
            "--duration",
            str(args.duration),
            "--warmup",
            str(WARMUP_S),
            "--max-tokens",
            str(TOKENS),
            "--ramp-ms",
            str(ramp_ms),
            "--procs",
            str(args.client_procs),
        ]
        started = time.monotonic()
        gen = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        # loadgen starts its clock once connected (0.2 s + 20 µs a connection): the server's CPU is read over
        # loadgen's measuring window
        t0 = started + 0.2 + c * 20e-6
        time.sleep(max(t0 + WARMUP_S - time.monotonic(), 0))
        cpu0, wall0 = busy_seconds(server_cores, workers), time.monotonic()
        time.sleep(max(t0 + args.duration - time.monotonic(), 0))
        cpu1, wall1 = busy_seconds(server_cores, workers), time.monotonic()
        out, _ = gen.communicate(timeout=args.duration + 120)
        if gen.returncode != 0:
            raise RuntimeError(f"loadgen failed at C={c}")
        load = json.loads(out)
        truth = httpx.get(f"http://127.0.0.1:{port}/truth", timeout=60).json()
    finally:
        server.kill()
        server.wait()
    server_busy = (cpu1 - cpu0) / (wall1 - wall0)
    return {
        "c": c,
        "ramp_ms": ramp_ms,
        "rate": load["chunks_per_s"],
        "server_busy": server_busy,
        "us_per_chunk": 1e6 * server_busy / load["chunks_per_s"] if load["chunks_per_s"] else 0.0,
        "client_cpu": load["cpu_s"] / load["wall_s"],
        "late": truth["lateness_ms"],
        "queued": truth["queued_writes"],
        "dropped": truth["dropped"],
        "errors": load["errors"],
    }


def row(r: dict) -> str:
    late = r["late"]
    return (
        f"{r['c']:>6} {r['ramp_ms']:>6g} {r['rate']:>11,.0f} {100 * r['server_busy']:>10.0f}% "
        f"{r['us_per_chunk']:>8.2f} {late['p50']:>8.3f} {late['p99']:>8.3f} {late['max']:>8.2f} "
        f"{r['queued']:>7} {100 * r['client_cpu']:>9.0f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="256,512,768,1024,1280,1536")
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of load per level")
    parser.add_argument("--procs", type=int, default=1, help="server processes")
    parser.add_argument("--server-cpus", default=None, help="pin server process i to the i-th core listed")
    parser.add_argument("--server-cores", default="0", help="taskset for the server")
    parser.add_argument("--client-cores", default="1", help="taskset for loadgen")
    parser.add_argument("--client-procs", type=int, default=1, help="loadgen processes")
    parser.add_argument("--burst", type=int, default=1024, help="a level with every stream in step (0: none)")
    args = parser.parse_args()
    truthserver.build()
    plan = [(int(c), args.itl_ms) for c in args.levels.split(",")] + ([(args.burst, 0.0)] if args.burst else [])
    print(
        f"truth server: {args.procs} process(es) on cores {args.server_cores or 'any'}, loadgen on "
        f"{args.client_cores or 'any'}; TTFT {TTFT_MS:g} ms, ITL {args.itl_ms:g} ms, {TOKENS} tokens, "
        f"{args.duration:g} s a level"
    )
    print(
        f"{'C':>6} {'ramp':>6} {'chunks/s':>11} {'server busy':>11} {'µs/chunk':>8} {'late p50':>8} {'p99':>8} "
        f"{'max':>8} {'queued':>7} {'loadgen':>10}"
    )
    results = []
    for c, ramp in plan:
        results.append(level(args, c, ramp, 19000 + len(results)))
        print(row(results[-1]), flush=True)
    steady = [r for r in results if r["ramp_ms"] and r["late"]["p99"] < LATENESS_LIMIT_MS and not r["errors"]]
    if steady:
        best = max(steady, key=lambda r: r["rate"])
        print(
            f"capacity: {best['rate']:,.0f} chunks/s with lateness p99 {best['late']['p99']:.3f} ms (< "
            f"{LATENESS_LIMIT_MS:g} ms) in {args.procs} process(es), {best['rate'] / args.procs:,.0f} a process, "
            f"with the server's cores {100 * best['server_busy']:.0f}% busy ({best['us_per_chunk']:.2f} µs a chunk)"
        )
    else:
        print(f"capacity: no level kept lateness p99 under {LATENESS_LIMIT_MS:g} ms")


if __name__ == "__main__":
    main()
