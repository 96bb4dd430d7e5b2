"""How fast firstlight notices that a launch is ready, or has failed, against a 10-second polling loop.

Usage: python perf/readiness_lag.py [--runs 3] [--spec examples/tiny-vllm-cpu.yaml]

For each run the tiny model is launched through firstlight (detached watcher, as `up` does) while two
observers run in this process:
- the truth: the log file read every 5 ms for the engine's own "Application startup complete."
  line (for a failing launch: the engine's pid checked every 5 ms for its exit);
- the peer: the hand-written loop this replaces, which polls `/v1/models` (or the process) every 10 s.
Printed per run: firstlight's lag and the peer's lag after the truth, and their ratio.
Target: firstlight under 0.5 s for both.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

from firstlight.deployment import load_deployment
from firstlight.launch.control import start_launch, stop_launch
from firstlight.store import Store

ROOT = Path(__file__).resolve().parents[1]
PEER_PERIOD_S = 10.0


def watch_log_for(path: Path, needle: bytes, stop: threading.Event, out: dict[str, float]) -> None:
    while not stop.is_set():
        try:
            if needle in path.read_bytes():
                out["t"] = time.time()
                return
        except FileNotFoundError:
            pass
        time.sleep(0.005)


def watch_pid_exit(store: Store, launch_id: int, stop: threading.Event, out: dict[str, float]) -> None:
    pid = None
    while not stop.is_set() and pid is None:
        launch = store.get_launch(launch_id)
        pid = launch.pid if launch else None
        time.sleep(0.005)
    while not stop.is_set():
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.005)
    out["t"] = time.time()


def peer_loop(check, stop: threading.Event, out: dict[str, float]) -> None:  # type: ignore[no-untyped-def]
    """The shell loop from the story: sleep 10, check, repeat."""
    while not stop.wait(PEER_PERIOD_S):
        if check():
            out["t"] = time.time()
            return


def models_answer(url: str) -> bool:
    try:
        return httpx.get(url + "/v1/models", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait_state(store: Store, launch_id: int, states: tuple[str, ...], timeout: float = 300) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        launch = store.get_launch(launch_id)
        if launch and launch.state in states:
            return launch.state
        time.sleep(0.02)
    raise TimeoutError(f"launch {launch_id} never reached {states}")


def event_time(store: Store, launch_id: int, kind: str, phase: str | None = None) -> float:
    for ev in store.events(launch_id, kinds=(kind,)):
        if phase is None or ev.phase == phase:
            return ev.ts
    raise LookupError(kind)


def one_ready_run(store: Store, spec: Path) -> tuple[float, float]:
    dep = load_deployment(spec)
    launch = start_launch(store, dep)
    stop = threading.Event()
    truth: dict[str, float] = {}
    peer: dict[str, float] = {}
    threads = [
        threading.Thread(
            target=watch_log_for, args=(Path(launch.log_path), b"Application startup complete.", stop, truth)
        ),
        threading.Thread(target=peer_loop, args=(lambda: models_answer(dep.url), stop, peer)),
    ]
    for t in threads:
        t.start()
    try:
        wait_state(store, launch.id, ("ready", "failed", "stalled"))
        while "t" not in peer:
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join()
        stop_launch(store, store.get_launch(launch.id))
    ready = event_time(store, launch.id, "phase", "ready")
    return ready - truth["t"], peer["t"] - truth["t"]


def one_failed_run(store: Store, spec: Path, tmp: Path) -> tuple[float, float]:
    dep = load_deployment(spec).model_copy(update={"model": tmp / "no-such-model", "log_dir": tmp})
    launch = start_launch(store, dep)
    stop = threading.Event()
    truth: dict[str, float] = {}
    peer: dict[str, float] = {}

    def process_gone() -> bool:
        current = store.get_launch(launch.id)
        return current is not None and current.pid is not None and not psutil.pid_exists(current.pid)

    threads = [
        threading.Thread(target=watch_pid_exit, args=(store, launch.id, stop, truth)),
        threading.Thread(target=peer_loop, args=(process_gone, stop, peer)),
    ]
    for t in threads:
        t.start()
    try:
        wait_state(store, launch.id, ("failed",))
        while "t" not in peer or "t" not in truth:
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join()
    failed = event_time(store, launch.id, "failed")
    return failed - truth["t"], peer["t"] - truth["t"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "tiny-vllm-cpu.yaml")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        ready, failed = [], []
        for i in range(args.runs):
            fl, peer = one_ready_run(store, args.spec)
            ready.append((fl, peer))
            print(
                f"ready  run {i + 1}: firstlight {fl * 1000:7.0f} ms   10 s loop {peer * 1000:7.0f} ms   "
                f"ratio {peer / max(fl, 1e-3):6.1f}x",
                flush=True,
            )
        for i in range(args.runs):
            fl, peer = one_failed_run(store, args.spec, Path(tmp))
            failed.append((fl, peer))
            print(
                f"failed run {i + 1}: firstlight {fl * 1000:7.0f} ms   10 s loop {peer * 1000:7.0f} ms   "
                f"ratio {peer / max(fl, 1e-3):6.1f}x",
                flush=True,
            )
    for name, rows in (("ready", ready), ("failed", failed)):
        fl = statistics.median(r[0] for r in rows)
        peer = statistics.median(r[1] for r in rows)
        verdict = "met" if fl < 0.5 else "NOT met"
        print(
            f"median {name} lag: firstlight {fl * 1000:.0f} ms, 10 s loop {peer * 1000:.0f} ms "
            f"({peer / max(fl, 1e-3):.0f}x slower); target < 500 ms {verdict}"
        )


if __name__ == "__main__":
    main()
