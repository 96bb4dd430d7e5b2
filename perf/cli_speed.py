"""How long the quick commands take to answer, against a bare interpreter run in the same command.

`status`, `logs`, `down` and `watch` are typed many times a day and from scripts: they must answer at
once, so each command imports only what it uses. This runs each command N times on a small store
(one finished launch with its log) and prints the median wall time, and its ratio to two named peers
measured the same way in the same run: `python -c pass` (the floor no Python CLI can beat) and
`python -c "import typer"` (the CLI framework alone), and a two-command typer app running one command
(the floor for any typer CLI). It also lists the slowest imports of `status`
(`python -X importtime`).

Bytecode: pip compiles an installed package's modules; an editable install under
PYTHONDONTWRITEBYTECODE=1 (as on this project's machines) compiles firstlight's own modules on every
start. Both are measured: `--no-pyc` as things are, the default after writing the .pyc files once.

Usage: python perf/cli_speed.py [--runs 9] [--no-pyc]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def median_wall(argv: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make_store(directory: Path) -> Path:
    """A store with one stopped launch and its log, written through the store's own API."""
    sys.path.insert(0, str(ROOT / "src"))
    from firstlight.store import LaunchState, Store

    store = Store(directory / "store.db")
    log = directory / "engine.log"
    log.write_text("INFO: engine started\n" * 200)
    launch_id = store.add_launch("tiny", "vllm", {"engine": "vllm", "model": "m"}, "http://127.0.0.1:1", str(log))
    store.update_launch(launch_id, state=LaunchState.STOPPED, ended=time.time(), reason="stopped by firstlight down")
    store.add_event(launch_id, "phase", "process_start", entered=True)
    store.close()
    return directory / "store.db"


def slowest_imports(argv: list[str], env: dict[str, str], n: int = 12) -> list[tuple[int, str]]:
    res = subprocess.run([sys.executable, "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True)
    rows = []
    for line in res.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cumulative, name = line.split(":", 1)[1].split("|")
        rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:n]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--no-pyc", action="store_true", help="do not write .pyc files for firstlight first")
    args = parser.parse_args()
    env = {**os.environ, "COLUMNS": "120"}
    if not args.no_pyc:
        compileall.compile_dir(str(ROOT / "src"), quiet=1)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        store = str(make_store(Path(tmp)))
        fl = [sys.executable, "-m", "firstlight"]
        one_command = (
            "import typer\napp = typer.Typer()\n@app.command()\ndef hello(n: int = 1) -> None:\n    print(n)\n"
            "@app.command()\ndef other() -> None:\n    pass\napp()"
        )
        peers = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import typer'": [sys.executable, "-c", "import typer"],
            "a two-command typer app": [sys.executable, "-c", one_command, "hello"],
        }
        commands = {
            "status": [*fl, "status", "--store", store],
            "status --json": [*fl, "status", "--json", "--store", store],
            "logs": [*fl, "logs", "--store", store],
            "watch --json": [*fl, "watch", "--json", "--store", store],
            "down": [*fl, "down", "--store", store],
            "--help": [*fl, "--help"],
        }
        base = {name: median_wall(argv, env, args.runs) for name, argv in peers.items()}
        print(f"median of {args.runs} runs; {'no .pyc for firstlight' if args.no_pyc else '.pyc written'}")
        for name, seconds in base.items():
            print(f"  {name:<28} {seconds * 1000:7.1f} ms")
        for name, argv in commands.items():
            seconds = median_wall(argv, env, args.runs)
            ratios = "  ".join(f"{seconds / b:4.2f}x {peer}" for peer, b in base.items())
            print(f"  firstlight {name:<17} {seconds * 1000:7.1f} ms   {ratios}")
        print("slowest imports of `firstlight status` (cumulative µs):")
        for cumulative, module in slowest_imports(commands["status"], env):
            print(f"  {cumulative:8d}  {module}")


if __name__ == "__main__":
    main()
