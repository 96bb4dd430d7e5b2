"""Faults injected on purpose, against real processes: what must happen, what did, and what was kept.

Usage: python perf/faults.py [--only server,store,launch,concurrency,interrupt,input] [--quick]

Groups (each runs real processes: the reference and fault servers of firstlight.testing, llama.cpp's
llama-server and the vLLM CPU engine built by `make`; nothing is simulated inside firstlight):
- server: `bench` against a server that fails in one way per run (HTTP 500, a garbage body, a stream
  closed mid-chunk, a 10 MB chunk, a slow-loris stream, a connection reset, `[DONE]` never sent), and
  against the reference server with the open-files limit far below the concurrency;
- store: the store's file system full (a size-limited file: RLIMIT_FSIZE on the benchmark); eight
  processes on one store (a benchmark writing, `status` and `report` in loops);
- launch: the watcher SIGKILLed, the engine SIGKILLed, the engine SIGSTOPped, in each phase long enough
  to hit (vLLM on the CPU: process_start, kv_cache_allocated, http_listening, ready; --quick: two);
- concurrency: two `up` of the same spec at once;
- interrupt: Ctrl-C (SIGINT) during `up`, `bench` and `sweep` (at a launch and in a cell), then resume;
- input: generated malformed specs, plans and facts files (the hypothesis tests).
Prints one table: fault, what must happen, what happened, records kept/lost, verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
ENGINE_PY = ROOT / ".venv-engine" / "bin" / "python"
FAULTS = ("http500", "garbage", "close_mid_chunk", "huge_chunk", "slowloris", "reset", "no_done")
EXPECTED_KIND = {
    "http500": "http_500",
    "garbage": "malformed_stream",
    "close_mid_chunk": "connection_reset",
    "huge_chunk": None,  # served in full
    "slowloris": "timeout",
    "reset": "connection_reset",
    "no_done": "timeout",
}


@dataclass
class Row:
    group: str
    fault: str
    must: str
    happened: str
    records: str
    ok: bool


ROWS: list[Row] = []


def row(group: str, fault: str, must: str, happened: str, records: str, ok: bool) -> None:
    ROWS.append(Row(group, fault, must, happened, records, ok))
    print(f"[{'ok' if ok else 'FAIL'}] {group}/{fault}: {happened} | {records}", flush=True)


def fl(*args: str, store: Path | None = None, timeout: float = 300, **kw: Any) -> subprocess.CompletedProcess[str]:
    cmd = [PY, "-m", "firstlight", *args, *(["--store", str(store)] if store else [])]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(module: str, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([PY, "-m", f"firstlight.testing.{module}", "--port", str(port), *args])
    url = f"http://127.0.0.1:{port}"
    import httpx

    for _ in range(100):
        try:
            httpx.get(url + "/v1/models", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    return proc, url


def stored(store: Path) -> int:
    with sqlite3.connect(store) as db:
        return int(
            db.execute(
                "SELECT COUNT(*) FROM bench_requests r JOIN bench_levels l ON r.level_id=l.id WHERE l.idx>=0"
            ).fetchone()[0]
        )


def one_line(res: subprocess.CompletedProcess[str]) -> tuple[bool, str]:
    """No traceback; the last line of stderr (the reason), if any."""
    text = res.stdout + res.stderr
    last = (res.stderr.strip().splitlines() or [""])[-1]
    return "Traceback" not in text, last[:160]


# ---------------------------------------------------------------- server faults during a benchmark


def group_server(tmp: Path, quick: bool) -> None:
    for fault in FAULTS:
        proc, url = serve("faultserver", "--fault", fault)
        store, out = tmp / f"server-{fault}.db", tmp / f"server-{fault}.json"
        try:
            res = fl(
                "bench",
                "--url",
                url,
                "--concurrency",
                "2",
                "--num-requests",
                "6",
                "--warmup",
                "0",
                "--timeout",
                "3",
                "--output-len",
                "8",
                "--input-len",
                "16",
                "--json",
                str(out),
                store=store,
                timeout=120,
            )
        finally:
            proc.kill()
        clean, last = one_line(res)
        level = json.loads(out.read_text())["levels"][0] if out.exists() else {}
        kinds = {k: v["count"] for k, v in (level.get("errors") or {}).items()}
        want = EXPECTED_KIND[fault]
        right = (level.get("completed") == 6) if want is None else kinds.get(want) == 6
        kept = stored(store) if store.exists() else 0
        row(
            "server",
            fault,
            f"{want or 'served'} counted for each request, no crash, all stored",
            f"exit {res.returncode}; completed {level.get('completed')}, errors {kinds}",
            f"{kept}/6 stored",
            clean and right and kept == 6 and res.returncode in (0, 1),
        )
    proc, url = serve("refserver", "--ttft-ms", "20", "--itl-ms", "5")
    store = tmp / "server-nofile.db"
    try:
        res = fl(
            "bench",
            "--url",
            url,
            "--concurrency",
            "256",
            "--num-requests",
            "512",
            "--warmup",
            "0",
            "--output-len",
            "16",
            "--json",
            str(tmp / "nofile.json"),
            store=store,
            timeout=300,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96)),
        )
    finally:
        proc.kill()
    clean, last = one_line(res)
    data = json.loads((tmp / "nofile.json").read_text()) if (tmp / "nofile.json").exists() else {"levels": [{}]}
    level = data["levels"][0] if data["levels"] else {}
    kinds = {k: v["count"] for k, v in (level.get("errors") or {}).items()}
    kept = stored(store) if store.exists() else 0
    row(
        "server",
        "ulimit -n 96, C=256",
        "refused connections counted by kind, no crash, every request stored",
        f"exit {res.returncode}; completed {level.get('completed')}, errors {kinds}; {last}",
        f"{kept} stored = {level.get('completed')} completed + {level.get('failed')} failed; the rest resumable",
        clean and res.returncode in (0, 1) and kept == (level.get("completed") or 0) + (level.get("failed") or 0) > 0,
    )


# ---------------------------------------------------------------- the store

# One reader process: a command in a loop for {s} seconds; prints calls and failures (a traceback, a
# locked store, an error other than "no benchmark runs" yet).
READER = """
import subprocess, sys, time
end, bad, n = time.time() + {s}, 0, 0
while time.time() < end:
    r = subprocess.run([sys.executable, "-m", "firstlight", {cmd!r}, "--json", "--store", {db!r}], capture_output=True)
    n += 1
    err = r.stderr
    bad += b"Traceback" in err or b"locked" in err or (r.returncode != 0 and b"no benchmark runs" not in err)
print(n, bad)
"""


def group_store(tmp: Path, quick: bool) -> None:
    proc, url = serve("refserver", "--ttft-ms", "5", "--itl-ms", "1")
    store = tmp / "full.db"
    limit = 2 * 1024 * 1024

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    try:
        res = fl(
            "bench",
            "--url",
            url,
            "--concurrency",
            "8",
            "--num-requests",
            "4000",
            "--warmup",
            "0",
            "--output-len",
            "64",
            store=store,
            timeout=300,
            preexec_fn=small_disk,
        )
    finally:
        proc.kill()
    clean, last = one_line(res)
    with sqlite3.connect(store) as db:
        check = db.execute("PRAGMA integrity_check").fetchone()[0]
    kept = stored(store)
    row(
        "store",
        "disk full (2 MiB file limit)",
        "one-line reason, committed records intact, the store opens clean",
        f"exit {res.returncode}: {last}; integrity_check {check}",
        f"{kept} committed, readable",
        clean and res.returncode != 0 and check == "ok" and kept > 0,
    )

    proc, url = serve("refserver", "--ttft-ms", "5", "--itl-ms", "2")
    store = tmp / "shared.db"
    fl("status", store=store)  # create it
    readers: list[subprocess.Popen[str]] = []
    loop = READER
    try:
        bench = subprocess.Popen(
            [
                PY,
                "-m",
                "firstlight",
                "bench",
                "--url",
                url,
                "--concurrency",
                "16",
                "--num-requests",
                "1500",
                "--warmup",
                "0",
                "--output-len",
                "32",
                "--store",
                str(store),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for cmd in ["status"] * 4 + ["report"] * 3:
            readers.append(
                subprocess.Popen(
                    [PY, "-c", loop.format(s=15, cmd=cmd, db=str(store))], stdout=subprocess.PIPE, text=True
                )
            )
        _out, err = bench.communicate(timeout=300)
        counts = [tuple(map(int, r.communicate(timeout=120)[0].split())) for r in readers]
    finally:
        proc.kill()
    calls, bad = sum(c[0] for c in counts), sum(c[1] for c in counts)
    kept = stored(store)
    row(
        "store",
        "8 processes on one store",
        "every reader answers, the benchmark completes, nothing lost",
        f"bench exit {bench.returncode}; {calls} status/report calls, {bad} failed",
        f"{kept}/1500 stored",
        bench.returncode == 0 and bad == 0 and kept == 1500 and "Traceback" not in err,
    )


# ---------------------------------------------------------------- launches: watcher and engine faults


def vllm_spec(tmp: Path, name: str, **extra: Any) -> Path:
    spec = {
        "name": name,
        "engine": "vllm",
        "python": str(ENGINE_PY),
        "model": str(ROOT / "models" / "tiny-llama"),
        "port": free_port(),
        "args": {"dtype": "float32", "max-model-len": 2048, "enforce-eager": True},
        "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
        "stall": {
            p: 8
            for p in ("distributed_init", "weights_loading", "weights_loaded", "kv_cache_allocated", "http_listening")
        }
        | {"process_start": 90},
        "log_dir": str(tmp / "logs"),
        **extra,
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def launch_record(store: Path) -> Any:
    from firstlight.store import Store

    db = Store(store)
    try:
        return db.latest_launch()
    finally:
        db.close()


def wait_phase(store: Path, phase: str, timeout: float = 200) -> Any:
    from firstlight.logs import PHASE_INDEX

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rec = launch_record(store)
        if rec is not None and rec.phase == phase and rec.pgid and rec.watcher_pid:
            return rec
        if rec is not None and (PHASE_INDEX.get(rec.phase, 0) > PHASE_INDEX[phase] or rec.state.value in ("failed",)):
            return None  # the phase went by between two looks
        time.sleep(0.02)
    return None


def left_running(rec: Any) -> list[int]:
    from firstlight.launch.supervisor import launch_members

    return [p.pid for p in launch_members(rec.pgid, rec.leader_start)]


def group_launch(tmp: Path, quick: bool) -> None:
    phases = ["process_start", "ready"] if quick else ["process_start", "kv_cache_allocated", "http_listening", "ready"]
    for kind in ("watcher SIGKILL", "engine SIGKILL", "engine SIGSTOP"):
        for phase in phases:
            store = tmp / f"launch-{kind.split()[0]}-{kind.split()[1]}-{phase}.db"
            spec = vllm_spec(tmp, f"fault-{phase}")
            fl("up", str(spec), "--detach", store=store)
            rec = wait_phase(store, phase)
            if rec is None:
                row("launch", f"{kind} in {phase}", "-", "phase went by too fast to hit", "-", True)
                fl("down", store=store)
                continue
            time.sleep(0.3 if phase != "ready" else 1.0)
            if kind == "watcher SIGKILL":
                os.kill(rec.watcher_pid, signal.SIGKILL)
                time.sleep(0.5)
                st = json.loads(fl("status", "--json", store=store).stdout)[0]
                watch = fl("watch", "--json", store=store, timeout=300)
                after = launch_record(store)
                down = fl("down", store=store)
                left = left_running(after)
                ok = st["watcher_lost"] and after.state.value in ("ready", "failed", "stalled") and not left
                row(
                    "launch",
                    f"{kind} in {phase}",
                    "status says watcher lost; watch re-attaches and decides; down stops all",
                    f"status watcher_lost={st['watcher_lost']}; watch exit {watch.returncode} → {after.state.value}; "
                    f"down: {down.stdout.strip()[:60]}",
                    f"{len(left)} processes left",
                    ok,
                )
            elif kind == "engine SIGKILL":
                os.killpg(rec.pgid, signal.SIGKILL)
                t0 = time.monotonic()
                while launch_record(store).state.value in ("starting", "ready") and time.monotonic() - t0 < 30:
                    time.sleep(0.02)
                after = launch_record(store)
                noticed = time.monotonic() - t0
                left = left_running(after)
                fl("down", store=store)
                ok = after.state.value in ("failed", "exited") and noticed < 5 and not left
                row(
                    "launch",
                    f"{kind} in {phase}",
                    "failed (exited after ready) within seconds, nothing left",
                    f"{after.state.value} after {noticed:.2f} s: {(after.reason or '')[:70]}",
                    f"{len(left)} left",
                    ok,
                )
            else:
                os.killpg(rec.pgid, signal.SIGSTOP)
                t0 = time.monotonic()
                while launch_record(store).state.value != "stalled" and time.monotonic() - t0 < 150:
                    time.sleep(0.1)
                after = launch_record(store)
                noticed = time.monotonic() - t0
                down = fl("down", "--grace", "3", store=store)
                left = left_running(after)
                ok = after.state.value == "stalled" and not left
                row(
                    "launch",
                    f"{kind} in {phase}",
                    "stalled after the phase's allowance (ready: health), down stops it",
                    f"{after.state.value} after {noticed:.1f} s: {(after.reason or '')[:60]}; "
                    f"down exit {down.returncode}",
                    f"{len(left)} left",
                    ok,
                )


# ---------------------------------------------------------------- two launches of one spec


def group_concurrency(tmp: Path, quick: bool) -> None:
    spec = vllm_spec(tmp, "twice")
    store = tmp / "twice.db"
    procs = [
        subprocess.Popen(
            [PY, "-m", "firstlight", "up", str(spec), "--store", str(store)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=400) for p in procs]
    from firstlight.store import Store

    db = Store(store)
    launches = db.launches()
    for r in launches:
        fl("down", str(r.id), store=store)
    states = sorted(r.state.value for r in db.launches())
    left = [pid for r in launches for pid in left_running(r)]
    codes = sorted(p.returncode for p in procs)
    clean = all("Traceback" not in o + e for o, e in outs)
    refused = any("is already" in e for _, e in outs)
    ok = clean and codes == [0, 2] and refused and states == ["stopped"] and not left
    row(
        "concurrency",
        "two `up` of one spec at once",
        "one serves; the other is refused (the first is recorded at that address); nothing left",
        f"exit codes {codes}; {len(launches)} launch(es); refused: {refused}",
        f"{len(left)} left",
        ok,
    )


# ---------------------------------------------------------------- Ctrl-C


def interrupt(cmd: list[str], when: Callable[[], bool], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and not when():
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def llama_spec(tmp: Path, name: str) -> Path:
    spec = yaml.safe_load((ROOT / "examples" / "tiny-llama-cpp.yaml").read_text())
    spec.update(
        name=name,
        port=free_port(),
        program=str(ROOT / "models" / "llama-server"),
        model=str(ROOT / "models" / "tiny-llama.gguf"),
        log_dir=str(tmp / "logs"),
    )
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def group_interrupt(tmp: Path, quick: bool) -> None:
    store = tmp / "int-check.db"
    res = interrupt(
        [PY, "-m", "firstlight", "up", str(vllm_spec(tmp, "int-check")), "--store", str(store)],
        lambda: False,
        timeout=0.8,  # in the checks: the software probe and the entry-point import run then
    )
    clean, last = one_line(res)
    rec = launch_record(store) if store.exists() else None
    row(
        "interrupt",
        "Ctrl-C during `up` (the checks)",
        "one line; nothing launched",
        f"exit {res.returncode}: {last}",
        "no launch recorded" if rec is None else f"launch {rec.id} {rec.state.value}",
        clean and rec is None and "nothing was launched" in last,
    )

    store = tmp / "int-up.db"
    spec = vllm_spec(tmp, "int-up")
    res = interrupt(
        [PY, "-m", "firstlight", "up", str(spec), "--store", str(store)],
        lambda: (launch_record(store) or type("r", (), {"pgid": None})).pgid is not None,
    )
    rec = launch_record(store)
    clean, last = one_line(res)
    time.sleep(1)
    left = left_running(rec) if rec else []
    row(
        "interrupt",
        "Ctrl-C during `up` (process_start)",
        "one line; the launch stopped, nothing left",
        f"exit {res.returncode}: {last}; state {rec.state.value if rec else '-'}",
        f"{len(left)} left",
        clean and rec is not None and rec.state.value == "stopped" and not left,
    )

    proc, url = serve("refserver", "--ttft-ms", "20", "--itl-ms", "10")
    store = tmp / "int-bench.db"
    try:
        res = interrupt(
            [
                PY,
                "-m",
                "firstlight",
                "bench",
                "--url",
                url,
                "--concurrency",
                "4",
                "--num-requests",
                "60",
                "--warmup",
                "0",
                "--output-len",
                "32",
                "--store",
                str(store),
            ],
            lambda: store.exists() and stored(store) >= 10,
        )
        kept = stored(store)
        resumed = fl("bench", "--resume", "1", "--url", url, store=store, timeout=120)
        total = stored(store)
    finally:
        proc.kill()
    clean, last = one_line(res)
    row(
        "interrupt",
        "Ctrl-C during `bench` (mid-level)",
        "exit 130, one line, every finished request kept; resume completes",
        f"exit {res.returncode}: {last}; resume exit {resumed.returncode}",
        f"{kept} kept, {total} after resume",
        clean and res.returncode == 130 and kept >= 10 and resumed.returncode == 0 and total >= 60,
    )

    base = llama_spec(tmp, "int-sweep")
    plan = tmp / "int-sweep-plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "base": base.name,
                "variants": {"a": {}, "b": {"args": {"parallel": 2}}},
                "load": {"concurrency": [1, 2], "num-requests": 40, "output-len": 32},
            }
        )
    )
    store = tmp / "int-sweep.db"

    def count(sql: str) -> int:
        try:
            with sqlite3.connect(store) as db:
                return int(db.execute(sql).fetchone()[0])
        except sqlite3.Error:  # not created yet
            return 0

    def cells_running() -> bool:
        return count("SELECT COUNT(*) FROM sweep_cells WHERE state='running'") > 0

    def launching() -> bool:
        return count("SELECT COUNT(*) FROM sweep_attempts WHERE variant='b'") > 0

    for where, when in (("in a cell", cells_running), ("at the second variant's launch", launching)):
        for f in store.parent.glob(store.name + "*"):
            f.unlink()
        res = interrupt([PY, "-m", "firstlight", "sweep", str(plan), "--store", str(store)], when)
        clean, last = one_line(res)
        with sqlite3.connect(store) as db:
            state = db.execute("SELECT state FROM sweeps").fetchone()[0]
            running = db.execute("SELECT COUNT(*) FROM sweep_cells WHERE state='running'").fetchone()[0]
        time.sleep(0.5)
        left = [pid for r in _launches(store) for pid in left_running(r)]
        resumed = fl("sweep", str(plan), "--resume", "1", store=store, timeout=300)
        with sqlite3.connect(store) as db:
            done = db.execute(
                "SELECT COUNT(DISTINCT variant||level||repeat) FROM sweep_cells WHERE state='complete'"
            ).fetchone()[0]
        row(
            "interrupt",
            f"Ctrl-C during `sweep` ({where})",
            "exit 130, one line, engine stopped, resumable to completion",
            f"exit {res.returncode}: {last[:70]}; sweep {state}; resume exit {resumed.returncode}",
            f"{len(left)} left, {running} cells left running; {done}/4 cells after resume",
            clean
            and res.returncode == 130
            and state == "interrupted"
            and not left
            and running == 0
            and resumed.returncode == 0
            and done == 4,
        )


def _launches(store: Path) -> list[Any]:
    from firstlight.store import Store

    db = Store(store)
    try:
        return db.launches(100)
    finally:
        db.close()


# ---------------------------------------------------------------- malformed input


def group_input(tmp: Path, quick: bool) -> None:
    res = subprocess.run(
        [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests/unit/test_malformed_input.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    summary = (res.stdout.strip().splitlines() or [""])[-1]
    row(
        "input",
        "generated malformed specs, plans, facts",
        "a SpecError/FactsError naming the field or file, never a traceback",
        summary,
        "-",
        res.returncode == 0,
    )


GROUPS = {
    "server": group_server,
    "store": group_store,
    "launch": group_launch,
    "concurrency": group_concurrency,
    "interrupt": group_interrupt,
    "input": group_input,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(GROUPS))
    parser.add_argument("--quick", action="store_true", help="two phases per launch fault instead of four")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="firstlight-faults-"))
    for name in args.only.split(","):
        try:
            GROUPS[name](tmp, args.quick)
        except Exception as e:  # a harness failure is a row too, and the rest still runs
            row(name, "(harness)", "-", f"{type(e).__name__}: {e}", "-", False)
    print("\n| group | fault | must | happened | records | verdict |\n|---|---|---|---|---|---|")
    for r in ROWS:
        print(f"| {r.group} | {r.fault} | {r.must} | {r.happened} | {r.records} | {'ok' if r.ok else 'FAIL'} |")
    print(f"\n{sum(r.ok for r in ROWS)}/{len(ROWS)} ok; work files in {tmp}")
    sys.exit(0 if all(r.ok for r in ROWS) else 1)


if __name__ == "__main__":
    main()
