"""Time to diagnose a 10,000-line multi-rank log, a few lines of 60 KB, and a large log, against reading the same
file.

Usage: python perf/diagnose_speed.py [--big-mb 1024] [--repeat 5]

The peer is a plain pass over the same file in the same process (split into lines, nothing else),
so the printed ratio says what diagnosis costs on top of reading; the absolute time is printed too
(target: under 0.2 s for 10,000 lines).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

from timing import best_of

from firstlight.diagnosis import diagnose_file

RANK_LINES = [
    "[2026-10-02 09:14:{s:02d} TP{r}] Load weight begin. avail mem=138.02 GB",
    "[2026-10-02 09:14:{s:02d} TP{r}] Using model weights format ['*.safetensors']",
    "NCCL INFO Channel {r:02d}/32 : {r} {n} via P2P/CUMEM/read",
    "[Gloo] Rank {r} is connected to 7 peer ranks. Expected number of connected peer ranks is : 7",
    "[2026-10-02 09:14:{s:02d} TP{r}] Decode batch, #running-req: 12, #token: 8832, token usage: 0.01, "
    "cuda graph: True, gen throughput (token/s): 1203.55, #queue-req: 0",
    "Loading safetensors checkpoint shards:  {p}% Completed | {k}/64 [00:{s:02d}<00:40,  1.60it/s]",
    "[2026-10-02 09:14:{s:02d} TP{r}] WARNING: Setup Custom allreduce failed with CUDART error: peer access "
    "is not supported between these two devices. To silence this warning, specify --disable-custom-all-reduce",
]
FAILURE = [
    "[2026-10-02 09:15:01 TP5] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2063, in run_scheduler_process',
    "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "[2026-10-02 09:15:02] Received sigquit from a child process. It usually means the child failed.",
]


def write_log(path: Path, n_lines: int) -> None:
    rng = random.Random(0)
    with open(path, "w") as f:
        written = 0
        fail_at = n_lines * 2 // 3
        while written < n_lines:
            if written == fail_at:
                f.write("\n".join(FAILURE) + "\n")
                written += len(FAILURE)
                continue
            k = rng.randint(0, 64)
            line = rng.choice(RANK_LINES).format(
                s=written % 60, r=rng.randint(0, 7), n=rng.randint(0, 7), k=k, p=k * 100 // 64
            )
            f.write(line + "\n")
            written += 1


def read_only(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--big-mb", type=int, default=256, help="size of the large log (1024 for 1 GB)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "10k.log"
        write_log(small, 10_000)
        report = diagnose_file(small)
        assert report.diagnosis is not None and report.diagnosis.category == "nccl_error", report.to_dict()
        t_diag = best_of(lambda: diagnose_file(small), args.repeat)
        t_read = best_of(lambda: read_only(small), args.repeat)
        print(
            f"10,000 lines ({small.stat().st_size / 1e6:.1f} MB): diagnose {t_diag * 1000:.1f} ms, "
            f"peer (read and count lines) {t_read * 1000:.2f} ms, ratio {t_diag / t_read:.0f}x "
            f"[target < 200 ms: {'met' if t_diag < 0.2 else 'NOT met'}]"
        )

        # lines of tens of kilobytes without a break (a dumped tensor, a base64 blob): each a regex's worst case
        wide = Path(tmp) / "wide.log"
        blobs = ["a" * 60_000, "a." * 30_000, "a " * 30_000, "-" * 60_000, "error: " + "a/" * 30_000]
        wide.write_text("\n".join([*blobs, *FAILURE]) + "\n")
        t_wide = best_of(lambda: diagnose_file(wide), 1)
        t_wide_read = best_of(lambda: read_only(wide), args.repeat)
        print(
            f"{len(blobs)} lines of 60 KB: diagnose {t_wide * 1000:.0f} ms, peer (read) {t_wide_read * 1000:.2f} ms, "
            f"ratio {t_wide / t_wide_read:.0f}x"
        )

        big = Path(tmp) / "big.log"
        per_line = small.stat().st_size / 10_000
        write_log(big, int(args.big_mb * 1e6 / per_line))
        tracemalloc.start()
        t0 = time.perf_counter()
        report = diagnose_file(big)
        t_big = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        t_big_read = best_of(lambda: read_only(big), 1)
        size = big.stat().st_size / 1e6
        print(
            f"{size:,.0f} MB ({report.lines:,} lines): diagnose {t_big:.1f} s ({size / t_big:.0f} MB/s), "
            f"peak Python memory {peak / 1e6:.1f} MB, peer (read) {t_big_read:.2f} s, "
            f"ratio {t_big / t_big_read:.0f}x; outcome {report.outcome}, "
            f"category {report.diagnosis.category if report.diagnosis else None}"
        )


if __name__ == "__main__":
    main()
