"""`firstlight bench`: measure a serving endpoint at every load, without losing a request.

Exit codes: 0 every level completed; 1 the run stopped early (a dead server, repeated failures) with
what finished kept; 2 bad options or an unreachable setup; 130 interrupted (Ctrl-C), results kept.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
import uvloop
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from firstlight.bench.metrics import parse_slo
from firstlight.bench.runner import Aborted, BenchConfig, LevelState, parse_list, run
from firstlight.cli.common import StoreOption, console, err_console, fail, open_store, print_diagnosis
from firstlight.cli.up import watch_until_decided
from firstlight.deployment import SpecError, load_deployment
from firstlight.engines import get_engine
from firstlight.launch.control import start_launch, stop_launch
from firstlight.report.data import run_data
from firstlight.report.tables import run_table
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
    store: StoreOption = None,
) -> None:
    """Drive an OpenAI-compatible server at several loads; every request is stored as it finishes."""
    options = dict(locals())  # the command's options by name, before anything else is defined here
    db = open_store(store)
    api_key = os.environ.get("FIRSTLIGHT_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if resume is not None:
        stored = db.get_run(resume)
        if stored is None:
            fail(f"no benchmark run {resume} in {db.path}", 2)
        cfg = BenchConfig(**{**stored["config"], "api_key": api_key})
    else:
        cfg = _config(options, api_key)
    launched = None
    if launch is not None:
        try:
            dep = load_deployment(launch)
        except SpecError as e:
            fail(str(e), 2)
        launched = start_launch(db, dep)
        if watch_until_decided(db, launched, json_out=False, stop_on_interrupt=True) != 0:
            raise typer.Exit(1)
        cfg.url = dep.url
        cfg.model = cfg.model or get_engine(dep.engine).request_model(dep)
        cfg.tokenizer_dir = cfg.tokenizer_dir or str(dep.model)
    try:
        code = _run(cfg, db, resume, launched.id if launched else None, json_path)
    finally:
        if launched is not None:
            current = db.get_launch(launched.id)
            if current is not None and current.state in ("failed", "exited"):
                console.print(f"the launched server ended: {current.reason}")
                print_diagnosis(current.diagnosis, current.log_path)
            stop_launch(db, current or launched)
    raise typer.Exit(code)


def _config(o: dict[str, Any], api_key: str | None) -> BenchConfig:
    """The run's configuration from the command's options, each checked with a message that says how to fix it."""
    if (o["url"] is None) == (o["launch"] is None):
        fail("give exactly one of --url (a running server) and --launch (a spec to bring up)", 2)
    if o["concurrency"] and o["request_rate"]:
        fail("give --concurrency or --request-rate, not both", 2)
    if o["endpoint"] not in ("completions", "chat"):
        fail("--endpoint must be completions or chat", 2)
    if o["arrival"] not in ("poisson", "constant"):
        fail("--arrival must be poisson or constant", 2)
    if o["num_requests"] is not None and o["duration"] is not None:
        fail("give --num-requests or --duration, not both", 2)
    if o["dataset"] is not None and not o["dataset"].is_file():
        fail(f"--dataset {o['dataset']}: no such file", 2)
    try:
        levels = parse_list(o["concurrency"] or "1", int) if not o["request_rate"] else []
        rates = parse_list(o["request_rate"], float) if o["request_rate"] else []
        slos = parse_slo(o["slo"])
    except ValueError as e:
        fail(str(e), 2)
    for name, value in (
        ("--num-requests", o["num_requests"]),
        ("--input-len", o["input_len"]),
        ("--output-len", o["output_len"]),
    ):
        if value is not None and value < 1:
            fail(f"{name} must be at least 1", 2)
    return BenchConfig(
        url=(o["url"] or "").rstrip("/"),
        model=o["model"],
        endpoint=o["endpoint"],
        concurrency=levels,
        request_rates=rates,
        arrival=o["arrival"],
        max_concurrency=o["max_concurrency"],
        num_requests=o["num_requests"],
        duration=o["duration"],
        warmup=max(o["warmup"], 0),
        input_len=o["input_len"],
        output_len=o["output_len"],
        dataset=str(o["dataset"]) if o["dataset"] else None,
        slo=slos,
        label=o["label"],
        timeout=o["timeout"],
        temperature=o["temperature"],
        seed=o["seed"],
        tokenizer_dir=str(o["tokenizer"]) if o["tokenizer"] else None,
        api_key=api_key,
    )


def _run(cfg: BenchConfig, db: Store, resume: int | None, launch_id: int | None, json_path: Path | None) -> int:
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
    )
    tasks: dict[int, int] = {}

    def show(state: LevelState) -> None:
        name = "warm-up" if state.warmup else (f"rate {state.rate:g}/s" if state.rate else f"C={state.concurrency}")
        elapsed = max(time.perf_counter() - state.started, 1e-9)
        stats = f"{state.tokens / elapsed:8.1f} tok/s  {state.failed} failed"
        if state.index not in tasks:
            tasks[state.index] = progress.add_task(name, total=state.total, stats=stats)
        progress.update(tasks[state.index], completed=state.done, stats=stats)

    code = 0
    created: list[int] = [resume] if resume is not None else []
    try:
        with progress:
            uvloop.run(run(cfg, db.path, show, resume, launch_id, created))
    except Aborted as e:
        err_console.print(f"error: {e}")
        code = 1
    except KeyboardInterrupt:
        err_console.print("interrupted: every finished request is kept")
        code = 130
    if not created:
        return 2 if code == 0 else code
    data = run_data(db, created[0])
    console.print(run_table(data))
    for lv in data["levels"]:
        warning = (lv.get("client") or {}).get("warning")
        if warning:
            console.print(f"[yellow]{lv.get('concurrency') or lv.get('request_rate')}: {warning}[/yellow]")
        for kind, info in (lv.get("errors") or {}).items():
            console.print(f"  errors {kind}: {info['count']} (first: {'; '.join(info['first'][:1])})", markup=False)
    if json_path is not None:
        json_path.write_text(json.dumps(data, indent=1))
        console.print(f"results written to {json_path}")
    if code:
        console.print(
            f"run {data['run']} is kept ({data['state']}); complete it with `firstlight bench --resume {data['run']}`"
        )
    return code
