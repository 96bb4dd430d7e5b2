"""What a sweep adds to its launches and benchmarks: the campaign's own time against the sum of the work it
drives, in the same run.

Usage: python perf/sweep_overhead.py [--plan PLAN.yaml] [--store PATH]

Without --plan, a small campaign on the tiny CPU engine (examples/tiny-vllm-cpu.yaml): baseline and n-gram,
C = 1, 4, one repeat. With --plan, any plan (on a GPU machine, the GPU-memory release is measured too).
From the store, after the sweep:
- the peer: the sum of what the sweep drives: each launch from its start to ready, each cell's benchmark,
  each `down` until the processes are gone (and NVML shows their GPU memory released);
- the campaign's own time: the sweep's wall time minus that sum (plans, checks, waiting between steps);
- the gap between one variant's `down` ending and the next variant's engine process starting.
Printed: the overhead as a share of the peer's time (target: under 2%), and the gaps.
"""

from __future__ import annotations

import argparse
import tempfile
from itertools import pairwise
from pathlib import Path

import yaml

from firstlight.store import Store
from firstlight.sweep import load_plan, run_sweep

ROOT = Path(__file__).resolve().parents[1]


def small_plan(directory: Path) -> Path:
    plan = {
        "base": str(ROOT / "examples" / "tiny-vllm-cpu.yaml"),
        "variants": {"baseline": {}, "ngram": {"speculative": {"method": "ngram", "tokens": 3, "lookup_max": 3}}},
        "load": {"concurrency": [1, 4], "num-requests": 24, "input-len": 64, "output-len": 64},
        "repeats": 1,
    }
    path = directory / "overhead.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path)
    parser.add_argument("--store", type=Path)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sweep-overhead-"))
    plan = load_plan(args.plan or small_plan(tmp))
    store = Store(args.store or tmp / "store.db")
    outcome = run_sweep(plan, store=store)
    sweep = store.get_sweep(outcome.sweep_id)
    assert sweep is not None
    attempts = store.attempts(outcome.sweep_id)
    cells = store.cells(outcome.sweep_id)
    launch_s = sum(a["ready_s"] or 0.0 for a in attempts)
    failed_s = sum((a["ended"] or 0) - a["started"] for a in attempts if a["state"] not in ("ready", "stopped", "died"))
    bench_s = sum((c["ended"] or c["started"]) - c["started"] for c in cells)
    down_s = sum(a["release_s"] or 0.0 for a in attempts)
    work = launch_s + failed_s + bench_s + down_s
    wall = sweep["ended"] - sweep["created"]
    overhead = wall - work
    done = f"{outcome.cells_done}/{outcome.cells_total}"
    print(f"sweep {outcome.sweep_id}: {outcome.state}, {done} cells, wall {wall:.1f} s")
    print(
        f"  peer (the work it drives): launches {launch_s:.1f} s, failed launches {failed_s:.1f} s, "
        f"benchmarks {bench_s:.1f} s, downs {down_s:.1f} s = {work:.1f} s"
    )
    print(f"  campaign overhead: {overhead:.2f} s = {100 * overhead / work:.2f}% of the peer (target < 2%)")
    for before, after in pairwise(attempts):
        launch = store.get_launch(after["launch_id"]) if after["launch_id"] else None
        if before["ended"] and launch is not None:
            print(
                f"  {before['variant']} #{before['attempt']} down → {after['variant']} #{after['attempt']} "
                f"engine start: {launch.created - before['ended']:.2f} s"
            )
    for a in attempts:
        if a["release_s"] is not None:
            gpu = a["gpu_release_s"]
            on_gpu = f"; GPU memory released {gpu:.2f} s after the processes exited" if gpu is not None else ""
            print(f"  {a['variant']} #{a['attempt']}: down in {a['release_s']:.2f} s{on_gpu}")


if __name__ == "__main__":
    main()
