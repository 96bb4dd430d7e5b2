"""`firstlight bench`: measure a serving endpoint at every load, without losing a request.

Exit codes: 0 every level completed; 1 the run stopped early (a dead server, repeated failures) with
what finished kept; 2 bad options or an unreachable setup; 130 interrupted (Ctrl-C), results kept.
The benchmark stack (HTTP client, numpy, uvloop, the progress bars) is imported when the command runs.
"""

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from firstlight.cli.common import StoreOption, console, err_console, print_diagnosis, show_findings

if TYPE_CHECKING:
    from rich.progress import Progress

    from firstlight.benchmark import BenchConfig, LevelState
    from firstlight.launch import Launch
    from firstlight.store import Store


def bench(
    url: Annotated[str | None, typer.Option(help="the server, e.g. http://127.0.0.1:8000")] = None,
    launch: Annotated[Path | None, typer.Option(help="a Deployment spec: up, bench, down in one command")] = None,
    model: Annotated[str | None, typer.Option(help="model name for requests (default: the server's first)")] = None,
    endpoint: Annotated[str, typer.Option(help="completions or chat")] = "completions",
    concurrency: Annotated[str | None, typer.Option(help="closed-loop levels, e.g. 1,8,64,256")] = None,
    request_rate: Annotated[str | None, typer.Option(help="open-loop levels in requests/s, e.g. 2,4,8")] = None,
    arrival: Annotated[str, typer.Option(help="poisson or constant (rate mode)")] = "poisson",
    max_concurrency: Annotated[int | None, typer.Option(help="cap on in-flight requests (rate mode)")] = None,
    num_requests: Annotated[int | None, typer.Option(help="requests per level")] = None,
    duration: Annotated[float | None, typer.Option(help="seconds per level (instead of --num-requests)")] = None,
    warmup: Annotated[int, typer.Option(help="warm-up requests before the first level, not measured")] = 2,
    input_len: Annotated[int, typer.Option(help="input tokens per synthetic prompt")] = 128,
    output_len: Annotated[int, typer.Option(help="output tokens per request (max_tokens, ignore_eos)")] = 128,
    dataset: Annotated[Path | None, typer.Option(help="ShareGPT JSON, or JSONL with prompt and output_len")] = None,
    slo: Annotated[str | None, typer.Option(help="goodput SLOs in ms, e.g. ttft=500,tpot=50")] = None,
    label: Annotated[str, typer.Option(help="a name for this run (e.g. baseline, eagle3)")] = "",
    json_path: Annotated[Path | None, typer.Option("--json", help="write the results as JSON here")] = None,
    resume: Annotated[int | None, typer.Option(help="a stored run to complete: runs only what is missing")] = None,
    timeout: Annotated[float, typer.Option(help="seconds per request before it counts as a timeout")] = 600.0,
    temperature: Annotated[float, typer.Option(help="sampling temperature")] = 0.0,
    seed: Annotated[int, typer.Option(help="seed for prompts and arrivals")] = 0,
    tokenizer: Annotated[Path | None, typer.Option(help="a model directory whose tokenizer counts tokens")] = None,
    workers: Annotated[str, typer.Option(help="processes sending the requests: a number, or auto")] = "1",
    force: Annotated[bool, typer.Option("--force", help="with --launch: launch even when a check fails")] = False,
    store: StoreOption = None,
) -> None:
    """Drive an OpenAI-compatible server at several loads; every request is stored as it finishes."""
    options = dict(locals())  # the command's options by name, before anything else is defined here
    for name in ("json_path", "resume", "store", "force"):
        del options[name]  # not the run's configuration
    from firstlight.benchmark import BenchConfig
    from firstlight.store import Store

    db = Store(store)
    api_key = os.environ.get("FIRSTLIGHT_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if resume is not None:
        cfg = BenchConfig.of_run(db, resume, api_key)
    else:
        cfg = BenchConfig.from_options(api_key=api_key, **options)
    launched = _bring_up(launch, db, cfg, force) if launch is not None else None
    try:
        code = _run(cfg, db, resume, launched.id if launched else None, json_path)
    finally:
        if launched is not None:
            _take_down(launched)
    raise typer.Exit(code)


def _bring_up(spec: Path, db: "Store", cfg: "BenchConfig", force: bool) -> "Launch":
    """Check and launch the spec and show it until ready; the run then benchmarks it (its URL, model and
    tokenizer). A failed check is shown, and stops the command unless --force."""
    from firstlight.cli.view import follow
    from firstlight.errors import PreflightFailed
    from firstlight.launch import up

    try:
        launch = up(spec, store=db, force=force)
    except PreflightFailed as e:
        show_findings([f for f in e.findings if f.severity != "ok"])
        raise
    code = follow(launch, json_out=False, stop_on_interrupt=True)
    if code != 0:
        raise typer.Exit(code)
    cfg.url = launch.url
    cfg.model = cfg.model or launch.adapter.request_model(launch.deployment)
    cfg.tokenizer_dir = cfg.tokenizer_dir or str(launch.deployment.model)
    return launch


def _take_down(launch: "Launch") -> None:
    from firstlight.launch import LaunchState

    record = launch.record
    if record.state in (LaunchState.FAILED, LaunchState.EXITED):
        console().print(f"the launched server ended: {record.reason}")
        print_diagnosis(record.diagnosis, record.log_path)
    launch.down()


def _run(cfg: "BenchConfig", db: "Store", resume: int | None, launch_id: int | None, json_path: Path | None) -> int:
    """The run with a live progress view; the results are shown however it ends. A run that stopped early
    re-raises BenchAborted (exit 1) after its results are shown."""
    from firstlight.benchmark import BenchAborted, run_bench

    progress = _progress()
    runs: list[int] = [resume] if resume is not None else []  # known at once, even if interrupted
    try:
        with progress:
            result = run_bench(
                cfg,
                store=db,
                on_progress=_shower(progress),
                resume=resume,
                launch_id=launch_id,
                on_start=runs.append,
            )
    except BenchAborted as e:
        kept = e.run_id if e.run_id is not None else (runs[0] if runs else None)
        if kept is not None:
            _show(db, kept, json_path, stopped=True)
        raise
    except KeyboardInterrupt:
        err_console().print("interrupted: every finished request is kept")
        if runs:
            _show(db, runs[0], json_path, stopped=True)
        return 130
    _show(db, result.run_id, json_path, stopped=False)
    return 0


def _progress() -> "Progress":
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out = console()
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        console=out,
        disable=not out.is_terminal,
    )


def _shower(progress: "Progress") -> "Callable[[LevelState], None]":
    """One bar per level: requests done, tokens/s and failures so far."""
    tasks: dict[int, int] = {}

    def show(state: "LevelState") -> None:
        name = "warm-up" if state.warmup else (f"rate {state.rate:g}/s" if state.rate else f"C={state.concurrency}")
        elapsed = max(time.perf_counter() - state.started, 1e-9)
        stats = f"{state.tokens / elapsed:8.1f} tok/s  {state.failed} failed"
        if state.index not in tasks:
            tasks[state.index] = progress.add_task(name, total=state.total, stats=stats)
        progress.update(tasks[state.index], completed=state.done, stats=stats)

    return show


def _show(db: "Store", run_id: int, json_path: Path | None, stopped: bool) -> None:
    """The run's table, each level's client warning and errors, the JSON file, and how to resume."""
    from firstlight.benchmark import run_data
    from firstlight.reports import run_table

    data = run_data(db, run_id)
    out = console()
    out.print(run_table(data))
    for lv in data["levels"]:
        warning = (lv.get("client") or {}).get("warning")
        if warning:
            out.print(f"[yellow]{lv.get('concurrency') or lv.get('request_rate')}: {warning}[/yellow]")
        for kind, info in (lv.get("errors") or {}).items():
            out.print(f"  errors {kind}: {info['count']} (first: {'; '.join(info['first'][:1])})", markup=False)
    if json_path is not None:
        json_path.write_text(json.dumps(data, indent=1))
        out.print(f"results written to {json_path}")
    if stopped:
        out.print(f"run {run_id} is kept ({data['state']}); complete it with `firstlight bench --resume {run_id}`")
